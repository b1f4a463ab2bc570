"""Accuracy as every evaluation counts it: the accuracy of prediction rows, the accuracy of a
uniform guess over each item's own choices, the cell of both that reports show, and the
Wilson 95% interval every reported rate carries (:func:`ci95`).

Pure functions of prediction rows (the dicts stored one per line in ``predictions.jsonl``,
:mod:`judgetrain.eval.core.runs`), so a report is recomputable from that file alone; the
fields read are ``label``, ``prediction`` and ``choices``. Accuracy is scikit-learn's
``accuracy_score`` over (label, prediction) pairs, a fraction in 0..1; intervals are Wilson
score intervals (:func:`judgetrain.eval.core.stats.wilson`, the interval of paper 001's
bracketed rates), as fractions too.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["accuracy", "accuracy_cell", "ci95", "random_accuracy"]


def accuracy(rows: Sequence[Mapping[str, Any]]) -> float:
    """Fraction of rows whose ``prediction`` equals ``label`` (``nan`` for no rows)."""
    if not rows:
        return math.nan
    from sklearn.metrics import accuracy_score

    return float(accuracy_score([str(r["label"]) for r in rows], [str(r["prediction"]) for r in rows]))


def random_accuracy(rows: Sequence[Mapping[str, Any]]) -> float:
    """Expected accuracy of a uniform guess over each item's own choices, averaged over
    items: 1/2 for detection, mean 1/n for frame localization, mean 1/len(choices) for
    temporal localization (1/C(n,2) with all-pairs choices, 1/(n-1) with adjacent ones).
    Computed per item because n varies within a source (paper 000 Table 2, Random row)."""
    if not rows:
        return math.nan
    return sum(1.0 / len(r["choices"]) for r in rows) / len(rows)


def ci95(k: int, n: int) -> list[float] | None:
    """Wilson score 95% interval ``[lo, hi]`` (fractions) of ``k`` successes in ``n``;
    ``None`` for ``n == 0`` (no items, no interval)."""
    if not n:
        return None
    from .stats import wilson

    return list(wilson(int(k), int(n)))


def accuracy_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"accuracy", "random", "n", "correct", "ci95"}`` for one group of rows (``ci95``:
    :func:`ci95` of correct in n, ``None`` for no rows)."""
    acc = accuracy(rows)
    correct = 0 if not rows else round(acc * len(rows))
    return {
        "accuracy": acc,
        "random": random_accuracy(rows),
        "n": len(rows),
        "correct": correct,
        "ci95": ci95(correct, len(rows)),
    }
