"""Judge evaluation: pairwise, pointwise and ordering records of PRISM / MIRAGE / the ordering probe (paper 002 F.1, C.1–C.3).

This module is the run (config, records → prediction rows, the resumable loop, the CLI); the
metrics are :mod:`judgetrain.eval.judge.metrics` and the report :mod:`judgetrain.eval.judge.report`.
Docs: "reference/commands/eval-judge.md", "concepts/prism-mirage.md".

Two modes (``--mode``):

- ``score`` (default): constrained scoring by :class:`judgetrain.scoring.Scorer`
  over each record's ``choices`` (``A``/``B``, ``1``…``5``); the prediction is
  the choice with the highest renormalised probability, so every answer is
  valid. Records without choices (the ordering probe) cannot be scored that way
  and are generated and parsed, as in ``rationale`` mode.
- ``rationale``: greedy generation (``--max-new-tokens``) parsed by the record's
  own parser (:func:`judgetrain.scoring.parser_for_record`); an answer the
  parser cannot read is counted invalid, never guessed (large models produce
  many, paper 002 E). The prompt is the record's as built: a
  ``build rationales`` "with rationale" set asks for reasoning then a final
  ``Answer: X``; plain PRISM/MIRAGE prompts ask for the answer first. The
  explanation (:func:`split_rationale`) is the text before the last answer cue
  ("Answer:", "Final answer:", "Rating:", …), or, when there is none, the text
  after the answer's first sentence.

Metrics (:func:`compute_judge_metrics`, from ``predictions.jsonl`` alone):

- **Pairwise** (Tables S2, S3): per layout, per benchmark (PRISM / MIRAGE) and
  per subset (PRISM-Semantic, PRISM-Temporal, MIRAGE-Recipes, MIRAGE-Vist):
  ``accuracy`` over valid predictions (the paper's Acc, reported with its
  ``n_valid``), ``accuracy_all`` counting invalid answers as wrong, macro
  ``precision`` / ``recall`` / ``f1`` (scikit-learn
  ``precision_recall_fscore_support(average="macro", zero_division=0)`` over the
  valid predictions, labels = those seen in gold or prediction), ``n_invalid``.
- **Pointwise** (Tables S1, S7): the same classification cell over the 1–5
  scores, plus Pearson r (``scipy.stats.pearsonr``), MAE and RMSE (scikit-learn)
  of the valid predictions against each reference that the records carry:
  ``gold`` (the rubric label), ``teacher`` (``meta.teacher_answer``, the
  paper's r_G, written by ``judgetrain build rationales``) and ``human``
  (``meta.human_score``: a number or a list of annotator scores, averaged; no
  builder writes one yet). A reference no record carries is reported absent
  (``None``, "–"), never 0; r is ``None`` with fewer than two pairs or a
  constant side. Score distributions (the "binary collapse", Figure S2) of the
  model, the gold and each reference, with the share in {1, 2}.
- **Explanations** (rationale mode; Tables S7, S14): BLEU, ROUGE-1/2/L, METEOR,
  MiniLM cosine and length difference (:mod:`judgetrain.eval.judge.explain`) against
  ``meta.teacher_rationale``, on valid, non-empty explanations with a
  non-empty reference only; the rows left out are counted by reason.
- **Ordering probe** (App. G, Table S21): exact match (invalid = wrong),
  invalid rate, Kendall tau, chance, and the "answers by position" signature
  (share of items answered with the label order 1, 2, …, n or its reverse).

Gold answers are the builder's: a record of ``judgetrain build rationales
--target teacher`` carries its gold in ``meta.gold_label`` (its ``label`` is the
teacher's answer, the SFT target), and that gold is what predictions are scored
against.

Subsets come from the record: ``meta.domain`` ``recipes`` / ``vist`` →
MIRAGE-Recipes / MIRAGE-Vist; else ``perturbation`` ``semantic-*`` →
PRISM-Semantic, ``swap`` / ``swap-nonconsecutive`` / ``shuffle`` →
PRISM-Temporal, ``none`` → PRISM-Coherent (pointwise gold sequences); task
``ordering`` → Ordering-probe; anything else keeps its ``source``.

Results (``judgetrain.eval.timecatch.report``): ``predictions.jsonl`` (one line per
record, appended, flushed and fsync'd per batch; a rerun resumes, a finished
run scores nothing), ``run.json``, ``metrics.json``, ``report.md`` and PNGs,
all recomputable with ``judgetrain eval report RUN``. ``run.json``'s identity
(:mod:`judgetrain.eval.core.runs`) is the model, adapter, dtype, split, mode,
``max_new_tokens``, the prefill scored after (a reasoning checkpoint's own unless
``--prefill``; :mod:`judgetrain.eval.core.prefill`) and the split's content hash: a rerun into the same folder
with other ``--tasks``, ``--layouts``, ``--subsets`` or ``--limit`` resumes (those
select items; the metrics cover exactly the items selected), one with another
identity is refused unless ``--overwrite``. Each
line carries what :mod:`judgetrain.eval.bias` needs (task, layout,
perturbation, position, subset, presentation, first-shown letter, gold,
prediction, valid, probs, n_frames, generated text, parsed rationale,
reference rationale) and what ``judgetrain eval view`` shows of the item: ``prompt_text``
(the exact text scored or generated from) and ``frames`` (the sha256 of each image's stored
bytes, in prompt order). Data-parallel under ``accelerate launch`` exactly as
:mod:`judgetrain.eval.timecatch` (items strided over processes, merged in
dataset order by the main process)::

    accelerate launch --num_processes 8 -m judgetrain.eval.judge --model M --data DIR --out results/RUN

In-process (training-time validation, Optuna sweeps)::

    from judgetrain.eval.judge import judge_metrics, metric_value
    m = judge_metrics(model, processor, val_dataset, tasks=["pairwise"], subsets=["PRISM-Temporal"])
    metric_value(m, "PRISM-Temporal", "macro_f1")      # = m["pairwise"]["by_subset"]["PRISM-Temporal"]["all"]["f1"]
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain.config import ConfigError, arg, comma_list
from judgetrain.config import make_parser as make_config_parser

from ..core.args import EvalArgs, parse_batch_size
from ..core.markdown import fmt, pct, rate
from ..core.prefill import run_prefill, scorer_loader
from ..core.reward_pairs import REWARD_MODE
from ..core.runs import METRICS, PREDICTIONS, REPORT, EvalInputError, dataset_identity, run_info
from ..core.sample import SAMPLE_STRATA, sample_identity, sampled
from ..core.sharded import process_state, run_sharded
from .metrics import MIRAGE_DOMAINS, SUBSETS, compute_judge_metrics
from .report import report
from .reward import reward_mode_problems

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

__all__ = [
    "JUDGE_TASKS",
    "JudgeEvalConfig",
    "MODES",
    "evaluate",
    "judge_metrics",
    "main",
    "make_parser",
    "model_scorer",
    "predict",
    "prediction_row",
    "run",
    "select",
    "split_rationale",
    "subset_of",
]
EVALUATION = "judge"

JUDGE_TASKS = ("pairwise", "pointwise", "ordering")
MODES = ("score", "rationale")
DEFAULT_MAX_NEW_TOKENS = 512
# The answer split the letter / yes-no parsers use for an answer-first reply ("A. Because …", "A, since …").
_FIRST_SENTENCE = re.compile(r"(?:[\n!?;:,]|\.\s)")


# --------------------------------------------------------------------------- records → rows


def subset_of(record: Mapping[str, Any], meta: Mapping[str, Any]) -> str:
    """The paper's subset name of a record (module docstring)."""
    from judgetrain.records import SEMANTIC, TEMPORAL

    if record["task"] == "ordering":
        return "Ordering-probe"
    if meta.get("domain") in MIRAGE_DOMAINS:
        return MIRAGE_DOMAINS[meta["domain"]]
    p = record["perturbation"]
    if p in SEMANTIC:
        return "PRISM-Semantic"
    if p in TEMPORAL:
        return "PRISM-Temporal"
    if p == "none" and record["task"] == "pointwise":
        return "PRISM-Coherent"
    return str(record["source"])


