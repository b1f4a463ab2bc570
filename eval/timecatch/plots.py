"""TimeCatch figures: localization confusion matrices, temporal detection by LPIPS bin, accuracy by true frame.

Each ``*_figure`` function returns the matplotlib figure (tests read its artists);
each ``plot_*`` saves it as a PNG and closes it. The values come from
:mod:`judgetrain.eval.core.metrics` and :mod:`judgetrain.eval.timecatch.tables`.
Docs: "concepts/timecatch.md", "concepts/positional-bias.md".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from judgetrain.plotting import pyplot, save_figure, save_if_drawn

from ..core.figures import rate_heatmap
from .metrics import TASK_TITLES
from .tables import balanced_interval

__all__ = [
    "confusion_figure",
    "lpips_figure",
    "plot_confusion",
    "plot_lpips",
    "plot_timecatch_positions",
    "timecatch_positions_figure",
]

SWAPPED_COLOR, INTACT_COLOR = "#C44E52", "#4C72B0"


def confusion_figure(conf: Mapping[str, Any], task: str):
    """Row-normalised confusion matrix (true position down, predicted across), counts annotated."""
    plt = pyplot()
    labels, counts, norm = conf["labels"], conf["counts"], conf["normalized"]
    k = len(labels)
    # at least 4.2 in wide: the title is wider than a 3×3 matrix
    fig, ax = plt.subplots(figsize=(max(4.2, 1.2 + 0.45 * k), max(3.0, 1.0 + 0.45 * k)), layout="constrained")
    im = ax.imshow(norm, cmap="Blues", vmin=0.0, vmax=1.0)
    for i in range(k):
        for j in range(k):
            if counts[i][j]:
                ax.text(
                    j, i, str(counts[i][j]), ha="center", va="center", fontsize=7, color="white" if norm[i][j] > 0.5 else "black"
                )
    ax.set_yticks(range(k), [str(x) for x in labels], fontsize=7)
    ax.set_xticks(range(k), [str(x) for x in labels], fontsize=7, rotation=90 if task == "temporal_localize" else 0)
    ax.set_xlabel("predicted pair" if task == "temporal_localize" else "predicted frame")
    ax.set_ylabel("true frame" if task == "frame_localize" else "true swapped pair")
    ax.set_title(f"{TASK_TITLES.get(task, task)}: row-normalised (counts annotated)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return fig


def plot_confusion(conf: Mapping[str, Any], task: str, path: str | os.PathLike) -> None:
    """:func:`confusion_figure` saved to ``path``."""
    save_figure(confusion_figure(conf, task), path)


def _pct(cell: Mapping[str, Any]) -> float:
    return float("nan") if cell["accuracy"] is None else 100 * cell["accuracy"]


def _whiskers(ax: Any, xs: Sequence[float], spans: Sequence[tuple[float, float] | None], gid: str) -> None:
    """Error bars from 0..1 ``spans`` (in %) at ``xs``: the vertical lines one LineCollection
    (``gid``), its caps another (``gid`` + " caps"); nothing where a span is None. Drawn as line
    collections, not ``errorbar`` containers, so ``ax.containers`` holds the bars alone."""
    kept = [(x, 100 * lo, 100 * hi) for x, span in zip(xs, spans, strict=True) if span is not None for lo, hi in [span]]
    if not kept:
        return
    x, lo, hi = zip(*kept, strict=True)
    ax.vlines(x, lo, hi, color="#333333", linewidth=1.0, zorder=4, gid=gid)
    ax.hlines(
        [*lo, *hi],
        [v - 0.06 for v in x * 2],
        [v + 0.06 for v in x * 2],
        color="#333333",
        linewidth=1.0,
        zorder=4,
        gid=gid + " caps",
    )


def lpips_figure(bins: Sequence[Mapping[str, Any]]):
    """Temporal detection per LPIPS bin of the swapped pair (bins of
    :func:`~judgetrain.eval.timecatch.tables.lpips_class_bins`): one bar per class
    (swapped items said anomalous, their intact partners said intact) and the balanced
    accuracy as a marker. Every bar carries its Wilson 95% interval as an error bar (the
    class's ``ci95``; none on an empty class), and the balanced-accuracy marker the MOVER
    interval (``balanced_accuracy_ci95``, :func:`~judgetrain.eval.timecatch.tables.balanced_interval`). The 50% chance line is drawn for the balanced accuracy only,
    and only when some bin has both classes: a bar of one class has no chance level
    (a model that always says "anomaly" scores 100% on swapped items)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 0.9 * len(bins) + 2.0), 3.6), layout="constrained")
    xs = list(range(len(bins)))
    ax.bar(
        [x - 0.2 for x in xs], [_pct(b["swapped"]) for b in bins], width=0.4, color=SWAPPED_COLOR, label="swapped: said anomalous"
    )
    _whiskers(ax, [x - 0.2 for x in xs], [b["swapped"].get("ci95") for b in bins], "wilson swapped")
    both = any(b["balanced_accuracy"] is not None for b in bins)
    if any(b["intact"]["n"] for b in bins):
        ax.bar(
            [x + 0.2 for x in xs],
            [_pct(b["intact"]) for b in bins],
            width=0.4,
            color=INTACT_COLOR,
            label="intact partner: said intact",
        )
        _whiskers(ax, [x + 0.2 for x in xs], [b["intact"].get("ci95") for b in bins], "wilson intact")
    balanced = [float("nan") if b["balanced_accuracy"] is None else 100 * b["balanced_accuracy"] for b in bins]
    if both:
        ax.plot(xs, balanced, linestyle="none", marker="D", color="black", label="balanced accuracy", zorder=5)
        _whiskers(ax, xs, [b.get("balanced_accuracy_ci95") or balanced_interval(b) for b in bins], "mover balanced")
        ax.axhline(50, color="grey", linestyle="--", linewidth=1, label="chance (balanced accuracy)")
    for container, key in zip(ax.containers, ("swapped", "intact"), strict=False):
        for bar, b in zip(container, bins, strict=False):
            if b[key]["n"]:  # the value over every bar with items, so 0% is not mistaken for an empty bin
                top = 100 * b[key]["ci95"][1] if b[key].get("ci95") else bar.get_height()  # above its whisker
                ax.text(bar.get_x() + bar.get_width() / 2, top + 1.5, f"{bar.get_height():.0f}", ha="center", fontsize=6)
    ax.set_xticks(xs, [f"{b['lo']:.1f}–{b['hi']:.1f}\nn={b['swapped']['n']}+{b['intact']['n']}" for b in bins], fontsize=7)
    ax.set_ylim(0, 135)  # room above 100% for the legend
    ax.set_yticks(range(0, 101, 25))
    ax.set_xlabel("LPIPS distance of the swapped frames (n = swapped + intact items; whiskers: 95% CI)", fontsize=8)
    ax.set_ylabel("accuracy per class (%)", fontsize=8)
    title = "Temporal detection by LPIPS bin of the swapped pair"
    ax.set_title(title if both else title + "\n(swapped items only: no intact partners in the run)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", ncol=2, frameon=False)
    return fig


