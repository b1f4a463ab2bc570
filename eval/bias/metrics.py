"""The analyses of ``judgetrain eval bias``: per-position accuracy, first-option bias, the ordering
probe's signature (paper 002 F.3, C.3, G), each a function of the ``predictions.jsonl`` rows of
one judge run (:mod:`judgetrain.eval.judge`) or TimeCatch run (:mod:`judgetrain.eval.timecatch`),
gathered by :func:`analyze`; and the accessors of their position tables that the figures and
the report share. Everything comes from the prediction rows:

- **Per position, PRISM Type-1** (Tables S4, S17, S19, S20; Figure S5): pairwise
  rows of the positional subset (``positional_subset``: ``semantic-1`` and
  ``swap`` negatives of gold sequences of at most 6 frames; rows without that
  field qualify by perturbation and ``n_frames``) grouped by the semantic
  outlier's position 0…5 or the swapped pair 0-1 … 4-5. Per position: accuracy
  over valid answers and macro-F1 (:func:`judgetrain.eval.judge.classification_cell`);
  ``W_avg``: their mean over positions weighted by each position's valid
  answers (the paper's sample-weighted mean; for accuracy that is the pooled
  accuracy, correct of valid over all positions, so it has a Wilson interval too).
  For every run and, per run, every layout. Heatmaps (run × position,
  run·layout × position: each cell's n shown, cells of fewer than 10 valid answers
  greyed rather than coloured, rows without data left out) and W_avg bars.
- **Per true position, TimeCatch**: accuracy of each task on the anomalous
  records by 1-based frame of the anomaly (the noise frame, the earlier swapped
  frame) and its n-weighted mean; a heatmap.
- **Presentation flips**: over the twin pairs of a ``--twins`` PRISM / MIRAGE build (each
  pairwise item shown both ways round, ``twin`` in the prediction rows), the share of pairs
  whose preference (gold or perturbed sequence) differs between the two presentations, with
  its Wilson interval (:func:`presentation_flips`); what GRPO's consistency reward lowers.
- **First-option bias** (F.3: "models disproportionately select the first
  sequence"): over valid pairwise answers whose record says which sequence was
  shown first (``presentation`` ``gold_first`` / ``gold_second``; under P4 that
  is B): the rate of choosing the first-shown sequence, and an exact two-sided
  binomial test (``scipy.stats.binomtest``) of H0: P(choose the first-shown
  sequence) = 1/2, with its Clopper–Pearson 95% interval (the exact interval of
  that test; ``wilson95`` holds every rate's Wilson interval, which the report
  prints with each rate and the figure draws as error bars). H0 is what an
  order-blind judge gives when gold-first and gold-second items are equally
  many, which the PRISM and MIRAGE builders guarantee (the counts are reported
  beside it). Also the first-shown and letter-A rates when gold is first vs
  second, accuracy per presentation order and their gap, with Fisher's exact
  test (``scipy.stats.fisher_exact``) of presentation × correct, which holds
  without that balance. The paper names no test; these are ours.
- **Ordering probe** (App. G, Table S21): exact match, invalid rate and the
  "answers by position" signature, the share of items answered in the label
  order 1, 2, …, n or its reverse (:func:`judgetrain.eval.judge.ordering_cell`).
README: "`judgetrain eval judge`, `eval bias`".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.metrics import accuracy_cell, ci95
from ..judge.metrics import classification_cell, ordering_cell
from ..timecatch.metrics import TIMECATCH_TASKS

__all__ = [
    "KINDS",
    "TITLES",
    "analyze",
    "first_option_bias",
    "has_data",
    "position_cell",
    "position_columns",
    "position_table",
    "prism_positions",
    "timecatch_positions",
    "type1_rows",
]

KINDS = {"semantic": "semantic-1", "temporal": "swap"}
TITLES = {"semantic": "PRISM-Semantic (outlier at position)", "temporal": "PRISM-Temporal (swapped pair)"}


def type1_rows(rows: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    """Pairwise rows of the PRISM Type-1 positional subset of ``kind`` (``semantic`` / ``temporal``)."""
    from judgetrain.records import POSITIONAL_SUBSET_MAX_FRAMES

    perturbation = KINDS[kind]
    out = []
    for r in rows:
        if r.get("task") != "pairwise" or r.get("perturbation") != perturbation or int(r.get("position", -1)) < 0:
            continue
        flag = r.get("positional_subset")
        if flag if flag is not None else int(r.get("n_frames", 0)) <= POSITIONAL_SUBSET_MAX_FRAMES:
            out.append(r)
    return out


def _label(kind: str, position: int) -> str:
    return f"{position}-{position + 1}" if kind == "temporal" else str(position)


def _weighted(cells: Mapping[str, Mapping[str, Any]], key: str, weight: str) -> float | None:
    pairs = [(c[key], c[weight]) for c in cells.values() if c.get(key) is not None and c[weight]]
    total = sum(w for _, w in pairs)
    return math.fsum(v * w for v, w in pairs) / total if total else None


def position_table(rows: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """``{"positions": [label…], "cells": {label: classification cell}, "w_avg": {"accuracy", "f1", "n", "n_valid",
    "correct", "accuracy_ci95"}}`` for Type-1 rows of one kind; ``w_avg`` weights each position by its valid
    answers, which for accuracy is ``correct`` of ``n_valid`` over all positions (its Wilson interval beside it)."""
    by_pos: dict[int, list] = {}
    for r in rows:
        by_pos.setdefault(int(r["position"]), []).append(r)
    cells = {_label(kind, p): classification_cell(by_pos[p]) for p in sorted(by_pos)}
    correct, n_valid = sum(c["correct"] for c in cells.values()), sum(c["n_valid"] for c in cells.values())
    return {
        "positions": list(cells),
        "cells": cells,
        "w_avg": {
            "accuracy": _weighted(cells, "accuracy", "n_valid"),
            "f1": _weighted(cells, "f1", "n_valid"),
            "n": sum(c["n"] for c in cells.values()),
            "n_valid": n_valid,
            "correct": correct,
            "accuracy_ci95": ci95(correct, n_valid),
        },
    }


def prism_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per kind (``semantic``, ``temporal``) present: ``{"all": table, "by_layout": {layout: table}}``."""
    out = {}
    for kind in KINDS:
        sel = type1_rows(rows, kind)
        if sel:
            layouts = sorted({str(r["layout"]) for r in sel})
            out[kind] = {
                "all": position_table(sel, kind),
                "by_layout": {lay: position_table([r for r in sel if str(r["layout"]) == lay], kind) for lay in layouts},
            }
    return out


