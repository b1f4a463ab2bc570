"""The judge run's report: metrics.json, report.md and the figures, recomputed from
``predictions.jsonl`` + ``run.json`` (``judgetrain eval report RUN``), and the cells
``judgetrain eval compare`` puts side by side (:func:`cells`, with the counts behind them,
:func:`cell_counts`). The metrics are :mod:`judgetrain.eval.judge.metrics`. Every rate is printed in
% with its Wilson 95% interval and n (:func:`judgetrain.eval.core.markdown.rate`); macro P/R/F1 in
% too; Pearson r, MAE, RMSE and the explanation scores in their own units. A reward-model run
(``--mode reward``) gets its own report: pair accuracy per perturbation kind, the symmetry check
and the agreement with a generative judge (:mod:`judgetrain.eval.judge.reward_metrics`).
Docs: "concepts/prism-mirage.md".
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

from ..core.figures import wilson_yerr
from ..core.markdown import RATE_NOTE, display_name, figures_markdown, fmt, pct, rate, rows_markdown, run_header
from ..core.reward_pairs import REWARD_MODE
from ..core.runs import METRICS, PREDICTIONS, REPORT, items_count, read_run
from .metrics import SCORES, compute_judge_metrics
from .reward_metrics import compute_reward_metrics, judge_pair_rows

__all__ = ["cell_counts", "cells", "pairwise_layouts_figure", "plot_pairwise_layouts", "plot_score_distribution", "report"]


_CLS = ("Acc", "Acc (inv.=wrong)", "Pr", "Rec", "F1", "n_val", "invalid")


def _cls_cells(c: Mapping[str, Any]) -> list[str]:
    return [
        rate(c["accuracy"], c.get("accuracy_ci95"), c["n_valid"]),
        rate(c["accuracy_all"], c.get("accuracy_all_ci95"), c["n"]),
        pct(c["precision"]),
        pct(c["recall"]),
        pct(c["f1"]),
        str(c["n_valid"]),
        str(c["n_invalid"]),
    ]


def _layout_rows(block: Mapping[str, Any], cells: Callable[[Mapping[str, Any]], list[str]]) -> list[list[str]]:
    rows = [[lay, *cells(c)] for lay, c in block["by_layout"].items()]
    if len(block["by_layout"]) > 1:
        rows.append(["all", *cells(block["all"])])
    return rows


_POINT = ("Acc", "F1", "r_G", "MAE_G", "RMSE_G", "r_H", "MAE_H", "RMSE_H", "r_gold", "MAE_gold", "RMSE_gold", "n_val", "invalid")


def _point_cells(c: Mapping[str, Any]) -> list[str]:
    cells = [rate(c["accuracy"], c.get("accuracy_ci95"), c["n_valid"]), pct(c["f1"])]
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
        ax.bar(
            xs, shares, width=width, color=colors.get(name), label=f"{name} (n={d['n']}, {100 * d['share_1_2']:.0f}% in {{1,2}})"
        )
    ax.set_xticks(list(SCORES))
    ax.set_xlabel("score")
    ax.set_ylabel("share of items")
    ax.set_ylim(0, 1.05)
    ax.set_title("Pointwise score distribution (binary collapse: mass in {1, 2})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _layout_points(block: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(label, cell) per layout, then "all" when there are several layouts."""
    points = list(block["by_layout"].items())
    return points + ([("all", block["all"])] if len(points) > 1 and "all" in block else [])


