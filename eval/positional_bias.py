"""Positional bias of judges: per-position accuracy, first-option bias, the ordering probe's signature (paper 002 F.3, C.3, G).

``judgetrain eval bias RUN [RUN …]`` reads the ``predictions.jsonl`` of judge runs
(:mod:`judgetrain.eval.judge`) or TimeCatch runs (:mod:`judgetrain.eval.timecatch`)
and writes ``bias.json``, ``bias.md`` and PNGs (into the run folder for one run,
into ``--out`` for several). Everything comes from the prediction rows:

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

``bias.md`` prints every rate in % with its Wilson 95% interval and n
(:func:`judgetrain.eval.core.markdown.rate`).
README: "`judgetrain eval judge`, `eval bias`".
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.config import arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.io import no_nan, write_json, write_text
from judgetrain.plotting import pyplot, save_if_drawn

from .core.figures import rate_heatmap, wilson_yerr
from .core.markdown import RATE_NOTE, display_name, figures_markdown, fmt, pct, rate, rows_markdown
from .core.metrics import accuracy_cell, ci95
from .core.runs import read_run
from .judge.metrics import classification_cell, ordering_cell
from .timecatch.metrics import TIMECATCH_TASKS

__all__ = [
    "BIAS_JSON",
    "BIAS_REPORT",
    "BiasConfig",
    "analyze",
    "bias",
    "first_option_bias",
    "first_option_figure",
    "main",
    "make_parser",
    "position_table",
    "positions_figure",
    "prism_positions",
    "timecatch_positions",
    "type1_rows",
    "wavg_figure",
]

BIAS_JSON = "bias.json"
BIAS_REPORT = "bias.md"
KINDS = {"semantic": "semantic-1", "temporal": "swap"}
TITLES = {"semantic": "PRISM-Semantic (outlier at position)", "temporal": "PRISM-Temporal (swapped pair)"}


# --------------------------------------------------------------------------- analyses


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
    order = [r for r in rows if r.get("task") == "ordering"]
    if order:
        out["ordering"] = ordering_cell(order)
    return out


# --------------------------------------------------------------------------- plots


def _columns(tables: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The position columns of position tables, in position order, then W_avg."""
    cols: list[str] = []
    for t in tables:
        for p in (t or {}).get("positions", []):
            if p not in cols:
                cols.append(p)
    return sorted(cols, key=lambda c: [int(x) for x in c.split("-")]) + ["W_avg"]


def _cell(table: Mapping[str, Any] | None, column: str) -> Mapping[str, Any] | None:
    return None if table is None else (table["w_avg"] if column == "W_avg" else table["cells"].get(column))


def _has_data(table: Mapping[str, Any] | None) -> bool:
    if not table:
        return False
    return any(c.get("accuracy") is not None for c in table["cells"].values())


def positions_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]], title: str):
    """Heatmaps row × position (accuracy over valid answers, macro-F1 and n below it), semantic
    and temporal side by side (:func:`judgetrain.eval.core.figures.rate_heatmap`: cells of fewer
    than 10 valid answers greyed). ``named``: (row label, ``prism_positions`` output); a row with
    no data of a kind is left out of that kind's panel. ``None`` when there is nothing to draw."""
    panels = []
    for kind in KINDS:
        rows = [(n, p[kind]["all"]) for n, p in named if p and kind in p and _has_data(p[kind]["all"])]
        if rows:
            panels.append((kind, rows))
    if not panels:
        return None
    plt = pyplot()
    height = 1.5 + 0.5 * max(len(rows) for _, rows in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), height), squeeze=False, layout="constrained")
    im = None
    for ax, (kind, rows) in zip(axes[0], panels, strict=False):
        cols = _columns([t for _, t in rows])
        cells = [[_cell(t, c) for c in cols] for _, t in rows]
        values = [[None if c is None else c.get("accuracy") for c in row] for row in cells]
        counts = [[None if c is None else c.get("n_valid") for c in row] for row in cells]
        extra = [["" if c is None or c.get("f1") is None else f"F1 {100 * c['f1']:.0f}" for c in row] for row in cells]
        im = rate_heatmap(ax, values, counts, [n for n, _ in rows], cols, TITLES[kind], extra)
    fig.suptitle(title + " — accuracy (valid), macro-F1, n valid; grey: n < 10", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.02)
    return fig


