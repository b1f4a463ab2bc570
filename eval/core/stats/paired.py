"""Paired tests of two arms on the same items (paper 001 §4, Tables 1, S7, S9, App. E): exact
McNemar on binary outcomes, the Wilcoxon signed-rank test, and equivalence by two one-sided
paired t-tests (TOST) against a margin of ±2.5 points, optionally question-clustered.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .checks import StatsError, as_array, as_bools, check_aligned, cluster_codes

__all__ = ["EQUIVALENCE_MARGIN", "mcnemar_exact", "tost_paired", "wilcoxon_signed_rank"]


# §4 "Statistical protocol": ±2.5 points, fixed ex ante at half the 8→32-frame gain.
EQUIVALENCE_MARGIN = 0.025


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

    a, b = as_bools(a_correct, "a_correct"), as_bools(b_correct, "b_correct")
    check_aligned(("a_correct", a), ("b_correct", b))
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
    xa, xb = as_array(a, "a"), as_array(b, "b")
    check_aligned(("a", xa), ("b", xb))
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
            codes = cluster_codes(clusters, len(d))
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