def timecatch_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per TimeCatch task: accuracy by 1-based frame of the anomaly (``position`` + 1) on the
    anomalous records, ``{"positions", "cells": {frame: accuracy cell}, "w_avg": {"accuracy", "n", "correct", "ci95"}}``
    (the n-weighted mean accuracy is ``correct`` of ``n``, with its Wilson interval)."""
    out = {}
    for task in TIMECATCH_TASKS:
        sel = [r for r in rows if r.get("task") == task and int(r.get("position", -1)) >= 0]
        if not sel:
            continue
        by_frame: dict[int, list] = {}
        for r in sel:
            by_frame.setdefault(int(r["position"]) + 1, []).append(r)
        cells = {str(k): accuracy_cell(by_frame[k]) for k in sorted(by_frame)}
        correct = sum(c["correct"] for c in cells.values())
        out[task] = {
            "positions": list(cells),
            "cells": cells,
            "w_avg": {
                "accuracy": _weighted(cells, "accuracy", "n"),
                "n": len(sel),
                "correct": correct,
                "ci95": ci95(correct, len(sel)),
            },
        }
    return out


def _first_shown(r: Mapping[str, Any]) -> str | None:
    if r.get("first_option"):
        return r["first_option"]
    if r.get("presentation") == "gold_first":
        return r["label"]
    others = [c for c in r.get("choices") or [] if c != r["label"]]
    return others[0] if r.get("presentation") == "gold_second" and len(others) == 1 else None


def _rate(rows: Sequence[Mapping[str, Any]], hit) -> float | None:
    return sum(bool(hit(r)) for r in rows) / len(rows) if rows else None


def _wilson(rows: Sequence[Mapping[str, Any]], hit) -> list[float] | None:
    return ci95(sum(bool(hit(r)) for r in rows), len(rows))


# the rates of first_option_bias, each with the rows it counts ("valid", "gf": gold first, "gs": gold second)
_FIRST_RATES = (
    ("first_rate", "valid", "first"),
    ("first_rate_gold_first", "gf", "first"),
    ("first_rate_gold_second", "gs", "first"),
    ("a_rate_gold_first", "gf", "A"),
    ("a_rate_gold_second", "gs", "A"),
    ("accuracy_gold_first", "gf", "correct"),
    ("accuracy_gold_second", "gs", "correct"),
)


def first_option_bias(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """First-option statistics (module docstring) over valid pairwise answers with a known
    presentation order; ``None`` when there are none. ``wilson95``: the Wilson 95% interval
    of every rate (``first_rate`` of ``n_valid``, the ``*_gold_first`` rates of ``n_gold_first``,
    the ``*_gold_second`` ones of ``n_gold_second``)."""
    from scipy.stats import binomtest, fisher_exact

    sel = [r for r in rows if r.get("task") == "pairwise" and r.get("presentation") in ("gold_first", "gold_second")]
    valid = [r for r in sel if r.get("valid", True) and r.get("prediction") is not None and _first_shown(r)]
    if not valid:
        return None
    first = [r for r in valid if r["prediction"] == _first_shown(r)]
    gf = [r for r in valid if r["presentation"] == "gold_first"]
    gs = [r for r in valid if r["presentation"] == "gold_second"]
    test = binomtest(len(first), len(valid), 0.5, alternative="two-sided")
    ci = test.proportion_ci(confidence_level=0.95, method="exact")
    correct_gf = sum(r["prediction"] == r["label"] for r in gf)
    correct_gs = sum(r["prediction"] == r["label"] for r in gs)
    out: dict[str, Any] = {
        "n": len(sel),
        "n_valid": len(valid),
        "n_gold_first": len(gf),
        "n_gold_second": len(gs),
        "chose_first": len(first),
        "first_rate": len(first) / len(valid),
        "first_rate_ci95": [float(ci.low), float(ci.high)],
        "binomial_p": float(test.pvalue),
        "excess_first": len(first) / len(valid) - 0.5,
        "first_rate_gold_first": _rate(gf, lambda r: r["prediction"] == _first_shown(r)),
        "first_rate_gold_second": _rate(gs, lambda r: r["prediction"] == _first_shown(r)),
        "a_rate_gold_first": _rate(gf, lambda r: r["prediction"] == "A"),
        "a_rate_gold_second": _rate(gs, lambda r: r["prediction"] == "A"),
        "accuracy_gold_first": correct_gf / len(gf) if gf else None,
        "accuracy_gold_second": correct_gs / len(gs) if gs else None,
        "accuracy_gap": None,
        "fisher_p": None,
    }
    groups = {"valid": valid, "gf": gf, "gs": gs}
    hits = {
        "first": lambda r: r["prediction"] == _first_shown(r),
        "A": lambda r: r["prediction"] == "A",
        "correct": lambda r: r["prediction"] == r["label"],
    }
    out["wilson95"] = {key: _wilson(groups[g], hits[h]) for key, g, h in _FIRST_RATES}
    if gf and gs:
        out["accuracy_gap"] = out["accuracy_gold_first"] - out["accuracy_gold_second"]
        out["fisher_p"] = float(fisher_exact([[correct_gf, len(gf) - correct_gf], [correct_gs, len(gs) - correct_gs]]).pvalue)
    return out


def presentation_flips(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The presentation-flip rate over twin pairs (``twin``: a ``--twins`` build shows each pairwise item
    both ways round): a row's preference is the gold sequence when it answered the gold letter, else the
    other; a pair *flips* when its two preferences differ, i.e. the judge changed its mind only because the
    two sequences swapped places. ``{"rate", "n" (pairs with both answers valid), "flips", "ci95" (Wilson),
    "skipped": {"twin_missing", "invalid"}}``; ``None`` when no row has a twin."""
    pairs: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("task") == "pairwise" and r.get("twin"):
            pairs.setdefault(str(r["twin"]), []).append(r)
    if not pairs:
        return None
    whole = [p for p in pairs.values() if len(p) == 2]
    valid = [p for p in whole if all(r.get("valid", True) and r.get("prediction") is not None for r in p)]
    flips = sum((a["prediction"] == a["label"]) != (b["prediction"] == b["label"]) for a, b in valid)
    return {
        "rate": flips / len(valid) if valid else None,
        "n": len(valid),
        "flips": flips,
        "ci95": ci95(flips, len(valid)),
        "skipped": {"twin_missing": len(pairs) - len(whole), "invalid": len(whole) - len(valid)},
    }