def plot_positions(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike, title: str) -> bool:
    """:func:`positions_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(positions_figure(named, title), path)


def _percent_bars_axes(ax, ticks: Sequence[str], ylabel: str, title: str, legend_columns: int) -> None:
    """The axes of a grouped bar chart in %: chance at 50%, one tick per run, 0–100 with room
    above 100% for the legend."""
    ax.axhline(50, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax.set_ylim(0, 130)
    ax.set_yticks(range(0, 101, 25))
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=legend_columns, loc="upper center", frameon=False)


def wavg_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]]):
    """Bars per run: W_avg accuracy (with its Wilson 95% interval) and macro-F1 on the semantic and
    temporal Type-1 subsets, in %; chance at 50%. Runs without a Type-1 subset are left out;
    ``None`` when no run has one."""
    series = [(f"{k} {m}", k, m) for k in KINDS for m in ("accuracy", "f1")]
    named = [(n, p) for n, p in named if p]  # a run without a Type-1 subset (the ordering probe alone) has no bars
    if not named:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(named) + 1.5), 3.2), layout="constrained")
    width = 0.8 / len(series)
    colors = ("#4C72B0", "#8FAADC", "#C44E52", "#E6A0A2")
    for s, ((label, kind, metric), color) in enumerate(zip(series, colors, strict=False)):
        cells = [(p or {}).get(kind, {}).get("all", {}).get("w_avg", {}) for _, p in named]
        vals = [c.get(metric) for c in cells]
        xs = [i + (s - (len(series) - 1) / 2) * width for i in range(len(named))]
        yerr = wilson_yerr(vals, [c.get("accuracy_ci95") for c in cells], 100) if metric == "accuracy" else None
        ax.bar(
            xs,
            [100 * (v or 0.0) for v in vals],
            width=width,
            color=color,
            yerr=yerr,
            capsize=2,
            label=label.replace("accuracy", "Acc").replace("f1", "F1"),
        )
    _percent_bars_axes(ax, [n for n, _ in named], "W_avg (%)", "W_avg over positions (PRISM Type-1; Acc with Wilson 95%)", 4)
    return fig


def plot_wavg(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """:func:`wavg_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(wavg_figure(named), path)


_FIRST_BARS = (
    ("first_rate", "all", "#4C72B0"),
    ("first_rate_gold_first", "gold first", "#55A868"),
    ("first_rate_gold_second", "gold second", "#C44E52"),
)


def first_option_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]]):
    """Bars per run: P(choose first-shown) overall, when gold is first and when gold is second (%),
    each with its Wilson 95% interval as an error bar; the run's n valid and binomial p under it.
    ``None`` when no run has first-option data."""
    shown = [(n, fo) for n, fo in named if fo]
    if not shown:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(shown) + 1.5), 3.2), layout="constrained")  # room for the title
    width = 0.8 / len(_FIRST_BARS)
    for s, (key, label, color) in enumerate(_FIRST_BARS):
        xs = [i + (s - 1) * width for i in range(len(shown))]
        vals = [fo[key] for _, fo in shown]
        yerr = wilson_yerr(vals, [(fo.get("wilson95") or {}).get(key) for _, fo in shown], 100)
        ax.bar(xs, [100 * (v or 0.0) for v in vals], width=width, color=color, yerr=yerr, capsize=2, label=label)
    ticks = [f"{n}\nn={fo['n_valid']} ({fo['n_gold_first']}/{fo['n_gold_second']}), p={fo['binomial_p']:.2g}" for n, fo in shown]
    _percent_bars_axes(
        ax, ticks, "P(choose first-shown sequence) (%)", "First-option bias: Wilson 95% error bars; binomial test of P = 1/2", 3
    )
    return fig


def plot_first_option(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """:func:`first_option_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(first_option_figure(named), path)


