"""What a rationale build writes and prints besides its datasets' split files: the SFT records of each variant
(``with_rationale`` / ``score_only``), the paper 002 Table S6 statistics and answer-distribution plot, the
replay-format export ``rationales.jsonl``, and the console summary.

Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.common import finish_summary
from .items import Item, TeacherRun, load_rows, row_at
from .prompts import ANSWER_LINE, rewrite_prompt, with_rationale_completion

VARIANTS = ("with_rationale", "score_only")
EXPORT_FILE = "rationales.jsonl"
PLOT_FILE = "teacher_answers.png"


def sft_rows(data: Path, builder: str, split: str, plan_json: str):
    """The SFT records of one split and variant (generator for ``Dataset.from_generator``)."""
    plan = json.loads(plan_json)
    ds = load_rows(data, split)
    for entry in plan["rows"]:
        row = row_at(ds, entry["index"])
        rec = dict(row)
        answer = entry["target_answer"]
        if plan["variant"] == "with_rationale":
            rec["prompt"] = rewrite_prompt(
                row["prompt"],
                builder=builder,
                task=row["task"],
                layout=row["layout"],
                closing=ANSWER_LINE[row["task"]],
                rid=row["id"],
            )
            text = with_rationale_completion(entry["rationale"], answer)
        else:
            text = answer
        rec["completion"] = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        rec["label"] = answer
        meta = json.loads(row["meta"])
        meta.update(
            teacher=entry["teacher"],
            teacher_answer=entry["answer"],
            teacher_rationale=entry["rationale"],
            gold_label=row["label"],
            target=plan["target"],
            sft_variant=plan["variant"],
        )
        rec["meta"] = json.dumps(meta, sort_keys=True)
        yield rec


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample std (ddof 1) of ``values``; None where undefined (no values / one value)."""
    import numpy as np

    if not values:
        return None, None
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def statistics(items: Sequence[Item], run: TeacherRun) -> dict:
    """Table S6 per task and layout (asked, success rate, rationale words and
    characters, mean ± sample std) and the teacher's answer distribution per task
    next to gold, with agreement and, for pointwise, the share of scores in {1, 2}."""
    from sklearn.metrics import accuracy_score

    lengths: dict[str, dict[str, dict]] = {}
    answers: dict[str, dict] = {}
    for task in sorted({i.task for i in items}):
        of_task = [i for i in items if i.task == task]
        lengths[task] = {}
        for layout in sorted({i.layout for i in of_task}) + ["all"]:
            asked = [i for i in of_task if layout in ("all", i.layout)]
            got = [run.answers[i.id].rationale for i in asked if i.id in run.answers]
            words, words_sd = mean_std([len(r.split()) for r in got])
            chars, chars_sd = mean_std([len(r) for r in got])
            lengths[task][layout] = {
                "asked": len(asked),
                "answered": len(got),
                "success_rate": len(got) / len(asked),
                "words_mean": words,
                "words_std": words_sd,
                "chars_mean": chars,
                "chars_std": chars_sd,
            }
        pairs = [(i.label, run.answers[i.id].answer) for i in of_task if i.id in run.answers]
        choices = list(of_task[0].choices)
        teacher = Counter(a for _, a in pairs)
        entry = {
            "answered": len(pairs),
            "choices": choices,
            "teacher": {c: teacher.get(c, 0) for c in choices},
            "gold": {c: Counter(g for g, _ in pairs).get(c, 0) for c in choices},
            "agreement_with_gold": float(accuracy_score([g for g, _ in pairs], [a for _, a in pairs])) if pairs else None,
        }
        if task == "pointwise":
            entry["share_1_2"] = (teacher.get("1", 0) + teacher.get("2", 0)) / len(pairs) if pairs else None
        answers[task] = entry
    return {"rationale_length": lengths, "teacher_answers": answers}