def analyze(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every analysis of one run's prediction rows (the parts with no rows are left out)."""
    out: dict[str, Any] = {"n": len(rows)}
    if positions := prism_positions(rows):
        out["prism_positions"] = positions
    if tc := timecatch_positions(rows):
        out["timecatch_positions"] = tc
    if fo := first_option_bias(rows):
        layouts = sorted({str(r["layout"]) for r in rows if r.get("task") == "pairwise"})
        fo["by_layout"] = {lay: first_option_bias([r for r in rows if str(r.get("layout")) == lay]) for lay in layouts}
        out["first_option"] = fo
    if flips := presentation_flips(rows):
        out["presentation_flips"] = flips
    order = [r for r in rows if r.get("task") == "ordering"]
    if order:
        out["ordering"] = ordering_cell(order)
    return out


def position_columns(tables: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The position columns of position tables, in position order, then W_avg."""
    cols: list[str] = []
    for t in tables:
        for p in (t or {}).get("positions", []):
            if p not in cols:
                cols.append(p)
    return sorted(cols, key=lambda c: [int(x) for x in c.split("-")]) + ["W_avg"]


def position_cell(table: Mapping[str, Any] | None, column: str) -> Mapping[str, Any] | None:
    """The cell of ``column`` (a position label of :func:`position_columns`, or ``"W_avg"``) in a
    position table; None for a missing table or a position it does not have."""
    return None if table is None else (table["w_avg"] if column == "W_avg" else table["cells"].get(column))


def has_data(table: Mapping[str, Any] | None) -> bool:
    """Whether a position table has a position with a defined accuracy (at least one valid answer)."""
    if not table:
        return False
    return any(c.get("accuracy") is not None for c in table["cells"].values())
