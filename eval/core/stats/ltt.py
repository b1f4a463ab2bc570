"""Risk control by abstention (paper 001 App. H, Table S10): the selective risk of a threshold,
fixed-sequence Learn-then-Test of margin thresholds with one-sided Clopper–Pearson bounds,
and its in-cell certified mode on seeded calibration / test halves.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .checks import StatsError, as_array, as_bools, check_aligned
from .intervals import clopper_pearson

__all__ = [
    "LTT_DELTA",
    "LTT_MIN_ANSWERED",
    "LTT_SPLITS",
    "clopper_pearson_upper",
    "learn_then_test",
    "ltt_halves",
    "ltt_splits",
    "selective_risk",
]


# App. H: fixed-sequence LTT at delta = 10 %, the walk starting at the ten highest-scoring items.
LTT_DELTA = 0.10
LTT_MIN_ANSWERED = 10
# App. H: 300 random calibration / test splits per (model, benchmark) cell.
LTT_SPLITS = 300


def clopper_pearson_upper(k: int, n: int, delta: float = LTT_DELTA) -> float:
    """One-sided exact upper confidence bound at level 1 - delta for k errors in n
    (App. H: 0 errors in 10 at delta = 10 % gives 0.206)."""
    if not 0 < delta < 0.5:
        raise StatsError(f"delta={delta}: must be in (0, 0.5)")
    # The upper end of the two-sided 1 - 2·delta interval is the one-sided 1 - delta bound.
    return clopper_pearson(k, n, alpha=2 * delta)[1]


def _risk_inputs(scores: Sequence[float], errors: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    s, e = as_array(scores, "scores"), as_bools(errors, "errors")
    check_aligned(("scores", s), ("errors", e))
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
    s, e = _risk_inputs(scores, errors)
    if not 0 < alpha < 1:
        raise StatsError(f"alpha={alpha}: the risk level must be in (0, 1)")
    if not 0 < delta < 0.5:
        raise StatsError(f"delta={delta}: must be in (0, 0.5)")
    if min_answered < 1:
        raise StatsError(f"min_answered={min_answered}: must be >= 1")
    candidates = (np.unique(s) if thresholds is None else np.unique(as_array(thresholds, "thresholds")))[::-1]
    steps = _walk_steps(*_walk_counts(s, e, candidates, min_answered), alpha, delta)
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


def _walk_counts(
    s: np.ndarray, e: np.ndarray, candidates: np.ndarray, min_answered: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The steps of :func:`learn_then_test`'s walk, strict to permissive, as three aligned arrays:
    each step's threshold (NaN for the start when a tie straddles it), the items it answers
    (``score >= threshold``) and their errors. ``candidates`` are distinct thresholds, highest
    first; those answering fewer than ``min_answered`` items are dropped."""
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
    return candidates, answered, k


def _walk_steps(candidates: np.ndarray, answered: np.ndarray, k: np.ndarray, alpha: float, delta: float) -> list[dict[str, Any]]:
    """The steps of the walk up to its first failure, included (all of them when none fails):
    ``[{"threshold" (None for a NaN start), "answered", "errors", "upper", "pvalue", "accepted"}, …]``,
    a step accepted when the one-sided Clopper–Pearson bound (level 1 - delta) on ``k / answered``
    is <= ``alpha``. No candidate gives no step."""
    from scipy.stats import binom
    from statsmodels.stats.proportion import proportion_confint

    if not len(candidates):
        return []
    # one-sided level 1 - delta bound = upper end of the two-sided 1 - 2·delta interval
    upper = np.atleast_1d(proportion_confint(k, answered, alpha=2 * delta, method="beta")[1])
    pvalue = binom.cdf(k, answered, alpha)  # exact binomial p of H0: risk >= alpha (binomtest "less")
    accepted = upper <= alpha
    stop = int(np.argmin(accepted)) if not accepted.all() else len(accepted) - 1
    return [
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
