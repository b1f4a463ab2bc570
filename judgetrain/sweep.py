"""Optuna sweeps over a training recipe: one fresh `accelerate launch` per trial, pruning from inside training.

    judgetrain sweep RECIPE --space SPACE.yaml --trials 50 --storage sqlite:///runs/sweeps.db --study NAME [overrides…]
    judgetrain sweep --config sweep.yaml [overrides…]       # the options below as YAML keys
    judgetrain sweep best NAME --storage sqlite:///runs/sweeps.db [--out best.yaml]

How it fits together (paper 002 §4D, B.1):

- **Search space**: a YAML file (``recipes/spaces/``) mapping recipe fields to
  Optuna distributions (:class:`SearchSpace`). Any field of the recipe's
  dataclasses can be searched; the space is checked against them with the
  trainer's own parser (lowest, highest and every categorical value) before
  any trial starts.
- **Options** (:class:`SweepConfig`): one dataclass, from which the command's
  parser is made (``--config FILE.yaml`` sets its fields) and which
  :func:`run_sweep` takes; arguments it does not know are recipe overrides
  for every trial.
- **Controller** (:func:`run_sweep`): ``study.optimize`` with a seeded TPE
  sampler; the objective of a trial launches ``accelerate launch -m
  judgetrain.sweep --config RECIPE <trial overrides>`` (this module's trial
  entry: ``judgetrain.train`` with the trial's callback) as a subprocess and
  waits. DeepSpeed state, GPU memory and out-of-memory errors stay inside the
  trial's process, and LoRA rank or sequence length can differ per trial —
  which ``Trainer.hyperparameter_search`` (one Python process) cannot do. A
  ``MaxTrialsCallback`` makes ``--trials`` the size of the *study*, so several
  controllers (machines) sharing one storage stop together.
- **Trial side** (:class:`SweepCallback`, which the trial entry
  :func:`trial_main` hands to ``judgetrain.train.main`` as a callback; it reads
  the controller's ``JUDGETRAIN_SWEEP`` variable): at every evaluation
  it computes the objective (validation loss, or a judge metric such as
  macro-F1 on PRISM-Temporal through the scoring engine), reports it to the
  study (``trial.report``) and stops training when the pruner says so
  (``trial.should_prune``). The final values go to ``sweep_result.json`` in
  the trial's folder, next to its adapter, metrics and resolved recipe.
- **Failures**: a trial process that crashes, runs out of memory or is
  killed is recorded as FAIL with its reason (user attribute
  ``fail_reason``) and re-queued ``--retries`` times with the same
  parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``). With RDB
  storage (SQLite, PostgreSQL, MySQL) a heartbeat marks the trials of a
  controller that died as stale on any machine; on the same machine (and
  for journal files, which have no heartbeat) a rerun controller fails and
  re-queues the RUNNING trials of dead controllers of this host at start.
  Finished trials are never rerun.

Storage URLs: ``sqlite:///path.db`` (one machine), ``postgresql://…`` /
``mysql://…`` (many machines), ``journal:path`` or a ``*.journal`` / ``*.log``
file (a journal file on a shared file system).
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from judgetrain.config import ConfigError, arg

ENV = "JUDGETRAIN_SWEEP"
RESULT_FILE = "sweep_result.json"
DEFAULT_STORAGE = "sqlite:///runs/sweeps.db"
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
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, log=self.log, step=self.step)

    def probe_values(self) -> list[Any]:
        """The values the space is checked with: every choice, or both ends of the range."""
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int":
            return [int(self.low), int(self.high)]
        return [self.low, self.high]


_PARAM_KEYS = {"choices", "low", "high", "log", "step", "type"}


@dataclass
class SearchSpace:
    """A search space file: ``params`` (field -> distribution) and optional ``fixed`` overrides."""

    path: Path
    params: list[Param]
    fixed: dict[str, Any] = field(default_factory=dict)
    description: str = ""

    @classmethod
    def load(cls, path: str | os.PathLike) -> SearchSpace:
        import yaml

        path = Path(path)
        if not path.is_file():
            raise SweepError(f"--space {path}: no such file (shipped spaces are in recipes/spaces/)")
        doc = yaml.safe_load(path.read_text()) or {}
        if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict) or not doc["params"]:
            raise SweepError(f"{path}: a search space is a mapping with `params:` (field: {{choices: [...]}} or "
                             "{low: x, high: y, log: true})")
        unknown = sorted(set(doc) - {"params", "fixed", "description"})
        problems = [f"{path}: unknown top-level key {k!r} (allowed: params, fixed, description)" for k in unknown]
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
        return [a for k, v in {**self.fixed, **values}.items() for a in (f"--{k}", _flag_value(v))]

    def validate(self, recipe: Path, extra: list[str] | None = None) -> None:
        """Parse the recipe (with the sweep's ``extra`` overrides) with every probe value
        through the trainer's parser and cross-field checks; raise one
        :class:`SweepError` listing every problem."""
        from judgetrain import train

        known = {a.dest for a in train.make_parser()._actions}
        problems = []
        for name in [p.name for p in self.params] + list(self.fixed):
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, known, n=1)
                problems.append(f"{self.path}: {name!r} is not a recipe field" + (f"; did you mean {close[0]!r}?" if close else ""))
        base = self.overrides({}) + list(extra or [])
        if not problems:
            try:
                train.parse(["--config", str(recipe), *base])
            except (train.ConfigError, SystemExit, ValueError) as e:
                raise SweepError(f"the recipe {recipe} does not parse here, before any searched value: {e}") from None
            for p in self.params:
                for v in p.probe_values():
                    try:
                        margs, dargs, largs, targs = train.parse(["--config", str(recipe), *base, f"--{p.name}", _flag_value(v)])
                    except (train.ConfigError, SystemExit, ValueError) as e:
                        problems.append(f"{self.path}: params.{p.name} = {v!r} does not parse: {e}")
                        continue
                    problems += [f"{self.path}: params.{p.name} = {v!r}: {m}"
                                 for m in train.check_config(margs, dargs, largs, targs, world_size=1)]
        if problems:
            raise SweepError("the search space does not fit the recipe:\n" + "\n".join(f"  - {p}" for p in dict.fromkeys(problems)))


def _flag_value(v: Any) -> str:
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


def parse_objectives(names: str, directions: str | None) -> list[Objective]:
    """``--objective a,b --direction maximize,minimize``; directions default to
    minimize for losses and errors, maximize otherwise."""
    from judgetrain.data_builders.common import csv

    objs = csv(names)
    dirs = csv(directions) if directions else ()
    if dirs and len(dirs) != len(objs):
        raise SweepError(f"--direction: {len(dirs)} direction(s) for {len(objs)} objective(s); give one per objective")
    out = []
    for k, name in enumerate(objs):
        if name != "eval_loss" and not (name.startswith("judge:") and "/" in name):
            raise SweepError(f"--objective {name!r}: use eval_loss or judge:SUBSET/METRIC (e.g. {DEFAULT_OBJECTIVE}, "
                             "judge:all/accuracy)")
        d = dirs[k] if dirs else ("minimize" if name == "eval_loss" or name.endswith(("mae", "rmse", "loss")) else "maximize")
        if d not in ("minimize", "maximize"):
            raise SweepError(f"--direction {d!r}: use minimize or maximize")
        out.append(Objective(name, d))
    return out


# --------------------------------------------------------------------------- storage and study


def storage_from_url(url: str, *, heartbeat_interval: int | None = 60, retries: int = 0):
    """An Optuna storage for ``url`` (see the module docstring for the forms)."""
    import optuna

    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        from optuna.storages.journal import JournalFileBackend

        path = Path(url.removeprefix("journal:"))
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise SweepError(f"--storage {url!r}: give sqlite:///runs/sweeps.db, postgresql://user@host/db, mysql://…, "
                         "or journal:path/to/study.journal")
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {}
    if heartbeat_interval:
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        kwargs.update(heartbeat_interval=heartbeat_interval, grace_period=2 * heartbeat_interval,
                      heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=retries) if retries else None)
    try:
        for attempt in range(5):
            try:
                return optuna.storages.RDBStorage(url, **kwargs)
            except Exception as e:  # noqa: BLE001 - only the schema-creation race is retried
                # Controllers started at the same moment on an empty database race to
                # create Optuna's tables and types; the loser sees "already exists" and
                # finds the schema complete when it tries again.
                if "already exists" not in str(e) or attempt == 4:
                    raise
                time.sleep(1.0 + attempt)
    except ImportError as e:  # the database driver
        raise SweepError(f"--storage {url.split('://')[0]}://…: {e}. PostgreSQL needs `pip install judgetrain[postgres]` "
                         "(psycopg 3; `postgresql+psycopg2://` URLs use psycopg2 if you have it); MySQL needs a driver such as PyMySQL") from None


def make_pruner(name: str, warmup_steps: int = 0, startup_trials: int = 2):
    import optuna

    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner()
    if name == "none":
        return optuna.pruners.NopPruner()
    raise SweepError(f"--pruner {name!r}: choose from {', '.join(PRUNERS)}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fail_orphans(study, retries: int) -> list[int]:
    """FAIL (and re-queue) RUNNING trials whose controller on this host is gone: a
    killed controller leaves them RUNNING forever in journal storage, and until the
    heartbeat grace period in RDB storage."""
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.trial import TrialState

    host = socket.gethostname()
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("controller") or {}
        if owner.get("host") == host and owner.get("pid") and not _alive(int(owner["pid"])):
            try:
                study._storage.set_trial_user_attr(t._trial_id, "fail_reason", f"controller pid {owner['pid']} died while the trial ran")
                study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # another controller got there first
            failed.append(t.number)
            if retries:
                RetryHeartbeatStaleTrialCallback(max_retry=retries)(study, study._storage.get_trial(t._trial_id))
    return failed


# --------------------------------------------------------------------------- the controller


class TrialFailed(RuntimeError):
    """A trial's training process did not finish; the message is its reason."""


@dataclass
class SweepConfig:
    """``judgetrain sweep``'s options, declared once: the command's parser is made from
    them (:func:`make_parser`; ``--config FILE.yaml`` sets them) and :func:`run_sweep`
    takes them. What they imply (the loaded search space, the objectives, the
    enqueued parameter sets) are properties."""

    recipe: Path | None = arg(None, "recipe YAML to sweep, or `best` to print a finished study's winning recipe "
                                    "(the first word: `judgetrain sweep RECIPE`)", positional=True)
    study_name: str | None = arg(None, "(with `best`) the study name (the second word: `judgetrain sweep best STUDY`)",
                                 positional=True)
    space: Path | None = arg(None, "search space YAML (recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)")
    trials: int = arg(50, "finished trials the study should hold (all controllers together)")
    storage: str = arg(DEFAULT_STORAGE, "Optuna storage URL; postgresql://… or journal:FILE to share a study between machines")
    study: str | None = arg(None, "study name (None: the recipe's file name)")
    out: Path | None = arg(None, "trial folders (None: runs/sweeps/STUDY); with `best`, the recipe file to write (None: stdout)")
    objective: str = arg(DEFAULT_OBJECTIVE, "eval_loss or judge:SUBSET/METRIC, comma-separated for several")
    direction: str | None = arg(None, "minimize/maximize per objective (None: from the metric)")
    pruner: str = arg("median", "median, hyperband or none", choices=PRUNERS)
    warmup_steps: int = arg(0, "median pruner: steps before a trial can be pruned")
    startup_trials: int = arg(2, "median pruner: trials that are never pruned")
    seed: int = arg(42, "TPE sampler seed (give each controller of a shared study its own)")
    accelerate_config: str | None = arg(None, "shipped name (zero3, ddp, …) or accelerate YAML, per trial")
    num_processes: int | None = arg(None, "processes per trial")
    retries: int = arg(0, "re-run a failed (crashed, OOM, killed) trial this many times")
    heartbeat: int = arg(60, "RDB storage heartbeat interval in seconds (stale after 2x)")
    enqueue: Path | None = arg(None, "YAML list of parameter sets to try first (e.g. the paper's best)")
    trial: int | None = arg(None, "(with `best`) take this trial instead of the best one")
    overrides: list[str] = arg([], "recipe overrides for every trial: on the command line, any argument not listed here "
                                   "(--field value); in a --config file, a mapping (field: value)", passthrough=True)

    def __post_init__(self) -> None:
        if isinstance(self.overrides, dict):  # from a --config file
            self.overrides = [a for k, v in self.overrides.items() for a in (f"--{k}", _flag_value(v))]
        self.overrides = [str(a) for a in self.overrides or []]
        for name in ("recipe", "space", "out", "enqueue"):
            if isinstance(getattr(self, name), str):
                setattr(self, name, Path(getattr(self, name)))
        if self.recipe is not None and not self.is_best:
            self.study = self.study or self.recipe.stem
            self.out = self.out or Path("runs") / "sweeps" / self.study

    @property
    def is_best(self) -> bool:
        return self.recipe is not None and str(self.recipe) == "best"

    @cached_property
    def search_space(self) -> SearchSpace:
        if self.space is None:
            raise SweepError("--space: give a search space YAML (shipped: recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)")
        return SearchSpace.load(self.space)

    @cached_property
    def objectives(self) -> list[Objective]:
        return parse_objectives(self.objective, self.direction)

    @cached_property
    def enqueued(self) -> list[dict[str, Any]]:
        """The parameter sets of ``--enqueue``, tried first."""
        import yaml

        if self.enqueue is None:
            return []
        if not self.enqueue.is_file():
            raise SweepError(f"--enqueue {self.enqueue}: no such file")
        sets = yaml.safe_load(self.enqueue.read_text())
        if not isinstance(sets, list) or not all(isinstance(e, dict) for e in sets):
            raise SweepError(f"--enqueue {self.enqueue}: give a YAML list of field: value mappings")
        return sets

    def check(self) -> None:
        """Everything that can fail before the study opens (the search space is checked
        against the recipe later, by :meth:`SearchSpace.validate`)."""
        if self.recipe is None:
            raise SweepError("give the recipe to sweep: `judgetrain sweep RECIPE --space SPACE.yaml …` "
                             "(or `judgetrain sweep best STUDY` for a finished study's winner)")
        if not self.recipe.is_file():
            raise SweepError(f"recipe {self.recipe} not found")
        for implied in ("search_space", "objectives", "enqueued"):  # loaded now, so that their errors come first
            getattr(self, implied)
        from judgetrain.accelerate_configs import accelerate_args

        accelerate_args(self)  # an unknown --accelerate_config fails here, not in the first trial


def _reason(rc: int, log: Path) -> str:
    import re

    tail = log.read_text(errors="replace")[-20000:] if log.is_file() else ""
    # accelerate launch exits 1 when its training process dies of a signal, and says which
    died = re.findall(r"died with <Signals\.(SIG[A-Z]+)", tail)
    if rc < 0 or died:
        name = died[-1] if died else (signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc))
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "") + f"; log: {log}"
    if "OutOfMemoryError" in tail or "CUDA out of memory" in tail:
        return f"out of GPU memory; log: {log}"
    last = [line for line in tail.splitlines() if line.strip()][-1:] or [""]
    return f"exited with code {rc}: {last[0][-300:]}; log: {log}"