def plot_timecatch(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """Heatmap (run · task) × true frame of the anomaly: accuracy, n below; the frame axis
    holds every frame 1…max (a frame no item has stays blank), never skipping one."""
    from .timecatch.plots import plot_timecatch_positions

    return plot_timecatch_positions(named, path)


# --------------------------------------------------------------------------- the command


def _grid_markdown(labelled: Sequence[tuple[Sequence[str], Mapping[str, Any]]], first: Sequence[str], text) -> str:
    """A markdown table of position tables: label columns, then one column per position and W_avg."""
    cols = _columns([t for _, t in labelled])
    body = [[*labels, *("–" if (cell := _cell(t, c)) is None else text(cell) for c in cols)] for labels, t in labelled]
    return rows_markdown((*first, *cols), body)


def _prism_text(c: Mapping[str, Any]) -> str:
    """A PRISM position cell: accuracy over valid answers (Wilson interval, n valid) / macro-F1, in %."""
    return f"{rate(c['accuracy'], c.get('accuracy_ci95'), c['n_valid'])} / {pct(c['f1'])}"


def _position_markdown(named: Sequence[tuple[str, Mapping[str, Any] | None]], first: str) -> str:
    md = ""
    for kind in KINDS:
        tables = [((n,), p[kind]["all"]) for n, p in named if p and kind in p and _has_data(p[kind]["all"])]
        if tables:
            md += f"\n**{TITLES[kind]}** — accuracy [Wilson 95%] (n valid) / macro-F1, %\n\n"
            md += _grid_markdown(tables, (first,), _prism_text)
    return md


def _first_rate(f: Mapping[str, Any], key: str, n_key: str) -> str:
    return rate(f[key], (f.get("wilson95") or {}).get(key), f[n_key])


def _first_option_markdown(fo: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    md = (
        "\n## First-option bias (paper 002 F.3)\n\n"
        "P(first): share of valid answers choosing the sequence shown first; binomial p: exact two-sided test of "
        "P(first) = 1/2 (an order-blind judge on balanced presentation), with its exact (Clopper–Pearson) 95% "
        f"interval. {RATE_NOTE} Gap: accuracy gold first − gold second, in points; Fisher p: presentation "
        "order × correct.\n\n"
    )
    gf, gs = ("n_gold_first", "n_gold_second")
    md += rows_markdown(
        (
            "run",
            "gold first / second",
            "P(first)",
            "exact 95% CI",
            "binomial p",
            "P(first ∣ gold first)",
            "P(first ∣ gold second)",
            "P(A ∣ gold first)",
            "P(A ∣ gold second)",
            "Acc gold first",
            "Acc gold second",
            "gap",
            "Fisher p",
        ),
        [
            [
                n,
                f"{f[gf]} / {f[gs]}",
                _first_rate(f, "first_rate", "n_valid"),
                f"{pct(f['first_rate_ci95'][0])}–{pct(f['first_rate_ci95'][1])}",
                fmt(f["binomial_p"], 4),
                _first_rate(f, "first_rate_gold_first", gf),
                _first_rate(f, "first_rate_gold_second", gs),
                _first_rate(f, "a_rate_gold_first", gf),
                _first_rate(f, "a_rate_gold_second", gs),
                _first_rate(f, "accuracy_gold_first", gf),
                _first_rate(f, "accuracy_gold_second", gs),
                "–" if f["accuracy_gap"] is None else f"{100 * f['accuracy_gap']:+.1f}",
                fmt(f["fisher_p"], 4),
            ]
            for n, f in fo
        ],
    )
    md += "\nBy layout:\n\n"
    md += rows_markdown(
        ("run", "layout", "P(first)", "binomial p", "Acc gold first", "Acc gold second"),
        [
            [
                n,
                lay,
                _first_rate(x, "first_rate", "n_valid"),
                fmt(x["binomial_p"], 4),
                _first_rate(x, "accuracy_gold_first", gf),
                _first_rate(x, "accuracy_gold_second", gs),
            ]
            for n, f in fo
            for lay, x in f["by_layout"].items()
            if x
        ],
    )
    return md


def _ordering_markdown(od: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    md = (
        "\n## Chronological-ordering probe (paper 002 App. G)\n\n"
        "Answers by position: items answered in the label order (1, 2, …, n: the order shown) or its reverse. "
        f"{RATE_NOTE}\n\n"
    )
    return md + rows_markdown(
        ("run", "exact match", "invalid rate", "label order", "reverse", "by position (share)"),
        [
            [
                n,
                rate(o["exact_match"], o.get("exact_match_ci95"), o["n"]),
                rate(o["invalid_rate"], o.get("invalid_rate_ci95"), o["n"]),
                str(o["label_order"]),
                str(o["reverse_label_order"]),
                rate(o["by_position_share"], o.get("by_position_share_ci95"), o["n"]),
            ]
            for n, o in od
        ],
    )


def bias(
    runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None, out: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Analyse the runs' predictions and write ``bias.json``, ``bias.md`` and figures to ``out``
    (default: the run folder when there is one run). Returns the ``bias.json`` contents."""
    paths = [Path(r) for r in runs]
    if not paths:
        raise ValueError("give at least one run folder")
    if out is None:
        if len(paths) > 1:
            raise ValueError("several runs: pass --out DIR for the combined analysis")
        out = paths[0]
    out = Path(out)
    loaded = []
    for p in paths:
        rows, info = read_run(p, "pass the --out folder of `judgetrain eval judge` or `eval timecatch`")
        loaded.append((p, info, rows))
    if names is None:
        names = [display_name(info, rows) for _, info, rows in loaded]
        if len(set(names)) < len(names):
            names = [p.name for p, _, _ in loaded]
    if len(names) != len(paths):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(paths)} run(s); give one per run")
    analyses = {n: analyze(rows) for n, (_, _, rows) in zip(names, loaded, strict=False)}
    out.mkdir(parents=True, exist_ok=True)

    figures: list[tuple[str, str]] = []
    named_pos = [(n, a.get("prism_positions")) for n, a in analyses.items()]
    if plot_positions(named_pos, out / "bias_positions.png", "PRISM Type-1 by position"):
        figures.append(("PRISM Type-1 accuracy by position (model × position)", "bias_positions.png"))
    by_layout = [
        (
            f"{n} · {lay}" if len(analyses) > 1 else lay,
            {k: {"all": v["by_layout"][lay]} for k, v in (a.get("prism_positions") or {}).items() if lay in v["by_layout"]},
        )
        for n, a in analyses.items()
        for lay in sorted({lay for v in (a.get("prism_positions") or {}).values() for lay in v["by_layout"]})
    ]
    if plot_positions(by_layout, out / "bias_positions_by_layout.png", "PRISM Type-1 by layout and position"):
        figures.append(("PRISM Type-1 accuracy by layout and position", "bias_positions_by_layout.png"))
    if plot_wavg(named_pos, out / "bias_wavg.png"):
        figures.append(("Weighted-average accuracy and macro-F1 over positions", "bias_wavg.png"))
    if plot_first_option([(n, a.get("first_option")) for n, a in analyses.items()], out / "bias_first_option.png"):
        figures.append(("First-option bias", "bias_first_option.png"))
    if plot_timecatch([(n, a.get("timecatch_positions")) for n, a in analyses.items()], out / "bias_timecatch_positions.png"):
        figures.append(("TimeCatch accuracy by true position", "bias_timecatch_positions.png"))

    result = no_nan(
        {
            "runs": {n: {"path": str(p), **analyses[n]} for n, (p, _, _) in zip(names, loaded, strict=False)},
            "figures": [f for _, f in figures],
        }
    )
    write_json(out / BIAS_JSON, result)
    write_text(out / BIAS_REPORT, _markdown(result, named_pos, by_layout, figures, paths, names, out))
    return result


def _markdown(result, named_pos, by_layout, figures, paths, names, out) -> str:
    runs = result["runs"]
    md = ["# Positional bias\n\n", "".join(f"- {n}: `{r['path']}` ({r['n']} predictions)\n" for n, r in runs.items())]
    if any(p for _, p in named_pos):
        md.append("\n## PRISM Type-1 by position (paper 002 Tables S4, S17a, S19)\n\n")
        md.append(
            "Accuracy over valid answers / macro-F1 (valid answers); W_avg weights positions by their valid answers "
            f"(for accuracy: correct of valid over all positions). {RATE_NOTE}\n"
        )
        md.append(_position_markdown(named_pos, "run"))
        md.append("\n## By layout (Tables S17b, S20)\n")
        md.append(_position_markdown(by_layout, "layout"))
    tc = [(n, r["timecatch_positions"]) for n, r in runs.items() if r.get("timecatch_positions")]
    if tc:
        md.append("\n## TimeCatch by true position of the anomaly\n\n")
        md.append(f"Accuracy on the anomalous records by 1-based frame of the anomaly (swap: the earlier frame). {RATE_NOTE}\n\n")
        md.append(
            _grid_markdown(
                [((n, task), t) for n, tasks in tc for task, t in tasks.items()],
                ("run", "task"),
                lambda c: rate(c["accuracy"], c.get("ci95"), c["n"]),
            )
        )
    fo = [(n, r["first_option"]) for n, r in runs.items() if r.get("first_option")]
    if fo:
        md.append(_first_option_markdown(fo))
    od = [(n, r["ordering"]) for n, r in runs.items() if r.get("ordering")]
    if od:
        md.append(_ordering_markdown(od))
    if not any(k in r for r in runs.values() for k in ("prism_positions", "timecatch_positions", "first_option", "ordering")):
        md.append("\nNo row of these runs has a position, a presentation order or an ordering answer to analyse.\n")
    md.append(figures_markdown(figures))
    cmd = "judgetrain eval bias " + " ".join(shlex.quote(str(p)) for p in paths)
    if len(paths) > 1:
        cmd += f" --names {shlex.quote(','.join(names))} --out {shlex.quote(str(out))}"
    md.append(f"\n## Reproduce\n\n```bash\n{cmd}\n```\n")
    return "".join(md)


@dataclass(kw_only=True)
class BiasConfig:
    """``judgetrain eval bias``: every field is a flag (``--field-name``) and a ``--config`` key."""

    runs: list[Path] = arg(
        help="run folders (the --out of `eval judge` or `eval timecatch`); also the leading bare words", positional=True
    )
    names: list[str] | None = arg(None, "display names, one per run (space- or comma-separated; default: model names)")
    out: Path | None = arg(None, "output folder (default: the run folder when there is one run)")

    def __post_init__(self) -> None:
        from judgetrain.config import ConfigError

        self.runs = [Path(r) for r in (self.runs or [])]
        self.names = comma_list(self.names) or None
        self.out = Path(self.out) if self.out is not None else None
        problems = []
        if not self.runs:
            problems.append("runs: give at least one run folder")
        if len(self.runs) > 1 and self.out is None:
            problems.append(f"out: {len(self.runs)} runs: pass --out DIR for the combined analysis")
        if self.names is not None and len(self.names) != len(self.runs):
            problems.append(f"names: {len(self.names)} name(s) for {len(self.runs)} run(s); give one per run")
        if problems:
            raise ConfigError(problems, "eval bias configuration")


def make_parser():
    return make_config_parser(
        BiasConfig,
        "judgetrain eval bias",
        "Positional bias of judge or TimeCatch runs from their predictions.jsonl: accuracy and macro-F1 per outlier / swap "
        "position (PRISM Type-1) with W_avg, TimeCatch accuracy per true position, first-option bias with a binomial "
        "test, and the ordering probe's answers-by-position signature.",
        "examples:\n"
        "  judgetrain eval bias results/ov                      # writes bias.md, bias.json and PNGs into the run\n"
        "  judgetrain eval bias results/ov results/q25 --names ov,qwen2.5 --out results/bias\n"
        "\nresults/ov and results/q25: the judge runs of `judgetrain eval judge --help`'s examples.\n",
    )


def main(cfg: BiasConfig) -> int:
    result = bias(cfg.runs, cfg.names, cfg.out)
    out = cfg.out or cfg.runs[0]
    for name, r in result["runs"].items():
        parts = []
        for kind, block in (r.get("prism_positions") or {}).items():
            w = block["all"]["w_avg"]
            parts.append(f"{kind} W_avg acc {rate(w['accuracy'], w.get('accuracy_ci95'), w['n_valid'])} %")
        if r.get("first_option"):
            f = r["first_option"]
            parts.append(
                f"first-option rate {_first_rate(f, 'first_rate', 'n_valid')} % (binomial p = {fmt(f['binomial_p'], 4)})"
            )
        if r.get("ordering"):
            o = r["ordering"]
            parts.append(
                f"ordering exact {rate(o['exact_match'], o.get('exact_match_ci95'), o['n'])} %, "
                f"by position {rate(o['by_position_share'], o.get('by_position_share_ci95'), o['n'])} %"
            )
        print(f"{name}: " + ("; ".join(parts) or "nothing to analyse"), flush=True)
    print(f"Bias report in {Path(out) / BIAS_REPORT} (data in {Path(out) / BIAS_JSON})", flush=True)
    return 0
