"""The run loop every evaluation shares (TimeCatch, judge, PhaseFusion): resumable, data-parallel.

:func:`run_sharded` takes the items an evaluation selected (dataset records, or
PhaseFusion's manifest questions) and a function that turns a chunk of them into
prediction rows (one per item, or several: PhaseFusion writes a question's passes
and closes it with a ``question`` row), and does the rest the same way for every
evaluation:

- ``run.json`` identity (:mod:`judgetrain.eval.core.runs`): a folder written with another
  configuration or other data is refused (or, with ``--overwrite``, started afresh),
  so a rerun never mixes two runs' predictions; ``run.json`` is written only once
  the data and the model have loaded;
- resume: ids already in ``predictions.jsonl`` or any ``predictions.rank{k}.jsonl``
  are skipped (a partial last line from a kill is dropped before appending); an
  evaluation with several rows per item says which ids are finished, and the rows
  of unfinished ones (a kill mid-item) are removed before anything is redone;
- one writer: an ``--out`` that is, holds or lies inside the model, the adapter, the data or
  the media a manifest lists is refused, and the main process holds the folder's writer lock
  (:mod:`judgetrain.writer`) for the whole run, so a second run into it stops at once naming
  this one (or, with ``--wait``, starts when this one has finished); rows already in the folder
  that repeat a row's key are refused (:func:`~judgetrain.eval.core.runs.check_unique`);
- ``--overwrite`` replaces the folder's old run only once the new one is real;
- data parallelism under ``accelerate launch``: every process reads what is done
  before any writes, so all compute the same todo list; items are strided
  (``todo[rank::world]``), each process appends to its own rank file, and after a
  barrier the main process merges them in dataset order and writes the report; on
  several machines (``--num_machines``) the same, ranks global, ``--out`` a folder every
  machine shares (a process that does not see the main one's ``run.json`` stops, naming it);
- ``--report_to wandb``: the main process then logs the finished run to wandb
  (:mod:`judgetrain.eval.core.wandb_report`).

Docs: "concepts/identity.md".
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain import writer
from judgetrain.errors import UserError
from judgetrain.io import RowAppender, write_rows
from judgetrain.overlap import overlap

from .runs import (
    METRICS,
    PREDICTIONS,
    RUN_INFO,
    EvalInputError,
    PredictionsError,
    check_resume,
    check_unique,
    clear_run,
    finish_run,
    read_predictions,
    repair_predictions,
    write_run_info,
)

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

__all__ = ["AUTO_CHUNK_CUDA", "merge_rank_files", "process_state", "rank_file", "run_as_module", "run_sharded"]

# Rows written per flush on CUDA with batch_size="auto" (the scorer sizes its own batches inside,
# up to MAX_AUTO_BATCH_SIZE = 64, and sorts the chunk's items by length: several batches to sort).
AUTO_CHUNK_CUDA = 256
# Batches per flushed chunk with a fixed batch size above 1: the scorer sorts a chunk's items by
# length (longest first), so a chunk of several batches is what lets it group similar lengths; a
# kill loses at most one chunk. Batch size 1 has no padding to save: one item a flush.
SORT_WINDOW_BATCHES = 4


def rank_file(out: Path, rank: int) -> Path:
    """Where process ``rank`` appends its predictions under a multi-process launch."""
    return out / f"predictions.rank{rank}.jsonl"


def merge_rank_files(out: Path, order: Sequence[str]) -> None:
    """Fold every ``predictions.rank*.jsonl`` into ``predictions.jsonl`` in dataset order
    (ids no longer in the dataset at the end), then delete them. Each id's rows come from
    the first file holding it (``predictions.jsonl`` first), all of them, in file order."""
    ranks = sorted(out.glob("predictions.rank*.jsonl"))
    if not ranks:
        return
    by_id: dict[str, list[dict[str, Any]]] = {}
    for path in [out / PREDICTIONS, *ranks]:
        here: dict[str, list[dict[str, Any]]] = {}
        for row in read_predictions(path):
            here.setdefault(row["id"], []).append(row)
        for i, rows in here.items():
            by_id.setdefault(i, rows)
    pos = {i: k for k, i in enumerate(order)}
    ids = sorted(by_id, key=lambda i: pos.get(i, len(pos)))
    write_rows(out / PREDICTIONS, [r for i in ids for r in by_id[i]])
    for path in ranks:
        path.unlink()


def _prediction_files(out: Path) -> list[Path]:
    return [out / PREDICTIONS, *sorted(out.glob("predictions.rank*.jsonl"))]


def _drop_unfinished(out: Path, finished: Callable[[list[dict[str, Any]]], set[str]]) -> None:
    """Rewrite each predictions file without the rows of ids it has not finished (atomically)."""
    for path in _prediction_files(out):
        rows = read_predictions(path)
        done = finished(rows)
        kept = [r for r in rows if r["id"] in done]
        if len(kept) != len(rows):
            write_rows(path, kept)


def process_state(module: str, timeout_seconds: int | None = None):
    """accelerate's process state. ``PartialState`` alone reads no ``ACCELERATE_USE_CPU``
    (only ``AcceleratorState`` does), so without ``cpu=True`` two CPU processes would
    each believe they run alone and write the same file. ``module`` (``-m`` name) goes
    into the message that says how to launch on CPU. ``timeout_seconds`` (the evaluation's
    ``--collective_timeout``) bounds every collective of the process group."""
    from datetime import timedelta

    import torch
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    cpu = parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available()
    state = PartialState(cpu=cpu, **({"timeout": timedelta(seconds=timeout_seconds)} if timeout_seconds else {}))
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched != state.num_processes:
        raise RuntimeError(
            f"launched as {launched} processes (WORLD_SIZE) but accelerate set up {state.num_processes} "
            f"({state.distributed_type}); on CPU launch with ACCELERATE_USE_CPU=1 accelerate launch "
            f"--multi_gpu --num_processes N -m {module} ..."
        )
    return state


def _resume(out: Path, info: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """The run.json a rerun resumes (``{}`` for a fresh folder), or ``None`` when
    ``overwrite`` replaces the folder's other run; every rank decides the same. A run to
    resume whose rows repeat a key (two runs that once wrote the folder at once) is refused."""
    try:
        old = check_resume(out, info)
    except PredictionsError:
        if not overwrite:
            raise
        return None
    for path in _prediction_files(out):
        check_unique(path)
    return old


def _todo(
    state: Any,
    out: Path,
    old: dict[str, Any] | None,
    idx: Sequence[int],
    order: Sequence[str],
    finished: Callable[[list[dict[str, Any]]], set[str]] | None,
) -> list[int]:
    """The selected items not done yet (all of them when ``old`` is ``None``: a run to replace)."""
    if old is not None and finished is not None and state.is_main_process:
        _drop_unfinished(out, finished)
    # Every process reads what is done (read-only, tolerant of a partial last line)
    # before any process writes, so all compute the same todo list and shards.
    state.wait_for_everyone()
    done: set[str] = set()
    for path in _prediction_files(out) if old is not None else []:
        rows = read_predictions(path)
        done.update(finished(rows) if finished is not None else (r["id"] for r in rows))
    return [i for i in idx if order[i] not in done]


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
    batch_size: BatchSize,
    desc: str,
    progress: bool,
    overwrite: bool = False,
    always_report: bool = False,
    load: Callable[[str | None], Any] | None = None,
    describe: Callable[[Any], Mapping[str, Any]] | None = None,
    carry: Sequence[str] = (),
    finished: Callable[[list[dict[str, Any]]], set[str]] | None = None,
    chunk: int | None = None,
    unit: str = "item",
) -> dict[str, Any]:
    """Score ``ds`` (a ``datasets.Dataset`` or a list) items ``idx`` (ids ``order``, in dataset
    order) with ``predict(scorer, items) -> rows`` into run folder ``out`` and report it.

    Throughout, the main process holds ``out``'s writer lock (an ``--out`` overlapping an input
    refused first; ``info["wait"]``: wait for another writer). ``info``
    (:func:`~judgetrain.eval.core.runs.run_info`) goes to ``run.json`` once the scorer
    is ready, loaded only when this process has something to score: ``load(device)``
    (``None``: default placement), by default ``Scorer.from_pretrained(model, adapter, ...)``.
    ``describe(scorer)``: ``run.json`` keys from the main process's scorer; ``carry``: keys
    of the old ``run.json`` kept when this call does not set them. Another run's folder is
    refused unless ``overwrite`` (:func:`~judgetrain.eval.core.runs.check_resume`), which
    replaces it once the model has loaded. ``finished(rows)``: the ids complete in one
    file's rows (default: every id present); other ids' rows are removed and redone.
    ``chunk``: items per flushed write (default: :data:`SORT_WINDOW_BATCHES` batches, so the
    scorer can batch similar lengths together; one item at batch size 1). ``report(out)`` runs
    on the main process when anything was scored, under several processes, when the
    selected items changed, when no ``metrics.json`` exists yet, or with
    ``always_report``; otherwise the stored metrics are returned. With ``info["report_to"]``
    naming wandb the main process then logs the finished run there. Returns ``{"out",
    "n_items", "n_scored", "world_size", "metrics"}`` (``n_scored``: this process's, in
    this call; ``metrics`` on the main process only).
    """
    rank, world = state.process_index, state.num_processes
    with _one_writer(state, out, info):
        old = _resume(out, info, overwrite)
        mine = _todo(state, out, old, idx, order, finished)[rank::world]
        scorer = _load_scorer(state, load, model, adapter, dtype, batch_size) if mine else None
        state.wait_for_everyone()  # data and model loaded everywhere: the run is real
        if state.is_main_process:
            _start_run(out, info, old, carry, dict(describe(scorer)) if describe is not None and scorer is not None else {})
        state.wait_for_everyone()
        _check_shared(out, state)
        n_scored = (
            _score_shard(
                scorer, out, ds, mine, predict, chunk or batch_size, chunk is not None, rank, world, desc, progress, unit
            )
            if mine
            else 0
        )
        state.wait_for_everyone()
        result: dict[str, Any] = {"out": out, "n_items": len(idx), "n_scored": n_scored, "world_size": world, "metrics": None}
        if state.is_main_process:
            merge_rank_files(out, order)
            changed = (old or {}).get("items") != info.get("items")
            if n_scored or world > 1 or changed or not (out / METRICS).is_file() or always_report:
                result["metrics"] = report(out)
            else:  # finished before: nothing scored, nothing to recompute
                result["metrics"] = json.loads((out / METRICS).read_text())
            finish_run(out)
            _report_to(out, info)
        state.wait_for_everyone()
    return result


def _start_run(out: Path, info: dict[str, Any], old: dict[str, Any] | None, carry: Sequence[str], extra: dict[str, Any]) -> None:
    """The main process, once data and model have loaded everywhere: the other run an ``--overwrite``
    replaces goes only now (``old`` None), and ``run.json`` is written (``extra``: what the scorer
    says of itself; ``carry``: keys of the old ``run.json`` kept when ``extra`` does not set them)."""
    if old is None:
        clear_run(out)
    kept = {k: (old or {})[k] for k in carry if k in (old or {}) and k not in extra}
    write_run_info(out, {**info, **kept, **extra}, old)


def _inputs(info: Mapping[str, Any]) -> dict[str, Any]:
    """What an evaluation reads, as ``run.json`` names it: the model, the adapter, the dataset or the
    manifest (whose videos :func:`judgetrain.overlap.overlap` adds)."""
    return {f"--{name}": info.get(name) for name in ("model", "adapter", "data", "manifest")}


@contextmanager
def _one_writer(state: Any, out: Path, info: Mapping[str, Any]) -> Iterator[None]:
    """The run folder for this run alone, for the block: an ``--out`` that is, holds or lies inside
    an input is refused, then the main process takes ``out``'s writer lock
    (:func:`judgetrain.writer.hold`; ``info["wait"]``, ``--wait``: wait for another writer instead of
    stopping) and holds it to the end. Every process gets the main one's verdict, so all stop together."""
    error: Exception | None = None
    if state.is_main_process:
        clash = overlap(out, _inputs(info), whole=False)
        try:
            if clash:
                raise EvalInputError(clash)
            writer.hold(out, wait=bool(info.get("wait")))
        except UserError as e:
            error = e
    message = str(error) if error is not None else None
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        message = broadcast_object_list([message])[0]
    if error is not None:
        raise error
    if message is not None:
        raise PredictionsError(message)
    try:
        yield
    finally:
        if state.is_main_process:
            writer.release(out)


