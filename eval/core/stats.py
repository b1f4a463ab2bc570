"""Statistics of the PhaseFusion evaluation (paper 001 §4, App. A, E, H, I, K).

Answer-level measures and the tests the paper's claims rest on, each a thin
wrapper that states which test, which correction and which interval, and leaves
the computation to scipy, statsmodels and scikit-learn:

- answer stability: accuracy per arm, pairwise disagreement between arms
  (phases, samplers, origins), the any-of-``k`` change rate, the consensus
  answer over orderings and the ordering flip, the answer margin (§2.1, §4.3);
- paired accuracy / change-rate comparisons: exact McNemar (§4, Tables 1, S7, S9);
- equivalence: two one-sided paired t-tests (TOST) against a margin of
  ±2.5 points, 90 % CI, optionally question-clustered (§4 "Statistical protocol", App. E);
- multiplicity: Benjamini–Hochberg step-up over the confirmatory family (App. A, Table S2);
- bootstrap CIs that resample questions, so passes of one question stay together
  (App. A, App. C "Oracle-bound uncertainty");
- rate intervals: Wilson score intervals for flip, change and disagreement rates
  (what the paper's brackets are: 136/593 gives 22.9 % [19.7, 26.5], App. A);
- fixed-sequence Learn-then-Test of margin thresholds with one-sided
  Clopper–Pearson bounds, on seeded calibration / test halves (App. H, Table S10);
- AUROC of a score for predicting flips or correctness (§4.3, App. I/J), and DeLong's
  test of two correlated AUROCs on the same items (Table S2's "Margin vs. MSP", App. I).

Conventions: rates and accuracies are fractions in 0..1 (reports print points);
``a``/``b`` arrays are aligned item by item (the same question at the same
index); empty input, length mismatches and undefined statistics raise
:class:`StatsError` naming the argument, never return a silent ``nan``.
README: "`judgetrain eval phasefusion`".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "EQUIVALENCE_MARGIN",
    "LTT_DELTA",
    "LTT_MIN_ANSWERED",
    "LTT_SPLITS",
    "StatsError",
    "accuracy_by_arm",
    "answer_margin",
    "any_change_rate",
    "auroc",
    "benjamini_hochberg",
    "bootstrap_ci",
    "clopper_pearson",
    "clopper_pearson_upper",
    "consensus_answer",
    "delong_auroc_difference",
    "disagreement",
    "flipped",
    "learn_then_test",
    "ltt_halves",
    "ltt_splits",
    "mcnemar_exact",
    "or_none",
    "paired_bootstrap_ci",
    "pairwise_disagreement",
    "selective_risk",
    "tost_paired",
    "wilcoxon_signed_rank",
    "wilson",
]

# §4 "Statistical protocol": ±2.5 points, fixed ex ante at half the 8→32-frame gain.
EQUIVALENCE_MARGIN = 0.025
# App. H: fixed-sequence LTT at delta = 10 %, the walk starting at the ten highest-scoring items.
LTT_DELTA = 0.10
LTT_MIN_ANSWERED = 10
# App. H: 300 random calibration / test splits per (model, benchmark) cell.
LTT_SPLITS = 300


class StatsError(ValueError):
    """A statistic that cannot be computed from the given input (empty, misaligned, one class only)."""


def or_none(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or ``None`` where the data leave the statistic undefined
    (:class:`StatsError`: one class only, no variance…; or a non-finite float), for
    reports that print "–" there."""
    try:
        out = fn(*args, **kwargs)
    except StatsError:
        return None
    if isinstance(out, float) and not np.isfinite(out):
        return None
    return out


def _array(values: Sequence[Any], name: str, *, dtype: Any = float) -> np.ndarray:
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise StatsError(f"{name}: expected a flat sequence (one value per item), got shape {arr.shape}")
    if arr.size == 0:
        raise StatsError(f"{name}: no items; a statistic needs at least one")
    if dtype is float and not np.isfinite(arr).all():
        raise StatsError(f"{name}: {int((~np.isfinite(arr)).sum())} value(s) are NaN or infinite; drop or fix those items first")
    return arr


