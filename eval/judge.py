"""Judge evaluation: pairwise, pointwise and ordering records of PRISM / MIRAGE / the ordering probe (paper 002 F.1, C.1–C.3).

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
  MiniLM cosine and length difference (:mod:`judgetrain.eval.explain`) against
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

Results (``judgetrain.eval.report``): ``predictions.jsonl`` (one line per
record, appended, flushed and fsync'd per batch; a rerun resumes, a finished
run scores nothing), ``run.json``, ``metrics.json``, ``report.md`` and PNGs,
all recomputable with ``judgetrain eval report RUN``. ``run.json``'s identity
(:mod:`judgetrain.eval.runs`) is the model, adapter, dtype, split, mode,
``max_new_tokens`` and the split's content hash: a rerun into the same folder
with other ``--tasks``, ``--layouts``, ``--subsets`` or ``--limit`` resumes (those
select items; the metrics cover exactly the items selected), one with another
identity is refused unless ``--overwrite``. Each
line carries what :mod:`judgetrain.eval.positional_bias` needs (task, layout,
perturbation, position, subset, presentation, first-shown letter, gold,
prediction, valid, probs, n_frames, generated text, parsed rationale,
reference rationale). Data-parallel under ``accelerate launch`` exactly as
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
import math
import os
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain import records
from judgetrain.config import ConfigError, EvalArgs, arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.io import no_nan, write_json, write_text
from judgetrain.plotting import pyplot

from .metrics import accuracy
from .report import display_name, figures_markdown
from .runs import METRICS, PREDICTIONS, REPORT, EvalInputError, dataset_identity, items_count, read_run, run_info
from .sharded import parse_batch_size, process_state, run_as_module, run_sharded

__all__ = [
    "JUDGE_TASKS",
    "MODES",
    "JudgeEvalConfig",
    "cells",
    "classification_cell",
    "compute_judge_metrics",
    "evaluate",
    "fmt",
    "judge_metrics",
    "main",
    "make_parser",
    "metric_value",
    "ordering_cell",
    "pointwise_cell",
    "predict",
    "prediction_row",
    "report",
    "rows_markdown",
    "run",
    "select",
    "split_rationale",
    "subset_of",
]
EVALUATION = "judge"

JUDGE_TASKS = ("pairwise", "pointwise", "ordering")
MODES = ("score", "rationale")
DEFAULT_MAX_NEW_TOKENS = 512
SUBSETS = ("PRISM-Semantic", "PRISM-Temporal", "PRISM-Coherent", "MIRAGE-Recipes", "MIRAGE-Vist", "Ordering-probe")
MIRAGE_DOMAINS = {"recipes": "MIRAGE-Recipes", "vist": "MIRAGE-Vist"}
SCORES = (1, 2, 3, 4, 5)
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


def benchmark_of(subset: str) -> str:
    """``PRISM-Semantic`` → ``PRISM``; a subset without a dash is its own benchmark."""
    return subset.split("-", 1)[0]


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


def predict(scorer: Any, items: Sequence[Mapping[str, Any]], mode: str = "score", *,
            max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, model: str = "", adapter: str | None = None) -> list[dict[str, Any]]:
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


# --------------------------------------------------------------------------- metrics


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def classification_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n", "n_valid", "n_invalid", "accuracy", "accuracy_all", "precision", "recall", "f1"}``:
    ``accuracy`` and the macro P/R/F1 over valid predictions (``None`` when there are
    none), ``accuracy_all`` over all rows with invalid answers counted wrong."""
    valid = [r for r in rows if r.get("valid", True) and r.get("prediction") is not None]
    cell: dict[str, Any] = {"n": len(rows), "n_valid": len(valid), "n_invalid": len(rows) - len(valid),
                            "accuracy": _none_if_nan(accuracy(valid)),
                            "accuracy_all": sum(bool(r.get("correct")) for r in valid) / len(rows) if rows else None,
                            "precision": None, "recall": None, "f1": None}
    if valid:
        from sklearn.metrics import precision_recall_fscore_support

        p, r, f, _ = precision_recall_fscore_support([str(x["label"]) for x in valid], [str(x["prediction"]) for x in valid],
                                                     average="macro", zero_division=0)
        cell.update(precision=float(p), recall=float(r), f1=float(f))
    return cell