def split_rationale(text: str) -> str:
    """The explanation part of a generated answer: the text before the last answer
    cue ("Answer:", "Final answer:", "Rating:", … — the cues the scoring parsers
    read), else the text after the first sentence (an answer-first reply such as
    "A. Sequence B swaps …"). A closed ``<think>`` block is dropped first."""
    from judgetrain.scoring import ANSWER_CUE  # the parsers' own definition of an answer cue

    body = text.strip()
    if "</think>" in body:
        body = body.rsplit("</think>", 1)[1].strip()
    cues = list(ANSWER_CUE.finditer(body))
    if cues:
        return body[: cues[-1].start()].strip()
    parts = _FIRST_SENTENCE.split(body, maxsplit=1)
    return parts[1].strip() if len(parts) == 2 else ""


def _first_option(gold: str, choices: Sequence[str], presentation: str | None) -> str | None:
    """The letter whose sequence is shown first, from the gold letter and the presentation order."""
    if presentation not in ("gold_first", "gold_second"):
        return None
    if presentation == "gold_first":
        return gold
    others = [c for c in choices if c != gold]
    return others[0] if len(others) == 1 else None


def prediction_row(record: Mapping[str, Any], result: Any, model: str, adapter: str | None) -> dict[str, Any]:
    """One ``predictions.jsonl`` line from a record and its :class:`~judgetrain.scoring.ChoiceScores`
    (scored) or :class:`~judgetrain.scoring.Generation` (generated).

    ``label`` is the builder's gold answer: a rationale-distilled record keeps it in
    ``meta.gold_label`` (its own ``label`` may be the teacher's answer, the SFT target),
    and ``presentation`` is relative to that gold."""
    meta = json.loads(record.get("meta") or "{}")
    gold = str(meta.get("gold_label", record["label"]))
    scored = hasattr(result, "probs")
    prediction = result.prediction if scored else result.answer
    valid = True if scored else bool(result.valid)
    text = None if scored else result.text
    presentation = meta.get("presentation")
    return {
        "id": record["id"],
        "task": record["task"],
        "source": record["source"],
        "subset": subset_of(record, meta),
        "layout": record["layout"],
        "perturbation": record["perturbation"],
        "position": record["position"],
        "n_frames": record["n_frames"],
        "positional_subset": bool(meta.get("positional_subset", False)),
        "presentation": presentation,
        "twin": meta.get("twin"),  # the pair a `--twins` build shows both ways round (eval bias's presentation flips)
        "first_option": _first_option(gold, record["choices"], presentation) if record["task"] == "pairwise" else None,
        "label": gold,
        "prediction": prediction,
        "valid": valid,
        "correct": valid and prediction == gold,
        "method": "score" if scored else "generate",
        "choices": list(record["choices"]),
        "probs": [float(p) for p in result.probs] if scored else None,
        "text": text,
        # an ordering answer ("2, 4, 1, 3") has no explanation part to split off
        "rationale": split_rationale(text) if text is not None and valid and record["task"] != "ordering" else None,
        "truncated": None if scored else bool(result.truncated),
        "reference_rationale": meta.get("teacher_rationale"),
        "teacher": meta.get("teacher"),
        "teacher_answer": meta.get("teacher_answer"),
        "human_score": meta.get("human_score"),
        "model": model,
        "adapter": adapter,
    }


