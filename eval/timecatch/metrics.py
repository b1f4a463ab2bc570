"""TimeCatch's metrics (paper 000 §4.2, §6): accuracy per task × source and per length subset,
localization confusion matrices, and accuracy by LPIPS bin of the swapped pair.

Pure functions of prediction rows (``predictions.jsonl``), so a report is recomputable from
that file alone. The fields read are ``task``, ``source``, ``subset``, ``label``,
``prediction``, ``choices``, ``position`` (0-based), ``n_frames`` and ``lpips_swapped``.
Confusion matrices are scikit-learn's ``confusion_matrix``. Accuracies are fractions in
0..1 here, each cell with its n, correct count and Wilson 95% interval (``ci95``); reports
print them as percentages with one decimal (paper 000 Table 2).
Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.metrics import accuracy_cell

__all__ = [
    "ALL",
    "LOCALIZE_TASKS",
    "LPIPS_BIN_WIDTH",
    "SUBSETS",
    "TASK_ABBREV",
    "TASK_TITLES",
    "TIMECATCH_TASKS",
    "accuracy_table",
    "confusion",
    "lpips_bin",
    "lpips_bins",
    "subset_table",
]

TIMECATCH_TASKS = ("temporal_detect", "temporal_localize", "frame_detect", "frame_localize")
LOCALIZE_TASKS = ("temporal_localize", "frame_localize")
TASK_TITLES = {
    "temporal_detect": "Temporal Detect",
    "temporal_localize": "Temporal Localize",
    "frame_detect": "Frame Detect",
    "frame_localize": "Frame Localize",
}
TASK_ABBREV = {"temporal_detect": "TD", "temporal_localize": "TL", "frame_detect": "FD", "frame_localize": "FL"}
SUBSETS = ("main", "long")
# Paper 000 §6: swapped pairs are grouped in fixed 0.1-wide LPIPS bins (0.0–0.1, 0.1–0.2, …).
LPIPS_BIN_WIDTH = 0.1
ALL = "all"


def _group(rows: Iterable[Mapping[str, Any]], *keys: str) -> dict[tuple, list[Mapping[str, Any]]]:
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return groups


def _tasks_in(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    present = {r["task"] for r in rows}
    return [t for t in TIMECATCH_TASKS if t in present] + sorted(present - set(TIMECATCH_TASKS))


def accuracy_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{task: {source: cell, ..., "all": cell}}`` (cells from :func:`accuracy_cell`);
    tasks in TimeCatch order, sources sorted."""
    groups = _group(rows, "task", "source")
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for task in _tasks_in(rows):
        sources = sorted({s for (t, s) in groups if t == task})
        table[task] = {s: accuracy_cell(groups[(task, s)]) for s in sources}
        table[task][ALL] = accuracy_cell([r for r in rows if r["task"] == task])
    return table


