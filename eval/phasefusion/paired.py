"""Paired tests between two PhaseFusion runs, question by question: the p rows of ``eval compare``.

:func:`paired` reads both runs' ``predictions.jsonl``, pairs their questions by id and
tests, per arm, the columns :func:`judgetrain.eval.phasefusion.report.cells` shows that
have a paired test, under exactly the definitions behind those cells (identity ordering,
first origin; :func:`judgetrain.eval.phasefusion.answers.per_question_answers`):

- ``acc ARM``: exact McNemar on per-question correctness (paper 001 §4, Tables 1, S7, S9);
- ``flip ARM``: exact McNemar on per-question ordering-flip indicators. Paper 001 gives
  p-values for flip-rate changes (Table S3, rows 11–12) without naming the test; a flip
  is a paired binary outcome per question, so McNemar is the natural choice;
- ``margin ARM`` (arms with an option posterior): Wilcoxon signed-rank, two-sided, on
  per-question margins (scipy's default method: exact null distribution up to 50 pairs
  without ties or zero differences; zero differences dropped).

``changed …`` columns (Table 1B) have no paired test here. Every p is uncorrected.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core import stats
from ..core.runs import METRICS, read_run
from .answers import collect_rows, per_question_answers
from .metrics import POSTERIOR_POOLS, compute_metrics

__all__ = ["TESTS", "paired"]

# What each kind of column is tested with; ``eval compare`` prints it under its table.
TESTS = {
    "acc": "exact McNemar on per-question correctness",
    "flip": "exact McNemar on per-question ordering flips",
    "margin": "Wilcoxon signed-rank (two-sided) on per-question margins",
}


def paired(first_run: str | os.PathLike, other_run: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Per column of :func:`cells` that has a paired test, ``{"pvalue", "n", "test"}``: the
    two-sided p-value of ``other_run`` against ``first_run`` on the ``n`` questions both runs
    scored (paired by question id) and the test's name (:data:`TESTS`).

    ``acc`` and ``flip`` pair the questions that carry every arm in each run (Table 1A's
    questions, which the cells are computed on); ``margin`` pairs the questions that carry
    the arm (as ``metrics["margin"]`` does). An arm missing from either run, or without shared
    questions, gets no entry; nor does a vote's margin (no posterior)."""
    a, b = _answers(Path(first_run)), _answers(Path(other_run))
    out: dict[str, dict[str, Any]] = {}
    in_b = set(b["table_a"])
    ids = [q for q in a["table_a"] if q in in_b]
    for arm, pa in a["pq"].items():
        pb = b["pq"].get(arm)
        if pb is None:
            continue
        if ids:
            for kind, key in (("acc", "correct"), ("flip", "flip")):
                test = stats.mcnemar_exact([pb[q][key] for q in ids], [pa[q][key] for q in ids])
                out[f"{kind} {arm}"] = {"pvalue": test["pvalue"], "n": len(ids), "test": TESTS[kind]}
        shared = [q for q in pa if q in pb]
        if shared and a["pools"][arm] in POSTERIOR_POOLS and b["pools"][arm] in POSTERIOR_POOLS:
            p = stats.wilcoxon_signed_rank([pb[q]["margin"] for q in shared], [pa[q]["margin"] for q in shared])
            out[f"margin {arm}"] = {"pvalue": p, "n": len(shared), "test": TESTS["margin"]}
    return out


def _answers(run: Path) -> dict[str, Any]:
    """A run's per-question answers per arm at the first origin (``pq``), each arm's pooling,
    and Table 1A's questions (those carrying every arm), in file order."""
    rows, info = read_run(run, f"run `judgetrain eval phasefusion --out {run} …` first")
    # the arms and origins the cells were read from; metrics.json holds them once `eval report` ran
    metrics = json.loads((run / METRICS).read_text()) if (run / METRICS).is_file() else compute_metrics(rows, info)
    col = collect_rows(rows)
    first = metrics["origins"][0] if metrics["origins"] else "0"
    arms: Mapping[str, Mapping[str, Any]] = metrics["arms"]
    pq = {name: per_question_answers(col, spec, first) for name, spec in arms.items()}
    table_a = [q for q in col["questions"] if all(q in by_q for by_q in pq.values())]
    return {"pq": pq, "pools": {name: spec["pool"] for name, spec in arms.items()}, "table_a": table_a}
