"""The chronological-ordering probe's metrics (paper 002 App. G): exact match of the whole
ordering, Kendall's tau between chronological ranks, and the share of ranks named right.
Docs: "concepts/ordering-probe.md".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["exact_match", "kendall_tau", "ordering_metrics", "position_accuracy"]


def _check_pair(pred: Sequence[int], gold: Sequence[int]) -> None:
    if sorted(pred) != sorted(gold) or sorted(gold) != list(range(1, len(gold) + 1)):
        raise ValueError(f"orderings must be permutations of the same 1…n: got {list(pred)} and {list(gold)}")


def exact_match(pred: Sequence[int] | None, gold: Sequence[int]) -> bool:
    """True iff the whole predicted ordering equals the gold (the paper's ✓); None is wrong."""
    return pred is not None and list(pred) == list(gold)


def kendall_tau(pred: Sequence[int], gold: Sequence[int]) -> float:
    """Kendall's tau (``scipy.stats.kendalltau``; no ties, so tau-b = tau-a)
    between the chronological rank each image gets in ``pred`` and in ``gold``:
    1 identical, −1 reversed. Needs n ≥ 2."""
    from scipy.stats import kendalltau

    _check_pair(pred, gold)
    if len(gold) < 2:
        raise ValueError("Kendall's tau needs at least two images")
    rank_pred = {img: r for r, img in enumerate(pred)}
    rank_gold = {img: r for r, img in enumerate(gold)}
    images = sorted(rank_gold)
    return float(kendalltau([rank_pred[i] for i in images], [rank_gold[i] for i in images]).statistic)


def position_accuracy(pred: Sequence[int], gold: Sequence[int]) -> float:
    """Share of chronological ranks at which ``pred`` names the right image."""
    _check_pair(pred, gold)
    return sum(a == b for a, b in zip(pred, gold, strict=True)) / len(gold)


def ordering_metrics(preds: Sequence[Sequence[int] | None], golds: Sequence[Sequence[int]]) -> dict:
    """Aggregate over items: ``n``, ``n_valid``, ``n_invalid``; ``exact_match``
    over all items (invalid = wrong, as Table S21's x/10) and
    ``exact_match_valid`` over valid ones; mean ``kendall_tau`` and
    ``position_accuracy`` over valid ones (None when none is valid);
    ``chance_exact_match`` = mean of 1/n! (a uniform random guess)."""
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} predictions for {len(golds)} gold orderings")
    valid = [(p, g) for p, g in zip(preds, golds, strict=True) if p is not None]
    n = len(golds)

    def mean(xs):
        xs = list(xs)
        return sum(xs) / len(xs) if xs else None

    return {
        "n": n,
        "n_valid": len(valid),
        "n_invalid": n - len(valid),
        "exact_match": mean(exact_match(p, g) for p, g in zip(preds, golds, strict=True)),
        "exact_match_valid": mean(exact_match(p, g) for p, g in valid),
        "kendall_tau": mean(kendall_tau(p, g) for p, g in valid),
        "position_accuracy": mean(position_accuracy(p, g) for p, g in valid),
        "chance_exact_match": mean(1 / math.factorial(len(g)) for g in golds),
    }