def pairwise_layouts_figure(pairwise: Mapping[str, Any]):
    """What the table cannot show at a glance: whether each layout's accuracy is told apart from
    chance and from the other layouts. One panel per benchmark: accuracy over valid answers per
    layout (and all layouts) with its Wilson 95% interval as an error bar, the accuracy with
    invalid answers counted wrong as a hollow marker beside it, each layout's n valid / n under
    its tick, and the 50% chance line (the builders' A/B items are balanced)."""
    plt = pyplot()
    benches = list(pairwise["by_benchmark"])
    widest = max(len(_layout_points(pairwise["by_benchmark"][b])) for b in benches)
    fig, axes = plt.subplots(
        1, len(benches), figsize=(max(4.2, 1.0 + 0.9 * widest) * len(benches), 3.2), squeeze=False, layout="constrained"
    )
    for ax, bench in zip(axes[0], benches, strict=True):
        points = _layout_points(pairwise["by_benchmark"][bench])
        xs = list(range(len(points)))
        for off, key, face, label in (
            (-0.12, "accuracy", "#4C72B0", "Acc (valid answers)"),
            (0.12, "accuracy_all", "white", "Acc (invalid = wrong)"),
        ):
            vals = [c.get(key) for _, c in points]
            yerr = wilson_yerr(vals, [c.get(f"{key}_ci95") for _, c in points], 100)
            ax.errorbar(
                [x + off for x in xs],
                [float("nan") if v is None else 100 * v for v in vals],
                yerr=yerr,
                fmt="o",
                color="#4C72B0",
                markerfacecolor=face,
                capsize=3,
                label=label,
            )
        ax.axhline(50, color="grey", linestyle="--", linewidth=1, label="chance")
        ax.set_xticks(xs, [f"{lay}\nn={c.get('n_valid', '?')}/{c.get('n', '?')}" for lay, c in points], fontsize=7)
        ax.set_xlim(-0.6, len(points) - 0.4)
        ax.set_xlabel("prompt layout (n valid / n)", fontsize=8)
        ax.set_ylabel("accuracy (%), Wilson 95%", fontsize=8)
        ax.set_ylim(0, 130)  # room above 100% for the legend
        ax.set_yticks(range(0, 101, 25))
        ax.set_title(f"{bench} pairwise accuracy by layout", fontsize=9)
        ax.legend(fontsize=7, ncol=3, loc="upper center", frameon=False)
    return fig


def plot_pairwise_layouts(pairwise: Mapping[str, Any], path: str | os.PathLike) -> None:
    """:func:`pairwise_layouts_figure` saved to ``path``."""
    save_figure(pairwise_layouts_figure(pairwise), path)


def report(run_dir: str | os.PathLike) -> dict[str, Any]:
    """Recompute ``metrics.json``, ``report.md`` and the figures of a judge run folder from
    its ``predictions.jsonl`` (``run.json`` names the model and the command). Returns the metrics."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, f"run `judgetrain eval judge --out {run_dir} …` first")
    if info.get("mode") == REWARD_MODE:
        return _reward_report(run_dir, rows, info)
    metrics: dict[str, Any] = {
        "run": {
            k: info.get(k)
            for k in (
                "model",
                "adapter",
                "data",
                "split",
                "mode",
                "max_new_tokens",
                "tasks",
                "layouts",
                "subsets",
                "limit",
                "world_size",
            )
        },
        "items": items_count(rows, info),
    }
    metrics.update(compute_judge_metrics(rows))
    figures: list[tuple[str, str]] = []
    if "pairwise" in metrics:
        plot_pairwise_layouts(metrics["pairwise"], run_dir / "pairwise_layouts.png")
        figures.append(("Pairwise accuracy per layout, with Wilson 95% intervals and chance", "pairwise_layouts.png"))
    if metrics.get("pointwise", {}).get("distribution"):
        plot_score_distribution(metrics["pointwise"]["distribution"], run_dir / "pointwise_scores.png")
        figures.append(("Pointwise score distribution", "pointwise_scores.png"))
    metrics["figures"] = [f for _, f in figures]
    metrics = no_nan(metrics)
    write_json(run_dir / METRICS, metrics)
    write_text(run_dir / REPORT, _markdown(run_dir, metrics, info, rows, figures))
    return metrics


def _reward_report(run_dir: Path, rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`report` of a reward-model run (:mod:`judgetrain.eval.judge.reward_metrics`)."""
    agree_with = info.get("agree_with")
    judge = judge_pair_rows(agree_with, info) if agree_with else None
    metrics: dict[str, Any] = {
        "run": {k: info.get(k) for k in ("model", "adapter", "data", "split", "mode", "agree_with", "limit", "world_size")},
        "items": items_count(rows, info),
        "n": len(rows),
        "reward": compute_reward_metrics(rows, judge_rows=judge),
    }
    metrics = no_nan(metrics)
    write_json(run_dir / METRICS, metrics)
    rw = metrics["reward"]
    md = [
        f"# Reward-model evaluation: {display_name(info, rows)}\n\n",
        run_header(
            info,
            rows,
            f"mode: reward; sequences scored: {len(rows)} of the {metrics['items']['selected']} the run selects; "
            f"gold-vs-negative pairs: {rw['n_pairs']}",
        ),
        _reward_pairs_markdown(rw),
        _symmetry_markdown(rw["symmetry"]),
    ]
    if rw["agreement"] is not None:
        md.append(_agreement_markdown(rw["agreement"], str(agree_with)))
    md.append(f"\n## Reproduce\n\n```bash\n{info.get('command', '')}\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics and report from {PREDICTIONS}\n```\n")
    write_text(run_dir / REPORT, "".join(md))
    return metrics