TRIAL_MODULE = "judgetrain.sweep"  # its __main__ is the trial entry (trial_main)


def trial_command(cfg: SweepConfig, overrides: list[str]) -> list[str]:
    """``python -m accelerate.commands.launch [config] -m judgetrain.sweep --config RECIPE overrides``."""
    from judgetrain.accelerate_configs import accelerate_args

    return [sys.executable, "-m", "accelerate.commands.launch", *accelerate_args(cfg),
            "-m", TRIAL_MODULE, "--config", str(cfg.recipe), *overrides]


def _objective_fn(cfg: SweepConfig, console):
    import optuna

    def objective(trial: optuna.Trial):
        values = cfg.search_space.suggest(trial)
        out = (cfg.out / f"trial-{trial.number:04d}").resolve()
        out.mkdir(parents=True, exist_ok=True)
        (out / RESULT_FILE).unlink(missing_ok=True)
        trial.set_user_attr("controller", {"host": socket.gethostname(), "pid": os.getpid()})
        trial.set_user_attr("output_dir", str(out))
        overrides = cfg.search_space.overrides(values) + list(cfg.overrides) + ["--output_dir", str(out)]
        if "--run_name" not in cfg.overrides:
            overrides += ["--run_name", f"{cfg.study}-trial-{trial.number:04d}"]
        env = dict(os.environ)
        env[ENV] = json.dumps({
            "storage": cfg.storage, "study": cfg.study, "trial_id": trial._trial_id, "trial_number": trial.number,
            "objectives": [[o.name, o.direction] for o in cfg.objectives], "controller_pid": os.getpid(),
            # the pruner lives in the controller's Study object, not in the storage: the trial rebuilds it
            "pruner": [cfg.pruner, cfg.warmup_steps, cfg.startup_trials],
        })
        # wandb: every trial a run in the study's group
        env.setdefault("WANDB_RUN_GROUP", cfg.study)
        env["WANDB_JOB_TYPE"] = "trial"
        cmd = trial_command(cfg, overrides)
        log = out / "train.log"
        console.print(f"[bold]trial {trial.number}[/]: {json.dumps(values)} -> {out}")
        t0 = time.monotonic()
        with open(log, "ab") as fh:
            fh.write(("$ " + " ".join(cmd) + "\n").encode())
            fh.flush()
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=os.getcwd()).returncode
        trial.set_user_attr("seconds", round(time.monotonic() - t0, 1))
        result = _read_result(out)
        if rc != 0 or result is None or result.get("state") == "orphaned":
            reason = _reason(rc, log) if rc != 0 else f"no {RESULT_FILE} written; log: {log}"
            trial.set_user_attr("fail_reason", reason)
            console.print(f"  [red]trial {trial.number} failed[/]: {reason}")
            raise TrialFailed(reason)
        trial.set_user_attr("steps", result.get("step"))
        trial.set_user_attr("metrics", result.get("metrics", {}))
        if result["state"] == "pruned":
            console.print(f"  trial {trial.number} [yellow]pruned[/] at step {result['step']} (value {result['values']})")
            raise optuna.TrialPruned(f"pruned at step {result['step']}")
        console.print(f"  trial {trial.number} [green]complete[/]: {result['values']} after {result['step']} steps")
        vals = [float(v) for v in result["values"]]
        return vals[0] if len(vals) == 1 else vals

    return objective


