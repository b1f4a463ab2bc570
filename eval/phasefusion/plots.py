"""PhaseFusion's figures, drawn from ``metrics.json`` (and, for the margin plot, per-question
answers): accuracy against attention cost, phase / origin disagreement, and the margin's
flips, reliability and risk–coverage (:func:`margin_figure` returns that figure, whose
artists the tests read); :func:`write_figures` draws them all into a run folder for
:func:`judgetrain.eval.phasefusion.report.report`.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judgetrain.plotting import pyplot, save_figure

from .answers import collect_rows, per_question_answers
from .signals import vote_share

__all__ = ["margin_figure", "plot_accuracy_vs_cost", "plot_margin", "plot_phase_disagreement", "write_figures"]


def plot_accuracy_vs_cost(metrics: Mapping[str, Any], path: str | os.PathLike) -> dict[str, tuple[float, float]]:
    """Identity-ordering accuracy (±1 SE) against attention units per arm; pooled arms starred.

    Pooled arms read the same S passes, so they share one cost: each is drawn a little to the
    side of that cost (the tick is the true one), so none hides another. Returns where each
    arm's marker was drawn, ``{arm: (x, accuracy %)}``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    rows = {r["arm"]: r for r in metrics["table_a"]["rows"]}
    singles = sorted(
        (
            a
            for a in metrics["arms"].values()
            if a["pool"] == "single" and a["name"] in rows and rows[a["name"]]["accuracy"] is not None
        ),
        key=lambda a: a["attention_units"],
    )
    if singles:
        ax.errorbar(
            [a["attention_units"] for a in singles],
            [100 * rows[a["name"]]["accuracy"] for a in singles],
            yerr=[100 * rows[a["name"]]["se"] for a in singles],
            marker="o",
            color="#4C72B0",
            capsize=3,
            label="single pass",
        )
        at: dict[tuple[int, float], list[str]] = {}
        for a in singles:  # arms on the same point (e.g. samplers of one budget) share one label
            at.setdefault((a["attention_units"], 100 * rows[a["name"]]["accuracy"]), []).append(a["name"])
        for xy, names in at.items():
            ax.annotate(", ".join(names), xy, fontsize=7, xytext=(4, 4), textcoords="offset points")
    drawn = {a["name"]: (float(a["attention_units"]), 100 * rows[a["name"]]["accuracy"]) for a in singles}
    styles = {"arithmetic": ("*", "#C44E52", 13), "geometric": ("P", "#8172B2", 9), "vote": ("D", "#55A868", 7)}
    pooled = [a for a in metrics["arms"].values() if a["pool"] in styles and rows.get(a["name"], {}).get("accuracy") is not None]
    for a, x in zip(pooled, _dodged([a["attention_units"] for a in pooled]), strict=True):
        marker, color, size = styles[a["pool"]]
        y = 100 * rows[a["name"]]["accuracy"]
        ax.errorbar(
            [x],
            [y],
            yerr=[100 * rows[a["name"]]["se"]],
            marker=marker,
            color=color,
            markersize=size,
            capsize=3,
            linestyle="none",
            markeredgecolor="black",
            markeredgewidth=0.6,
            zorder=3,
            label=f"{a['name']} ({a['frames']})",
        )
        drawn[a["name"]] = (x, y)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("visual-prefix attention units (views · frames²)")
    ax.set_ylabel("accuracy at the identity ordering (%)")
    ax.set_title(f"Accuracy vs cost (n = {metrics['table_a']['n']} paired questions)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    if len(pooled) > 1:
        ax.text(
            0.01,
            0.01,
            "pooled arms of one cost drawn side by side",
            transform=ax.transAxes,
            fontsize=6,
            color="grey",
            va="bottom",
        )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def _dodged(costs: Sequence[float]) -> list[float]:
    """x positions for markers at ``costs``: those sharing a cost spread symmetrically around
    it, 0.12 of a doubling apart on the log-2 axis."""
    out = []
    for i, c in enumerate(costs):
        same = [j for j, d in enumerate(costs) if d == c]
        k = same.index(i) - (len(same) - 1) / 2
        out.append(float(c) * 2 ** (0.12 * k))
    return out


def plot_phase_disagreement(metrics: Mapping[str, Any], path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Left: pairwise phase disagreement of consensus answers, any-of-S and the re-run floor.
    Right: answers changed under each origin shift per arm. Every bar is labelled with its
    value (a 0% bar is otherwise invisible), and a panel whose bars are all 0 says so.
    Returns per panel what was drawn: ``{"left"|"right": {"labels", "values", "note"}}``."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    ph = metrics.get("phases") or {}
    bars = [(f"{p['a'].split()[-1]} vs {p['b'].split()[-1]}", p["rate"], p["ci95"]) for p in ph.get("pairwise_disagreement", [])]
    if ph.get("any_change"):
        bars.append((f"any of {ph['views']}", ph["any_change"]["rate"], ph["any_change"]["ci95"]))
    if ph.get("rerun_floor"):
        bars.append(("re-run", ph["rerun_floor"]["rate"], ph["rerun_floor"]["ci95"]))
    if (metrics.get("rerun_floor_across_runs") or {}).get("rate") is not None:
        rr = metrics["rerun_floor_across_runs"]
        bars.append(("re-run\n(2 runs)", rr["rate"], rr["ci95"]))
    drawn = {"left": _bars(left, bars, "#4C72B0", "no consensus answer differs")}
    left.set_title("Consensus answers that differ (phases)", fontsize=9)
    b_rows = []
    for block in metrics.get("table_b", []):
        for r in block["rows"]:
            b_rows.append(
                (f"{r['arm']}\n{block['origins'][0]}→{block['origins'][1]}", r["changed"]["rate"], r["changed"]["ci95"])
            )
    drawn["right"] = _bars(right, b_rows, "#C44E52", "no answer changed")
    right.set_title("Answers changed under an origin shift", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def _bars(ax: Any, bars: Sequence[tuple[str, float | None, Sequence[float | None]]], color: str, all_zero: str) -> dict[str, Any]:
    if not bars:
        ax.text(0.5, 0.5, "not measured in this run", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        ax.set_axis_off()
        return {"labels": [], "values": [], "note": "not measured in this run"}
    vals = [100 * (v or 0.0) for _, v, _ in bars]
    lo = [max(0.0, v - 100 * (ci[0] if ci[0] is not None else v / 100)) for v, (_, _, ci) in zip(vals, bars, strict=True)]
    hi = [max(0.0, 100 * (ci[1] if ci[1] is not None else v / 100) - v) for v, (_, _, ci) in zip(vals, bars, strict=True)]
    xs = list(range(len(bars)))
    ax.bar(xs, vals, yerr=[lo, hi], color=color, capsize=3, ecolor="#888888", error_kw={"elinewidth": 1})
    # a bar at 0 has no height: a marker on the axis and the printed value show it is there
    ax.scatter(
        [x for x, v in zip(xs, vals, strict=True) if v == 0],
        [0.0] * vals.count(0.0),
        marker="_",
        s=400,
        color=color,
        linewidths=3,
        zorder=3,
        clip_on=False,
    )
    labels = [f"{v:.1f}%" for v in vals]
    for x, v, text in zip(xs, vals, labels, strict=True):
        ax.annotate(text, (x, v), xytext=(3, 2), textcoords="offset points", ha="left", va="bottom", fontsize=7)
    ax.set_xticks(xs, [b[0] for b in bars], fontsize=7)
    ax.set_ylabel("% of questions (95% CI, Wilson)")
    top = max(10.0, min(100.0, max(v + h for v, h in zip(vals, hi, strict=True)) * 1.15))
    ax.set_ylim(0, top)
    note = None
    if not any(vals):
        note = f"all 0%: {all_zero}\n(whiskers: the 95% CI of a rate of 0 in n)"
        ax.text(
            0.5,
            0.55,
            note,
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=8,
            zorder=4,
            bbox={"facecolor": "white", "edgecolor": "#BBBBBB", "boxstyle": "round,pad=0.4"},
        )
    return {"labels": labels, "values": vals, "note": note}


# one style per series, so a series drawn under another on the same points still shows: the first
# thick and solid, each later one thinner, dashed and hollow-marked, drawn above it
_SERIES = (
    {"color": "#4C72B0", "linestyle": "-", "marker": "o", "linewidth": 3.0, "markersize": 6, "zorder": 2},
    {
        "color": "#C44E52",
        "linestyle": (0, (4, 3)),
        "marker": "s",
        "linewidth": 1.4,
        "markersize": 9,
        "markerfacecolor": "none",
        "zorder": 3,
    },
    {
        "color": "#55A868",
        "linestyle": (0, (1, 2)),
        "marker": "^",
        "linewidth": 1.4,
        "markersize": 9,
        "markerfacecolor": "none",
        "zorder": 4,
    },
    {
        "color": "#8172B2",
        "linestyle": "-.",
        "marker": "D",
        "linewidth": 1.2,
        "markersize": 8,
        "markerfacecolor": "none",
        "zorder": 5,
    },
)
# the vote share of Fig. S2, beside the margin lines
_VOTE_STYLE = {
    "color": "#CCB974",
    "linestyle": (0, (6, 2, 1, 2)),
    "marker": "v",
    "linewidth": 1.6,
    "markersize": 8,
    "markerfacecolor": "none",
    "zorder": 6,
}


def margin_figure(metrics: Mapping[str, Any], per_question: Mapping[str, Sequence[Mapping[str, Any]]]):
    """Margin histograms split by ordering flip, reliability of the top-1 posterior, and
    risk–coverage when abstaining on the lowest margins (App. H); returns the figure.

    Each arm of ``per_question`` (the single pass, then fusion) has its own line style and
    marker (:data:`_SERIES`): the first thick and solid underneath, the later ones thinner,
    dashed and hollow on top, so arms that agree on every question still show every line.
    Legends sit inside their panels."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.3), layout="constrained")
    for i, (name, items) in enumerate(per_question.items()):
        style = _SERIES[i % len(_SERIES)]
        m = np.array([x["margin"] for x in items])
        flips = np.array([x["flip"] for x in items], bool)
        correct = np.array([x["correct"] for x in items], bool)
        if i == 0:
            axes[0].hist(
                [m[flips], m[~flips]],
                bins=np.linspace(0, 1, 11),
                label=[f"{name}: flips", f"{name}: stable"],
                color=["#C44E52", "#4C72B0"],
                alpha=0.8,
            )
        xs, ys = _reliability(np.array([x["top1"] for x in items]), correct)
        axes[1].plot(xs, ys, label=name, **style)
        answered = np.arange(1, len(m) + 1)
        every = max(1, len(m) // 8)  # a few markers on a long curve
        order = np.argsort(-m, kind="stable")
        axes[2].plot(
            answered / len(m), 100 * np.cumsum(correct[order]) / answered, label=f"{name}: margin", markevery=every, **style
        )
        if name == "single" and len(items[0]["answers"]) > 1:  # Fig. S2: the K-ordering vote share, on its own answers
            share = np.array([vote_share(x) for x in items])
            plural = np.array([x["consensus_correct"] for x in items], bool)
            by_share = np.argsort(-share, kind="stable")
            axes[2].plot(
                answered / len(m),
                100 * np.cumsum(plural[by_share]) / answered,
                label=f"{name}: {len(items[0]['answers'])}-ordering vote share",
                markevery=every,
                **_VOTE_STYLE,
            )
    _label_margin_axes(axes)
    return fig


def _reliability(top1: np.ndarray, correct: np.ndarray) -> tuple[list[float], list[float]]:
    """Mean top-1 posterior and accuracy per quantile bin of the top-1 posterior (at most six bins)."""
    edges = np.quantile(top1, np.linspace(0, 1, min(6, len(top1)) + 1))
    idx = np.clip(np.searchsorted(edges, top1, side="right") - 1, 0, len(edges) - 2)
    kept = [k for k in range(len(edges) - 1) if (idx == k).any()]
    return [float(top1[idx == k].mean()) for k in kept], [float(correct[idx == k].mean()) for k in kept]


def _label_margin_axes(axes: Sequence[Any]) -> None:
    axes[0].set_xlabel("margin (top-1 − top-2), identity ordering")
    axes[0].set_ylabel("questions")
    axes[0].set_title("Margin of flipping vs stable questions", fontsize=9)
    axes[1].plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, zorder=1)
    axes[1].set_xlabel("top-1 posterior (quantile bins)")
    axes[1].set_ylabel("accuracy")
    axes[1].set_title("Reliability", fontsize=9)
    axes[2].set_xlabel("coverage (answered, most reliable first)")
    axes[2].set_ylabel("accuracy on answered (%)")
    axes[2].set_title("Risk–coverage (Fig. S2)", fontsize=9)
    for ax in axes:
        ax.legend(fontsize=7, loc="best", framealpha=0.8)


def plot_margin(
    metrics: Mapping[str, Any], per_question: Mapping[str, Sequence[Mapping[str, Any]]], path: str | os.PathLike
) -> None:
    """:func:`margin_figure` saved to ``path``."""
    save_figure(margin_figure(metrics, per_question), path)


def write_figures(metrics: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], run_dir: Path, replace: Iterable[str]) -> None:
    """Replace a run's figures (the files ``replace`` names are removed first): accuracy vs cost,
    phase disagreement, and the margin plot of the single pass and fusion at the first origin
    (none when no arm was scored)."""
    for f in replace:
        (run_dir / f).unlink(missing_ok=True)
    if not metrics["table_a"]["rows"]:
        return
    plot_accuracy_vs_cost(metrics, run_dir / "accuracy_vs_cost.png")
    plot_phase_disagreement(metrics, run_dir / "phase_disagreement.png")
    col = collect_rows(rows)
    first = metrics["origins"][0]
    singles = [n for n, a in metrics["arms"].items() if a["pool"] == "single"]
    shown = [
        n
        for n in dict.fromkeys(["single" if "single" in singles else next(iter(singles), None), "fusion"])
        if n is not None and n in metrics["arms"]
    ]
    per_q = {n: items for n in shown if (items := list(per_question_answers(col, metrics["arms"][n], first).values()))}
    if per_q:
        plot_margin(metrics, per_q, run_dir / "margin.png")