def _number(value: Any) -> float | None:
    """A reference score as a float: a number, a numeric string, or a list of them (their mean)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)):
        vals = [_number(v) for v in value]
        return None if not vals or any(v is None for v in vals) else math.fsum(vals) / len(vals)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


REFERENCES = {"gold": "label", "teacher": "teacher_answer", "human": "human_score"}


def _agreement(pred: Sequence[float], ref: Sequence[float]) -> dict[str, Any]:
    """Pearson r, MAE, RMSE of predictions against one reference; absent (None) when undefined."""
    out: dict[str, Any] = {"n": len(pred), "r": None, "mae": None, "rmse": None}
    if not pred:
        return out
    from sklearn.metrics import mean_absolute_error, root_mean_squared_error

    out["mae"] = float(mean_absolute_error(ref, pred))
    out["rmse"] = float(root_mean_squared_error(ref, pred))
    if len(pred) >= 2 and len(set(pred)) > 1 and len(set(ref)) > 1:
        from scipy.stats import pearsonr

        out["r"] = float(pearsonr(pred, ref).statistic)
    return out


def pointwise_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`classification_cell` plus, per reference (``gold``, ``teacher``, ``human``),
    ``{"n", "r", "mae", "rmse"}`` over valid predictions whose record carries that
    reference, and ``unreadable``: references present but not a number (left out)."""
    cell = classification_cell(rows)
    valid = [r for r in rows if r.get("valid", True) and _number(r.get("prediction")) is not None]
    for name, key in REFERENCES.items():
        pairs = [(_number(r["prediction"]), _number(r.get(key))) for r in valid]
        kept = [(p, q) for p, q in pairs if q is not None]
        agreement = _agreement([p for p, _ in kept], [q for _, q in kept])
        agreement["unreadable"] = sum(1 for r in valid if r.get(key) is not None and _number(r.get(key)) is None)
        cell[name] = agreement
    return cell


