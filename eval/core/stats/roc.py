"""How well a score predicts flips or correctness (paper 001 §4.3, App. I/J): AUROC, and
DeLong's test of two correlated AUROCs on the same items (Table S2's "Margin vs. MSP").
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .checks import StatsError, as_array, as_bools, check_aligned

__all__ = ["auroc", "delong_auroc_difference"]


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for the positive ``labels``
    (scikit-learn ``roc_auc_score``). Flip prediction passes the negated margin
    (low margin → flip); correctness prediction passes the margin itself."""
    from sklearn.metrics import roc_auc_score

    s, y = as_array(scores, "scores"), as_bools(labels, "labels")
    check_aligned(("scores", s), ("labels", y))
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

    a, b, y = as_array(scores_a, "scores_a"), as_array(scores_b, "scores_b"), as_bools(labels, "labels")
    check_aligned(("scores_a", a), ("scores_b", b), ("labels", y))
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
