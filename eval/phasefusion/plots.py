"""PhaseFusion's figures, drawn from ``metrics.json`` (and, for the margin plot, per-question
answers): accuracy against attention cost, phase / origin disagreement, and the margin's
flips, reliability and risk–coverage. :func:`judgetrain.eval.phasefusion.report.report`
calls them. README: "`judgetrain eval phasefusion`".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judgetrain.plotting import pyplot

from .signals import vote_share

__all__ = ["plot_accuracy_vs_cost", "plot_margin", "plot_phase_disagreement"]


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


def plot_margin(
    metrics: Mapping[str, Any], per_question: Mapping[str, Sequence[Mapping[str, Any]]], path: str | os.PathLike
) -> None:
    """Margin histograms split by ordering flip, reliability of the top-1 posterior, and
    risk–coverage when abstaining on the lowest margins (App. H)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.3))
    colors = ["#4C72B0", "#C44E52", "#55A868", "#8172B2", "#CCB974", "#64B5CD"]
    for i, (name, items) in enumerate(per_question.items()):
        color = colors[i % len(colors)]
        m = np.array([x["margin"] for x in items])
        flips = np.array([x["flip"] for x in items], bool)
        correct = np.array([x["correct"] for x in items], bool)
        top1 = np.array([x["top1"] for x in items])
        bins = np.linspace(0, 1, 11)
        if i == 0:
            axes[0].hist(
                [m[flips], m[~flips]],
                bins=bins,
                label=[f"{name}: flips", f"{name}: stable"],
                color=["#C44E52", "#4C72B0"],
                alpha=0.8,
            )
        edges = np.quantile(top1, np.linspace(0, 1, min(6, len(top1)) + 1))
        idx = np.clip(np.searchsorted(edges, top1, side="right") - 1, 0, len(edges) - 2)
        xs = [top1[idx == k].mean() for k in range(len(edges) - 1) if (idx == k).any()]
        ys = [correct[idx == k].mean() for k in range(len(edges) - 1) if (idx == k).any()]
        axes[1].plot(xs, ys, marker="o", color=color, label=name)
        order = np.argsort(-m, kind="stable")
        answered = np.arange(1, len(m) + 1)
        axes[2].plot(answered / len(m), 100 * np.cumsum(correct[order]) / answered, color=color, label=f"{name}: margin")
        if name == "single" and len(items[0]["answers"]) > 1:  # Fig. S2: the K-ordering vote share, on its own answers
            share = np.array([vote_share(x) for x in items])
            plural = np.array([x["consensus_correct"] for x in items], bool)
            by_share = np.argsort(-share, kind="stable")
            axes[2].plot(
                answered / len(m),
                100 * np.cumsum(plural[by_share]) / answered,
                color=color,
                linestyle="--",
                label=f"{name}: {len(items[0]['answers'])}-ordering vote share",
            )
    axes[0].set_xlabel("margin (top-1 − top-2), identity ordering")
    axes[0].set_ylabel("questions")
    axes[0].set_title("Margin of flipping vs stable questions", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    axes[1].set_xlabel("top-1 posterior (quantile bins)")
    axes[1].set_ylabel("accuracy")
    axes[1].set_title("Reliability", fontsize=9)
    axes[1].legend(fontsize=7)
    axes[2].set_xlabel("coverage (answered, most reliable first)")
    axes[2].set_ylabel("accuracy on answered (%)")
    axes[2].set_title("Risk–coverage (Fig. S2)", fontsize=9)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