def _load_scorer(
    state: Any, load: Callable[[str | None], Any] | None, model: Any, adapter: Any, dtype: Any, batch_size: BatchSize
) -> Any:
    """This process's scorer: ``load(device)``, else ``Scorer.from_pretrained`` (on the
    process's device under several processes or a GPU; the scorer's default on one CPU)."""
    device = str(state.device) if state.num_processes > 1 or state.device.type != "cpu" else None
    if load is not None:
        return load(device)
    from judgetrain.scoring import Scorer

    return Scorer.from_pretrained(model, adapter, dtype=dtype, device=device, batch_size=batch_size, progress=False)


def _check_shared(out: Path, state: Any) -> None:
    """Under several processes every one must see the folder the main process writes (each
    appends its own rank file there, and the main one merges them): on several machines a
    local ``--out`` would leave each machine's predictions where the report never reads them."""
    if state.num_processes > 1 and not state.is_main_process and not (out / RUN_INFO).is_file():
        raise PredictionsError(
            f"--out {out}: process {state.process_index} does not see the {RUN_INFO} that process 0 "
            "wrote there; on several machines --out must be a folder every machine shares (a network "
            "filesystem: NFS, Lustre, …), the same path on each (docs: how-to/cluster.md)"
        )


def _report_to(out: Path, info: Mapping[str, Any]) -> None:
    """Log the finished run where its config's ``report_to`` says (wandb:
    :func:`~judgetrain.eval.core.wandb_report.log_run`). A failure is a warning, not an
    error: the run folder is complete, and the other processes wait at a barrier."""
    from .wandb_report import log_run, reports_to_wandb

    if not reports_to_wandb(info.get("report_to")):
        return
    try:
        log_run(out)
    except Exception as e:  # noqa: BLE001 - wandb's own errors are many; the results are already written
        print(f"warning: {out} is complete, but logging it to wandb failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


def _take(ds: Any, indices: Sequence[int]) -> list[Any]:
    return list(ds.select(indices)) if hasattr(ds, "select") else [ds[i] for i in indices]


def _score_shard(
    scorer: Any,
    out: Path,
    ds: Any,
    mine: Sequence[int],
    predict: Callable,
    batch_size: BatchSize,
    explicit: bool,
    rank: int,
    world: int,
    desc: str,
    progress: bool,
    unit: str,
) -> int:
    """Score this process's items into its predictions file, a flushed chunk at a time
    (``batch_size``: the caller's chunk itself when ``explicit``, else the scorer's batch size)."""
    from tqdm.auto import tqdm

    from judgetrain.scoring import CPU_BATCH_SIZE

    if isinstance(batch_size, int):
        chunk = batch_size if batch_size == 1 or explicit else batch_size * SORT_WINDOW_BATCHES
    else:
        chunk = AUTO_CHUNK_CUDA if scorer.device.type == "cuda" else CPU_BATCH_SIZE * SORT_WINDOW_BATCHES
    target = out / PREDICTIONS if world == 1 else rank_file(out, rank)
    repair_predictions(target)  # drop a partial last line before appending after it
    n_scored = 0
    with (
        RowAppender(target) as writer,
        tqdm(
            total=len(mine), desc=desc + (f" [rank {rank}]" if world > 1 else ""), unit=unit, disable=not progress, position=rank
        ) as bar,
    ):
        for start in range(0, len(mine), chunk):
            items = _take(ds, mine[start : start + chunk])
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
    from judgetrain.noise import quiet_libraries

    quiet_libraries()
    mod = importlib.import_module(module)
    try:
        code = mod.main(*config.parse(mod.make_parser(), sys.argv[1:]))
    except UserError as e:  # as the CLI does: the message says what to do
        print(f"error: {e}", file=sys.stderr)
        code = 2
    from accelerate import PartialState

    PartialState().destroy_process_group()
    sys.exit(code)
