"""The figures of ``judgetrain eval bias``: PRISM Type-1 accuracy heatmaps (run × position), the
W_avg bars, the first-option bars, and TimeCatch accuracy by true position; each ``*_figure``
returns a matplotlib figure (``None`` when there is nothing to draw) and each ``plot_*`` saves it.
Docs: "concepts/positional-bias.md".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from judgetrain.plotting import pyplot, save_if_drawn

from ..core.figures import SMALL_N, rate_heatmap, wilson_yerr
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


# a cell's value, extra line and n: legible at the size a report shows the PNG
def positions_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]], title: str):
    """Heatmaps row × position (accuracy over valid answers, macro-F1 and n below it), semantic
    and temporal side by side (:func:`judgetrain.eval.core.figures.rate_heatmap`: cells of fewer than 10 valid answers lighter
    and hatched, still in their colour). ``named``: (row label, ``prism_positions`` output); a row
    with no data of a kind is left out of that kind's panel. ``None`` when there is nothing to draw."""
    panels = []
    for kind in KINDS:
        rows = [(n, p[kind]["all"]) for n, p in named if p and kind in p and has_data(p[kind]["all"])]
        if rows:
            panels.append((kind, rows))
    if not panels:
        return None
    plt = pyplot()
    width = max(len(position_columns([t for _, t in rows])) for _, rows in panels)
    height = 1.6 + 0.62 * max(len(rows) for _, rows in panels)
    size = (max(5.0, 0.75 * width + 1.6) * len(panels), height)
    fig, axes = plt.subplots(1, len(panels), figsize=size, squeeze=False, layout="constrained")
    im = None
    for ax, (kind, rows) in zip(axes[0], panels, strict=False):
        cols = position_columns([t for _, t in rows])
        cells = [[position_cell(t, c) for c in cols] for _, t in rows]
        values = [[None if c is None else c.get("accuracy") for c in row] for row in cells]
        counts = [[None if c is None else c.get("n_valid") for c in row] for row in cells]
        extra = [["" if c is None or c.get("f1") is None else f"F1 {100 * c['f1']:.0f}" for c in row] for row in cells]
        im = rate_heatmap(ax, values, counts, [n for n, _ in rows], cols, TITLES[kind], extra)
    fig.suptitle(title + f" — accuracy (valid), macro-F1, n valid; lighter, hatched: n < {SMALL_N}", fontsize=9)
    fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.02)
    return fig


def plot_positions(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike, title: str) -> bool:
    """:func:`positions_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(positions_figure(named, title), path)


def _percent_bars_axes(ax, ticks: Sequence[str], ylabel: str, title: str) -> None:
    """The axes of a grouped bar chart in %: chance at 50%, one tick per run, 0–100; the legend in one
    column right of the axes (constrained layout keeps room for it), never over the bars or past an edge."""
    ax.axhline(50, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=7)
    ax.set_ylim(0, 108)
    ax.set_yticks(range(0, 101, 25))
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def wavg_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]]):
    """Bars per run: W_avg accuracy (with its Wilson 95% interval) and macro-F1 on the semantic and
    temporal Type-1 subsets, in %; chance at 50%. Runs without a Type-1 subset are left out;
    ``None`` when no run has one."""
    series = [(f"{k} {m}", k, m) for k in KINDS for m in ("accuracy", "f1")]
    named = [(n, p) for n, p in named if p]  # a run without a Type-1 subset (the ordering probe alone) has no bars
    if not named:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(named) + 1.5) + 1.4, 3.2), layout="constrained")
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
    _percent_bars_axes(ax, [n for n, _ in named], "W_avg (%)", "W_avg over positions (PRISM Type-1; Acc with Wilson 95%)")
    return fig


def plot_wavg(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """:func:`wavg_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(wavg_figure(named), path)


_FIRST_BARS = (
    ("first_rate", "all", "#4C72B0"),
    ("first_rate_gold_first", "gold first", "#55A868"),
    ("first_rate_gold_second", "gold second", "#C44E52"),
)
# the letter panel: P(A) overall, and the first-shown rate split by the letter shown first
_LETTER_BARS = (
    ("letter_rate", "answers A (all)", "#8172B2"),
    ("first_rate_a_first", "first-shown, A first", "#55A868"),
    ("first_rate_b_first", "first-shown, B first (P4)", "#DD8452"),
)


def _bars(ax, shown, bars) -> None:
    width = 0.8 / len(bars)
    for s, (key, label, color) in enumerate(bars):
        xs = [i + (s - (len(bars) - 1) / 2) * width for i in range(len(shown))]
        vals = [fo.get(key) for _, fo in shown]
        yerr = wilson_yerr(vals, [(fo.get("wilson95") or {}).get(key) for _, fo in shown], 100)
        ax.bar(xs, [100 * (v or 0.0) for v in vals], width=width, color=color, yerr=yerr, capsize=2, label=label)


def first_option_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]]):
    """Left: bars per run of P(choose first-shown) overall, when gold is first and when gold is second
    (%), each with its Wilson 95% interval as an error bar; the run's n valid and binomial p under it.
    Right (runs whose result has the letter rate): P(answer A) and P(choose first-shown) where A is
    shown first and where B is — a letter preference keeps P(A) level and splits the first-shown
    bars, a first-option preference the other way round; the verdict under each run. ``None`` when
    no run has first-option data."""
    shown = [(n, fo) for n, fo in named if fo]
    if not shown:
        return None
    lettered = [(n, fo) for n, fo in shown if "letter_rate" in fo]
    plt = pyplot()
    panels = 2 if lettered else 1
    size = (max(4.0, 1.4 * len(shown) + 1.5) + 1.3 + (max(4.0, 1.4 * len(lettered) + 1.5) + 1.9 if lettered else 0), 3.6)
    fig, axes = plt.subplots(1, panels, figsize=size, squeeze=False, layout="constrained")
    ax = axes[0][0]
    _bars(ax, shown, _FIRST_BARS)
    ticks = [f"{n}\nn={fo['n_valid']} ({fo['n_gold_first']}/{fo['n_gold_second']}), p={fo['binomial_p']:.2g}" for n, fo in shown]
    _percent_bars_axes(ax, ticks, "P(choose first-shown) (%)", "First-option rate: Wilson 95%; binomial test of P = 1/2")
    if lettered:
        ax = axes[0][1]
        _bars(ax, lettered, _LETTER_BARS)
        ticks = [f"{n}\np(A)={fo['letter_binomial_p']:.2g}\n{fo['verdict'].replace('_', '-')}" for n, fo in lettered]
        _percent_bars_axes(ax, ticks, "rate (%)", "Letter vs first position (by letter shown first)")
    return fig


def plot_first_option(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """:func:`first_option_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(first_option_figure(named), path)


def plot_timecatch(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """Heatmap (run · task) × true frame of the anomaly: accuracy, n below; the frame axis
    holds every frame 1…max (a frame no item has stays blank), never skipping one."""
    from ..timecatch.plots import plot_timecatch_positions

    return plot_timecatch_positions(named, path)