def _read_result(out: Path) -> dict | None:
    path = out / RESULT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def open_study(cfg: SweepConfig):
    import optuna

    storage = storage_from_url(cfg.storage, heartbeat_interval=cfg.heartbeat, retries=cfg.retries)
    study = optuna.create_study(
        study_name=cfg.study, storage=storage, load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=cfg.seed),
        pruner=make_pruner(cfg.pruner, cfg.warmup_steps, cfg.startup_trials),
        directions=[o.direction for o in cfg.objectives],
    )
    have = [d.name.lower() for d in study.directions]
    want = [o.direction for o in cfg.objectives]
    if have != want:
        raise SweepError(f"study {cfg.study!r} exists with directions {have}; this sweep asks for {want}. "
                         "Use the same --objective/--direction, or another --study")
    attrs = study.user_attrs
    if "recipe" not in attrs:
        study.set_user_attr("recipe", str(cfg.recipe))
        study.set_user_attr("recipe_yaml", cfg.recipe.read_text())
        study.set_user_attr("space", str(cfg.search_space.path))
        study.set_user_attr("objectives", [[o.name, o.direction] for o in cfg.objectives])
        study.set_user_attr("fixed", cfg.search_space.fixed)
        study.set_user_attr("extra", cfg.overrides)
    return study