def _pair_cells(c: Mapping[str, Any]) -> list[str]:
    return [rate(c["accuracy"], c["ci95"], c["n"]), rate(c["tie_rate"], c["tie_ci95"], c["n"]), str(c["n"])]


def _reward_pairs_markdown(rw: Mapping[str, Any]) -> str:
    """The pair-accuracy section: per perturbation kind (and all), per layout when several, the mean rewards."""
    md = ["\n## Pair accuracy: each gold sequence against each of its perturbations\n\n"]
    md.append(
        "Acc: share of pairs whose gold sequence gets a strictly higher reward than the perturbed one; a tie (equal "
        f"rewards) is not won and is counted apart (tie rate). {RATE_NOTE}\n\n"
    )
    kinds = [[k, *_pair_cells(c)] for k, c in [*rw["by_perturbation"].items(), ("all", rw["all"])]]
    md.append(rows_markdown(("perturbation", "Acc", "tie rate", "pairs"), kinds))
    if len(rw["by_layout"]) > 1:
        md.append(
            "\n"
            + rows_markdown(("layout", "Acc", "tie rate", "pairs"), [[k, *_pair_cells(c)] for k, c in rw["by_layout"].items()])
        )
    mean = rw["mean_reward"]
    md.append(f"\nMean reward: gold sequences {fmt(mean['gold'])}, perturbed sequences {fmt(mean['negative'])}.\n")
    if rw["n_unpaired"]:
        md.append(
            f"\n{rw['n_unpaired']} scored sequence(s) are in no pair yet: their gold sequence's record has no prediction "
            "(the run stopped before its end; rerun its command to resume it).\n"
        )
    return "".join(md)


def _symmetry_markdown(s: Mapping[str, Any]) -> str:
    """The symmetry check: why a reward model has no position bias, and the check that its scorer keeps it so."""
    verdict = {True: "**passed**", False: "**FAILED**", None: "not run (no sequence was re-scored)"}[s["passed"]]
    return (
        "\n## Symmetry check\n\n"
        "A reward model scores each sequence alone: there is no A/B presentation, so no position bias by "
        "construction. What could still break that is the scorer: a reward that depends on the other sequences "
        "of its batch (padding read as content, a batch returned out of order). The first sequence of each chunk "
        "the run wrote was scored again in a batch of two, after another sequence (other companions, other "
        "padding); each difference must be within its tolerance (relative to max(1, |reward|), by the weights' "
        "dtype).\n\n"
        + rows_markdown(
            ("re-scored", "largest difference", "its tolerance", "over tolerance", "check"),
            [
                [
                    str(s["n_checked"]),
                    fmt(s["max_abs_diff"], 8),
                    fmt(s["worst_tolerance"], 8),
                    str(s["n_failed"]),
                    verdict,
                ]
            ],
        )
    )


def _agreement_markdown(a: Mapping[str, Any], judge: str) -> str:
    """Agreement with the generative judge on the items both scored."""
    cells = [rate(a[k]["rate"], a[k]["ci95"], a[k]["n"]) for k in ("agree", "reward_accuracy", "judge_accuracy")]
    return (
        f"\n## Agreement with the generative judge\n\nJudge run: `{judge}`. On each pairwise item of the judge that "
        "shows one of these pairs (its twin too), both prefer the same sequence; the judge's invalid answers and the "
        "reward's ties prefer neither and are counted apart. The accuracies are on the same decided items. "
        f"{RATE_NOTE}\n\n"
        + rows_markdown(
            (
                "agreement rate",
                "reward Acc",
                "judge Acc",
                "judge invalid",
                "reward ties",
                "judge items unmatched",
                "pairs unjudged",
            ),
            [[*cells, *(str(a[k]) for k in ("n_judge_invalid", "n_reward_tie", "n_judge_unmatched", "n_pairs_unjudged"))]],
        )
    )


