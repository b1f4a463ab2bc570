"""The run loop every per-record evaluation shares (TimeCatch, judge): resumable, data-parallel.

:func:`run_sharded` takes the records an evaluation selected and a function that
turns a chunk of them into prediction rows, and does the rest the same way for
every evaluation:

- ``run.json`` identity (:mod:`judgetrain.eval.runs`): a folder written with another
  configuration or other data is refused (or, with ``--overwrite``, started afresh),
  so a rerun never mixes two runs' predictions; ``run.json`` is written only once
  the data and the model have loaded;
- resume: ids already in ``predictions.jsonl`` or any ``predictions.rank{k}.jsonl``
  are skipped (a partial last line from a kill is dropped before appending);
- data parallelism under ``accelerate launch``: every process reads what is done
  before any writes, so all compute the same todo list; items are strided
  (``todo[rank::world]``), each process appends to its own rank file, and after a
  barrier the main process merges them in dataset order and writes the report.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.config import parse_batch_size  # noqa: F401  (re-exported: evaluations import it from here)
from judgetrain.io import write_rows

from .runs import METRICS, PREDICTIONS, PredictionsError, PredictionWriter, check_resume, clear_run, finish_run, \
    read_predictions, repair_predictions, write_run_info

__all__ = ["AUTO_CHUNK_CUDA", "merge_rank_files", "parse_batch_size", "process_state", "rank_file", "run_as_module",
           "run_sharded"]

# Rows written per flush on CUDA with batch_size="auto" (the scorer sizes its own batches inside).
AUTO_CHUNK_CUDA = 64


def rank_file(out: Path, rank: int) -> Path:
    """Where process ``rank`` appends its predictions under a multi-process launch."""
    return out / f"predictions.rank{rank}.jsonl"


def merge_rank_files(out: Path, order: Sequence[str]) -> None:
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


def process_state(module: str):
    """accelerate's process state. ``PartialState`` alone reads no ``ACCELERATE_USE_CPU``
    (only ``AcceleratorState`` does), so without ``cpu=True`` two CPU processes would
    each believe they run alone and write the same file. ``module`` (``-m`` name) goes
    into the message that says how to launch on CPU."""
    import torch
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu)
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != state.num_processes:
        raise RuntimeError(f"launched as {launched} processes (WORLD_SIZE) but accelerate set up {state.num_processes} "
                           f"({state.distributed_type}); on CPU launch with ACCELERATE_USE_CPU=1 accelerate launch "
                           f"--multi_gpu --num_processes N -m {module} ...")
    return state


def _resume(state: Any, out: Path, info: dict[str, Any], overwrite: bool) -> dict[str, Any]:
    """The run.json a rerun resumes (``{}`` for a fresh folder); every rank decides the same."""
    try:
        old: dict[str, Any] | None = check_resume(out, info)
    except PredictionsError:
        if not overwrite:
            raise
        old = None
    state.wait_for_everyone()  # every rank has read the old run before the main one clears it
    if old is None:
        if state.is_main_process:
            clear_run(out)
        old = {}
    state.wait_for_everyone()
    return old


def run_sharded(
    state: Any,
    out: Path,
    info: dict[str, Any],
    ds: Any,
    idx: Sequence[int],
    order: Sequence[str],
    predict: Callable[[Any, list[dict[str, Any]]], Iterable[Mapping[str, Any]]],
    report: Callable[[Path], dict[str, Any]],
    *,
    model: str,
    adapter: str | None,
    dtype: str | None,
    batch_size: int | str,
    desc: str,
    progress: bool,
    overwrite: bool = False,
    always_report: bool = False,
) -> dict[str, Any]:
    """Score ``ds`` rows ``idx`` (ids ``order``, in dataset order) with ``predict(scorer,
    records) -> rows`` into run folder ``out`` and report it.

    ``info`` (:func:`~judgetrain.eval.runs.run_info`) goes to ``run.json`` once the
    scorer (``model`` + ``adapter``, loaded only when this process has something to
    score) is ready; a folder holding another run is refused unless ``overwrite``
    (:func:`~judgetrain.eval.runs.check_resume`). ``report(out)`` runs on the main
    process when anything was scored, under several processes, when the selected items
    changed, when no ``metrics.json`` exists yet, or with ``always_report``; otherwise
    the stored metrics are returned. Returns ``{"out", "n_items", "n_scored",
    "world_size", "metrics"}`` (``n_scored``: items this process scored in this call;
    ``metrics`` on the main process only).
    """
    rank, world = state.process_index, state.num_processes
    old = _resume(state, out, info, overwrite)

    # Every process reads what is done (read-only, tolerant of a partial last line)
    # before any process writes, so all compute the same todo list and shards.
    done: set[str] = set()
    for path in [out / PREDICTIONS, *sorted(out.glob("predictions.rank*.jsonl"))]:
        done.update(r["id"] for r in read_predictions(path))
    todo = [i for i in idx if order[i] not in done]
    mine = todo[rank::world]
    scorer = None
    if mine:
        from judgetrain.scoring import Scorer

        device = str(state.device) if world > 1 or state.device.type != "cpu" else None
        scorer = Scorer.from_pretrained(model, adapter, dtype=dtype, device=device, batch_size=batch_size, progress=False)
    state.wait_for_everyone()  # data and model loaded everywhere: the run is real
    if state.is_main_process:
        write_run_info(out, info, old)
    state.wait_for_everyone()

    n_scored = _score_shard(scorer, out, ds, mine, predict, batch_size, rank, world, desc, progress) if mine else 0
    state.wait_for_everyone()
    result: dict[str, Any] = {"out": out, "n_items": len(idx), "n_scored": n_scored, "world_size": world, "metrics": None}
    if state.is_main_process:
        merge_rank_files(out, order)
        changed = old.get("items") != info.get("items")
        if n_scored or world > 1 or changed or not (out / METRICS).is_file() or always_report:
            result["metrics"] = report(out)
        else:  # finished before: nothing scored, nothing to recompute
            result["metrics"] = json.loads((out / METRICS).read_text())
        finish_run(out)
    state.wait_for_everyone()
    return result


def _score_shard(scorer: Any, out: Path, ds: Any, mine: Sequence[int], predict: Callable, batch_size: int | str,
                 rank: int, world: int, desc: str, progress: bool) -> int:
    """Score this process's items into its predictions file, a flushed chunk at a time."""
    from tqdm.auto import tqdm

    from judgetrain.scoring import CPU_BATCH_SIZE

    if isinstance(batch_size, int):
        chunk = batch_size
    else:
        chunk = AUTO_CHUNK_CUDA if scorer.device.type == "cuda" else CPU_BATCH_SIZE
    target = out / PREDICTIONS if world == 1 else rank_file(out, rank)
    repair_predictions(target)  # drop a partial last line before appending after it
    n_scored = 0
    with PredictionWriter(target) as writer, tqdm(total=len(mine), desc=desc + (f" [rank {rank}]" if world > 1 else ""),
                                                  unit="item", disable=not progress, position=rank) as bar:
        for start in range(0, len(mine), chunk):
            items = list(ds.select(mine[start:start + chunk]))
            writer.write(predict(scorer, items))
            n_scored += len(items)
            bar.update(len(items))
    return n_scored


def run_as_module(module: str) -> None:
    """``python -m`` / ``accelerate launch -m`` entry of a data-parallel evaluation: parse
    its typed config (``--config`` and flags, as the CLI does), run, then tear the
    process group down on every rank together (a rank that exits while another still
    holds the gloo group can make that one abort)."""
    import importlib
    import sys

    from judgetrain import config
    from judgetrain.errors import UserError

    mod = importlib.import_module(module)
    try:
        code = mod.main(*config.parse(mod.make_parser(), sys.argv[1:]))
    except UserError as e:  # as the CLI does: the message says what to do
        print(f"error: {e}", file=sys.stderr)
        code = 2
    from accelerate import PartialState

    PartialState().destroy_process_group()
    sys.exit(code)