def _finished(study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def run_sweep(cfg: SweepConfig) -> Any:
    """Run trials until the study holds ``cfg.trials`` finished (complete or pruned) ones."""
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)  # messages stay on one line in logs
    if len(cfg.objectives) > 1 and cfg.pruner != "none":
        console.print("multi-objective study: Optuna cannot prune it, so --pruner is ignored")
    cfg.search_space.validate(cfg.recipe, cfg.overrides)
    cfg.out.mkdir(parents=True, exist_ok=True)
    study = open_study(cfg)
    orphans = _fail_orphans(study, cfg.retries)
    if orphans:
        console.print(f"trials {orphans} were RUNNING under a controller that died: marked failed"
                      + (", queued again" if cfg.retries else ""))
    for params in cfg.enqueued:
        study.enqueue_trial(params, skip_if_exists=True)
    done = _finished(study)
    if done >= cfg.trials:
        console.print(f"study {cfg.study!r} already holds {done} finished trials (--trials {cfg.trials}); nothing to run")
    else:
        def retry_failed(study, trial):
            if trial.state == TrialState.FAIL and cfg.retries:
                RetryHeartbeatStaleTrialCallback(max_retry=cfg.retries)(study, trial)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study.optimize(
            _objective_fn(cfg, console), n_trials=None, catch=(TrialFailed,),
            callbacks=[retry_failed, MaxTrialsCallback(cfg.trials, states=(TrialState.COMPLETE, TrialState.PRUNED))],
        )
    _print_summary(study, cfg, console)
    if "wandb" in _report_to(cfg):
        wandb_summary(study, cfg.out, [o.name for o in cfg.objectives])
    return study


