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
  answers (the paper's sample-weighted mean). For every run and, per run, every
  layout. Heatmaps (run × position, run·layout × position) and W_avg bars.
- **Per true position, TimeCatch**: accuracy of each task on the anomalous
  records by 1-based frame of the anomaly (the noise frame, the earlier swapped
  frame) and its n-weighted mean; a heatmap.
- **First-option bias** (F.3: "models disproportionately select the first
  sequence"): over valid pairwise answers whose record says which sequence was
  shown first (``presentation`` ``gold_first`` / ``gold_second``; under P4 that
  is B): the rate of choosing the first-shown sequence, and an exact two-sided
  binomial test (``scipy.stats.binomtest``) of H0: P(choose the first-shown
  sequence) = 1/2, with its Clopper–Pearson 95% interval. H0 is what an
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
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.config import arg, comma_list, make_parser as make_config_parser
from judgetrain.io import no_nan, write_json, write_text
from judgetrain.plotting import pyplot

from .core.markdown import display_name, figures_markdown, fmt, rows_markdown
from .core.metrics import accuracy_cell
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
    "main",
    "make_parser",
    "position_table",
    "prism_positions",
    "timecatch_positions",
    "type1_rows",
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
    """``{"positions": [label…], "cells": {label: classification cell}, "w_avg": {"accuracy", "f1", "n", "n_valid"}}``
    for Type-1 rows of one kind; ``w_avg`` weights each position by its valid answers."""
    by_pos: dict[int, list] = {}
    for r in rows:
        by_pos.setdefault(int(r["position"]), []).append(r)
    cells = {_label(kind, p): classification_cell(by_pos[p]) for p in sorted(by_pos)}
    return {"positions": list(cells), "cells": cells,
            "w_avg": {"accuracy": _weighted(cells, "accuracy", "n_valid"), "f1": _weighted(cells, "f1", "n_valid"),
                      "n": sum(c["n"] for c in cells.values()), "n_valid": sum(c["n_valid"] for c in cells.values())}}


def prism_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per kind (``semantic``, ``temporal``) present: ``{"all": table, "by_layout": {layout: table}}``."""
    out = {}
    for kind in KINDS:
        sel = type1_rows(rows, kind)
        if sel:
            layouts = sorted({str(r["layout"]) for r in sel})
            out[kind] = {"all": position_table(sel, kind),
                         "by_layout": {lay: position_table([r for r in sel if str(r["layout"]) == lay], kind) for lay in layouts}}
    return out


def timecatch_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per TimeCatch task: accuracy by 1-based frame of the anomaly (``position`` + 1) on the
    anomalous records, ``{"positions", "cells": {frame: accuracy cell}, "w_avg": {"accuracy", "n"}}``."""
    out = {}
    for task in TIMECATCH_TASKS:
        sel = [r for r in rows if r.get("task") == task and int(r.get("position", -1)) >= 0]
        if not sel:
            continue
        by_frame: dict[int, list] = {}
        for r in sel:
            by_frame.setdefault(int(r["position"]) + 1, []).append(r)
        cells = {str(k): accuracy_cell(by_frame[k]) for k in sorted(by_frame)}
        out[task] = {"positions": list(cells), "cells": cells,
                     "w_avg": {"accuracy": _weighted(cells, "accuracy", "n"), "n": len(sel)}}
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


def first_option_bias(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """First-option statistics (module docstring) over valid pairwise answers with a known
    presentation order; ``None`` when there are none."""
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
        "n": len(sel), "n_valid": len(valid), "n_gold_first": len(gf), "n_gold_second": len(gs),
        "chose_first": len(first), "first_rate": len(first) / len(valid), "first_rate_ci95": [float(ci.low), float(ci.high)],
        "binomial_p": float(test.pvalue), "excess_first": len(first) / len(valid) - 0.5,
        "first_rate_gold_first": _rate(gf, lambda r: r["prediction"] == _first_shown(r)),
        "first_rate_gold_second": _rate(gs, lambda r: r["prediction"] == _first_shown(r)),
        "a_rate_gold_first": _rate(gf, lambda r: r["prediction"] == "A"),
        "a_rate_gold_second": _rate(gs, lambda r: r["prediction"] == "A"),
        "accuracy_gold_first": correct_gf / len(gf) if gf else None,
        "accuracy_gold_second": correct_gs / len(gs) if gs else None,
        "accuracy_gap": None, "fisher_p": None,
    }
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


def _heatmap(ax, values: list[list[float | None]], notes: list[list[str]], rows: Sequence[str], cols: Sequence[str], title: str):
    import numpy as np

    data = np.array([[np.nan if v is None else v for v in row] for row in values], dtype=float)
    im = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(notes):
        for j, note in enumerate(row):
            if note:
                ax.text(j, i, note, ha="center", va="center", fontsize=6,
                        color="black" if not np.isnan(data[i, j]) and data[i, j] > 0.6 else "white")
    ax.set_xticks(range(len(cols)), list(cols), fontsize=7)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=7)
    ax.set_title(title, fontsize=8)
    return im


def _table_grid(tables: Sequence[Mapping[str, Any] | None], key: str = "accuracy", second: str | None = "f1"):
    """(columns, values, notes) for heatmap rows from position tables (a missing table: an empty row); W_avg last."""
    cols: list[str] = []
    for t in tables:
        for p in (t or {}).get("positions", []):
            if p not in cols:
                cols.append(p)
    cols = sorted(cols, key=lambda c: [int(x) for x in c.split("-")]) + ["W_avg"]
    values, notes = [], []
    for t in tables:
        vrow, nrow = [], []
        for c in cols:
            cell = None if t is None else (t["w_avg"] if c == "W_avg" else t["cells"].get(c))
            v = None if cell is None else cell.get(key)
            vrow.append(v)
            below = None if cell is None or not second else cell.get(second)
            extra = "" if below is None else f"\n{below}" if isinstance(below, int) else f"\n{below:.2f}"
            nrow.append("" if cell is None or v is None else f"{v:.2f}{extra}")
        values.append(vrow)
        notes.append(nrow)
    return cols, values, notes


def plot_positions(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike, title: str) -> bool:
    """Heatmaps row × position (accuracy, macro-F1 below it), semantic and temporal side by side.
    ``named``: (row label, ``prism_positions`` output). False when there is nothing to draw."""
    kinds = [k for k in KINDS if any(p and k in p for _, p in named)]
    if not kinds:
        return False
    plt = pyplot()
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.6 * len(kinds), 1.4 + 0.42 * len(named)), squeeze=False,
                             layout="constrained")
    im = None
    for ax, kind in zip(axes[0], kinds):
        tables = [p[kind]["all"] if p and kind in p else None for _, p in named]
        cols, values, notes = _table_grid(tables)
        im = _heatmap(ax, values, notes, [n for n, _ in named], cols, TITLES[kind])
    fig.suptitle(title + " — accuracy (valid), macro-F1 below", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.02)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_wavg(named: Sequence[tuple[str, Mapping[str, Any]]], path: str | os.PathLike) -> bool:
    """Bars per run: W_avg accuracy and macro-F1 on the semantic and temporal Type-1 subsets; chance at 0.5."""
    series = [(f"{k} {m}", k, m) for k in KINDS for m in ("accuracy", "f1")]
    if not any(p and k in p for _, p in named for _, k, _ in series):
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(named) + 1.5), 3.0))
    width = 0.8 / len(series)
    colors = ("#4C72B0", "#8FAADC", "#C44E52", "#E6A0A2")
    for s, ((label, kind, metric), color) in enumerate(zip(series, colors)):
        vals = [(p or {}).get(kind, {}).get("all", {}).get("w_avg", {}).get(metric) for _, p in named]
        xs = [i + (s - (len(series) - 1) / 2) * width for i in range(len(named))]
        ax.bar(xs, [v or 0.0 for v in vals], width=width, color=color, label=label.replace("accuracy", "Acc").replace("f1", "F1"))
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(named)), [n for n, _ in named], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("W_avg")
    ax.set_title("W_avg over positions (PRISM Type-1)", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_first_option(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """Bars per run: P(choose first-shown) overall, when gold is first and when gold is second."""
    named = [(n, fo) for n, fo in named if fo]
    if not named:
        return False
    plt = pyplot()
    keys = (("first_rate", "all", "#4C72B0"), ("first_rate_gold_first", "gold first", "#55A868"),
            ("first_rate_gold_second", "gold second", "#C44E52"))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(named) + 1.5), 3.0))
    width = 0.8 / len(keys)
    for s, (key, label, color) in enumerate(keys):
        xs = [i + (s - 1) * width for i in range(len(named))]
        ax.bar(xs, [fo[key] or 0.0 for _, fo in named], width=width, color=color, label=label)
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(named)), [f"{n}\np={fo['binomial_p']:.2g}" for n, fo in named], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("P(choose first-shown sequence)")
    ax.set_title("First-option bias (binomial test of P = 1/2)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_timecatch(named: Sequence[tuple[str, Mapping[str, Any]]], path: str | os.PathLike) -> bool:
    """Heatmap (run · task) × true frame of the anomaly: accuracy, n below; the frame axis
    holds every frame 1…max (a frame no item has stays blank), never skipping one."""
    from .timecatch.plots import plot_timecatch_positions

    return plot_timecatch_positions(named, path)


# --------------------------------------------------------------------------- the command


def _grid_markdown(labelled: Sequence[tuple[Sequence[str], Mapping[str, Any] | None]], first: Sequence[str], fmt) -> str:
    """A markdown table of position tables: label columns, then one column per position and W_avg."""
    cols, _, _ = _table_grid([t for _, t in labelled])
    body = []
    for labels, t in labelled:
        cells = [None if t is None else (t["w_avg"] if c == "W_avg" else t["cells"].get(c)) for c in cols]
        body.append([*labels, *("–" if cell is None else fmt(cell) for cell in cells)])
    return rows_markdown((*first, *cols), body)


def _position_markdown(named: Sequence[tuple[str, Mapping[str, Any] | None]], first: str) -> str:
    md = ""
    for kind in KINDS:
        tables = [((n,), p[kind]["all"] if p and kind in p else None) for n, p in named]
        if any(t for _, t in tables):
            md += f"\n**{TITLES[kind]}** — accuracy / macro-F1 (valid answers)\n\n"
            md += _grid_markdown(tables, (first,), lambda c: f"{fmt(c['accuracy'], 2)} / {fmt(c['f1'], 2)} ({c['n_valid']})")
    return md


def bias(runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None, out: str | os.PathLike | None = None) -> dict[str, Any]:
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
    analyses = {n: analyze(rows) for n, (_, _, rows) in zip(names, loaded)}
    out.mkdir(parents=True, exist_ok=True)

    figures: list[tuple[str, str]] = []
    named_pos = [(n, a.get("prism_positions")) for n, a in analyses.items()]
    if plot_positions(named_pos, out / "bias_positions.png", "PRISM Type-1 by position"):
        figures.append(("PRISM Type-1 accuracy by position (model × position)", "bias_positions.png"))
    by_layout = [(f"{n} · {lay}" if len(analyses) > 1 else lay,
                  {k: {"all": v["by_layout"][lay]} for k, v in (a.get("prism_positions") or {}).items() if lay in v["by_layout"]})
                 for n, a in analyses.items()
                 for lay in sorted({lay for v in (a.get("prism_positions") or {}).values() for lay in v["by_layout"]})]
    if plot_positions(by_layout, out / "bias_positions_by_layout.png", "PRISM Type-1 by layout and position"):
        figures.append(("PRISM Type-1 accuracy by layout and position", "bias_positions_by_layout.png"))
    if plot_wavg(named_pos, out / "bias_wavg.png"):
        figures.append(("Weighted-average accuracy and macro-F1 over positions", "bias_wavg.png"))
    if plot_first_option([(n, a.get("first_option")) for n, a in analyses.items()], out / "bias_first_option.png"):
        figures.append(("First-option bias", "bias_first_option.png"))
    if plot_timecatch([(n, a.get("timecatch_positions")) for n, a in analyses.items()], out / "bias_timecatch_positions.png"):
        figures.append(("TimeCatch accuracy by true position", "bias_timecatch_positions.png"))

    result = no_nan({"runs": {n: {"path": str(p), **analyses[n]} for n, (p, _, _) in zip(names, loaded)},
                      "figures": [f for _, f in figures]})
    write_json(out / BIAS_JSON, result)
    write_text(out / BIAS_REPORT, _markdown(result, named_pos, by_layout, figures, paths, names, out))
    return result


def _markdown(result, named_pos, by_layout, figures, paths, names, out) -> str:
    runs = result["runs"]
    md = ["# Positional bias\n\n", "".join(f"- {n}: `{r['path']}` ({r['n']} predictions)\n" for n, r in runs.items())]
    if any(p for _, p in named_pos):
        md.append("\n## PRISM Type-1 by position (paper 002 Tables S4, S17a, S19)\n\n")
        md.append("Accuracy over valid answers / macro-F1 (valid answers); W_avg weights positions by their valid answers.\n")
        md.append(_position_markdown(named_pos, "run"))
        md.append("\n## By layout (Tables S17b, S20)\n")
        md.append(_position_markdown(by_layout, "layout"))
    tc = [(n, r["timecatch_positions"]) for n, r in runs.items() if r.get("timecatch_positions")]
    if tc:
        md.append("\n## TimeCatch by true position of the anomaly\n\n")
        md.append("Accuracy (n) on the anomalous records by 1-based frame of the anomaly (swap: the earlier frame).\n\n")
        md.append(_grid_markdown([((n, task), t) for n, tasks in tc for task, t in tasks.items()], ("run", "task"),
                                 lambda c: f"{fmt(c['accuracy'], 2)} ({c['n']})"))
    fo = [(n, r["first_option"]) for n, r in runs.items() if r.get("first_option")]
    if fo:
        md.append("\n## First-option bias (paper 002 F.3)\n\n")
        md.append("P(first): share of valid answers choosing the sequence shown first; binomial p: exact two-sided test of "
                  "P(first) = 1/2 (an order-blind judge on balanced presentation); CI: Clopper–Pearson 95%. "
                  "Fisher p: presentation order × correct.\n\n")
        md.append(rows_markdown(
            ("run", "n_val", "gold first / second", "P(first)", "95% CI", "binomial p", "P(first ∣ gold first)",
             "P(first ∣ gold second)", "P(A ∣ gold first)", "P(A ∣ gold second)", "Acc gold first", "Acc gold second", "gap", "Fisher p"),
            [[n, str(f["n_valid"]), f"{f['n_gold_first']} / {f['n_gold_second']}", fmt(f["first_rate"]),
              f"{fmt(f['first_rate_ci95'][0])}–{fmt(f['first_rate_ci95'][1])}", fmt(f["binomial_p"], 4), fmt(f["first_rate_gold_first"]),
              fmt(f["first_rate_gold_second"]), fmt(f["a_rate_gold_first"]), fmt(f["a_rate_gold_second"]), fmt(f["accuracy_gold_first"]),
              fmt(f["accuracy_gold_second"]), fmt(f["accuracy_gap"]), fmt(f["fisher_p"], 4)] for n, f in fo]))
        md.append("\nBy layout:\n\n")
        md.append(rows_markdown(("run", "layout", "n_val", "P(first)", "binomial p", "Acc gold first", "Acc gold second"),
                                 [[n, lay, str(x["n_valid"]), fmt(x["first_rate"]), fmt(x["binomial_p"], 4), fmt(x["accuracy_gold_first"]),
                                   fmt(x["accuracy_gold_second"])] for n, f in fo for lay, x in f["by_layout"].items() if x]))
    od = [(n, r["ordering"]) for n, r in runs.items() if r.get("ordering")]
    if od:
        md.append("\n## Chronological-ordering probe (paper 002 App. G)\n\n")
        md.append("Answers by position: items answered in the label order (1, 2, …, n: the order shown) or its reverse.\n\n")
        md.append(rows_markdown(("run", "exact match", "invalid rate", "label order", "reverse", "by position (share)", "n"),
                                 [[n, fmt(o["exact_match"]), fmt(o["invalid_rate"]), str(o["label_order"]), str(o["reverse_label_order"]),
                                   fmt(o["by_position_share"]), str(o["n"])] for n, o in od]))
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

    runs: list[Path] = arg(help="run folders (the --out of `eval judge` or `eval timecatch`); also the leading bare words",
                           positional=True)
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
        BiasConfig, "judgetrain eval bias",
        "Positional bias of judge or TimeCatch runs from their predictions.jsonl: accuracy and macro-F1 per outlier / swap "
        "position (PRISM Type-1) with W_avg, TimeCatch accuracy per true position, first-option bias with a binomial "
        "test, and the ordering probe's answers-by-position signature.",
        "examples:\n"
        "  judgetrain eval bias results/ov                      # writes bias.md, bias.json and PNGs into the run\n"
        "  judgetrain eval bias results/ov results/q25 --names ov,qwen2.5 --out results/bias\n"
        "\nresults/ov and results/q25: the judge runs of `judgetrain eval judge --help`'s examples.\n")


def main(cfg: BiasConfig) -> int:
    result = bias(cfg.runs, cfg.names, cfg.out)
    out = cfg.out or cfg.runs[0]
    for name, r in result["runs"].items():
        parts = []
        for kind, block in (r.get("prism_positions") or {}).items():
            parts.append(f"{kind} W_avg acc {fmt(block['all']['w_avg']['accuracy'], 2)}")
        if r.get("first_option"):
            f = r["first_option"]
            parts.append(f"first-option rate {fmt(f['first_rate'], 2)} (binomial p = {fmt(f['binomial_p'], 4)})")
        if r.get("ordering"):
            parts.append(f"ordering exact {fmt(r['ordering']['exact_match'], 2)}, by position {fmt(r['ordering']['by_position_share'], 2)}")
        print(f"{name}: " + ("; ".join(parts) or "nothing to analyse"), flush=True)
    print(f"Bias report in {Path(out) / BIAS_REPORT} (data in {Path(out) / BIAS_JSON})", flush=True)
    return 0