def answers_figure(stats: Mapping[str, Any]):
    """The figure of :func:`plot_answers`: a panel per task, teacher and gold bars side by side
    per choice, and one legend for all panels above them, where it covers no bar whatever the
    shares (inside a panel, a legend sits on a bar whenever every bar is tall)."""
    from judgetrain.plotting import pyplot

    plt = pyplot()
    tasks = list(stats["teacher_answers"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.5), squeeze=False, layout="constrained")
    for ax, task in zip(axes[0], tasks, strict=True):
        s = stats["teacher_answers"][task]
        n = max(s["answered"], 1)
        xs = range(len(s["choices"]))
        for side, who, colour in ((-0.2, "teacher", "#C44E52"), (0.2, "gold", "#4C72B0")):
            ax.bar([x + side for x in xs], [100 * s[who][c] / n for c in s["choices"]], width=0.4, label=who, color=colour)
        ax.set_xticks(list(xs), s["choices"])
        ax.set_ylabel("share of answered records (%)")
        extra = f", {100 * s['share_1_2']:.0f}% in {{1,2}}" if s.get("share_1_2") is not None else ""
        ax.set_title(f"{task}: teacher vs. gold (n={s['answered']}{extra})", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # "outside": constrained layout makes room for the legend above the panels' titles
    fig.legend(handles, labels, loc="outside upper center", ncol=len(labels), fontsize=8, frameon=False)
    return fig


def plot_answers(stats: Mapping[str, Any], path: Path) -> None:
    """Teacher vs. gold answer shares per task (paper 002 Figure S2, left, for pointwise), written
    atomically to ``path`` (PNG)."""
    from judgetrain.plotting import save_figure

    save_figure(answers_figure(stats), path)


def write_export(path: Path, items: Sequence[Item], run: TeacherRun) -> None:
    """Every answered item in the replay format (``id``, ``rationale``, ``answer``, ``teacher``, ``model``?), in item order."""
    from judgetrain.io import write_rows

    write_rows(
        path,
        (
            {
                "id": i.id,
                "rationale": run.answers[i.id].rationale,
                "answer": run.answers[i.id].answer,
                **teacher_fields(run.answers[i.id].teacher),
            }
            for i in items
            if i.id in run.answers
        ),
    )


def teacher_fields(label: str) -> dict:
    """``{"teacher", "model"}`` from a ``teacher:model`` label (no ``model`` key when the label has none)."""
    teacher, _, model = label.partition(":")
    return {"teacher": teacher, "model": model} if model else {"teacher": teacher}


def fmt(mean: float | None, std: float | None) -> str:
    """``mean ± std`` with one decimal, ``–`` without a mean."""
    if mean is None:
        return "–"
    return f"{mean:.1f} ± {std:.1f}" if std is not None else f"{mean:.1f}"


def print_summary(infos: Mapping[str, dict], out: Path) -> None:
    """Teacher calls and failures, Table S6 (success and rationale length per layout), answer distributions."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    info = infos[VARIANTS[0]]
    c = info["counts"]["teacher"]
    rate = f"{100 * c['success_rate']:.1f}%" if c["success_rate"] is not None else "–"
    console.print(
        f"Teacher {info['teacher']['label']}: {c['answered']} of {c['asked']} record(s) answered ({rate}); "
        f"{c['cache_hits']} from the cache, {c['calls']} asked now"
        + (f" ({c['http_requests']} HTTP requests)" if c["http_requests"] else "")
    )
    t = Table(title="Rationales per layout (Table S6)")
    for col in ("task", "layout", "asked", "success", "words (mean ± sd)", "chars (mean ± sd)"):
        t.add_column(col, justify="left" if col in ("task", "layout") else "right")
    for task, layouts in info["statistics"]["rationale_length"].items():
        for layout, s in layouts.items():
            t.add_row(
                task,
                layout,
                str(s["asked"]),
                f"{100 * s['success_rate']:.1f}%",
                fmt(s["words_mean"], s["words_std"]),
                fmt(s["chars_mean"], s["chars_std"]),
            )
    console.print(t)
    t = Table(title="Teacher answers vs. gold")
    for col in ("task", "answer", "teacher", "gold"):
        t.add_column(col, justify="left" if col == "task" else "right")
    notes = []
    for task, s in info["statistics"]["teacher_answers"].items():
        n = max(s["answered"], 1)
        for ch in s["choices"]:
            t.add_row(
                task,
                ch,
                f"{s['teacher'][ch]} ({100 * s['teacher'][ch] / n:.0f}%)",
                f"{s['gold'][ch]} ({100 * s['gold'][ch] / n:.0f}%)",
            )
        if s["agreement_with_gold"] is not None:
            notes.append(f"{task}: teacher agrees with gold on {100 * s['agreement_with_gold']:.1f}%")
        if s.get("share_1_2") is not None:
            notes.append(f"{task}: teacher scores in {{1,2}}: {100 * s['share_1_2']:.1f}% (paper 002: 91%, 'binary collapse')")
    console.print(t)
    for note in notes:
        console.print("  " + note)
    if info["failures"]:
        console.print(
            f"[yellow]{len(info['failures'])} record(s) failed and were left out (id and reason under 'failures' in "
            "build.json); rerun the same command to ask for them again[/yellow]"
        )
    plot = f"; answer plot: {out / PLOT_FILE}" if (out / PLOT_FILE).is_file() else ""
    print(f"Teacher answers: {out / EXPORT_FILE} (replay format){plot}", flush=True)
    for variant, vinfo in infos.items():
        finish_summary(console, vinfo, out / variant)
