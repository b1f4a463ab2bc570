"""The evaluations a run folder can hold, by the name ``run.json["evaluation"]`` records.

Each entry names the module whose ``report(run_dir) -> metrics`` rebuilds a run's
``metrics.json``, ``report.md`` and figures from ``predictions.jsonl`` + ``run.json``, and
whose ``cells(metrics) -> {label: value}`` gives the numbers ``eval compare`` puts side
by side; a module may also offer ``paired(first_run, other_run) -> {column: {"pvalue", "n",
"test"}}``, which gives ``eval compare`` its p rows (PhaseFusion:
:mod:`judgetrain.eval.phasefusion_paired`). Modules are imported only when used.
README: "Run folders".
"""

from __future__ import annotations

import difflib
import importlib
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from .runs import PredictionsError, RUN_INFO

__all__ = ["EVALUATIONS", "evaluation_of", "module_for"]

EVALUATIONS = {
    "timecatch": "judgetrain.eval.report",
    "judge": "judgetrain.eval.judge_report",
    "phasefusion": "judgetrain.eval.phasefusion_report",
}


def module_for(name: str) -> ModuleType:
    """The report module of evaluation ``name``; an unknown name gets a "did you mean"."""
    if name not in EVALUATIONS:
        close = difflib.get_close_matches(str(name), EVALUATIONS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise PredictionsError(f"unknown evaluation {name!r}.{hint} Known: {', '.join(EVALUATIONS)}")
    return importlib.import_module(EVALUATIONS[name])


def evaluation_of(run_dir: str | Path) -> tuple[str, dict[str, Any]]:
    """The evaluation a run folder holds and its ``run.json``; a folder without one, or
    one that names no evaluation, is an error that says what to do."""
    path = Path(run_dir) / RUN_INFO
    if not path.is_file():
        raise PredictionsError(f"{run_dir} holds no {RUN_INFO}: is it the --out folder of a `judgetrain eval …` run?")
    info = json.loads(path.read_text())
    name = info.get("evaluation")
    if not name:
        raise PredictionsError(f"{path} names no evaluation (a run of an older judgetrain); rerun its command with "
                               "--overwrite to record one")
    return name, info