def _report_to(cfg: SweepConfig) -> list[str]:
    """The trials' report_to: the last --report_to override, else the recipe's."""
    import yaml

    if "--report_to" in cfg.overrides:
        return [cfg.overrides[len(cfg.overrides) - 1 - cfg.overrides[::-1].index("--report_to") + 1]]
    value = (yaml.safe_load(cfg.recipe.read_text()) or {}).get("report_to") or []
    return [value] if isinstance(value, str) else list(value)


def wandb_summary(study, out: Path, objectives: list[str]) -> tuple[Path, dict[str, Any]]:
    """One wandb run (job type ``study``, in the trials' group) with every trial's
    state, values and parameters as a table and the best values in its summary.
    Offline into ``out`` when no API key is configured, as the trials do."""
    import wandb
    from optuna.trial import TrialState

    from judgetrain.train import wandb_netrc_configured

    if not os.environ.get("WANDB_API_KEY") and not wandb_netrc_configured() and os.environ.get("WANDB_MODE") is None:
        os.environ["WANDB_MODE"] = "offline"
    params = sorted({k for t in study.trials for k in t.params})
    columns = ["trial", "state", *objectives, "steps", *params]
    rows = [[t.number, t.state.name, *(t.values or [None] * len(objectives)), t.user_attrs.get("steps"),
             *(t.params.get(k) for k in params)] for t in study.trials]
    run = wandb.init(project=os.environ.get("WANDB_PROJECT", "judgetrain"), group=study.study_name, job_type="study",
                     name=f"{study.study_name}-summary", dir=str(out), config={"study": study.study_name, "objectives": objectives},
                     reinit="finish_previous")
    run.log({"trials": wandb.Table(columns=columns, data=rows)})
    counts = {s.name.lower(): len(study.get_trials(deepcopy=False, states=(s,))) for s in TrialState}
    summary: dict[str, Any] = {f"trials/{k}": v for k, v in counts.items()}
    if counts["complete"]:
        best = study.best_trials[0] if len(objectives) > 1 else study.best_trial
        summary.update({"best/trial": best.number, **{f"best/{o}": v for o, v in zip(objectives, best.values)},
                        **{f"best/{k}": v for k, v in best.params.items()}})
    run.summary.update(summary)
    run_dir = Path(run.dir).parent
    run.finish()
    return run_dir, summary