def _bools(values: Sequence[Any], name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 1 and arr.size and not np.isin(arr, (0, 1)).all():
        raise StatsError(f"{name}: expected booleans (or 0/1), got values like {arr[~np.isin(arr, (0, 1))][0]!r}")
    return _array(values, name, dtype=bool)


def _aligned(*pairs: tuple[str, np.ndarray]) -> None:
    lengths = {name: len(arr) for name, arr in pairs}
    if len(set(lengths.values())) > 1:
        raise StatsError(f"arrays must be aligned item by item, got lengths {lengths}")


def _answers(answers: Mapping[str, Sequence[Any]], least: int) -> list[tuple[str, list[Any]]]:
    arms = [(str(arm), list(values)) for arm, values in answers.items()]
    if len(arms) < least:
        raise StatsError(f"answers: need at least {least} arms, got {len(arms)} ({[a for a, _ in arms]})")
    for arm, values in arms:
        if not values:
            raise StatsError(f"answers[{arm!r}]: no items")
    lengths = {arm: len(values) for arm, values in arms}
    if len(set(lengths.values())) > 1:
        raise StatsError(f"answers: every arm must answer the same items in the same order, got lengths {lengths}")
    return arms


# ---------------------------------------------------------------- answer stability


def accuracy_by_arm(correct: Mapping[str, Sequence[bool]]) -> dict[str, dict[str, Any]]:
    """Accuracy of every arm: ``{arm: {"accuracy", "correct", "n"}}``.

    ``correct[arm]`` holds one bool per question (True = the arm's answer equals gold).
    Arms may cover different questions; compare arms on shared items with :func:`mcnemar_exact`.
    """
    if not correct:
        raise StatsError("correct: no arms")
    out = {}
    for arm, values in correct.items():
        arr = _bools(values, f"correct[{arm!r}]")
        out[str(arm)] = {"accuracy": float(arr.mean()), "correct": int(arr.sum()), "n": int(arr.size)}
    return out


def disagreement(a_answers: Sequence[Any], b_answers: Sequence[Any]) -> float:
    """Fraction of items whose answers differ between two arms (paper 001 §2.2's
    pairwise phase disagreement). Answers are content indices (or any values
    compared with ``==``; an invalid answer stored as None differs from every index)."""
    return _pair("a", list(a_answers), "b", list(b_answers))[2]


def _pair(a: str, xa: list[Any], b: str, xb: list[Any]) -> tuple[str, str, float, int]:
    arms = _answers({a: xa, b: xb}, 2)
    changed = sum(x != y for x, y in zip(arms[0][1], arms[1][1], strict=True))
    return a, b, changed / len(xa), changed


def pairwise_disagreement(answers: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Disagreement for every unordered pair of arms, in the mapping's order:
    ``[{"a", "b", "rate", "changed", "n"}, …]``."""
    arms = _answers(answers, 2)
    out = []
    for i, (a, xa) in enumerate(arms):
        for b, xb in arms[i + 1 :]:
            _, _, rate, changed = _pair(a, xa, b, xb)
            out.append({"a": a, "b": b, "rate": rate, "changed": changed, "n": len(xa)})
    return out


def any_change_rate(answers: Mapping[str, Sequence[Any]]) -> float:
    """Fraction of items whose answer is not the same under every arm (§2.2: "the
    answer changes at least once" over the three phases). Needs at least two arms."""
    arms = _answers(answers, 2)
    per_item = zip(*(values for _, values in arms), strict=True)
    return sum(any(x != row[0] for x in row[1:]) for row in per_item) / len(arms[0][1])


def consensus_answer(content_idxs: Sequence[int]) -> int:
    """Plurality content index over orderings, ties broken by the lowest index (§2.1;
    scipy.stats.mode returns the smallest of tied modes)."""
    from scipy.stats import mode

    arr = _array(content_idxs, "content_idxs", dtype=int)
    return int(mode(arr).mode)


def flipped(content_idxs: Sequence[int]) -> bool:
    """True when the chosen content index is not constant across orderings (App. C)."""
    arr = _array(content_idxs, "content_idxs", dtype=int)
    return bool((arr != arr[0]).any())


def answer_margin(probs: Sequence[float]) -> float:
    """Top-1 minus top-2 probability of one (renormalised or fused) option posterior (§4.3).
    A single option has margin 1."""
    arr = _array(probs, "probs")
    if len(arr) == 1:
        return 1.0
    top = np.sort(arr)[::-1]
    return float(top[0] - top[1])


# ---------------------------------------------------------------- paired tests


def mcnemar_exact(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> dict[str, Any]:
    """Exact (binomial) McNemar test of two paired binary outcomes (statsmodels
    ``mcnemar(exact=True)``), e.g. per-question correctness of two arms, or
    per-question "answer changed" of two arms under the same shift.

    Returns ``{"n", "n11", "n10", "n01", "n00", "a_rate", "b_rate", "difference",
    "statistic", "pvalue"}`` with ``n10`` = a true and b false, ``n01`` = a false
    and b true, ``difference`` = a_rate - b_rate, ``statistic`` = min(n10, n01),
    two-sided ``pvalue`` (1.0 with no discordant pair).
    """
    from statsmodels.stats.contingency_tables import mcnemar

    a, b = _bools(a_correct, "a_correct"), _bools(b_correct, "b_correct")
    _aligned(("a_correct", a), ("b_correct", b))
    n11, n10 = int((a & b).sum()), int((a & ~b).sum())
    n01, n00 = int((~a & b).sum()), int((~a & ~b).sum())
    res = mcnemar([[n11, n10], [n01, n00]], exact=True)
    return {
        "n": int(a.size),
        "n11": n11,
        "n10": n10,
        "n01": n01,
        "n00": n00,
        "a_rate": float(a.mean()),
        "b_rate": float(b.mean()),
        "difference": float(a.mean() - b.mean()),
        "statistic": float(res.statistic),
        "pvalue": float(res.pvalue),
    }


def wilcoxon_signed_rank(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p-value of scipy's Wilcoxon signed-rank test on the paired differences
    ``x - y`` (default ``zero_method="wilcox"``: zero differences are dropped). With no
    non-zero difference there is no evidence of a shift and the p-value is 1.0 (scipy would
    give ``nan``), as exact McNemar gives 1.0 with no discordant pair."""
    from scipy.stats import wilcoxon

    if len(x) != len(y) or not len(x):
        raise StatsError(f"wilcoxon_signed_rank needs aligned, non-empty x and y (got {len(x)} and {len(y)})")
    if all(float(u) == float(v) for u, v in zip(x, y, strict=True)):
        return 1.0
    return float(wilcoxon(x, y, alternative="two-sided").pvalue)


def _cluster_codes(clusters: Sequence[Any], n: int) -> np.ndarray:
    labels = list(clusters)
    if len(labels) != n:
        raise StatsError(f"clusters: need one label per item ({n}), got {len(labels)}")
    codes: dict[Any, int] = {}
    return np.array([codes.setdefault(label, len(codes)) for label in labels], dtype=int)


def tost_paired(
    a: Sequence[float],
    b: Sequence[float],
    margin: float = EQUIVALENCE_MARGIN,
    alpha: float = 0.05,
    clusters: Sequence[Any] | None = None,
) -> dict[str, Any]:
    """Two one-sided paired t-tests that mean(a - b) lies inside (-margin, +margin).

    Without ``clusters``: statsmodels ``ttost_paired`` on the per-item differences.
    With ``clusters`` (one label per row, e.g. the question id when several models'
    passes are pooled): the mean difference and its cluster-robust standard error
    from statsmodels OLS on a constant (``cov_type="cluster"``, t with G-1 df).
    Returns ``{"n", "n_clusters", "difference", "se", "margin", "alpha", "ci" (the
    1 - 2·alpha CI, as the paper's 90 % CI), "p_lower", "p_upper", "pvalue" (the
    larger of the two), "equivalent" (pvalue < alpha)}``.
    """
    import statsmodels.api as sm
    from scipy.stats import t as student_t
    from statsmodels.stats.weightstats import DescrStatsW, ttost_paired

    if not margin > 0:
        raise StatsError(f"margin={margin}: the equivalence margin must be > 0 (a fraction: 0.025 = 2.5 points)")
    if not 0 < alpha < 0.5:
        raise StatsError(f"alpha={alpha}: must be in (0, 0.5)")
    xa, xb = _array(a, "a"), _array(b, "b")
    _aligned(("a", xa), ("b", xb))
    d = xa - xb
    if len(d) < 2:
        raise StatsError("a, b: a paired t-test needs at least two items")
    with np.errstate(divide="ignore", invalid="ignore"):
        if clusters is None:
            pvalue, (_, p_lower, _), (_, p_upper, _) = ttost_paired(xa, xb, -margin, margin)
            stats = DescrStatsW(d)
            diff, se, n_clusters = float(stats.mean), float(stats.std_mean), len(d)
            ci = stats.tconfint_mean(alpha=2 * alpha)
        else:
            codes = _cluster_codes(clusters, len(d))
            n_clusters = int(codes.max()) + 1
            if n_clusters < 2:
                raise StatsError("clusters: a clustered test needs at least two clusters")
            fit = sm.OLS(d, np.ones_like(d)).fit(cov_type="cluster", cov_kwds={"groups": codes}, use_t=True)
            diff, se, df = np.float64(fit.params[0]), np.float64(fit.bse[0]), fit.df_resid_inference
            p_lower = student_t.sf((diff + margin) / se, df)  # H0: diff <= -margin
            p_upper = student_t.cdf((diff - margin) / se, df)  # H0: diff >= +margin
            pvalue = max(p_lower, p_upper)
            ci = fit.conf_int(alpha=2 * alpha)[0]
    return {
        "n": len(d),
        "n_clusters": n_clusters,
        "difference": diff,
        "se": se,
        "margin": margin,
        "alpha": alpha,
        "ci": (float(ci[0]), float(ci[1])),
        "p_lower": float(p_lower),
        "p_upper": float(p_upper),
        "pvalue": float(pvalue),
        "equivalent": bool(pvalue < alpha),
    }


def benjamini_hochberg(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Benjamini–Hochberg step-up over one family (statsmodels ``multipletests(method="fdr_bh")``):
    ``(reject, qvalues)`` in the input order."""
    from statsmodels.stats.multitest import multipletests

    p = _array(pvalues, "pvalues")
    if ((p < 0) | (p > 1)).any():
        raise StatsError(f"pvalues: every p-value must be in [0, 1], got {p[(p < 0) | (p > 1)][0]}")
    reject, q, _, _ = multipletests(p, alpha=alpha, method="fdr_bh")
    return [bool(r) for r in reject], [float(x) for x in q]


# ---------------------------------------------------------------- bootstrap


def _bootstrap(
    data: tuple[np.ndarray, ...],
    statistic: Callable,
    *,
    vectorized: bool,
    estimate: float,
    n: int,
    n_clusters: int,
    n_resamples: int,
    confidence: float,
    seed: int,
    method: str,
) -> dict[str, Any]:
    from scipy.stats import bootstrap

    if not 0 < confidence < 1:
        raise StatsError(f"confidence={confidence}: must be in (0, 1)")
    if n_clusters < 2:
        raise StatsError("a bootstrap needs at least two questions (clusters) to resample")
    res = bootstrap(
        data,
        statistic,
        n_resamples=n_resamples,
        vectorized=vectorized,
        paired=True,
        confidence_level=confidence,
        method=method,
        rng=np.random.default_rng(seed),
    )
    lo, hi = res.confidence_interval
    return {
        "estimate": float(estimate),
        "ci": (float(lo), float(hi)),
        "se": float(res.standard_error),
        "n": n,
        "n_clusters": n_clusters,
        "confidence": confidence,
        "method": method,
        "n_resamples": n_resamples,
        "seed": seed,
    }


def _cluster_sums(clusters: Sequence[Any] | None, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-cluster sums of every column plus the per-cluster row count: resampling
    these rows whole resamples questions, and ratio-of-sums is the pooled mean."""
    n = len(columns[0])
    codes = np.arange(n) if clusters is None else _cluster_codes(clusters, n)
    g = int(codes.max()) + 1
    return tuple(np.bincount(codes, weights=c, minlength=g) for c in columns) + (np.bincount(codes, minlength=g).astype(float),)


def bootstrap_ci(
    values: Sequence[float],
    *,
    clusters: Sequence[Any] | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """Bootstrap CI of a mean (a rate when ``values`` are 0/1) with scipy.stats.bootstrap.

    The resampling unit is the question: with ``clusters`` the clusters are
    resampled whole and the statistic is the pooled mean of their rows.
    Returns ``{"estimate", "ci": (lo, hi), "se", "n", "n_clusters", "confidence", "method", "n_resamples", "seed"}``.
    """
    x = _array(values, "values")
    sums, counts = _cluster_sums(clusters, x)

    def pooled_mean(s, c, axis=-1):
        return s.sum(axis=axis) / c.sum(axis=axis)

    return _bootstrap(
        (sums, counts),
        pooled_mean,
        vectorized=True,
        estimate=x.mean(),
        n=len(x),
        n_clusters=len(sums),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        method=method,
    )


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    stat: str | Callable[[np.ndarray, np.ndarray], float] = "mean_difference",
    clusters: Sequence[Any] | None = None,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    method: str = "percentile",
) -> dict[str, Any]:
    """Paired bootstrap CI of ``stat(a, b)`` with scipy.stats.bootstrap, resampling questions
    (rows, or whole ``clusters``) so that a and b stay paired.

    ``stat`` is ``"mean_difference"`` (mean(a) - mean(b), the accuracy gain of a
    over b) or a function of two aligned 1-D arrays returning a float (e.g. an
    AUROC difference). Returns the same keys as :func:`bootstrap_ci`.
    """
    xa, xb = _array(a, "a"), _array(b, "b")
    _aligned(("a", xa), ("b", xb))
    if stat == "mean_difference":
        sa, sb, counts = _cluster_sums(clusters, xa, xb)

        def mean_difference(sa, sb, c, axis=-1):
            return (sa.sum(axis=axis) - sb.sum(axis=axis)) / c.sum(axis=axis)

        return _bootstrap(
            (sa, sb, counts),
            mean_difference,
            vectorized=True,
            estimate=xa.mean() - xb.mean(),
            n=len(xa),
            n_clusters=len(counts),
            n_resamples=n_resamples,
            confidence=confidence,
            seed=seed,
            method=method,
        )
    if not callable(stat):
        raise StatsError(f"stat={stat!r}: use 'mean_difference' or a function stat(a, b) -> float")
    codes = np.arange(len(xa)) if clusters is None else _cluster_codes(clusters, len(xa))
    rows = [np.flatnonzero(codes == g) for g in range(int(codes.max()) + 1)]

    def resampled(idx):
        take = np.concatenate([rows[int(g)] for g in idx])
        return stat(xa[take], xb[take])

    return _bootstrap(
        (np.arange(len(rows)),),
        resampled,
        vectorized=False,
        estimate=stat(xa, xb),
        n=len(xa),
        n_clusters=len(rows),
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        method=method,
    )


# ---------------------------------------------------------------- risk control


def _check_count(k: int, n: int) -> None:
    if not (isinstance(n, (int, np.integer)) and isinstance(k, (int, np.integer))):
        raise StatsError(f"k={k!r}, n={n!r}: counts must be integers")
    if n < 1 or not 0 <= k <= n:
        raise StatsError(f"k={k}, n={n}: need n >= 1 and 0 <= k <= n")


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided exact (Clopper–Pearson) 1 - alpha interval for k successes in n trials
    (statsmodels ``proportion_confint(method="beta")``)."""
    from statsmodels.stats.proportion import proportion_confint

    _check_count(k, n)
    lo, hi = proportion_confint(int(k), int(n), alpha=alpha, method="beta")
    return float(lo), float(hi)


def wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score 1 - alpha interval for k successes in n trials (statsmodels
    ``proportion_confint(method="wilson")``): the interval of paper 001's bracketed flip,
    change and disagreement rates (App. A: 136 of 593 gives [19.7, 26.5] %, where
    Clopper–Pearson gives [19.6, 26.5])."""
    from statsmodels.stats.proportion import proportion_confint

    _check_count(k, n)
    lo, hi = proportion_confint(int(k), int(n), alpha=alpha, method="wilson")
    return float(lo), float(hi)


def clopper_pearson_upper(k: int, n: int, delta: float = LTT_DELTA) -> float:
    """One-sided exact upper confidence bound at level 1 - delta for k errors in n
    (App. H: 0 errors in 10 at delta = 10 % gives 0.206)."""
    if not 0 < delta < 0.5:
        raise StatsError(f"delta={delta}: must be in (0, 0.5)")
    # The upper end of the two-sided 1 - 2·delta interval is the one-sided 1 - delta bound.
    return clopper_pearson(k, n, alpha=2 * delta)[1]


def _risk_inputs(scores: Sequence[float], errors: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    s, e = _array(scores, "scores"), _bools(errors, "errors")
    _aligned(("scores", s), ("errors", e))
    return s, e


def selective_risk(scores: Sequence[float], errors: Sequence[bool], threshold: float | None) -> dict[str, Any]:
    """Coverage and selective error when answering the items with ``score >= threshold``
    (``None`` answers nothing): ``{"threshold", "answered", "errors", "coverage", "risk", "n"}``
    (``risk`` is ``None`` when nothing is answered)."""
    s, e = _risk_inputs(scores, errors)
    answered = np.zeros(len(s), bool) if threshold is None else s >= threshold
    n_ans, n_err = int(answered.sum()), int(e[answered].sum())
    return {
        "threshold": threshold,
        "answered": n_ans,
        "errors": n_err,
        "coverage": n_ans / len(s),
        "risk": n_err / n_ans if n_ans else None,
        "n": len(s),
    }


def learn_then_test(
    scores: Sequence[float],
    errors: Sequence[bool],
    alpha: float,
    delta: float = LTT_DELTA,
    *,
    thresholds: Sequence[float] | None = None,
    min_answered: int = LTT_MIN_ANSWERED,
) -> dict[str, Any]:
    """Fixed-sequence Learn-then-Test of an abstention threshold on calibration items (App. H).

    ``scores``: confidence per item, higher = more confident (the answer margin);
    an item is answered when ``score >= threshold``. ``errors``: True where the
    answer differs from gold. Candidate thresholds (default: the distinct
    calibration scores; given or not, those answering fewer than ``min_answered``
    items are dropped) are walked strict to permissive, after the start: the walk
    always starts at the ``min_answered`` highest-scoring items (App. H). When a tie
    straddles that start (30 items at the top score, say), no threshold answers
    exactly those items, so the start is tested on its own first step (``threshold``
    ``None``, never selectable) with the tie's errors counted first (the worst case
    over how the tie is broken); the tie's threshold is tested next. Each step is
    accepted while the one-sided Clopper–Pearson upper bound (level 1 - delta) on
    its calibration selective error is <= ``alpha``, and the walk stops at the first failure. The selected
    threshold is the last accepted (``None``: abstain on everything), which
    controls P(answer != gold | answered) <= alpha with probability >= 1 - delta.

    Returns ``{"alpha", "delta", "threshold", "coverage", "answered", "errors",
    "upper", "n", "steps": [{"threshold", "answered", "errors", "upper", "pvalue", "accepted"}, …]}``
    where ``pvalue`` is the exact binomial p-value of H0: risk > alpha
    (accepted exactly when ``pvalue <= delta``).
    """
    from scipy.stats import binom
    from statsmodels.stats.proportion import proportion_confint

    s, e = _risk_inputs(scores, errors)
    if not 0 < alpha < 1:
        raise StatsError(f"alpha={alpha}: the risk level must be in (0, 1)")
    if not 0 < delta < 0.5:
        raise StatsError(f"delta={delta}: must be in (0, 0.5)")
    if min_answered < 1:
        raise StatsError(f"min_answered={min_answered}: must be >= 1")
    candidates = (np.unique(s) if thresholds is None else np.unique(_array(thresholds, "thresholds")))[::-1]
    # every candidate at once (strict to permissive): answered = score >= t, counted off the sorted scores
    order = np.lexsort((~e, -s))  # by score, highest first; within a tie, errors first (the start's worst case)
    answered = np.searchsorted(-s[order], -candidates, side="right")
    cum_errors = np.concatenate([[0], np.cumsum(e[order])])
    keep = answered >= min_answered
    candidates, answered = candidates[keep], answered[keep]
    k = cum_errors[answered]
    if len(candidates) and answered[0] > min_answered:
        # a tie across the start: the walk still starts at the min_answered highest items, the tie's errors first
        candidates, answered, k = np.r_[np.nan, candidates], np.r_[min_answered, answered], np.r_[cum_errors[min_answered], k]
    chosen = None
    steps: list[dict[str, Any]] = []
    if len(candidates):
        # one-sided level 1 - delta bound = upper end of the two-sided 1 - 2·delta interval
        upper = np.atleast_1d(proportion_confint(k, answered, alpha=2 * delta, method="beta")[1])
        pvalue = binom.cdf(k, answered, alpha)  # exact binomial p of H0: risk >= alpha (binomtest "less")
        accepted = upper <= alpha
        stop = int(np.argmin(accepted)) if not accepted.all() else len(accepted) - 1
        steps = [
            {
                "threshold": None if np.isnan(candidates[i]) else float(candidates[i]),
                "answered": int(answered[i]),
                "errors": int(k[i]),
                "upper": float(upper[i]),
                "pvalue": float(pvalue[i]),
                "accepted": bool(accepted[i]),
            }
            for i in range(stop + 1)
        ]
        chosen = next((x for x in reversed(steps) if x["accepted"] and x["threshold"] is not None), None)
    return {
        "alpha": alpha,
        "delta": delta,
        "threshold": chosen["threshold"] if chosen else None,
        "coverage": chosen["answered"] / len(s) if chosen else 0.0,
        "answered": chosen["answered"] if chosen else 0,
        "errors": chosen["errors"] if chosen else 0,
        "upper": chosen["upper"] if chosen else None,
        "n": len(s),
        "steps": steps,
    }


def ltt_halves(n: int, key: Sequence[Any], split: int) -> tuple[np.ndarray, np.ndarray]:
    """Split ``split`` of ``n`` items into calibration (the first ``n // 2`` of a permutation)
    and test (the rest), seeded by sha256 of (``key``, ``split``): the same in every process."""
    from judgetrain.seeding import rng_for

    perm = rng_for("ltt-split", *key, split).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


def ltt_splits(
    scores: Sequence[float],
    errors: Sequence[bool],
    alpha: float,
    delta: float = LTT_DELTA,
    *,
    n_splits: int = LTT_SPLITS,
    key: Sequence[Any] = (),
    min_answered: int = LTT_MIN_ANSWERED,
    details: bool = False,
) -> dict[str, Any]:
    """App. H's in-cell certified mode (Table S10): ``n_splits`` seeded random halves of one
    cell's items (:func:`ltt_halves`); on each, :func:`learn_then_test` picks the threshold on
    the calibration half and the test half is answered at it.

    Returns ``{"alpha", "delta", "n", "n_calibration", "n_test", "n_splits", "coverage"
    (mean test-half coverage over splits), "violation_rate" (share of splits whose test-half
    selective error exceeds ``alpha``; a split answering nothing does not violate),
    "violations", "certified_splits" (splits with a threshold), "median_threshold"}``, plus
    ``"splits"`` (one ``{"threshold", "coverage", "risk", "violated"}`` per split) with ``details``.
    """
    s, e = _risk_inputs(scores, errors)
    if n_splits < 1:
        raise StatsError(f"n_splits={n_splits}: need at least one split")
    if len(s) < 2:
        raise StatsError(f"scores: {len(s)} item(s); a calibration / test split needs at least two")
    rows = []
    for i in range(n_splits if len(s) // 2 >= min_answered else 0):
        cal, test = ltt_halves(len(s), key, i)
        res = learn_then_test(s[cal], e[cal], alpha, delta, min_answered=min_answered)
        t = res["threshold"]
        answered = np.zeros(len(test), bool) if t is None else s[test] >= t
        risk = float(e[test][answered].mean()) if answered.any() else None
        rows.append(
            {"threshold": t, "coverage": float(answered.mean()), "risk": risk, "violated": risk is not None and risk > alpha}
        )
    if not rows:  # a calibration half smaller than the walk's start certifies nothing, on every split
        rows = [{"threshold": None, "coverage": 0.0, "risk": None, "violated": False} for _ in range(n_splits)]
    thresholds = [r["threshold"] for r in rows if r["threshold"] is not None]
    out: dict[str, Any] = {
        "alpha": alpha,
        "delta": delta,
        "n": len(s),
        "n_calibration": len(s) // 2,
        "n_test": len(s) - len(s) // 2,
        "n_splits": n_splits,
        "coverage": float(np.mean([r["coverage"] for r in rows])),
        "violation_rate": float(np.mean([r["violated"] for r in rows])),
        "violations": int(sum(r["violated"] for r in rows)),
        "certified_splits": len(thresholds),
        "median_threshold": float(np.median(thresholds)) if thresholds else None,
    }
    if details:
        out["splits"] = rows
    return out


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for the positive ``labels``
    (scikit-learn ``roc_auc_score``). Flip prediction passes the negated margin
    (low margin → flip); correctness prediction passes the margin itself."""
    from sklearn.metrics import roc_auc_score

    s, y = _array(scores, "scores"), _bools(labels, "labels")
    _aligned(("scores", s), ("labels", y))
    if y.all() or not y.any():
        raise StatsError(f"labels: AUROC needs both classes, but all {len(y)} items are {bool(y[0])}")
    return float(roc_auc_score(y, s))


def delong_auroc_difference(scores_a: Sequence[float], scores_b: Sequence[float], labels: Sequence[bool]) -> dict[str, Any]:
    """DeLong, DeLong & Clarke-Pearson (1988): are two AUROCs of the same items and
    labels, scored two ways, different? Each AUROC is the mean of its positives'
    placement values (the fraction of negatives scored below, ties counting half,
    from midranks as in Sun & Xu 2014); the covariance of the pair is
    ``S10 / m + S01 / n`` (m positives, n negatives, sample covariances of the
    placement values), and ``z = (A_a - A_b) / se`` is referred to the normal, two-sided.
    Needs at least two items of each class; a zero standard error is undefined."""
    from scipy.stats import norm, rankdata

    a, b, y = _array(scores_a, "scores_a"), _array(scores_b, "scores_b"), _bools(labels, "labels")
    _aligned(("scores_a", a), ("scores_b", b), ("labels", y))
    m, n = int(y.sum()), int((~y).sum())
    if m < 2 or n < 2:
        raise StatsError(f"labels: DeLong's test needs at least 2 items of each class, got {m} positive and {n} negative")
    v10, v01 = [], []
    for s in (a, b):
        ranks = rankdata(s)
        v10.append((ranks[y] - rankdata(s[y])) / n)  # per positive: negatives below it
        v01.append(1.0 - (ranks[~y] - rankdata(s[~y])) / m)  # per negative: positives above it
    cov = np.cov(np.vstack(v10)) / m + np.cov(np.vstack(v01)) / n
    auc_a, auc_b = float(v10[0].mean()), float(v10[1].mean())
    se = float(np.sqrt(max(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], 0.0)))
    if se == 0.0:
        raise StatsError(
            "scores_a, scores_b: the AUROC difference has zero standard error (the two scores rank "
            "every positive–negative pair alike); DeLong's z is undefined"
        )
    z = (auc_a - auc_b) / se
    return {
        "auroc_a": auc_a,
        "auroc_b": auc_b,
        "difference": auc_a - auc_b,
        "se": se,
        "z": float(z),
        "pvalue": float(2 * norm.sf(abs(z))),
        "n_positive": m,
        "n_negative": n,
        "test": "DeLong, two-sided",
    }
