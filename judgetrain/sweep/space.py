"""What a sweep searches and what it optimises: the search space (a YAML file mapping recipe
fields to Optuna distributions, checked against the trainer's own parser), the objectives
(``eval_loss`` or ``judge:SUBSET/METRIC``) and the pruners. Shared by the controller
(:mod:`judgetrain.sweep.controller`) and the trial side (:mod:`judgetrain.sweep.trial`).
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgetrain.compat.transformers import parser_actions
from judgetrain.config import ConfigError
from judgetrain.errors import did_you_mean

__all__ = [
    "DEFAULT_OBJECTIVE",
    "ENV",
    "PRUNERS",
    "RESULT_FILE",
    "Objective",
    "Param",
    "SearchSpace",
    "SweepError",
    "flag_value",
    "make_pruner",
    "objective_problems",
    "parse_objectives",
]

ENV = "JUDGETRAIN_SWEEP"
RESULT_FILE = "sweep_result.json"
DEFAULT_OBJECTIVE = "judge:PRISM-Temporal/macro_f1"
PRUNERS = ("median", "hyperband", "none")


class SweepError(ConfigError):
    """A sweep configuration problem; the message names the file or option and the fix
    (a :class:`~judgetrain.config.ConfigError`: the CLI prints it without a traceback)."""

    def __init__(self, message: str):
        self.problems = [message]
        ValueError.__init__(self, message)


# --------------------------------------------------------------------------- search spaces


@dataclass(frozen=True)
class Param:
    """One searched recipe field: ``choices`` (categorical) or ``low``/``high`` (``log``, ``step``)."""

    name: str
    kind: str  # "categorical", "float" or "int"
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None

    def suggest(self, trial: Any) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, self._choices())
        low, high = self._range()
        if self.kind == "int":
            return trial.suggest_int(self.name, int(low), int(high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, low, high, log=self.log, step=self.step)

    def probe_values(self) -> list[Any]:
        """The values the space is checked with: every choice, or both ends of the range."""
        if self.kind == "categorical":
            return self._choices()
        low, high = self._range()
        if self.kind == "int":
            return [int(low), int(high)]
        return [low, high]

    def _choices(self) -> list[Any]:
        assert self.choices is not None, f"{self.name}: a categorical param has choices (SearchSpace.load)"
        return list(self.choices)

    def _range(self) -> tuple[float, float]:
        assert self.low is not None and self.high is not None, f"{self.name}: a {self.kind} range has low and high"
        return self.low, self.high


_PARAM_KEYS = {"choices", "low", "high", "log", "step", "type"}
_TOP_KEYS = ("params", "fixed", "description")


@dataclass
class SearchSpace:
    """A search space file: ``params`` (field -> distribution) and optional ``fixed`` overrides."""

    path: Path
    params: list[Param]
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike) -> SearchSpace:
        from judgetrain.yamlfile import read_yaml

        path = Path(path)
        if not path.is_file():
            raise SweepError(f"--space {path}: no such file (shipped spaces are in recipes/spaces/)")
        doc = read_yaml(path) or {}
        if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict) or not doc["params"]:
            raise SweepError(
                f"{path}: a search space is a mapping with `params:` (field: {{choices: [...]}} or "
                "{low: x, high: y, log: true})"
            )
        unknown = sorted(set(doc) - set(_TOP_KEYS))
        problems = [f"{path}: unknown top-level key {k!r} (allowed: {', '.join(_TOP_KEYS)})" for k in unknown]
        params = []
        for name, spec in doc["params"].items():
            where = f"{path}: params.{name}"
            if not isinstance(spec, dict):
                problems.append(f"{where}: give a mapping ({{choices: [...]}} or {{low: x, high: y}})")
                continue
            bad = sorted(set(spec) - _PARAM_KEYS)
            if bad:
                problems.append(f"{where}: unknown key(s) {bad}; allowed: {sorted(_PARAM_KEYS)}")
            if "choices" in spec:
                if not isinstance(spec["choices"], list) or not spec["choices"]:
                    problems.append(f"{where}.choices: give a non-empty list")
                    continue
                if {"low", "high"} & set(spec):
                    problems.append(f"{where}: give either choices or low/high, not both")
                params.append(Param(name, "categorical", choices=tuple(spec["choices"])))
                continue
            if not {"low", "high"} <= set(spec):
                problems.append(f"{where}: give `choices: [...]` or both `low` and `high`")
                continue
            low, high = spec["low"], spec["high"]
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)):
                problems.append(f"{where}: low and high must be numbers (write 2.0e-6, not 2e-6: YAML reads the latter as text)")
                continue
            kind = spec.get("type") or ("int" if isinstance(low, int) and isinstance(high, int) else "float")
            if kind not in ("int", "float"):
                problems.append(f"{where}.type: {kind!r}; use int or float")
                continue
            if not low < high:
                problems.append(f"{where}: low ({low}) must be below high ({high})")
            if spec.get("log") and low <= 0:
                problems.append(f"{where}: a log range needs low > 0")
            params.append(Param(name, kind, low=low, high=high, log=bool(spec.get("log", False)), step=spec.get("step")))
        fixed = doc.get("fixed") or {}
        if not isinstance(fixed, dict):
            problems.append(f"{path}: fixed: give a mapping of field: value")
            fixed = {}
        if problems:
            raise SweepError("invalid search space:\n" + "\n".join(f"  - {p}" for p in problems))
        return cls(path, params, dict(fixed), str(doc.get("description") or ""))

    def suggest(self, trial: Any) -> dict[str, Any]:
        return {p.name: p.suggest(trial) for p in self.params}

    def overrides(self, values: dict[str, Any]) -> list[str]:
        """``--field value`` flags for the trainer: the fixed overrides, then the trial's values."""
        return [a for k, v in {**self.fixed, **values}.items() for a in (f"--{k}", flag_value(v))]

    def validate(
        self, recipe: Path, extra: list[str] | None = None, world_size: int = 1, objectives: list[Objective] | None = None
    ) -> None:
        """Parse the recipe (with the sweep's ``extra`` overrides) with every probe value
        through the trainer's parser and cross-field checks (for ``world_size`` processes
        per trial: a searched batch size must divide the recipe's effective batch), and the
        ``objectives`` against each (:func:`objective_problems`); raise one
        :class:`SweepError` listing every problem. Run once, before the first trial."""
        from judgetrain.train.args import ConfigError as TrainConfigError
        from judgetrain.train.checks import check_config
        from judgetrain.train.parser import make_parser, parse, recipe_method

        known = {a.dest for a in parser_actions(make_parser(recipe_method(["--config", str(recipe), *(extra or [])])))}
        problems = []
        for name in [p.name for p in self.params] + list(self.fixed):
            if name not in known:
                problems.append(f"{self.path}: {name!r} is not a recipe field{did_you_mean(name, known)}")
        base = self.overrides({}) + list(extra or [])
        if not problems:
            try:
                margs, dargs, targs = parse(["--config", str(recipe), *base])
            except (TrainConfigError, SystemExit, ValueError) as e:
                raise SweepError(f"the recipe {recipe} does not parse here, before any searched value: {e}") from None
            searched = {p.name for p in self.params}
            # (the cross-field checks run below, per probe value: a searched field's recipe value is never trained)
            before = (
                []
                if searched & {"eval_split", "eval_strategy"}
                else objective_problems(objectives or [], dargs.eval_split, targs.eval_strategy)
            )
            if before:  # every trial would fail on these, whatever it samples
                raise SweepError(
                    f"the recipe {recipe} (with this sweep's overrides) cannot run a trial, before any searched "
                    "value:\n" + "\n".join(f"  - {m}" for m in before)
                )
            for p in self.params:
                for v in p.probe_values():
                    try:
                        margs, dargs, targs = parse(["--config", str(recipe), *base, f"--{p.name}", flag_value(v)])
                    except (TrainConfigError, SystemExit, ValueError) as e:
                        problems.append(f"{self.path}: params.{p.name} = {v!r} does not parse: {e}")
                        continue
                    problems += [
                        f"{self.path}: params.{p.name} = {v!r}: {m}"
                        for m in check_config(margs, dargs, targs, world_size=world_size)
                        + objective_problems(objectives or [], dargs.eval_split, targs.eval_strategy)
                    ]
        if problems:
            raise SweepError(
                "the search space does not fit the recipe:\n" + "\n".join(f"  - {p}" for p in dict.fromkeys(problems))
            )


