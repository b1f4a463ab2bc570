"""TimeCatch evaluation: the four anomaly tasks per source with constrained scoring (paper 000 §4.2).

Every record is scored over its own ``choices`` by the scoring engine
(:class:`judgetrain.scoring.Scorer`): yes/no for detection, the frame numbers
1…n for frame localization, the candidate frame pairs for temporal
localization; the prediction is the choice with the highest renormalised
probability. Accuracy per task × source, with a Random row computed per item
from its choices, goes to ``report.md`` (paper 000 Table 2 layout), beside
``metrics.json``, localization confusion matrices and temporal-detection
accuracy by LPIPS bin of the swapped pair (§6).

Results (``judgetrain.eval.report``): ``predictions.jsonl`` gets one line per
record, appended, flushed and fsync'd per batch. A rerun of the same command
skips the ids already there (a partial last line from a kill is dropped), so a
killed run ends with the same metrics as an uninterrupted one, and a finished
run scores nothing.

Data-parallel: under ``accelerate launch`` with several processes the items
still to score are strided across processes (``todo[rank::world]``), each
appends to ``predictions.rank{k}.jsonl``, and after a barrier the main process
merges them into ``predictions.jsonl`` in dataset order and writes the report::

    accelerate launch --num_processes 8 -m judgetrain.eval.timecatch --model M --data DIR --out results/RUN
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 -m judgetrain.eval.timecatch ...  # CPU, gloo
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgetrain import records

from .metrics import TIMECATCH_TASKS
from .report import EvalInputError, METRICS, PREDICTIONS, REPORT, load_human, report, run_as_module
from .sharded import parse_batch_size, process_state, run_sharded

__all__ = ["configure_parser", "evaluate", "main", "prediction_row"]

# Keys of run.json a resumed run must share with the one that wrote the predictions.
_IDENTITY = ("model", "adapter", "data", "split")


def prediction_row(record: dict[str, Any], scores: Any, model: str, adapter: str | None) -> dict[str, Any]:
    """One ``predictions.jsonl`` line: the record's identifying fields, the prediction,
    whether it is correct, and the renormalised probability of every choice."""
    meta = json.loads(record.get("meta") or "{}")
    return {
        "id": record["id"],
        "task": record["task"],
        "source": record["source"],
        "layout": record["layout"],
        "subset": meta.get("subset"),
        "sequence_id": meta.get("sequence_id"),
        "n_frames": record["n_frames"],
        "position": record["position"],
        "perturbation": record["perturbation"],
        "lpips_swapped": meta.get("lpips_swapped"),
        "label": record["label"],
        "prediction": scores.prediction,
        "correct": scores.prediction == record["label"],
        "choices": list(scores.choices),
        "probs": [float(p) for p in scores.probs],
        "model": model,
        "adapter": adapter,
    }


def _select(data: Path, split: str, tasks: Sequence[str], limit: int | None):
    ds = records.load(data)
    if split not in ds:
        raise EvalInputError(f"{data} has no split {split!r}; its splits are {sorted(ds)} (pass --split)")
    ds = ds[split]
    meta_cols = ds.select_columns(["id", "task"])
    order = [r["id"] for r in meta_cols]
    wanted = set(tasks)
    idx = [i for i, r in enumerate(meta_cols) if r["task"] in wanted]
    if limit is not None:
        idx = idx[:limit]
    return ds, idx, order


def evaluate(
    model: str,
    data: str | os.PathLike,
    out: str | os.PathLike,
    *,
    adapter: str | None = None,
    split: str = "test",
    tasks: Sequence[str] = TIMECATCH_TASKS,
    batch_size: int | str = "auto",
    limit: int | None = None,
    human: str | os.PathLike | None = None,
    dtype: str | None = None,
    progress: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Score the TimeCatch records of ``data[split]`` and write a run folder ``out``.

    Resumable: ids already in ``out``'s predictions are skipped. Under a multi-process
    launch every process calls this; items are strided over processes and the main
    process merges and reports. Returns ``{"out", "n_items", "n_scored", "world_size",
    "metrics"}`` (``n_scored``: items this process scored in this call; ``metrics``
    on the main process only).
    """
    state = process_state("judgetrain.eval.timecatch")
    out, data = Path(out), Path(data)
    unknown = sorted(set(tasks) - set(TIMECATCH_TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; TimeCatch tasks are {', '.join(TIMECATCH_TASKS)}")
    human_table = load_human(human) if human else None
    ds, idx, order = _select(data, split, tasks, limit)

    info = {"model": str(model), "adapter": str(adapter) if adapter else None, "data": str(data.resolve()),
            "split": split, "tasks": list(tasks), "limit": limit, "world_size": state.num_processes, "command": command}
    if human_table:
        info["human"] = human_table

    def predict(scorer: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        scores = scorer.score(items, progress=False)
        return [prediction_row(r, s, str(model), info["adapter"]) for r, s in zip(items, scores, strict=True)]

    return run_sharded(state, out, info, _IDENTITY, ds, idx, order, predict, report, model=model, adapter=adapter,
                       dtype=dtype, batch_size=batch_size, desc="scoring TimeCatch", progress=progress,
                       always_report=bool(human_table))


# --------------------------------------------------------------------------- CLI


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = "Evaluate a model (optionally + LoRA adapter) on TimeCatch's four tasks with constrained scoring."
    p.epilog = (
        "examples:\n"
        "  judgetrain eval timecatch --model Qwen/Qwen3-VL-2B-Instruct --data data/timecatch --split validation --out results/qw3-2b\n"
        "  judgetrain eval timecatch --model Qwen/Qwen3-VL-2B-Instruct --adapter runs/lora --data data/timecatch --out results/qw3-2b-ft\n"
        "  accelerate launch --num_processes 8 -m judgetrain.eval.timecatch --model M --data DIR --out results/RUN\n"
        "  judgetrain eval report results/qw3-2b        # recompute metrics, report and figures\n"
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--model", required=True, help="model folder or hub id (base or merged)")
    p.add_argument("--adapter", default=None, help="PEFT adapter folder to load onto --model")
    p.add_argument("--data", type=Path, required=True, help="a TimeCatch dataset folder (judgetrain build timecatch --out)")
    p.add_argument("--split", default="test")
    p.add_argument("--out", type=Path, required=True, help="run folder; rerunning the same command resumes it")
    p.add_argument("--batch-size", default="auto", help="items per forward pass, or 'auto' (default)")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="score only the first N selected records")
    p.add_argument("--tasks", default=",".join(TIMECATCH_TASKS), help="comma-separated subset of " + ",".join(TIMECATCH_TASKS))
    p.add_argument("--human", type=Path, default=None,
                   help="human reference accuracies for the report: JSON {task: {source: acc}} or CSV task,source,accuracy")
    p.add_argument("--dtype", default=None, help="float32, bfloat16, float16 or auto (default: float32 on CPU, checkpoint's on GPU)")
    p.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    command = "judgetrain eval timecatch " + " ".join(
        shlex.quote(a) for a in _command_args(args))
    result = evaluate(args.model, args.data, args.out, adapter=args.adapter, split=args.split, tasks=tasks,
                      batch_size=parse_batch_size(args.batch_size), limit=args.limit, human=args.human, dtype=args.dtype,
                      progress=not args.no_progress, command=command)
    if result["metrics"] is not None:
        _print_summary(result)
    return 0


def _command_args(args: argparse.Namespace) -> list[str]:
    parts = ["--model", str(args.model)]
    if args.adapter:
        parts += ["--adapter", str(args.adapter)]
    parts += ["--data", str(args.data), "--split", args.split, "--out", str(args.out)]
    if args.batch_size != "auto":
        parts += ["--batch-size", str(args.batch_size)]
    if args.limit is not None:
        parts += ["--limit", str(args.limit)]
    if args.tasks != ",".join(TIMECATCH_TASKS):
        parts += ["--tasks", args.tasks]
    if args.human:
        parts += ["--human", str(args.human)]
    if args.dtype:
        parts += ["--dtype", args.dtype]
    return parts


def _print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .metrics import ALL, TASK_TITLES

    m, out = result["metrics"], result["out"]
    t = Table(title=f"TimeCatch accuracy (%) — {m['n']} items")
    t.add_column("task")
    t.add_column("source")
    for c in ("accuracy", "random", "n"):
        t.add_column(c, justify="right")
    for task, cells in m["by_task_source"].items():
        for source, c in cells.items():
            if source == ALL and len(cells) == 2:
                continue  # one source: its row already is the total
            acc = "–" if c["accuracy"] is None else f"{100 * c['accuracy']:.1f}"
            t.add_row(TASK_TITLES.get(task, task), source, acc, f"{100 * c['random']:.1f}", str(c["n"]))
    Console().print(t)
    if result["n_scored"] == 0:
        print("Nothing left to score: every selected item was already in predictions.jsonl.", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)


if __name__ == "__main__":  # accelerate launch -m judgetrain.eval.timecatch ...
    run_as_module("judgetrain eval timecatch", configure_parser, main)