def plot_lpips(bins: Sequence[Mapping[str, Any]], path: str | os.PathLike) -> None:
    """:func:`lpips_figure` saved to ``path``."""
    save_figure(lpips_figure(bins), path)


def _frame_columns(tables: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every frame 1…max seen, so a missing position is an empty column, never skipped."""
    top = max((int(p) for t in tables for p in t["positions"]), default=0)
    return [str(k) for k in range(1, top + 1)]


def timecatch_positions_figure(named: Sequence[tuple[str, Mapping[str, Any] | None]]):
    """Heatmap (run · task) × true frame of the anomaly: accuracy and n in each cell, cells of
    fewer than 10 items lighter and hatched (:func:`judgetrain.eval.core.figures.rate_heatmap`); ``named`` is
    (run name, :func:`judgetrain.eval.bias.timecatch_positions` output).
    The frame axis holds every frame from 1 to the largest seen (a frame no item has is
    left blank) and W_avg last. ``None`` when there is nothing to draw."""
    rows = [(f"{n} · {task}", t) for n, tc in named for task, t in (tc or {}).items()]
    if not rows:
        return None
    cols = _frame_columns([t for _, t in rows]) + ["W_avg"]
    cells = [[t["w_avg"] if c == "W_avg" else t["cells"].get(c) for c in cols] for _, t in rows]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.8, 2.5 + 0.5 * len(cols)), 1.6 + 0.5 * len(rows)), layout="constrained")
    im = rate_heatmap(
        ax,
        [[None if c is None else c.get("accuracy") for c in row] for row in cells],
        [[None if c is None else c.get("n") for c in row] for row in cells],
        [n for n, _ in rows],
        cols,
        "TimeCatch accuracy by true frame of the anomaly (n below; lighter, hatched: n < 10)",
    )
    ax.set_xlabel("frame (1-based; swap: earlier frame)")
    fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02)
    return fig


def plot_timecatch_positions(named: Sequence[tuple[str, Mapping[str, Any] | None]], path: str | os.PathLike) -> bool:
    """:func:`timecatch_positions_figure` saved to ``path``; False when there is nothing to draw."""
    return save_if_drawn(timecatch_positions_figure(named), path)