def subset_table(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{task: {"main": cell, "long": cell, "all": cell}}``: accuracy by sequence-length
    subset (main: 4–8 frames, long: 9–16); a subset with no rows is left out."""
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task"], str(r.get("subset") or "unknown")), []).append(r)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for task in _tasks_in(rows):
        subsets = {s for (t, s) in groups if t == task}
        order = [s for s in SUBSETS if s in subsets] + sorted(subsets - set(SUBSETS))
        out[task] = {s: accuracy_cell(groups[(task, s)]) for s in order}
        out[task][ALL] = accuracy_cell([r for r in rows if r["task"] == task])
    return out


_INT = re.compile(r"\d+")
UNPARSED = "none"  # the confusion label of an answer naming no frame (or no pair)


def _frame(answer: Any) -> int | str:
    """The 1-based frame number an answer names ("3" -> 3), else :data:`UNPARSED`."""
    m = _INT.search(str(answer))
    return int(m.group()) if m else UNPARSED


def _pair(answer: Any) -> str:
    """The frame pair an answer names, lower frame first ("7 and 6" -> "6 and 7"), else :data:`UNPARSED`."""
    found = [int(x) for x in _INT.findall(str(answer))]
    if len(found) != 2:
        return UNPARSED
    a, b = sorted(found)
    return f"{a} and {b}"


def _pair_order(label: str) -> tuple:
    return (1, ()) if label == UNPARSED else (0, tuple(int(x) for x in label.split(" and ")))


def confusion(rows: Sequence[Mapping[str, Any]], task: str) -> dict[str, Any] | None:
    """Predicted vs true anomaly for a localization task.

    Frame localization: 1-based frame numbers, true ``position + 1`` (the noise frame).
    Temporal localization: frame pairs, true ``"p and p+1"`` with ``p = position + 1``
    (the swapped consecutive frames) against the pair answered, so "6 and 9" for
    "6 and 7" is off the diagonal; every adjacent pair is a label, and a non-adjacent
    pair that was answered gets its own. An answer naming no frame (or no pair) is
    counted under :data:`UNPARSED`, never dropped. Returns ``{"labels", "counts",
    "normalized"}`` (square; rows = true, columns = predicted, each row of
    ``normalized`` summing to 1 or all zero), or ``None`` when the task has no rows."""
    from sklearn.metrics import confusion_matrix

    sel = [r for r in rows if r["task"] == task and r.get("position", -1) is not None and r.get("position", -1) >= 0]
    if not sel:
        return None
    n = max(int(r["n_frames"]) for r in sel)
    true, pred, labels = (_pair_labels if task == "temporal_localize" else _frame_labels)(sel, n)
    index = {label: i for i, label in enumerate(labels)}
    counts = confusion_matrix([index[t] for t in true], [index[x] for x in pred], labels=list(range(len(labels)))).tolist()
    normalized = [[c / sum(row) if sum(row) else 0.0 for c in row] for row in counts]
    return {"labels": labels, "counts": counts, "normalized": normalized}


def _pair_labels(sel: Sequence[Mapping[str, Any]], n: int) -> tuple[Sequence[str], Sequence[str], Sequence[str]]:
    """(true, predicted, labels) of temporal localization: frame pairs, every adjacent pair of ``n`` frames a label."""
    true = [f"{int(r['position']) + 1} and {int(r['position']) + 2}" for r in sel]
    pred = [_pair(r["prediction"]) for r in sel]
    return true, pred, sorted({f"{i} and {i + 1}" for i in range(1, n)} | set(true) | set(pred), key=_pair_order)


def _frame_labels(sel: Sequence[Mapping[str, Any]], n: int) -> tuple[Sequence[int], Sequence[int | str], Sequence[int | str]]:
    """(true, predicted, labels) of frame localization: 1-based frames, every frame up to the largest seen a label."""
    true = [int(r["position"]) + 1 for r in sel]
    pred = [_frame(r["prediction"]) for r in sel]
    numbers = [*true, *(x for x in pred if isinstance(x, int))]  # every answer but UNPARSED names a frame
    labels: list[int | str] = [*range(1, max([n, *numbers]) + 1), *([UNPARSED] if UNPARSED in pred else [])]
    return true, pred, labels


def lpips_bin(value: float, width: float = LPIPS_BIN_WIDTH) -> int:
    """The 0-based bin ``k`` of ``[k*width, (k+1)*width)`` that an LPIPS distance falls in."""
    # round() first: 0.3 / 0.1 is 2.9999999999999996, which floor would put in bin 2.
    return int(math.floor(round(float(value) / width, 9)))


def lpips_bins(
    rows: Sequence[Mapping[str, Any]], task: str = "temporal_detect", width: float = LPIPS_BIN_WIDTH
) -> list[dict[str, Any]]:
    """Accuracy of ``task`` by LPIPS distance of the swapped pair, in ``width``-wide bins
    ``[k*width, (k+1)*width)`` from 0 up to the largest value seen (empty bins included,
    ``accuracy`` ``nan`` there). Only swapped records carry ``lpips_swapped``; intact
    ones are left out. Each bin: ``{"lo", "hi", "n", "correct", "accuracy", "ci95"}`` (Wilson)."""
    sel = [r for r in rows if r["task"] == task and r.get("lpips_swapped") is not None]
    if not sel:
        return []
    index = [lpips_bin(r["lpips_swapped"], width) for r in sel]
    bins = []
    for k in range(max(index) + 1):
        members = [r for r, i in zip(sel, index, strict=False) if i == k]
        cell = accuracy_cell(members)
        bins.append(
            {
                "lo": round(k * width, 10),
                "hi": round((k + 1) * width, 10),
                "n": cell["n"],
                "correct": cell["correct"],
                "accuracy": cell["accuracy"],
                "ci95": cell["ci95"],
            }
        )
    return bins
