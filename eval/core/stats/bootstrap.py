"""Bootstrap confidence intervals that resample questions, so that the passes of one question
stay together (paper 001 App. A, App. C "Oracle-bound uncertainty"): of a mean, and of a
paired statistic of two arms.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .checks import StatsError, as_array, check_aligned, cluster_codes

__all__ = ["bootstrap_ci", "paired_bootstrap_ci"]


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
    codes = np.arange(n) if clusters is None else cluster_codes(clusters, n)
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
    x = as_array(values, "values")
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
    xa, xb = as_array(a, "a"), as_array(b, "b")
    check_aligned(("a", xa), ("b", xb))
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
    codes = np.arange(len(xa)) if clusters is None else cluster_codes(clusters, len(xa))
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