def _print_summary(study, cfg: SweepConfig, console) -> None:
    from rich.table import Table
    from optuna.trial import TrialState

    table = Table(title=f"study {cfg.study} ({cfg.storage})")
    for col in ("trial", "state", "value(s)", "steps", "params", "note"):
        table.add_column(col)
    for t in study.get_trials(deepcopy=False):
        vals = "" if t.values is None else ", ".join(f"{v:.4g}" for v in t.values)
        table.add_row(str(t.number), t.state.name, vals, str(t.user_attrs.get("steps", "")),
                      json.dumps(t.params), t.user_attrs.get("fail_reason", "")[:80])
    console.print(table)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if complete:
        best = study.best_trials if len(cfg.objectives) > 1 else [study.best_trial]
        for b in best:
            console.print(f"best trial {b.number}: {b.values} {json.dumps(b.params)} in {b.user_attrs.get('output_dir')}")
    print(f"trial folders in {cfg.out}; `judgetrain sweep best {cfg.study} --storage {cfg.storage}` writes the winning recipe")


# --------------------------------------------------------------------------- best configuration


def best_recipe(storage: str, study_name: str, trial_number: int | None = None) -> tuple[str, Any]:
    """The winning trial's recipe as YAML text (the sweep's recipe with the trial's
    overrides applied), with the launch command as its first line."""
    import optuna
    import yaml

    study = optuna.load_study(study_name=study_name, storage=storage_from_url(storage, heartbeat_interval=None))
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        raise SweepError(f"study {study_name!r} has no complete trial yet")
    if trial_number is not None:
        pick = [t for t in complete if t.number == trial_number]
        if not pick:
            raise SweepError(f"study {study_name!r} has no complete trial {trial_number}")
        best = pick[0]
    elif len(study.directions) > 1:
        front = study.best_trials
        best = front[0]
        print(f"multi-objective study: {len(front)} trials on the Pareto front ({[t.number for t in front]}); "
              f"taking trial {best.number} (pick another with --trial)", file=sys.stderr)
    else:
        best = study.best_trial
    recipe = yaml.safe_load(study.user_attrs["recipe_yaml"]) or {}
    recipe.update(study.user_attrs.get("fixed") or {})
    recipe.update(best.params)
    name = f"{study_name}-trial-{best.number:04d}"
    recipe["output_dir"] = f"runs/{name}"
    recipe["run_name"] = name
    header = (f"# accelerate launch -m judgetrain.train --config runs/{name}.yaml\n"
              f"# Best trial {best.number} of Optuna study {study_name!r}: {study.user_attrs.get('objectives')} = {best.values}\n"
              f"# (from {study.user_attrs.get('recipe')} with {json.dumps(best.params)})\n")
    return header + yaml.safe_dump(recipe, sort_keys=False), best


