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
from .report import (
    run_as_module,
    EvalInputError,
    METRICS,
    PREDICTIONS,
    REPORT,
    RUN_INFO,
    PredictionWriter,
    write_rows,
    load_human,
    read_predictions,
    repair_predictions,
    report,
    write_json,
)

__all__ = ["configure_parser", "evaluate", "main", "prediction_row"]

# Rows written per flush on CUDA with batch_size="auto" (the scorer sizes its own batches inside).
AUTO_CHUNK_CUDA = 64
# Keys of run.json a resumed run must share with the one that wrote the predictions.
_IDENTITY = ("model", "adapter", "data", "split")


def _rank_file(out: Path, rank: int) -> Path:
    return out / f"predictions.rank{rank}.jsonl"


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


def _merge(out: Path, order: Sequence[str]) -> None:
    """Fold every ``predictions.rank*.jsonl`` into ``predictions.jsonl``, one row per id,
    in dataset order (ids no longer in the dataset at the end), then delete them."""
    ranks = sorted(out.glob("predictions.rank*.jsonl"))
    if not ranks:
        return
    by_id: dict[str, dict[str, Any]] = {}
    for path in [out / PREDICTIONS, *ranks]:
        for row in read_predictions(path):
            by_id.setdefault(row["id"], row)
    pos = {i: k for k, i in enumerate(order)}
    rows = sorted(by_id.values(), key=lambda r: pos.get(r["id"], len(pos)))
    write_rows(out / PREDICTIONS, rows)
    for path in ranks:
        path.unlink()


def _process_state():
    """accelerate's process state. ``PartialState`` alone reads no ``ACCELERATE_USE_CPU``
    (only ``AcceleratorState`` does), so without ``cpu=True`` two CPU processes would
    each believe they run alone and write the same file."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu)
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != state.num_processes:
        raise RuntimeError(f"launched as {launched} processes (WORLD_SIZE) but accelerate set up {state.num_processes} "
                           f"({state.distributed_type}); on CPU launch with ACCELERATE_USE_CPU=1 accelerate launch "
                           "--multi_gpu --num_processes N -m judgetrain.eval.timecatch ...")
    return state


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
    state = _process_state()
    rank, world = state.process_index, state.num_processes
    out, data = Path(out), Path(data)
    unknown = sorted(set(tasks) - set(TIMECATCH_TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; TimeCatch tasks are {', '.join(TIMECATCH_TASKS)}")
    human_table = load_human(human) if human else None
    ds, idx, order = _select(data, split, tasks, limit)

    info = {"model": str(model), "adapter": str(adapter) if adapter else None, "data": str(data.resolve()),
            "split": split, "tasks": list(tasks), "limit": limit, "world_size": world, "command": command}
    if human_table:
        info["human"] = human_table
    info_path = out / RUN_INFO
    if info_path.is_file():
        old = json.loads(info_path.read_text())
        diff = [k for k in _IDENTITY if old.get(k) != info[k]]
        if diff:
            raise ValueError(f"{out} holds predictions of another run ({', '.join(f'{k}: {old.get(k)!r} vs {info[k]!r}' for k in diff)}). "
                             "Use a new --out, or delete that folder to start over.")
    state.wait_for_everyone()  # nobody writes run.json while another process still compares with it
    if state.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        write_json(info_path, info)

    # Every process reads what is done (read-only, tolerant of a partial last line)
    # before any process writes, so all compute the same todo list and shards.
    done: set[str] = set()
    for path in [out / PREDICTIONS, *sorted(out.glob("predictions.rank*.jsonl"))]:
        done.update(r["id"] for r in read_predictions(path))
    ids = ds.select_columns(["id"])
    todo = [i for i in idx if ids[i]["id"] not in done]
    mine = todo[rank::world]
    state.wait_for_everyone()

    n_scored = 0
    if mine:
        from judgetrain.scoring import CPU_BATCH_SIZE, Scorer

        device = str(state.device) if world > 1 or state.device.type != "cpu" else None
        scorer = Scorer.from_pretrained(model, adapter, dtype=dtype, device=device, batch_size=batch_size, progress=False)
        if isinstance(batch_size, int):
            chunk = batch_size
        else:
            chunk = AUTO_CHUNK_CUDA if scorer.device.type == "cuda" else CPU_BATCH_SIZE
        target = out / PREDICTIONS if world == 1 else _rank_file(out, rank)
        repair_predictions(target)  # drop a partial last line before appending after it
        from tqdm.auto import tqdm

        with PredictionWriter(target) as writer, tqdm(total=len(mine), desc=f"scoring TimeCatch{f' [rank {rank}]' if world > 1 else ''}",
                                                      unit="item", disable=not progress, position=rank) as bar:
            for start in range(0, len(mine), chunk):
                batch = ds.select(mine[start:start + chunk])
                items = list(batch)
                scores = scorer.score(items, progress=False)
                writer.write(prediction_row(r, s, str(model), info["adapter"]) for r, s in zip(items, scores, strict=True))
                n_scored += len(items)
                bar.update(len(items))

    state.wait_for_everyone()
    result: dict[str, Any] = {"out": out, "n_items": len(idx), "n_scored": n_scored, "world_size": world, "metrics": None}
    if state.is_main_process:
        _merge(out, order)
        if n_scored or world > 1 or not (out / METRICS).is_file() or human_table:
            result["metrics"] = report(out)
        else:  # finished before: nothing scored, nothing to recompute
            result["metrics"] = json.loads((out / METRICS).read_text())
    state.wait_for_everyone()
    return result


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


def _batch_size(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"--batch-size must be a positive integer or 'auto', got {text!r}")
    return value


def main(args: argparse.Namespace) -> int:
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    command = "judgetrain eval timecatch " + " ".join(
        shlex.quote(a) for a in _command_args(args))
    result = evaluate(args.model, args.data, args.out, adapter=args.adapter, split=args.split, tasks=tasks,
                      batch_size=_batch_size(args.batch_size), limit=args.limit, human=args.human, dtype=args.dtype,
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
