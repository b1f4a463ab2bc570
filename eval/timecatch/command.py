"""TimeCatch evaluation: the four anomaly tasks per source with constrained scoring (paper 000 §4.2).

Every record is scored over its own ``choices`` by the scoring engine
(:class:`judgetrain.scoring.Scorer`): yes/no for detection, the frame numbers
1…n for frame localization, the candidate frame pairs for temporal
localization; the prediction is the choice with the highest renormalised
probability. Accuracy per task × source goes to ``report.md`` as paper 000
reports it: Table 2 on the main set (4–8 frames), the long set (9–16) in a table
of its own, each with a Random row computed per item from its choices
(:mod:`judgetrain.eval.timecatch.tables`); beside them ``metrics.json``,
localization confusion matrices and temporal detection per class by LPIPS bin
of the swapped pair (§6). Without ``--split`` the build's held-out split is read
(test, else validation) and ``run.json`` says so (``split_chosen``).

Records of a chunk that show the same frames in the same order are scored with their visual
prefix encoded once (``judgetrain.eval.timecatch.grouped``; ``--no-shared-prefix``: each on its own).

Results (``judgetrain.eval.timecatch.report``): ``predictions.jsonl`` gets one line per
record, appended, flushed and fsync'd per batch, with what ``judgetrain eval view`` shows of
the item: ``prompt_text`` (the exact text scored) and ``frames`` (the sha256 of each image's
stored bytes, in prompt order). A rerun of the same command
skips the ids already there (a partial last line from a kill is dropped), so a
killed run ends with the same metrics as an uninterrupted one, and a finished
run scores nothing.

Data-parallel: under ``accelerate launch`` with several processes the items
still to score are strided across processes (``todo[rank::world]``), each
appends to ``predictions.rank{k}.jsonl``, and after a barrier the main process
merges them into ``predictions.jsonl`` in dataset order and writes the report::

    accelerate launch --num_processes 8 -m judgetrain.eval.timecatch --model M --data DIR --out results/RUN
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 -m judgetrain.eval.timecatch ...  # CPU, gloo

Docs: "reference/commands/eval-timecatch.md", "concepts/timecatch.md".
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.config import ConfigError, arg, comma_list
from judgetrain.config import make_parser as make_config_parser

from ..core.args import EvalArgs, parse_batch_size
from ..core.prefill import run_prefill, scorer_loader
from ..core.runs import METRICS, PREDICTIONS, REPORT, EvalInputError, dataset_identity, run_info
from ..core.sample import SAMPLE_STRATA, sample_identity, sampled
from ..core.sharded import process_state, run_sharded
from .grouped import score_records
from .human import load_human
from .metrics import TIMECATCH_TASKS
from .report import report

__all__ = ["HELD_OUT_SPLITS", "TimeCatchEvalConfig", "evaluate", "held_out_split", "main", "make_parser", "prediction_row"]
EVALUATION = "timecatch"


@dataclass(kw_only=True)
class TimeCatchEvalConfig(EvalArgs):
    """``judgetrain eval timecatch``: every field is a flag (``--field-name``) and a ``--config`` key."""

    data: Path = arg(help="a TimeCatch dataset folder (judgetrain build timecatch --out)")
    split: str | None = arg(
        None,
        "split to evaluate (default: the held-out split the build wrote: test, or validation "
        "when the build wrote no test split, as `build timecatch` does by default)",
        identity=True,
    )
    tasks: list[str] = arg(list(TIMECATCH_TASKS), "tasks to evaluate (space- or comma-separated)")
    human: Path | None = arg(
        None, "human reference accuracies for the report: JSON {task: {source: acc}} or CSV task,source,accuracy"
    )
    shared_prefix: bool = arg(
        True,
        "score the records of a chunk that show the same frames in the same order with their visual prefix "
        "encoded once (the same scores up to float rounding); --no-shared-prefix: every record on its own",
    )

    def __post_init__(self) -> None:
        common = self.common_problems()  # listed after this command's own
        problems: list[str] = []
        self.data = Path(self.data)
        self.tasks = comma_list(self.tasks)
        unknown = sorted(set(self.tasks) - set(TIMECATCH_TASKS))
        if unknown:
            problems.append(f"tasks: unknown {unknown}; TimeCatch tasks are {', '.join(TIMECATCH_TASKS)}")
        elif not self.tasks:
            problems.append(f"tasks: give at least one of {', '.join(TIMECATCH_TASKS)}")
        problems += common
        if problems:
            raise ConfigError(problems, "eval timecatch configuration")


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


HELD_OUT_SPLITS = ("test", "validation")  # in order of preference


def held_out_split(splits: Sequence[str], data: Path | str = "the data") -> str:
    """The split a default ``eval timecatch`` reads: ``test`` if the build wrote one, else
    ``validation`` (``build timecatch`` writes train/validation unless ``--splits`` says
    otherwise). An error naming the splits when there is neither."""
    for name in HELD_OUT_SPLITS:
        if name in splits:
            return name
    raise EvalInputError(
        f"{data} has no held-out split (test or validation), only {sorted(splits)}: pass --split "
        f"{sorted(splits)[0] if len(splits) else 'NAME'} to evaluate on it anyway, or rebuild with "
        "--splits train=0.8,validation=0.2"
    )


def _select(ds: Any, data: Path, split: str, cfg: TimeCatchEvalConfig):
    if split not in ds:
        raise EvalInputError(f"{data} has no split {split!r}; its splits are {sorted(ds)} (pass --split)")
    ds = ds[split]
    meta_rows = list(ds.select_columns(["id", *SAMPLE_STRATA]))
    order = [r["id"] for r in meta_rows]
    wanted = set(cfg.tasks)
    idx = [i for i, r in enumerate(meta_rows) if r["task"] in wanted]
    if not idx:  # refused here, before the run folder is touched
        raise EvalInputError(_nothing_selected(data, split, cfg.tasks, Counter(r["task"] for r in meta_rows)))
    if cfg.sample is not None:
        strata = [tuple(meta_rows[i][k] for k in SAMPLE_STRATA) for i in idx]
        idx = sampled(idx, strata, cfg.sample, cfg.sample_seed)
    elif cfg.limit is not None:
        idx = idx[: cfg.limit]
    return ds, idx, order


def _nothing_selected(data: Path, split: str, tasks: list[str], present: Counter) -> str:
    """Why ``--tasks`` selects no record of ``data[split]``, and what to do instead."""
    held = ", ".join(f"{task} ({n})" for task, n in sorted(present.items())) or "no records"
    timecatch = sorted(set(present) & set(TIMECATCH_TASKS))
    if timecatch:
        fix = f"pass --tasks {','.join(timecatch)}, or rebuild with `judgetrain build timecatch --tasks …`"
    else:
        builder = _builder(data)
        fix = (
            f"it is {'a ' + builder + ' build' if builder else 'not a TimeCatch build'}, which holds no TimeCatch task; "
            "evaluate it with `judgetrain eval judge`, or give --data a `judgetrain build timecatch` folder"
        )
    return f"{data} [{split}] has no record of task(s) {tasks}; it holds {held}: {fix}"


def _builder(data: Path) -> str | None:
    from judgetrain import records

    try:
        return str(records.read_build_info(data).get("builder") or "") or None
    except (OSError, ValueError):
        return None


def evaluate(model: str, data: str | os.PathLike, out: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Score the TimeCatch records of ``data[split]`` into run folder ``out``; ``fields`` are
    the other :class:`TimeCatchEvalConfig` fields. See :func:`run`."""
    return run(TimeCatchEvalConfig(model=str(model), data=Path(data), out=Path(out), **fields))