def flag_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        raise SweepError(f"list values cannot be searched as flags ({v!r}); search a scalar field")
    return str(v)


# --------------------------------------------------------------------------- objectives


@dataclass(frozen=True)
class Objective:
    """``eval_loss`` (the Trainer's validation loss) or ``judge:SUBSET/METRIC`` (the judge
    evaluation's metric on the validation split, e.g. ``judge:PRISM-Temporal/macro_f1``)."""

    name: str
    direction: str

    @property
    def is_judge(self) -> bool:
        return self.name.startswith("judge:")

    @property
    def subset(self) -> str:
        return self.name.removeprefix("judge:").split("/", 1)[0]

    @property
    def metric(self) -> str:
        return self.name.removeprefix("judge:").split("/", 1)[1]


def objective_problems(objectives: list[Objective], eval_split: str | None, eval_strategy: Any) -> list[str]:
    """What a trial with this recipe could not measure: ``eval_loss`` needs evaluations during
    training (``eval_strategy`` other than ``no``), a judge metric needs validation records
    (``eval_split``). The controller checks these before the first trial; a trial refuses
    them with the same words."""
    problems = []
    strategy = getattr(eval_strategy, "value", eval_strategy)
    if any(o.name == "eval_loss" for o in objectives) and strategy == "no":
        problems.append(
            "eval_strategy: 'no', but the objective eval_loss needs evaluations during training: set "
            "`eval_strategy: steps` and `eval_steps` in the recipe (or pass --eval_strategy steps --eval_steps N), "
            f"or optimise a judge metric (--objective {DEFAULT_OBJECTIVE})"
        )
    judge = [o.name for o in objectives if o.is_judge]
    if judge and not eval_split:
        problems.append(
            f"eval_split: none, but the objective {judge[0]} is measured on validation records: set `eval_split: validation`"
        )
    return problems


