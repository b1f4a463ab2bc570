"""TimeCatch report tables as paper 000 reports them: Table 2 on the main set, the long set apart, LPIPS bins by class.

- Table 2 (paper 000 §4.2, Table 2) holds the *main* set (4–8 frames) only; the
  *long* set (9–16 frames, CRAFT-long in the paper, §3.3 and §6.5) is a table of
  its own. Each table's Random row comes from its own items, so a source built
  with both sets keeps the paper's Random values.
- Temporal detection by LPIPS bin of the swapped pair (§6.1): a swapped item
  alone only shows whether "anomaly" was said, so each bin also holds the intact
  partners of its swapped items (the same sequence and prompt, unswapped) and the
  balanced accuracy of the two (scikit-learn's ``balanced_accuracy_score``).

Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.metrics import accuracy_cell
from .metrics import ALL, LOCALIZE_TASKS, LPIPS_BIN_WIDTH, SUBSETS, accuracy_table, confusion, lpips_bin, subset_table

__all__ = ["MAIN_MAX_FRAMES", "balanced_interval", "compute_metrics", "length_subset", "lpips_class_bins", "table2"]

# Paper 000 §3.3: sequences of 4–8 frames are the main set, 9–16 the long one.
MAIN_MAX_FRAMES = 8


def length_subset(row: Mapping[str, Any]) -> str:
    """``"main"`` or ``"long"``: the row's ``subset`` (as the builder wrote it), or from
    ``n_frames`` (≤ 8: main) for rows that carry no subset."""
    subset = row.get("subset")
    if subset in SUBSETS:
        return str(subset)
    return "main" if int(row["n_frames"]) <= MAIN_MAX_FRAMES else "long"


def table2(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"main": table, "long": table}``, each an :func:`~judgetrain.eval.core.metrics.accuracy_table`
    of that set's rows alone (Random row included); a set with no rows is left out."""
    out = {}
    for subset in SUBSETS:
        members = [r for r in rows if length_subset(r) == subset]
        if members:
            out[subset] = accuracy_table(members)
    return out


def _partner_key(row: Mapping[str, Any]) -> tuple | None:
    # The builder writes one intact and one swapped record per (sequence, prompt layout).
    if row.get("sequence_id") is None:
        return None
    return (row.get("source"), row["sequence_id"], row.get("layout"))


def _class_cell(members: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    cell = accuracy_cell(members)
    return {"n": cell["n"], "correct": cell["correct"], "accuracy": cell["accuracy"] if members else None, "ci95": cell["ci95"]}


def _balanced(swapped: Sequence[Mapping[str, Any]], intact: Sequence[Mapping[str, Any]]) -> float | None:
    if not swapped or not intact:
        return None  # one class alone has no balanced accuracy
    from sklearn.metrics import balanced_accuracy_score

    # The class is "anomalous" whatever a prompt's polarity (prompt B's yes means intact):
    # the model called an item anomalous iff it was right on a swapped one or wrong on an intact one.
    truth = [True] * len(swapped) + [False] * len(intact)
    said = [bool(r["correct"]) for r in swapped] + [not r["correct"] for r in intact]
    return float(balanced_accuracy_score(truth, said))


def lpips_class_bins(
    rows: Sequence[Mapping[str, Any]], task: str = "temporal_detect", width: float = LPIPS_BIN_WIDTH
) -> list[dict[str, Any]]:
    """``task`` by LPIPS distance of the swapped pair, ``width``-wide bins ``[k·width, (k+1)·width)``
    from 0 up to the largest value seen (empty bins kept).

    Each bin: ``{"lo", "hi", "n", "swapped", "intact", "balanced_accuracy"}``; ``swapped``
    and ``intact`` are ``{"n", "correct", "accuracy", "ci95"}`` (accuracy and its Wilson
    interval ``None`` with no items),
    ``intact`` over the intact partners (same source, ``sequence_id`` and layout) of the
    bin's swapped items, ``balanced_accuracy`` the mean of the two classes' accuracies
    (``None`` unless both are present) with its 95% interval ``balanced_accuracy_ci95``
    (:func:`balanced_interval`), ``n`` both classes' items together."""
    task_rows = [r for r in rows if r["task"] == task]
    swapped = [r for r in task_rows if r.get("lpips_swapped") is not None]
    if not swapped:
        return []
    partners: dict[tuple, Mapping[str, Any]] = {}
    for r in task_rows:
        key = _partner_key(r)
        if r.get("perturbation") == "none" and key is not None:
            partners[key] = r
    index = [lpips_bin(r["lpips_swapped"], width) for r in swapped]
    bins = []
    for k in range(max(index) + 1):
        sw = [r for r, i in zip(swapped, index, strict=False) if i == k]
        intact = [partners[key] for r in sw if (key := _partner_key(r)) in partners]
        bins.append(
            {
                "lo": round(k * width, 10),
                "hi": round((k + 1) * width, 10),
                "n": len(sw) + len(intact),
                "swapped": _class_cell(sw),
                "intact": _class_cell(intact),
                "balanced_accuracy": _balanced(sw, intact),
            }
        )
        bins[-1]["balanced_accuracy_ci95"] = balanced_interval(bins[-1])
    return bins


def balanced_interval(b: Mapping[str, Any]) -> tuple[float, float] | None:
    """95% interval of a bin's balanced accuracy, the mean of its two class accuracies, by MOVER
    (Zou & Donner 2008, "method of variance estimates recovery"; Newcombe's hybrid score
    interval for a difference is the same construction): the two classes' Wilson intervals
    (``ci95`` of :func:`lpips_class_bins`) combined as for
    a sum of independent estimates, ``BA ∓ ½·√((p₁ − l₁)² + (p₂ − l₂)²)`` below and
    ``± ½·√((u₁ − p₁)² + (u₂ − p₂)²)`` above. The classes are different items (a swapped clip
    and its intact partner), treated as independent. ``None`` when a class is empty (no balanced
    accuracy)."""
    if b.get("balanced_accuracy") is None or not (b["swapped"].get("ci95") and b["intact"].get("ci95")):
        return None
    (p1, (l1, u1)), (p2, (l2, u2)) = ((c["accuracy"], c["ci95"]) for c in (b["swapped"], b["intact"]))
    ba = b["balanced_accuracy"]
    below = 0.5 * ((p1 - l1) ** 2 + (p2 - l2) ** 2) ** 0.5
    above = 0.5 * ((u1 - p1) ** 2 + (u2 - p2) ** 2) ** 0.5
    return max(0.0, ba - below), min(1.0, ba + above)


def compute_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything a TimeCatch report shows, from prediction rows alone: ``table2`` (main and
    long set apart), ``by_task_source`` (all lengths together), ``overall``, ``by_subset``,
    ``confusion`` and ``lpips_bins.temporal_detect`` (both classes per bin)."""
    by_task_source = accuracy_table(rows)
    return {
        "n": len(rows),
        "overall": {t: cells[ALL] for t, cells in by_task_source.items() if ALL in cells},
        "by_task_source": by_task_source,
        "table2": table2(rows),
        "by_subset": subset_table(rows),
        "confusion": {t: c for t in LOCALIZE_TASKS if (c := confusion(rows, t)) is not None},
        "lpips_bins": {"temporal_detect": lpips_class_bins(rows, "temporal_detect")},
    }