def _markdown(
    run_dir: Path,
    m: Mapping[str, Any],
    info: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    figures: Sequence[tuple[str, str]],
) -> str:
    """report.md of a judge run: the header, then a section per block of metrics ``m`` holds
    (pairwise, pointwise, explanations, ordering probe), the figures, and the commands that
    reproduce the run and this report."""
    name = display_name(info, rows)
    md = [
        f"# Judge evaluation: {name}\n\n",
        run_header(
            info,
            rows,
            f"mode: {info.get('mode', '?')}; items: {m['n']} of the {m['items']['selected']} the run "
            f"selects ({', '.join(f'{t} {n}' for t, n in m['tasks'].items())})",
        ),
    ]
    sections = (
        ("pairwise", _pairwise_markdown),
        ("pointwise", _pointwise_markdown),
        ("explanations", _explanations_markdown),
        ("ordering", _ordering_markdown),
    )
    md += [section(m[key]) for key, section in sections if key in m]
    md.append(figures_markdown(figures))
    md.append(_reproduce_markdown(run_dir, info))
    return "".join(md)


def _pairwise_markdown(pw: Mapping[str, Any]) -> str:
    """The pairwise section: a Table S2 table (layouts) per benchmark, then Table S3's per subset."""
    md = ["\n## Pairwise (paper 002 Table S2 layout)\n\n"]
    md.append(
        'Acc, Pr, Rec, F1 (macro) over valid predictions (n_val); "Acc (inv.=wrong)" counts invalid answers as '
        f"wrong (n: all items); Pr, Rec, F1 in %. {RATE_NOTE}\n\n"
    )
    for bench, block in pw["by_benchmark"].items():
        md.append(f"### {bench}\n\n")
        md.append(rows_markdown(("layout", *_CLS), _layout_rows(block, _cls_cells)))
        md.append("\n")
    md.append("### Per subset (Table S3 layout)\n\n")
    md.append(rows_markdown(("subset", *_CLS), [[s, *_cls_cells(b["all"])] for s, b in pw["by_subset"].items()]))
    return "".join(md)


def _pointwise_markdown(pt: Mapping[str, Any]) -> str:
    """The pointwise section: Table S7's layout per layout and per subset, then the score distribution."""
    md = ["\n## Pointwise (paper 002 Table S7 layout)\n\n"]
    md.append(
        f"Acc: exact score over valid predictions; F1: macro, in %. {RATE_NOTE} "
        "Pearson r, MAE and RMSE of the valid 1–5 predictions against the teacher (G: `meta.teacher_answer`), "
        "human (H: `meta.human_score`) and gold rubric scores; – where the records carry no such reference "
        "or r is undefined (fewer than two pairs, or a constant side).\n\n"
    )
    md.append(rows_markdown(("layout", *_POINT), _layout_rows(pt, _point_cells)))
    md.append("\n")
    md.append(rows_markdown(("subset", *_POINT), [[s, *_point_cells(c)] for s, c in pt["by_subset"].items()]))
    md.append("\nScore distribution (share in {1, 2} shows a binary collapse):\n\n")
    md.append(
        rows_markdown(
            ("scores of", *map(str, SCORES), "n", "share in {1,2}"),
            [
                [
                    k,
                    *(str(d["counts"][str(s)]) for s in SCORES),
                    str(d["n"]),
                    rate(d["share_1_2"], d.get("share_1_2_ci95"), d["n"]),
                ]
                for k, d in pt["distribution"].items()
            ],
        )
    )
    return "".join(md)


def _explanations_markdown(ex: Mapping[str, Any]) -> str:
    """The explanations section (Tables S7, S14): what was scored and left out, then a table per task."""
    md = ["\n## Explanations (paper 002 Tables S7, S14)\n\n"]
    md.append(
        "Against `meta.teacher_rationale`, on valid non-empty explanations only. BL: BLEU-4 (smoothing method1), "
        "R1/R2/RL: ROUGE F-measure, MTR: METEOR, CS: all-MiniLM-L6-v2 cosine, LenΔ: words generated − reference.\n\n"
    )
    skipped = ", ".join(f"{n} {why}" for why, n in ex["skipped"].items()) or "none"
    md.append(f"Generated answers: {ex['n_generated']}; left out: {skipped}.\n\n")
    for task, block in ex["by_task"].items():
        md.append(f"### {task}\n\n")
        md.append(rows_markdown(("layout", *_EXPL), _layout_rows(block, _expl_cells)))
        md.append("\n")
    return "".join(md)