def parse_objectives(names: str, directions: str | None) -> list[Objective]:
    """``--objective a,b --direction maximize,minimize``; directions default to
    minimize for losses and errors, maximize otherwise."""
    from judgetrain.data_builders.core.common import csv

    objs = csv(names)
    dirs = csv(directions) if directions else ()
    if dirs and len(dirs) != len(objs):
        raise SweepError(f"--direction: {len(dirs)} direction(s) for {len(objs)} objective(s); give one per objective")
    out = []
    for k, name in enumerate(objs):
        if name != "eval_loss" and not (name.startswith("judge:") and "/" in name):
            raise SweepError(
                f"--objective {name!r}: use eval_loss or judge:SUBSET/METRIC (e.g. {DEFAULT_OBJECTIVE}, judge:all/accuracy)"
            )
        d = dirs[k] if dirs else ("minimize" if name == "eval_loss" or name.endswith(("mae", "rmse", "loss")) else "maximize")
        if d not in ("minimize", "maximize"):
            raise SweepError(f"--direction {d!r}: use minimize or maximize")
        out.append(Objective(name, d))
    return out


# --------------------------------------------------------------------------- pruners


def make_pruner(name: str, warmup_steps: int = 0, startup_trials: int = 2):
    import optuna

    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name == "none":
        return optuna.pruners.NopPruner()
    raise SweepError(f"--pruner {name!r}: choose from {', '.join(PRUNERS)}")
