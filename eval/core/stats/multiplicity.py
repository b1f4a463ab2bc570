"""Multiplicity over the confirmatory family (paper 001 App. A, Table S2): Benjamini–Hochberg
step-up.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Sequence

from .checks import StatsError, as_array

__all__ = ["benjamini_hochberg"]


def benjamini_hochberg(pvalues: Sequence[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Benjamini–Hochberg step-up over one family (statsmodels ``multipletests(method="fdr_bh")``):
    ``(reject, qvalues)`` in the input order."""
    from statsmodels.stats.multitest import multipletests

    p = as_array(pvalues, "pvalues")
    if ((p < 0) | (p > 1)).any():
        raise StatsError(f"pvalues: every p-value must be in [0, 1], got {p[(p < 0) | (p > 1)][0]}")
    reject, q, _, _ = multipletests(p, alpha=alpha, method="fdr_bh")
    return [bool(r) for r in reject], [float(x) for x in q]
