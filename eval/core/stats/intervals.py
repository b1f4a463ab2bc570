"""Rate intervals for k successes in n trials: exact Clopper–Pearson, and the Wilson score
interval of paper 001's bracketed flip, change and disagreement rates (App. A: 136/593 gives
22.9 % [19.7, 26.5]).
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import numpy as np

from .checks import StatsError

__all__ = ["clopper_pearson", "difference_interval", "wilson"]


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


def difference_interval(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> tuple[float, float]:
    """The 1 - alpha interval of ``k2/n2 - k1/n1`` (a later run's rate minus the first's) by
    Newcombe's hybrid score method, his method 10, which builds it from the two rates' Wilson
    intervals (statsmodels ``confint_proportions_2indep(method="newcomb")``). It treats the two
    as independent samples: on the same items (paired) it errs wide."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    _check_count(k1, n1)
    _check_count(k2, n2)
    lo, hi = confint_proportions_2indep(int(k2), int(n2), int(k1), int(n1), method="newcomb", compare="diff", alpha=alpha)
    return float(lo), float(hi)
