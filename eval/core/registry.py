"""The evaluations a run folder can hold, by the name ``run.json["evaluation"]`` records.

Each entry of :data:`EVALUATIONS` names the report module whose ``report(run_dir) ->
metrics`` rebuilds a run's ``metrics.json``, ``report.md`` and figures from
``predictions.jsonl`` + ``run.json``, and whose ``cells(metrics) -> {label: value}`` gives
the numbers ``eval compare`` puts side by side; an optional ``cell_counts(metrics) ->
{label: (k | None, n)}`` gives the n (and, for a rate, the Wilson interval) behind each. An evaluation in :data:`PAIRED_TESTS` also
names the module whose ``paired(first_run, other_run) -> {column: {"pvalue", "n", "test"}}``
gives ``eval compare`` its p rows (PhaseFusion: :mod:`judgetrain.eval.phasefusion.paired`).
Modules are imported only when used.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from judgetrain.errors import did_you_mean

from .runs import RUN_INFO, PredictionsError

__all__ = ["EVALUATIONS", "PAIRED_TESTS", "evaluation_of", "module_for", "paired_tests_for"]

EVALUATIONS = {
    "timecatch": "judgetrain.eval.timecatch.report",
    "judge": "judgetrain.eval.judge.report",
    "phasefusion": "judgetrain.eval.phasefusion.report",
}
PAIRED_TESTS = {"phasefusion": "judgetrain.eval.phasefusion.paired"}


def module_for(name: str) -> ModuleType:
    """The report module of evaluation ``name``; an unknown name gets a "did you mean"."""
    if name not in EVALUATIONS:
        hint = did_you_mean(name, EVALUATIONS, sentence=True)
        raise PredictionsError(f"unknown evaluation {name!r}.{hint} Known: {', '.join(EVALUATIONS)}")
    return importlib.import_module(EVALUATIONS[name])


def paired_tests_for(name: str) -> Callable[[Path, Path], dict[str, dict[str, Any]]] | None:
    """The ``paired(first_run, other_run)`` tests of evaluation ``name``, or None for one without them."""
    return importlib.import_module(PAIRED_TESTS[name]).paired if name in PAIRED_TESTS else None


def evaluation_of(run_dir: str | Path) -> tuple[str, dict[str, Any]]:
    """The evaluation a run folder holds and its ``run.json``; a folder without one, or
    one that names no evaluation, is an error that says what to do."""
    path = Path(run_dir) / RUN_INFO
    if not path.is_file():
        raise PredictionsError(f"{run_dir} holds no {RUN_INFO}: is it the --out folder of a `judgetrain eval …` run?")
    info = json.loads(path.read_text())
    name = info.get("evaluation")
    if not name:
        raise PredictionsError(
            f"{path} names no evaluation (a run of an older judgetrain); rerun its command with --overwrite to record one"
        )
    return name, info