def predict(
    scorer: Any,
    items: Sequence[Mapping[str, Any]],
    mode: str = "score",
    *,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    model: str = "",
    adapter: str | None = None,
) -> list[dict[str, Any]]:
    """Prediction rows for ``items`` (task records), in order: scored over their choices in
    ``score`` mode (records without choices are generated), generated in ``rationale`` mode."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    scored = [i for i, r in enumerate(items) if mode == "score" and r["choices"]]
    generated = [i for i, r in enumerate(items) if not (mode == "score" and r["choices"])]
    results: list[Any] = [None] * len(items)
    if scored:
        for i, s in zip(scored, scorer.score([items[i] for i in scored], progress=False), strict=True):
            results[i] = s
    if generated:
        gens = scorer.generate([items[i] for i in generated], max_new_tokens=max_new_tokens, progress=False)
        for i, g in zip(generated, gens, strict=True):
            results[i] = g
    return [prediction_row(r, res, model, adapter) for r, res in zip(items, results, strict=True)]


# --------------------------------------------------------------------------- in-process API


def select(
    dataset: Any,
    *,
    tasks: Sequence[str] | None = None,
    layouts: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
) -> list[int]:
    """Indices of ``dataset`` rows (a ``datasets.Dataset`` of task records) of the given
    tasks / layouts / subsets (``None``: all), in dataset order: the first ``limit``, or the
    ``sample`` of :func:`~judgetrain.eval.core.sample.sampled` (stratified by task × source ×
    perturbation × layout, seeded by ``sample_seed``)."""
    cols = dataset.select_columns(["task", "layout", "perturbation", "source", "meta"])
    idx, strata = [], []
    for i, r in enumerate(cols):
        if tasks is not None and r["task"] not in tasks:
            continue
        if layouts is not None and r["layout"] not in layouts:
            continue
        if subsets is not None and subset_of(r, json.loads(r["meta"] or "{}")) not in subsets:
            continue
        idx.append(i)
        strata.append(tuple(r[k] for k in SAMPLE_STRATA))
    if sample is not None:
        return sampled(idx, strata, sample, sample_seed)
    return idx[:limit] if limit is not None else idx


def model_scorer(model: Any, processor: Any, batch_size: BatchSize = "auto") -> Any:
    """A :class:`~judgetrain.scoring.Scorer` of a model already in memory, scoring after the
    model's own prefill as ``eval judge`` does: what closes the thinking block a reasoning
    checkpoint's chat template opens (:func:`judgetrain.scoring.prompts.template_prefill`), else none."""
    from judgetrain.models.registry import detect_family
    from judgetrain.scoring import Scorer
    from judgetrain.scoring.prompts import FAMILY_PREFILL, resolve_prefill

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    prefill = resolve_prefill(FAMILY_PREFILL, detect_family(base.config), processor)
    return Scorer(model, processor, batch_size=batch_size, prefill=prefill, progress=False)


