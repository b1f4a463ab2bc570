"""The judge run's report: metrics.json, report.md and the figures, recomputed from
``predictions.jsonl`` + ``run.json`` (``judgetrain eval report RUN``), and the cells
``judgetrain eval compare`` puts side by side. The metrics are :mod:`judgetrain.eval.judge.metrics`.
README: "`judgetrain eval judge`, `eval bias`".
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.io import no_nan, write_json, write_text
from judgetrain.plotting import pyplot, save_figure

from ..core.markdown import display_name, figures_markdown, fmt, rows_markdown, run_header
from ..core.runs import METRICS, PREDICTIONS, REPORT, items_count, read_run
from .metrics import SCORES, compute_judge_metrics

__all__ = ["cells", "pairwise_layouts_figure", "plot_pairwise_layouts", "plot_score_distribution", "report"]


_CLS = ("Acc", "Acc (inv.=wrong)", "Pr", "Rec", "F1", "n_val", "invalid")


def _cls_cells(c: Mapping[str, Any]) -> list[str]:
    return [fmt(c["accuracy"]), fmt(c["accuracy_all"]), fmt(c["precision"]), fmt(c["recall"]), fmt(c["f1"]),
            str(c["n_valid"]), str(c["n_invalid"])]


def _layout_rows(block: Mapping[str, Any], cells: Callable[[Mapping[str, Any]], list[str]]) -> list[list[str]]:
    rows = [[lay, *cells(c)] for lay, c in block["by_layout"].items()]
    if len(block["by_layout"]) > 1:
        rows.append(["all", *cells(block["all"])])
    return rows


_POINT = ("F1", "r_G", "MAE_G", "RMSE_G", "r_H", "MAE_H", "RMSE_H", "r_gold", "MAE_gold", "RMSE_gold", "n_val", "invalid")


def _point_cells(c: Mapping[str, Any]) -> list[str]:
    cells = [fmt(c["f1"])]
    for ref in ("teacher", "human", "gold"):
        cells += [fmt(c[ref]["r"]), fmt(c[ref]["mae"]), fmt(c[ref]["rmse"])]
    return cells + [str(c["n_valid"]), str(c["n_invalid"])]


_EXPL = ("BL", "R1", "R2", "RL", "MTR", "CS", "LenΔ (words)", "n")


def _expl_cells(c: Mapping[str, Any]) -> list[str]:
    return [fmt(c[k]) for k in ("bleu", "rouge1", "rouge2", "rougeL", "meteor", "cosine")] + [fmt(c["len_diff"], 1), str(c["n"])]


def plot_score_distribution(dist: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Grouped bars: the share of each score 1…5 for the model and every reference present."""
    plt = pyplot()
    names = list(dist)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    width = 0.8 / max(len(names), 1)
    colors = {"model": "#4C72B0", "gold": "#55A868", "teacher": "#C44E52", "human": "#8172B2"}
    for k, name in enumerate(names):
        d = dist[name]
        shares = [d["counts"][str(s)] / d["n"] for s in SCORES]
        xs = [s + (k - (len(names) - 1) / 2) * width for s in SCORES]
        ax.bar(xs, shares, width=width, color=colors.get(name, None), label=f"{name} (n={d['n']}, {100 * d['share_1_2']:.0f}% in {{1,2}})")
    ax.set_xticks(list(SCORES))
    ax.set_xlabel("score")
    ax.set_ylabel("share of items")
    ax.set_ylim(0, 1.05)
    ax.set_title("Pointwise score distribution (binary collapse: mass in {1, 2})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def pairwise_layouts_figure(pairwise: Mapping[str, Any]):
    """Accuracy (valid answers) and macro-F1 per layout, one panel per benchmark, 0.5 marked
    (chance for both on the builders' balanced A/B items)."""
    plt = pyplot()
    benches = list(pairwise["by_benchmark"])
    fig, axes = plt.subplots(1, len(benches), figsize=(4.2 * len(benches), 3.0), squeeze=False, layout="constrained")
    for ax, bench in zip(axes[0], benches):
        block = pairwise["by_benchmark"][bench]["by_layout"]
        layouts = list(block)
        xs = range(len(layouts))
        for off, key, color in ((-0.2, "accuracy", "#4C72B0"), (0.2, "f1", "#DD8452")):
            ax.bar([x + off for x in xs], [block[lay][key] or 0.0 for lay in layouts], width=0.4, color=color,
                   label="Acc (valid answers)" if key == "accuracy" else "macro-F1")
        ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(list(xs), layouts, fontsize=8)
        ax.set_xlabel("prompt layout", fontsize=8)
        ax.set_ylabel("accuracy / macro-F1 (0–1)", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{bench} pairwise by layout", fontsize=9)
        ax.legend(fontsize=7)
    return fig


def plot_pairwise_layouts(pairwise: Mapping[str, Any], path: str | os.PathLike) -> None:
    """:func:`pairwise_layouts_figure` saved to ``path``."""
    save_figure(pairwise_layouts_figure(pairwise), path)


def report(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Recompute ``metrics.json``, ``report.md`` and the figures of a judge run folder from
    its ``predictions.jsonl`` (``run.json`` names the model and the command). Returns the metrics."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, f"run `judgetrain eval judge --out {run_dir} …` first")
    metrics: dict[str, Any] = {"run": {k: info.get(k) for k in ("model", "adapter", "data", "split", "mode", "max_new_tokens",
                                                                "tasks", "layouts", "subsets", "limit", "world_size")},
                               "items": items_count(rows, info)}
    metrics.update(compute_judge_metrics(rows))
    figures: list[tuple[str, str]] = []
    if "pairwise" in metrics:
        plot_pairwise_layouts(metrics["pairwise"], run_dir / "pairwise_layouts.png")
        figures.append(("Pairwise accuracy and macro-F1 per layout", "pairwise_layouts.png"))
    if metrics.get("pointwise", {}).get("distribution"):
        plot_score_distribution(metrics["pointwise"]["distribution"], run_dir / "pointwise_scores.png")
        figures.append(("Pointwise score distribution", "pointwise_scores.png"))
    metrics["figures"] = [f for _, f in figures]
    metrics = no_nan(metrics)
    write_json(run_dir / METRICS, metrics)
    write_text(run_dir / REPORT, _markdown(run_dir, metrics, info, rows, figures))
    return metrics


def _markdown(run_dir: Path, m: Mapping[str, Any], info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
              figures: Sequence[tuple[str, str]]) -> str:
    name = display_name(info, rows)
    md = [f"# Judge evaluation: {name}\n\n",
          run_header(info, rows, f"mode: {info.get('mode', '?')}; items: {m['n']} of the {m['items']['selected']} the run "
                                 f"selects ({', '.join(f'{t} {n}' for t, n in m['tasks'].items())})")]
    if "pairwise" in m:
        pw = m["pairwise"]
        md.append("\n## Pairwise (paper 002 Table S2 layout)\n\n")
        md.append("Acc, Pr, Rec, F1 (macro) over valid predictions (n_val); \"Acc (inv.=wrong)\" counts invalid answers as wrong.\n\n")
        for bench, block in pw["by_benchmark"].items():
            md.append(f"### {bench}\n\n")
            md.append(rows_markdown(("layout", *_CLS), _layout_rows(block, _cls_cells)))
            md.append("\n")
        md.append("### Per subset (Table S3 layout)\n\n")
        md.append(rows_markdown(("subset", *_CLS), [[s, *_cls_cells(b["all"])] for s, b in pw["by_subset"].items()]))
    if "pointwise" in m:
        pt = m["pointwise"]
        md.append("\n## Pointwise (paper 002 Table S7 layout)\n\n")
        md.append("Pearson r, MAE and RMSE of the valid 1–5 predictions against the teacher (G: `meta.teacher_answer`), "
                  "human (H: `meta.human_score`) and gold rubric scores; – where the records carry no such reference "
                  "or r is undefined (fewer than two pairs, or a constant side).\n\n")
        md.append(rows_markdown(("layout", *_POINT), _layout_rows(pt, _point_cells)))
        md.append("\n")
        md.append(rows_markdown(("subset", *_POINT), [[s, *_point_cells(c)] for s, c in pt["by_subset"].items()]))
        md.append("\nScore distribution (share in {1, 2} shows a binary collapse):\n\n")
        md.append(rows_markdown(("scores of", *map(str, SCORES), "n", "share in {1,2}"),
                                 [[k, *(str(d["counts"][str(s)]) for s in SCORES), str(d["n"]), fmt(d["share_1_2"])]
                                  for k, d in pt["distribution"].items()]))
    if "explanations" in m:
        ex = m["explanations"]
        md.append("\n## Explanations (paper 002 Tables S7, S14)\n\n")
        md.append("Against `meta.teacher_rationale`, on valid non-empty explanations only. BL: BLEU-4 (smoothing method1), "
                  "R1/R2/RL: ROUGE F-measure, MTR: METEOR, CS: all-MiniLM-L6-v2 cosine, LenΔ: words generated − reference.\n\n")
        skipped = ", ".join(f"{n} {why}" for why, n in ex["skipped"].items()) or "none"
        md.append(f"Generated answers: {ex['n_generated']}; left out: {skipped}.\n\n")
        for task, block in ex["by_task"].items():
            md.append(f"### {task}\n\n")
            md.append(rows_markdown(("layout", *_EXPL), _layout_rows(block, _expl_cells)))
            md.append("\n")
    if "ordering" in m:
        o = m["ordering"]
        md.append("\n## Chronological-ordering probe (paper 002 App. G)\n\n")
        md.append(rows_markdown(
            ("exact match", "exact (valid)", "Kendall τ", "invalid", "invalid rate", "chance", "label order", "reverse", "n"),
            [[fmt(o["exact_match"]), fmt(o["exact_match_valid"]), fmt(o["kendall_tau"]), str(o["n_invalid"]), fmt(o["invalid_rate"]),
              fmt(o["chance_exact_match"]), str(o["label_order"]), str(o["reverse_label_order"]), str(o["n"])]]))
    md.append(figures_markdown(figures))
    md.append("\n## Reproduce\n\n```bash\n")
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n")
    md.append(f"judgetrain eval bias {shlex.quote(str(run_dir))}   # positional and first-option bias\n```\n")
    return "".join(md)


def cells(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """What ``eval compare`` shows of a judge run, in %: pairwise accuracy (over valid
    answers) and macro-F1 per subset and overall, pointwise accuracy per subset and
    overall, and the ordering probe's exact match (invalid = wrong). ``None``: undefined
    (no valid answer)."""
    def pct(x: Any) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100 * float(x)

    out: dict[str, float | None] = {}
    pw = metrics.get("pairwise")
    if pw:
        for subset, block in pw["by_subset"].items():
            out[f"pairwise Acc {subset}"] = pct(block["all"]["accuracy"])
            out[f"pairwise F1 {subset}"] = pct(block["all"]["f1"])
        out["pairwise Acc all"] = pct(pw["all"]["accuracy"])
        out["pairwise F1 all"] = pct(pw["all"]["f1"])
    pt = metrics.get("pointwise")
    if pt:
        for subset, cell in pt["by_subset"].items():
            out[f"pointwise Acc {subset}"] = pct(cell["accuracy"])
        out["pointwise Acc all"] = pct(pt["all"]["accuracy"])
    if metrics.get("ordering"):
        out["ordering exact match"] = pct(metrics["ordering"]["exact_match"])
    return out