def run(cfg: TimeCatchEvalConfig) -> dict[str, Any]:
    """Score the TimeCatch records ``cfg`` selects and write its run folder.

    Resumable: ids already in the folder's predictions are skipped; a folder holding a
    run of another configuration or other data is refused (``cfg.overwrite`` replaces
    it). Prompts end with the run's prefill (:func:`~judgetrain.eval.core.prefill.run_prefill`:
    ``cfg.prefill``, else the model's own), recorded in ``run.json``. Under a
    multi-process launch every process calls this; items are strided over processes and
    the main process merges and reports. Returns ``{"out", "n_items", "n_scored",
    "world_size", "metrics"}`` (``n_scored``: items this process scored in
    this call; ``metrics`` on the main process only).
    """
    state = process_state("judgetrain.eval.timecatch", cfg.collective_timeout)
    human_table = load_human(cfg.human) if cfg.human else None
    from judgetrain import records  # datasets: not loaded for --help

    splits = records.load(cfg.data, builders=("timecatch",))
    chosen = _choose_split(cfg, list(splits), state.is_main_process)
    split = cfg.split
    assert split is not None  # _choose_split sets it when --split was left out
    ds, idx, order = _select(splits, cfg.data, split, cfg)
    prefill = run_prefill(cfg.model, cfg.adapter, cfg.prefill)  # a reasoning checkpoint's, unless --prefill
    info = run_info(
        EVALUATION,
        cfg,
        data=dataset_identity(cfg.data, [split]),
        items=[order[i] for i in idx],
        world_size=state.num_processes,
        prefill=prefill,
        sampling=sample_identity(cfg),
    )
    info["data"] = str(cfg.data.resolve())
    info["split_chosen"] = chosen
    if human_table:
        info["human"] = human_table
    adapter = str(cfg.adapter) if cfg.adapter else None

    position = {rid: i for i, rid in enumerate(order)}

    def predict(scorer: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        frames = records.frame_digests(ds, [position[r["id"]] for r in items])
        scores = score_records(scorer, items, frames, shared_prefix=cfg.shared_prefix)
        # what `eval view` shows of the item: the exact text scored and the frames in the order the model saw them
        return [
            {**prediction_row(r, s, cfg.model, adapter), "prompt_text": scorer.render(r["prompt"]), "frames": f}
            for r, s, f in zip(items, scores, frames, strict=True)
        ]

    return run_sharded(
        state,
        cfg.out,
        info,
        ds,
        idx,
        order,
        predict,
        report,
        model=cfg.model,
        adapter=adapter,
        dtype=cfg.dtype,
        batch_size=parse_batch_size(str(cfg.batch_size)),
        desc="scoring TimeCatch",
        progress=cfg.progress,
        overwrite=cfg.overwrite,
        always_report=bool(human_table),
        load=scorer_loader(cfg, prefill),
    )


def _choose_split(cfg: TimeCatchEvalConfig, splits: list[str], announce: bool) -> str:
    """Set ``cfg.split`` when it was left out (so the run's identity holds the split read)
    and say how it was chosen; the words go to run.json's ``split_chosen``."""
    if cfg.split is not None:
        return "--split"
    cfg.split = held_out_split(splits, cfg.data)
    why = "" if cfg.split == "test" else ", as the build wrote no test split"
    chosen = f"default: the build's held-out split{why}; its splits: {', '.join(sorted(splits))}"
    if announce:
        print(f"eval timecatch: no --split given; evaluating split {cfg.split!r}, {chosen}", flush=True)
    return chosen


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        TimeCatchEvalConfig,
        "judgetrain eval timecatch",
        "Evaluate a model (optionally + LoRA adapter) on TimeCatch's four tasks with constrained scoring.",
        "examples:\n"
        "  judgetrain quickstart        # first: tiny models, a TimeCatch set and a LoRA run under quickstart/\n"
        "  judgetrain eval timecatch --model quickstart/models/qwen3-vl --data quickstart/timecatch --split validation \\\n"
        "      --sample 20 --out results/qw3\n"
        "  judgetrain eval timecatch --model quickstart/models/qwen3-vl --adapter quickstart/runs/tiny-qwen3vl-timecatch \\\n"
        "      --data quickstart/timecatch --sample 20 --out results/qw3-lora   # split: test, else validation\n"
        "  judgetrain eval timecatch --config eval.yaml --sample 20   # YAML keys are the fields below (docs: reference/configuration.md)\n"
        "  accelerate launch --num_processes 2 -m judgetrain.eval.timecatch --model quickstart/models/qwen3-vl \\\n"
        "      --data quickstart/timecatch --sample 20 --out results/qw3-2proc   # data-parallel, one shard per process\n"
        "  judgetrain eval report results/qw3        # recompute metrics, report and figures\n"
        "\na real model: --model Qwen/Qwen3-VL-2B-Instruct (a hub id or a local folder).\n",
    )


def main(cfg: TimeCatchEvalConfig) -> int:
    result = run(cfg)
    if result["metrics"] is not None:
        _print_summary(result)
    return 0


def _print_summary(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .metrics import ALL, TASK_TITLES

    m, out = result["metrics"], result["out"]
    titles = {"main": "Table 2, main set (4–8 frames)", "long": "long set (9–16 frames)"}
    for subset, table in m["table2"].items():
        n = sum(cells[ALL]["n"] for cells in table.values())
        t = Table(title=f"TimeCatch accuracy (%), {titles.get(subset, subset)}: {n} items")
        t.add_column("task")
        t.add_column("source")
        for c in ("accuracy", "random", "n"):
            t.add_column(c, justify="right")
        for task, cells in table.items():
            for source, c in cells.items():
                if source == ALL and len(cells) == 2:
                    continue  # one source: its row already is the total
                acc = "–" if c["accuracy"] is None else f"{100 * c['accuracy']:.1f}"
                t.add_row(TASK_TITLES.get(task, task), source, acc, f"{100 * c['random']:.1f}", str(c["n"]))
        Console().print(t)
    if result["n_scored"] == 0:
        print("Nothing left to score: every selected item was already in predictions.jsonl.", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)
