"""The figures of ``judgetrain eval bias``: PRISM Type-1 accuracy heatmaps (run × position), the
W_avg bars, the first-option bars, and TimeCatch accuracy by true position; each ``*_figure``
returns a matplotlib figure (``None`` when there is nothing to draw) and each ``plot_*`` saves it.
README: "`judgetrain eval judge`, `eval bias`".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from judgetrain.plotting import pyplot, save_if_drawn

from ..core.figures import rate_heatmap, wilson_yerr
from .metrics import KINDS, TITLES, has_data, position_cell, position_columns

__all__ = [
    "first_option_figure",
    "plot_first_option",
    "plot_positions",
    "plot_timecatch",
    "plot_wavg",
    "positions_figure",
    "wavg_figure",
]


def positions_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]], title: str):
    """Heatmaps row × position (accuracy over valid answers, macro-F1 and n below it), semantic
    and temporal side by side (:func:`judgetrain.eval.core.figures.rate_heatmap`: cells of fewer
    than 10 valid answers greyed). ``named``: (row label, ``prism_positions`` output); a row with
    no data of a kind is left out of that kind's panel. ``None`` when there is nothing to draw."""
    panels = []
    for kind in KINDS:
        rows = [(n, p[kind]["all"]) for n, p in named if p and kind in p and has_data(p[kind]["all"])]
        if rows:
            panels.append((kind, rows))
    if not panels:
        return None
    plt = pyplot()
    height = 1.5 + 0.5 * max(len(rows) for _, rows in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.8 * len(panels), height), squeeze=False, layout="constrained")
    im = None
    for ax, (kind, rows) in zip(axes[0], panels, strict=False):
        cols = position_columns([t for _, t in rows])
        cells = [[position_cell(t, c) for c in cols] for _, t in rows]
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
    from ..timecatch.plots import plot_timecatch_positions

    return plot_timecatch_positions(named, path)