def judge_metrics(
    model: Any,
    processor: Any,
    dataset: Any,
    mode: str = "score",
    *,
    tasks: Sequence[str] | None = None,
    layouts: Sequence[str] | None = None,
    subsets: Sequence[str] | None = None,
    limit: int | None = None,
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
    batch_size: BatchSize = "auto",
    explanations: bool = False,
    progress: bool = False,
) -> dict[str, Any]:
    """The metrics dict of ``judgetrain eval judge`` for a model already in memory.

    ``model``, ``processor``: as loaded (a PEFT model mid-training works; its
    train/eval mode is restored afterwards), or a :class:`judgetrain.scoring.Scorer`
    as ``model`` with ``processor=None``. ``dataset``: a ``datasets.Dataset`` of task
    records (e.g. a PRISM validation split), filtered by :func:`select`. With an
    integer ``batch_size`` every process runs the same forward passes (what
    DeepSpeed ZeRO-3 needs when all ranks call this). A model given with its processor is
    scored after its own prefill (what its chat template calls for: a reasoning
    checkpoint's closed thinking block), as ``eval judge`` does. Nothing is written to disk;
    explanation metrics are off unless ``explanations=True``. Example (the sweep's
    objective, :func:`metric_value`)::

        m = judge_metrics(model, processor, ds["validation"], tasks=["pairwise"], subsets=["PRISM-Temporal"])
        metric_value(m, "PRISM-Temporal", "macro_f1")
    """
    from tqdm.auto import tqdm

    from judgetrain.scoring import Scorer

    if isinstance(model, Scorer):
        if processor is not None:
            raise ValueError("judge_metrics: pass a Scorer as model with processor=None, or a model and its processor")
        scorer, was_training = model, model.model.training
    else:
        if processor is None:
            raise ValueError("judge_metrics: a model needs its processor (or pass a judgetrain.scoring.Scorer as model)")
        was_training = model.training  # read before Scorer() switches the model to eval mode
        scorer = model_scorer(model, processor, batch_size)
    idx = select(dataset, tasks=tasks, layouts=layouts, subsets=subsets, limit=limit)
    rows: list[dict[str, Any]] = []
    chunk = 64
    try:
        with tqdm(total=len(idx), desc="judge", unit="item", disable=not progress) as bar:
            for start in range(0, len(idx), chunk):
                items = list(dataset.select(idx[start : start + chunk]))
                rows += predict(scorer, items, mode, max_new_tokens=max_new_tokens)
                bar.update(len(items))
    finally:
        scorer.model.train(was_training)
    return compute_judge_metrics(rows, explanations=explanations)