def score_distribution(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of 1…5 for the model's valid predictions and each reference present
    (a mean human score is rounded half up), and each one's share in {1, 2}."""
    series = {"model": [_number(r["prediction"]) for r in rows if r.get("valid", True)]}
    for name, key in REFERENCES.items():
        series[name] = [_number(r.get(key)) for r in rows]
    out: dict[str, Any] = {}
    for name, values in series.items():
        vals = [int(math.floor(v + 0.5)) for v in values if v is not None]
        if not vals:
            continue
        counts = Counter(vals)
        out[name] = {"counts": {str(s): counts.get(s, 0) for s in SCORES}, "n": len(vals),
                     "share_1_2": (counts.get(1, 0) + counts.get(2, 0)) / len(vals)}
    return out


def ordering_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ordering probe: :func:`judgetrain.eval.metrics.ordering_metrics`
    (exact match with invalid = wrong, Kendall tau, position accuracy, chance) plus
    ``invalid_rate`` and the "answers by position" signature: how many items were
    answered with the label order (1, 2, …, n: the order shown) or its reverse, and
    their shares of all items."""
    from .metrics import ordering_metrics

    def ints(text: str | None) -> list[int] | None:  # "2, 4, 1, 3" or the lettered "B-D-A-C" (A = 1)
        if text is None:
            return None
        letters = re.findall(r"[A-Za-z]", str(text))
        return [ord(c.upper()) - ord("A") + 1 for c in letters] if letters else [int(x) for x in re.findall(r"\d+", str(text))]

    preds = [ints(r["prediction"]) if r.get("valid", True) else None for r in rows]
    golds = [ints(r["label"]) for r in rows]
    cell = ordering_metrics(preds, golds)
    n = len(rows)
    label_order = sum(p is not None and p == sorted(p) for p in preds)
    reverse = sum(p is not None and len(p) > 1 and p == sorted(p, reverse=True) for p in preds)
    cell.update(invalid_rate=cell["n_invalid"] / n if n else None, label_order=label_order, reverse_label_order=reverse,
                label_order_share=label_order / n if n else None, reverse_label_order_share=reverse / n if n else None,
                by_position_share=(label_order + reverse) / n if n else None)
    return cell


def _breakdown(rows: Sequence[Mapping[str, Any]], cell: Callable[[Sequence[Mapping[str, Any]]], dict]) -> dict[str, Any]:
    layouts = sorted({str(r["layout"]) for r in rows})
    return {"all": cell(rows), "by_layout": {lay: cell([r for r in rows if str(r["layout"]) == lay]) for lay in layouts}}


def _ordered_subsets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    present = {str(r["subset"]) for r in rows}
    return [s for s in SUBSETS if s in present] + sorted(present - set(SUBSETS))


def _explanations(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Explanation metrics per task (all / by layout) over valid, non-empty rationales with a
    non-empty reference; ``skipped`` counts the generated rows left out, by reason."""
    from .explain import explanation_scores, mean_scores, words

    generated = [r for r in rows if r.get("method") == "generate" and r["task"] in ("pairwise", "pointwise")]
    if not generated:
        return None
    skipped: Counter = Counter()
    kept = []
    for r in generated:
        if not r.get("reference_rationale") or not words(str(r["reference_rationale"])):
            skipped["no reference rationale"] += 1
        elif not r.get("valid"):
            skipped["invalid answer"] += 1
        elif not r.get("rationale") or not words(str(r["rationale"])):
            skipped["empty explanation"] += 1
        else:
            kept.append(r)
    out: dict[str, Any] = {"n_generated": len(generated), "skipped": dict(sorted(skipped.items()))}
    if not kept:
        out["by_task"] = {}
        return out
    scores = explanation_scores([r["rationale"] for r in kept], [r["reference_rationale"] for r in kept])
    by_id = {r["id"]: s for r, s in zip(kept, scores)}
    out["by_task"] = {}
    for task in ("pairwise", "pointwise"):
        task_rows = [r for r in kept if r["task"] == task]
        if task_rows:
            out["by_task"][task] = _breakdown(task_rows, lambda rs: mean_scores([by_id[r["id"]] for r in rs]))
    return out


def compute_judge_metrics(rows: Sequence[Mapping[str, Any]], *, explanations: bool = True) -> dict[str, Any]:
    """Everything a judge report shows, from prediction rows alone (module docstring).
    ``explanations=False`` skips the text metrics (they load MiniLM and WordNet)."""
    out: dict[str, Any] = {"n": len(rows), "tasks": dict(sorted(Counter(r["task"] for r in rows).items()))}
    pair = [r for r in rows if r["task"] == "pairwise"]
    if pair:
        out["pairwise"] = _breakdown(pair, classification_cell)
        out["pairwise"]["by_benchmark"] = {b: _breakdown([r for r in pair if benchmark_of(str(r["subset"])) == b], classification_cell)
                                           for b in dict.fromkeys(benchmark_of(s) for s in _ordered_subsets(pair))}
        out["pairwise"]["by_subset"] = {s: _breakdown([r for r in pair if r["subset"] == s], classification_cell)
                                        for s in _ordered_subsets(pair)}
    point = [r for r in rows if r["task"] == "pointwise"]
    if point:
        out["pointwise"] = _breakdown(point, pointwise_cell)
        out["pointwise"]["by_subset"] = {s: pointwise_cell([r for r in point if r["subset"] == s]) for s in _ordered_subsets(point)}
        out["pointwise"]["distribution"] = score_distribution(point)
    order = [r for r in rows if r["task"] == "ordering"]
    if order:
        out["ordering"] = ordering_cell(order)
    if explanations:
        expl = _explanations(rows)
        if expl is not None:
            out["explanations"] = expl
    return out


# --------------------------------------------------------------------------- in-process API


def select(dataset: Any, *, tasks: Sequence[str] | None = None, layouts: Sequence[str] | None = None,
           subsets: Sequence[str] | None = None, limit: int | None = None) -> list[int]:
    """Indices of ``dataset`` rows (a ``datasets.Dataset`` of task records) of the given
    tasks / layouts / subsets (``None``: all), in dataset order, the first ``limit``."""
    cols = dataset.select_columns(["task", "layout", "perturbation", "source", "meta"])
    idx = []
    for i, r in enumerate(cols):
        if tasks is not None and r["task"] not in tasks:
            continue
        if layouts is not None and r["layout"] not in layouts:
            continue
        if subsets is not None and subset_of(r, json.loads(r["meta"] or "{}")) not in subsets:
            continue
        idx.append(i)
    return idx[:limit] if limit is not None else idx


def judge_metrics(model: Any, processor: Any, dataset: Any, mode: str = "score", *, tasks: Sequence[str] | None = None,
                  layouts: Sequence[str] | None = None, subsets: Sequence[str] | None = None, limit: int | None = None,
                  max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, batch_size: int | str = "auto",
                  explanations: bool = False, progress: bool = False) -> dict[str, Any]:
    """The metrics dict of ``judgetrain eval judge`` for a model already in memory.

    ``model``, ``processor``: as loaded (a PEFT model mid-training works; its
    train/eval mode is restored afterwards), or a :class:`judgetrain.scoring.Scorer`
    as ``model`` with ``processor=None``. ``dataset``: a ``datasets.Dataset`` of task
    records (e.g. a PRISM validation split), filtered by :func:`select`. With an
    integer ``batch_size`` every process runs the same forward passes (what
    DeepSpeed ZeRO-3 needs when all ranks call this). Nothing is written to disk;
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
        scorer = Scorer(model, processor, batch_size=batch_size, progress=False)
    idx = select(dataset, tasks=tasks, layouts=layouts, subsets=subsets, limit=limit)
    rows: list[dict[str, Any]] = []
    chunk = 64
    try:
        with tqdm(total=len(idx), desc="judge", unit="item", disable=not progress) as bar:
            for start in range(0, len(idx), chunk):
                items = list(dataset.select(idx[start:start + chunk]))
                rows += predict(scorer, items, mode, max_new_tokens=max_new_tokens)
                bar.update(len(items))
    finally:
        scorer.model.train(was_training)
    return compute_judge_metrics(rows, explanations=explanations)


_ALIASES = {"macro_f1": "f1", "acc": "accuracy"}
PAIRWISE_METRICS = ("accuracy", "accuracy_all", "precision", "recall", "f1", "n", "n_valid", "n_invalid")
POINTWISE_METRICS = ("pointwise_accuracy", "pointwise_f1", *(f"{s}_{ref}" for ref in REFERENCES for s in ("r", "mae", "rmse")))
ORDERING_METRICS = ("exact_match", "exact_match_valid", "kendall_tau", "invalid_rate", "by_position_share")


def _cell_of(block: Mapping[str, Any] | None, subset: str) -> Mapping[str, Any] | None:
    """``block``'s cell for ``subset``: ``all``, a subset, a benchmark (pairwise) or a layout."""
    if not block:
        return None
    if subset == "all":
        return block["all"]
    for key in ("by_subset", "by_benchmark", "by_layout"):
        hit = block.get(key, {}).get(subset)
        if hit is not None:
            return hit.get("all", hit) if key != "by_layout" else hit
    return None


def metric_value(metrics: Mapping[str, Any], subset: str, metric: str) -> float | None:
    """One number of :func:`compute_judge_metrics` output, for objectives such as
    ``judge:PRISM-Temporal/macro_f1``.

    ``subset``: ``all``, a subset (``PRISM-Temporal``, ``MIRAGE-Vist``, …), a
    benchmark (``PRISM``, ``MIRAGE``) or a layout (``P6``). ``metric``: a pairwise
    one (:data:`PAIRWISE_METRICS`; ``macro_f1`` = ``f1``), a pointwise one
    (:data:`POINTWISE_METRICS`, e.g. ``r_teacher``, ``mae_gold``) or an ordering-probe
    one (:data:`ORDERING_METRICS`, ``subset`` ignored). ``None`` when the records hold
    no such cell or the value is undefined; an unknown metric name is an error.
    """
    name = _ALIASES.get(metric, metric)
    if name in PAIRWISE_METRICS:
        cell = _cell_of(metrics.get("pairwise"), subset)
        return None if cell is None else cell.get(name)
    if name in POINTWISE_METRICS:
        cell = _cell_of(metrics.get("pointwise"), subset)
        if cell is None:
            return None
        if name.startswith("pointwise_"):
            return cell.get(name.removeprefix("pointwise_"))
        stat, ref = name.split("_", 1)
        return cell[ref][stat]
    if name in ORDERING_METRICS:
        return (metrics.get("ordering") or {}).get(name)
    raise ValueError(f"unknown judge metric {metric!r}; pairwise: {', '.join(PAIRWISE_METRICS)} (macro_f1 = f1); "
                     f"pointwise: {', '.join(POINTWISE_METRICS)}; ordering: {', '.join(ORDERING_METRICS)}")


# --------------------------------------------------------------------------- the run


@dataclass(kw_only=True)
class JudgeEvalConfig(EvalArgs):
    """``judgetrain eval judge``: every field is a flag (``--field-name``) and a ``--config`` key.

    ``split``, ``mode`` and ``max_new_tokens`` (with the model, adapter, dtype and the
    split's content hash) are the run's identity; ``tasks``, ``layouts``, ``subsets`` and
    ``limit`` only select which items of it are evaluated and reported."""

    data: Path = arg(help="a PRISM / MIRAGE / ordering-probe dataset folder (judgetrain build prism|mirage|ordering-probe|"
                          "rationales --out)")
    split: str = arg("test", "split to evaluate", identity=True)
    mode: str = arg("score", "score: constrained A/B or 1-5 scoring over each record's choices (records without choices, "
                             "the ordering probe, are generated); rationale: generate, parse, count invalid answers and "
                             "score the explanations", identity=True, metavar="{" + ",".join(MODES) + "}")
    tasks: list[str] = arg(list(JUDGE_TASKS), "tasks to evaluate, from " + ",".join(JUDGE_TASKS)
                           + " (space- or comma-separated)")
    layouts: list[str] | None = arg(None, "layouts to evaluate, e.g. P0,P6 (space- or comma-separated; default: all)")
    subsets: list[str] | None = arg(None, "subsets to evaluate, e.g. PRISM-Temporal (space- or comma-separated; default: "
                                          "all): " + ",".join(SUBSETS))
    max_new_tokens: int = arg(DEFAULT_MAX_NEW_TOKENS, "generation budget per item (rationale mode, and the ordering probe "
                                                      "in either mode)", identity=True)

    def __post_init__(self) -> None:
        common = self.common_problems()  # listed after this command's own
        problems: list[str] = []
        self.data = Path(self.data)
        self.tasks = comma_list(self.tasks)
        self.layouts = comma_list(self.layouts) or None
        self.subsets = comma_list(self.subsets) or None
        if self.mode not in MODES:
            problems.append(f"mode: {self.mode!r} is not a judge mode; choose {' or '.join(MODES)}")
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
    ds_all = records.load(cfg.data)
    if cfg.split not in ds_all:
        raise EvalInputError(f"{cfg.data} has no split {cfg.split!r}; its splits are {sorted(ds_all)} (pass --split)")
    ds = ds_all[cfg.split]
    idx = select(ds, tasks=cfg.tasks, layouts=cfg.layouts, subsets=cfg.subsets, limit=cfg.limit)
    if not idx:
        present = dict(Counter(list(ds["task"])))
        raise EvalInputError(f"{cfg.data} [{cfg.split}] has no record of task(s) {list(cfg.tasks)}"
                             + (f", layout(s) {list(cfg.layouts)}" if cfg.layouts else "")
                             + (f", subset(s) {list(cfg.subsets)}" if cfg.subsets else "")
                             + f"; its tasks are {present} (check --tasks, --layouts, --subsets)")
    return ds, idx, list(ds["id"])


def evaluate(model: str, data: str | os.PathLike, out: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Evaluate the judge records of ``data[split]`` into run folder ``out``; ``fields`` are
    the other :class:`JudgeEvalConfig` fields (``split``, ``mode``, ``tasks``, …). See :func:`run`."""
    return run(JudgeEvalConfig(model=str(model), data=data, out=out, **fields))


def run(cfg: JudgeEvalConfig) -> dict[str, Any]:
    """Evaluate the judge records ``cfg`` selects and write its run folder.

    Resumable: ids already in the folder's predictions are skipped; a folder holding a
    run of another identity (model, adapter, dtype, split, mode, max_new_tokens, the
    split's content) is refused, or with ``cfg.overwrite`` started afresh. Under a
    multi-process launch every process calls this; items are strided over processes
    and the main process merges and reports. Returns ``{"out", "n_items", "n_scored",
    "world_size", "metrics"}`` (``metrics`` on the main process only).
    """
    state = process_state("judgetrain.eval.judge")
    ds, idx, order = _select(cfg)
    info = run_info(EVALUATION, cfg, data=dataset_identity(cfg.data, [cfg.split]), items=[order[i] for i in idx],
                    world_size=state.num_processes)
    info["data"] = str(cfg.data.resolve())

    def score(scorer: Any, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return predict(scorer, items, cfg.mode, max_new_tokens=cfg.max_new_tokens, model=cfg.model, adapter=cfg.adapter)

    return run_sharded(state, cfg.out, info, ds, idx, order, score, report, model=cfg.model, adapter=cfg.adapter,
                       dtype=cfg.dtype, batch_size=parse_batch_size(cfg.batch_size), desc=f"judge ({cfg.mode})",
                       progress=cfg.progress, overwrite=cfg.overwrite)


# --------------------------------------------------------------------------- report


def fmt(x: Any, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals; "–" for an absent (None) or NaN value."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def rows_markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: ``header``, then ``rows`` of strings (first column left-aligned, the others right)."""
    out = "| " + " | ".join(header) + " |\n|---|" + "---:|" * (len(header) - 1) + "\n"
    return out + "".join("| " + " | ".join(r) + " |\n" for r in rows)


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


def plot_pairwise_layouts(pairwise: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Accuracy (valid) and macro-F1 per layout, one panel per benchmark, chance at 0.5."""
    plt = pyplot()
    benches = list(pairwise["by_benchmark"])
    fig, axes = plt.subplots(1, len(benches), figsize=(4.2 * len(benches), 3.0), squeeze=False)
    for ax, bench in zip(axes[0], benches):
        block = pairwise["by_benchmark"][bench]["by_layout"]
        layouts = list(block)
        xs = range(len(layouts))
        for off, key, color in ((-0.2, "accuracy", "#4C72B0"), (0.2, "f1", "#DD8452")):
            ax.bar([x + off for x in xs], [block[lay][key] or 0.0 for lay in layouts], width=0.4, color=color,
                   label="Acc" if key == "accuracy" else "macro-F1")
        ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_xticks(list(xs), layouts, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{bench} pairwise by layout", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    md = [f"# Judge evaluation: {name}\n\n"]
    md.append(f"- model: `{info.get('model') or (rows[0].get('model') if rows else None)}`"
              + (f", adapter: `{info['adapter']}`" if info.get("adapter") else "") + "\n")
    if info.get("data"):
        md.append(f"- data: `{info['data']}`, split `{info.get('split')}`\n")
    md.append(f"- mode: {info.get('mode', '?')}; items: {m['n']} of the {m['items']['selected']} the run selects "
              f"({', '.join(f'{t} {n}' for t, n in m['tasks'].items())})"
              + (f", processes: {info['world_size']}" if info.get("world_size") else "") + "\n")
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


# --------------------------------------------------------------------------- compare


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


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        JudgeEvalConfig, "judgetrain eval judge",
        "Evaluate a judge (optionally + LoRA adapter) on PRISM / MIRAGE pairwise and pointwise records and the ordering "
        "probe: accuracy, macro P/R/F1, n_val per layout and subset; Pearson r / MAE / RMSE; explanation metrics in "
        "rationale mode.",
        "examples:\n"
        "  judgetrain eval judge --model llava-hf/llava-onevision-qwen2-7b-ov-hf --data data/prism --split test --out results/ov\n"
        "  judgetrain eval judge --model M --adapter runs/lora --data data/prism-rationales/with_rationale \\\n"
        "      --mode rationale --layouts P0,P6 --out results/ov-ft-rationale\n"
        "  judgetrain eval judge --config judge.yaml --tasks pairwise      # YAML keys are the fields below\n"
        "  accelerate launch --num_processes 8 -m judgetrain.eval.judge --model M --data DIR --out results/RUN\n"
        "  judgetrain eval report results/ov                       # recompute metrics, report and figures\n"
        "  judgetrain eval bias results/ov                         # positional / first-option bias of the run\n"
        "  judgetrain eval compare results/ov results/ov-ft        # accuracy / F1 per subset side by side\n")


def main(cfg: JudgeEvalConfig) -> int:
    result = run(cfg)
    if result["metrics"] is not None:
        _print_summary(result)
    return 0


def _print_summary(result: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    m, out = result["metrics"], Path(result["out"])
    console = Console()
    if "pairwise" in m:
        t = Table(title=f"Pairwise — {m['pairwise']['all']['n']} items")
        for c in ("benchmark", "layout", "Acc", "F1", "n_val", "invalid"):
            t.add_column(c, justify="left" if c in ("benchmark", "layout") else "right")
        for bench, block in m["pairwise"]["by_benchmark"].items():
            for lay, c in [*block["by_layout"].items(), ("all", block["all"])]:
                t.add_row(bench, lay, fmt(c["accuracy"]), fmt(c["f1"]), str(c["n_valid"]), str(c["n_invalid"]))
        console.print(t)
    if "pointwise" in m:
        t = Table(title=f"Pointwise — {m['pointwise']['all']['n']} items")
        for c in ("layout", "F1", "r_G", "r_H", "r_gold", "MAE_gold", "n_val", "invalid"):
            t.add_column(c, justify="left" if c == "layout" else "right")
        for lay, c in [*m["pointwise"]["by_layout"].items(), ("all", m["pointwise"]["all"])]:
            t.add_row(lay, fmt(c["f1"]), fmt(c["teacher"]["r"]), fmt(c["human"]["r"]), fmt(c["gold"]["r"]), fmt(c["gold"]["mae"]),
                      str(c["n_valid"]), str(c["n_invalid"]))
        console.print(t)
    if "ordering" in m:
        o = m["ordering"]
        console.print(f"Ordering probe: exact match {fmt(o['exact_match'])} over {o['n']} items, {o['n_invalid']} invalid, "
                      f"{o['label_order']} in label order, {o['reverse_label_order']} reversed")
    if result.get("n_scored") == 0:
        print("Nothing left to evaluate: every selected item was already in predictions.jsonl.", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)


if __name__ == "__main__":  # accelerate launch -m judgetrain.eval.judge ...
    run_as_module("judgetrain.eval.judge")