# --------------------------------------------------------------------------- CLI


def make_parser():
    from judgetrain.config import make_parser as make_config_parser
    return make_config_parser(
        SweepConfig, "judgetrain sweep", __doc__.strip().splitlines()[0],
        "examples:\n"
        "  judgetrain sweep recipes/tiny/qwen3vl-prism-pairwise-lora.yaml --space recipes/spaces/tiny.yaml \\\n"
        "      --trials 6 --storage sqlite:///runs/sweeps.db --study tiny --objective eval_loss\n"
        "  judgetrain sweep recipes/llava-ov-7b/prism-pairwise-lora.yaml --space recipes/spaces/paper002.yaml \\\n"
        "      --trials 50 --storage sqlite:///runs/sweeps.db --study prism-ov7b --accelerate-config zero3\n"
        "  judgetrain sweep --config sweep.yaml --max_steps 30   # YAML keys are the fields below\n"
        "  judgetrain sweep best prism-ov7b --storage sqlite:///runs/sweeps.db --out recipes/best.yaml\n"
        "\nany further --field value is passed to every trial as a recipe override.\n",
        usage="judgetrain sweep RECIPE --space SPACE.yaml [options] [--field value …]\n"
              "       judgetrain sweep best STUDY [--storage URL] [--out FILE] [--trial N]")