# --------------------------------------------------------------------------- the run


@dataclass(kw_only=True)
class JudgeEvalConfig(EvalArgs):
    """``judgetrain eval judge``: every field is a flag (``--field-name``) and a ``--config`` key.

    ``split``, ``mode`` and ``max_new_tokens`` (with the model, adapter, dtype and the
    split's content hash) are the run's identity; ``tasks``, ``layouts``, ``subsets`` and
    ``limit`` only select which items of it are evaluated and reported."""

    data: Path = arg(
        help="a PRISM / MIRAGE / ordering-probe dataset folder (judgetrain build prism|mirage|ordering-probe|rationales --out)"
    )
    split: str = arg("test", "split to evaluate", identity=True)
    mode: str = arg(
        "score",
        "score: constrained A/B or 1-5 scoring over each record's choices (records without choices, "
        "the ordering probe, are generated); rationale: generate, parse, count invalid answers and "
        "score the explanations; reward (the default for a reward model): one reward per pointwise record, "
        "gold-vs-negative pair accuracy",
        identity=True,
        metavar="{" + ",".join((*MODES, REWARD_MODE)) + "}",
    )
    tasks: list[str] = arg(list(JUDGE_TASKS), "tasks to evaluate, from " + ",".join(JUDGE_TASKS) + " (space- or comma-separated)")
    layouts: list[str] | None = arg(None, "layouts to evaluate, e.g. P0,P6 (space- or comma-separated; default: all)")
    subsets: list[str] | None = arg(
        None, "subsets to evaluate, e.g. PRISM-Temporal (space- or comma-separated; default: all): " + ",".join(SUBSETS)
    )
    max_new_tokens: int = arg(
        DEFAULT_MAX_NEW_TOKENS,
        "generation budget per item (rationale mode, and the ordering probe in either mode)",
        identity=True,
    )
    agree_with: Path | None = arg(
        None, "reward mode: a generative judge's eval judge run on the pairwise records of the same data, to agree with"
    )

    def __post_init__(self) -> None:
        common = self.common_problems()  # listed after this command's own
        problems: list[str] = []
        self.data = Path(self.data)
        self.tasks = comma_list(self.tasks)
        self.layouts = comma_list(self.layouts) or None
        self.subsets = comma_list(self.subsets) or None
        problems += reward_mode_problems(self)
        if self.mode not in (*MODES, REWARD_MODE):
            problems.append(f"mode: {self.mode!r} is not a judge mode; choose {', '.join((*MODES, REWARD_MODE))}")
        unknown = [t for t in self.tasks if t not in JUDGE_TASKS]
        if unknown:
            problems.append(f"tasks: unknown {unknown}; judge tasks are {', '.join(JUDGE_TASKS)}")
        elif not self.tasks:
            problems.append(f"tasks: give at least one of {', '.join(JUDGE_TASKS)}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            problems.append(f"max_new_tokens: {self.max_new_tokens!r}; must be at least 1")
        problems += common
        if problems:
            raise ConfigError(problems, "eval judge configuration")


def _select(cfg: JudgeEvalConfig) -> tuple[Any, list[int], list[str]]:
    """The split's records, the indices ``cfg`` selects and every id in dataset order."""
    from judgetrain import records  # datasets: not loaded for --help

    ds_all = records.load(cfg.data, builders=("prism", "mirage", "ordering-probe"))
    if cfg.split not in ds_all:
        raise EvalInputError(f"{cfg.data} has no split {cfg.split!r}; its splits are {sorted(ds_all)} (pass --split)")
    ds = ds_all[cfg.split]
    chosen: dict[str, Any] = {"tasks": cfg.tasks, "layouts": cfg.layouts, "subsets": cfg.subsets, "limit": cfg.limit}
    idx = select(ds, **chosen, sample=cfg.sample, sample_seed=cfg.sample_seed)
    if not idx:
        present = dict(Counter(list(ds["task"])))
        raise EvalInputError(
            f"{cfg.data} [{cfg.split}] has no record of task(s) {list(cfg.tasks)}"
            + (f", layout(s) {list(cfg.layouts)}" if cfg.layouts else "")
            + (f", subset(s) {list(cfg.subsets)}" if cfg.subsets else "")
            + f"; its tasks are {present} (check --tasks, --layouts, --subsets)"
        )
    return ds, idx, list(ds["id"])


def evaluate(model: str, data: str | os.PathLike, out: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Evaluate the judge records of ``data[split]`` into run folder ``out``; ``fields`` are
    the other :class:`JudgeEvalConfig` fields (``split``, ``mode``, ``tasks``, …). See :func:`run`."""
    return run(JudgeEvalConfig(model=str(model), data=Path(data), out=Path(out), **fields))


def run(cfg: JudgeEvalConfig) -> dict[str, Any]:
    """Evaluate the judge records ``cfg`` selects and write its run folder.

    Resumable: ids already in the folder's predictions are skipped; a folder holding a
    run of another identity (model, adapter, dtype, split, mode, max_new_tokens, the
    split's content) is refused, or with ``cfg.overwrite`` started afresh. Under a
    multi-process launch every process calls this; items are strided over processes
    and the main process merges and reports. Prompts end with the run's prefill
    (:func:`~judgetrain.eval.core.prefill.run_prefill`: ``cfg.prefill``, else the model's own),
    recorded in ``run.json`` and its identity. Returns ``{"out", "n_items", "n_scored",
    "world_size", "metrics"}`` (``metrics`` on the main process only).
    """
    state = process_state("judgetrain.eval.judge", cfg.collective_timeout)
    ds, idx, order = _select(cfg)
    if cfg.mode == REWARD_MODE:
        from .reward import run_reward

        return run_reward(cfg, state, ds, idx, order, evaluation=EVALUATION, subset=subset_of)
    prefill = run_prefill(cfg.model, cfg.adapter, cfg.prefill)  # a reasoning checkpoint's, unless --prefill
    info = run_info(
        EVALUATION,
        cfg,
        data=dataset_identity(cfg.data, [cfg.split]),
        items=[order[i] for i in idx],
        world_size=state.num_processes,
        prefill=prefill,
        sampling=sample_identity(cfg),
    )
    info["data"] = str(cfg.data.resolve())
    from judgetrain import records

    position = {rid: i for i, rid in enumerate(order)}

    def score(scorer: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = predict(scorer, items, cfg.mode, max_new_tokens=cfg.max_new_tokens, model=cfg.model, adapter=cfg.adapter)
        frames = records.frame_digests(ds, [position[r["id"]] for r in items])
        # what `eval view` shows of the item: the exact text scored and the frames in the order the model saw them
        return [
            {**row, "prompt_text": scorer.render(r["prompt"]), "frames": f} for row, r, f in zip(rows, items, frames, strict=True)
        ]

    return run_sharded(
        state,
        cfg.out,
        info,
        ds,
        idx,
        order,
        score,
        report,
        model=cfg.model,
        adapter=cfg.adapter,
        dtype=cfg.dtype,
        batch_size=parse_batch_size(cfg.batch_size),
        desc=f"judge ({cfg.mode})",
        progress=cfg.progress,
        overwrite=cfg.overwrite,
        load=scorer_loader(cfg, prefill),
    )


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        JudgeEvalConfig,
        "judgetrain eval judge",
        "Evaluate a judge (optionally + LoRA adapter) on PRISM / MIRAGE pairwise and pointwise records and the ordering "
        "probe: accuracy, macro P/R/F1, n_val per layout and subset; Pearson r / MAE / RMSE; explanation metrics in "
        "rationale mode.",
        "examples:\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family llava-onevision --family qwen2.5-vl\n"
        "  judgetrain build prism --out data/prism-judge --synthetic 12 --layouts P0,P4,P6\n"
        "  judgetrain eval judge --model quickstart/models/llava-onevision --data data/prism-judge --split test --sample 16 --out results/ov\n"
        "  judgetrain eval judge --model quickstart/models/qwen2.5-vl --data data/prism-judge --split test --sample 16 --out results/q25\n"
        "  judgetrain eval report results/ov                       # recompute metrics, report and figures\n"
        "  judgetrain eval bias results/ov                         # positional / first-option bias of the run\n"
        "  judgetrain eval compare results/ov results/q25          # accuracy / F1 per subset side by side\n"
        "\na real judge: --model llava-hf/llava-onevision-qwen2-7b-ov-hf (a hub id or a local folder), --adapter runs/…;\n"
        "rationales (--mode rationale) and many processes (accelerate launch -m judgetrain.eval.judge): see the docs,\n"
        "concepts/prism-mirage.md.\n",
    )


def main(cfg: JudgeEvalConfig) -> int:
    result = run(cfg)
    if result["metrics"] is not None and "reward" in result["metrics"]:
        from .reward import print_reward_summary

        print_reward_summary(result["metrics"])
        print(f"Predictions, metrics and report in {result['out']}", flush=True)
    elif result["metrics"] is not None:
        _print_summary(result)
    return 0


def _print_summary(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    m, out = result["metrics"], Path(result["out"])
    console = Console()
    if "pairwise" in m:
        t = Table(title=f"Pairwise — {m['pairwise']['all']['n']} items (%; accuracy over valid answers, Wilson 95%)")
        for c in ("benchmark", "layout", "Acc", "F1", "n_val", "invalid"):
            t.add_column(c, justify="left" if c in ("benchmark", "layout") else "right")
        for bench, block in m["pairwise"]["by_benchmark"].items():
            for lay, c in [*block["by_layout"].items(), ("all", block["all"])]:
                t.add_row(
                    bench,
                    lay,
                    rate(c["accuracy"], c.get("accuracy_ci95"), c["n_valid"]),
                    pct(c["f1"]),
                    str(c["n_valid"]),
                    str(c["n_invalid"]),
                )
        console.print(t)
    if "pointwise" in m:
        t = Table(title=f"Pointwise — {m['pointwise']['all']['n']} items")
        for c in ("layout", "F1", "r_G", "r_H", "r_gold", "MAE_gold", "n_val", "invalid"):
            t.add_column(c, justify="left" if c == "layout" else "right")
        for lay, c in [*m["pointwise"]["by_layout"].items(), ("all", m["pointwise"]["all"])]:
            t.add_row(
                lay,
                pct(c["f1"]),
                fmt(c["teacher"]["r"]),
                fmt(c["human"]["r"]),
                fmt(c["gold"]["r"]),
                fmt(c["gold"]["mae"]),
                str(c["n_valid"]),
                str(c["n_invalid"]),
            )
        console.print(t)
    if "ordering" in m:
        o = m["ordering"]
        console.print(
            f"Ordering probe: exact match {rate(o['exact_match'], o.get('exact_match_ci95'), o['n'])} over {o['n']} items, {o['n_invalid']} invalid, "
            f"{o['label_order']} in label order, {o['reverse_label_order']} reversed"
        )
    if result.get("n_scored") == 0:
        print("Nothing left to evaluate: every selected item was already in predictions.jsonl.", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)