def _ordering_markdown(o: Mapping[str, Any]) -> str:
    """The chronological-ordering probe's section (App. G): one row of exact match, Kendall τ and invalid rate."""
    md = ["\n## Chronological-ordering probe (paper 002 App. G)\n\n"]
    md.append(
        f"Exact match over all items (invalid = wrong) and over valid answers; chance: a uniform guess, in %. {RATE_NOTE}\n\n"
    )
    md.append(
        rows_markdown(
            ("exact match", "exact (valid)", "Kendall τ", "invalid rate", "chance", "label order", "reverse"),
            [
                [
                    rate(o["exact_match"], o.get("exact_match_ci95"), o["n"]),
                    rate(o["exact_match_valid"], o.get("exact_match_valid_ci95"), o["n_valid"]),
                    fmt(o["kendall_tau"]),
                    rate(o["invalid_rate"], o.get("invalid_rate_ci95"), o["n"]),
                    pct(o["chance_exact_match"]),
                    str(o["label_order"]),
                    str(o["reverse_label_order"]),
                ]
            ],
        )
    )
    return "".join(md)


def _reproduce_markdown(run_dir: Path, info: Mapping[str, Any]) -> str:
    """The closing "Reproduce" block: the run's own command (when run.json has it), then the
    commands that rebuild this report and the bias analysis from ``run_dir``."""
    md = ["\n## Reproduce\n\n```bash\n"]
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n")
    md.append(f"judgetrain eval bias {shlex.quote(str(run_dir))}   # positional and first-option bias\n```\n")
    return "".join(md)


def _compare_cells(metrics: Mapping[str, Any]) -> list[tuple[str, Any, tuple[int | None, int] | None]]:
    """(label, fraction, (k, n)) of every column ``eval compare`` shows, in order; ``k`` None for
    a macro-F1 (not a rate), the count None for a metrics.json that records no n."""

    def acc(c: Mapping[str, Any]) -> tuple[int | None, int] | None:
        if "n_valid" not in c:
            return None
        k = c.get("correct")
        if k is None and c.get("accuracy") is not None:  # a metrics.json written before "correct" was recorded
            k = round(c["accuracy"] * c["n_valid"])
        return k, c["n_valid"]

    out: list[tuple[str, Any, tuple[int | None, int] | None]] = []
    pw = metrics.get("pairwise")
    if pw:
        for subset, block in [*pw["by_subset"].items(), ("all", pw)]:
            c = block["all"]
            out.append((f"pairwise Acc {subset}", c["accuracy"], acc(c)))
            out.append((f"pairwise F1 {subset}", c["f1"], None if "n_valid" not in c else (None, c["n_valid"])))
    pt = metrics.get("pointwise")
    if pt:
        out += [
            (f"pointwise Acc {subset}", c["accuracy"], acc(c)) for subset, c in [*pt["by_subset"].items(), ("all", pt["all"])]
        ]
    rw = metrics.get("reward")
    if rw:
        for kind, c in [*rw["by_perturbation"].items(), ("all", rw["all"])]:
            out.append((f"reward pair Acc {kind}", c["accuracy"], (c["correct"], c["n"])))
    o = metrics.get("ordering")
    if o:
        exact = o.get("exact")
        if exact is None and o.get("exact_match") is not None and "n" in o:
            exact = round(o["exact_match"] * o["n"])
        out.append(("ordering exact match", o["exact_match"], None if "n" not in o else (exact, o["n"])))
    return out


def cells(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """What ``eval compare`` shows of a judge run, in %: pairwise accuracy (over valid
    answers) and macro-F1 per subset and overall, pointwise accuracy per subset and
    overall, and the ordering probe's exact match (invalid = wrong). ``None``: undefined
    (no valid answer)."""
    return {
        label: None if x is None or (isinstance(x, float) and math.isnan(x)) else 100 * float(x)
        for label, x, _ in _compare_cells(metrics)
    }


def cell_counts(metrics: Mapping[str, Any]) -> dict[str, tuple[int | None, int]]:
    """``{label: (k, n)}`` behind :func:`cells`: correct of valid answers for an accuracy, exact
    matches of all items for the ordering probe, ``(None, n_valid)`` for a macro-F1 (not a rate,
    so no interval); a cell of a metrics.json that records no n is left out."""
    return {label: count for label, _, count in _compare_cells(metrics) if count is not None}