def main(cfg: SweepConfig) -> int:
    if cfg.is_best:
        name = cfg.study_name or cfg.study  # `sweep best STUDY`, or the study of a sweep's --config file
        if not name:
            raise SweepError("usage: judgetrain sweep best STUDY --storage URL [--out FILE]")
        text, best = best_recipe(cfg.storage, name, cfg.trial)
        if cfg.out:
            cfg.out.parent.mkdir(parents=True, exist_ok=True)
            cfg.out.write_text(text)
            print(f"best trial {best.number} ({best.values}) written as a recipe to {cfg.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    cfg.check()
    run_sweep(cfg)
    return 0


# --------------------------------------------------------------------------- the trial side


def _sweep_env() -> dict | None:
    raw = os.environ.get(ENV)
    return json.loads(raw) if raw else None


def sweep_callback(eval_records, processor, training_args) -> Any | None:
    """The trial's callback when this process was started by a sweep controller, else
    ``None`` (a ``judgetrain.train`` callback factory, see ``train.setup``)."""
    env = _sweep_env()
    if env is None:
        return None
    return SweepCallback(env, eval_records, processor, training_args)


def trial_main(argv: list[str] | None = None) -> int:
    """A trial's training process (``accelerate launch -m judgetrain.sweep --config
    RECIPE …``): ``judgetrain.train`` with :class:`SweepCallback`, so that the trainer
    knows nothing of sweeps. User errors print as one message (exit code 2)."""
    from judgetrain import train

    return train.script(argv, callbacks=[sweep_callback])


def _callback_base():
    from transformers import TrainerCallback

    return TrainerCallback


class SweepCallback(_callback_base()):
    """Report the objective at every evaluation, stop when the pruner says so, and
    write ``sweep_result.json`` (state, values, step, metrics) when training ends.

    Every rank computes judge metrics over the whole validation set (with a fixed
    batch size), so that ZeRO-3's collective parameter gathers line up; rank 0
    reports and decides, and its decision is broadcast.
    """

    def __init__(self, env: dict, eval_records, processor, training_args):
        self.env = env
        self.objectives = [Objective(n, d) for n, d in env["objectives"]]
        self.records = eval_records
        self.processor = processor
        self.batch_size = training_args.per_device_eval_batch_size
        self.out = Path(training_args.output_dir)
        self.pruned = False
        self.last: dict[str, Any] | None = None  # {"step", "values", "metrics"}
        self._trial = None
        if any(o.is_judge for o in self.objectives) and eval_records is None:
            raise SweepError(f"objective {self.objectives[0].name} needs validation records: set eval_split in the recipe")
        if any(o.name == "eval_loss" for o in self.objectives) and training_args.eval_strategy == "no":
            raise SweepError("objective eval_loss needs evaluations during training: set eval_strategy: steps and eval_steps")

    # -- helpers
    def _main(self) -> bool:
        from accelerate import PartialState

        return PartialState().is_main_process

    def trial(self):
        if self._trial is None:
            import optuna

            storage = storage_from_url(self.env["storage"], heartbeat_interval=None)
            study = optuna.load_study(study_name=self.env["study"], storage=storage, pruner=make_pruner(*self.env["pruner"]))
            self._trial = optuna.trial.Trial(study, self.env["trial_id"])
        return self._trial

    def _judge_metrics(self, model) -> dict[str, Any]:
        from judgetrain.eval.judge import SUBSETS, judge_metrics

        # score only the subsets the objectives read (PRISM-Temporal by default), when they name subsets
        wanted = sorted({o.subset for o in self.objectives if o.is_judge})
        subsets = wanted if all(s in SUBSETS for s in wanted) else None
        return judge_metrics(model, self.processor, self.records, subsets=subsets, batch_size=self.batch_size, progress=False)

    def compute(self, model, eval_metrics: dict[str, float] | None) -> tuple[list[float], dict[str, Any]]:
        judged = self._judge_metrics(model) if any(o.is_judge for o in self.objectives) else {}
        values = []
        for o in self.objectives:
            if o.name == "eval_loss":
                v = (eval_metrics or {}).get("eval_loss")
            else:
                v = lookup_metric(judged, o.subset, o.metric)
            values.append(float("nan") if v is None else float(v))
        return values, {"eval": eval_metrics or {}, "judge": judged}

    def _broadcast(self, obj):
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        if PartialState().num_processes == 1:
            return obj
        box = [obj]
        broadcast_object_list(box, from_process=0)
        return box[0]

    # -- events
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps and args.eval_strategy != "no":
            control.should_evaluate = True  # the final values come from an evaluation at the last step
        pid = int(self.env.get("controller_pid") or 0)
        if pid and not _alive(pid):
            # the controller died: nobody will read this trial's result, and a rerun re-queues it
            self.last = {"step": state.global_step, "values": None, "metrics": {}, "orphaned": True}
            control.should_training_stop = True
        return control

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        values, details = self.compute(model, metrics)
        self.last = {"step": state.global_step, "values": values, "metrics": details}
        prune = False
        if self._main() and len(self.objectives) == 1 and not math.isnan(values[0]):
            trial = self.trial()
            trial.report(values[0], state.global_step)
            prune = trial.should_prune()
        if self._broadcast(prune):
            self.pruned = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if self.last is None or (not self.pruned and not self.last.get("orphaned") and self.last["step"] != state.global_step):
            # no evaluation at the last step: compute the final values now (eval_loss needs an evaluation)
            values, details = self.compute(model, None)
            self.last = {"step": state.global_step, "values": values, "metrics": details}
        if not self._main():
            return control
        state_name = "orphaned" if self.last.get("orphaned") else ("pruned" if self.pruned else "complete")
        result = {"state": state_name, "step": self.last["step"], "values": self.last["values"],
                  "objectives": [o.name for o in self.objectives], "metrics": self.last["metrics"],
                  "trial_number": self.env.get("trial_number")}
        if state_name == "complete" and any(v is None or math.isnan(v) for v in result["values"]):
            result["state"] = "failed"
            result["reason"] = "an objective could not be computed (no evaluation with eval_loss at the last step?)"
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f".{RESULT_FILE}.tmp"
        tmp.write_text(json.dumps(result, indent=2, default=_nan_none) + "\n")
        os.replace(tmp, self.out / RESULT_FILE)
        return control


def _nan_none(x):
    return None


def lookup_metric(metrics: dict[str, Any], subset: str, metric: str) -> float | None:
    """``metrics`` of the judge evaluation -> the value of METRIC for SUBSET (``all`` = overall)."""
    from judgetrain.eval.judge import metric_value

    return metric_value(metrics, subset, metric)


# --------------------------------------------------------------------------- dashboard


def dashboard_storage(target: str) -> str:
    """A dashboard argument (URL, ``.db`` file or journal file) as a storage URL."""
    if "://" in target or target.startswith("journal:"):
        return target
    if target.endswith((".journal", ".log")):
        return f"journal:{target}"
    if not Path(target).is_file():
        raise SweepError(f"{target}: no such database file; give a storage URL (sqlite:///…, postgresql://…) or a .db/.journal file")
    return f"sqlite:///{target}"


if __name__ == "__main__":
    sys.exit(trial_main())
