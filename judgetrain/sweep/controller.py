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
- **Controller** (:func:`run_sweep`): ``study.optimize`` with TPE seeded per
  trial from (study, ``--seed``, trial number) (:mod:`judgetrain.sweep.sampler`),
  so that a restarted controller, or a second one with the same ``--seed``,
  continues the study's sampling instead of replaying it; a parameter set that
  a finished or running trial already has is skipped (recorded as FAIL with
  ``duplicate_of``), never trained twice. The objective of a trial launches ``accelerate launch -m
  judgetrain.sweep --config RECIPE <trial overrides>`` (this module's trial
  entry: ``judgetrain.train`` with the trial's callback) as a subprocess and
  waits. DeepSpeed state, GPU memory and out-of-memory errors stay inside the
  trial's process, and LoRA rank or sequence length can differ per trial —
  which ``Trainer.hyperparameter_search`` (one Python process) cannot do.
  ``--trials`` is the size of the *study*: a controller starts a trial only
  while finished + running trials (of every controller) are fewer, and waits
  for the others' running trials otherwise, so several controllers (machines)
  sharing one storage end with exactly ``--trials`` finished trials. While it waits it prints
  a line per trial as it starts (``trial n of N``, its parameters), per value the trial
  reports, and as it ends (:mod:`judgetrain.sweep.progress`).
- **Trial side** (:class:`~judgetrain.sweep.reporting.SweepCallback`, which the trial entry
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
  Finished trials are never rerun. The recipe and space are checked once, before the
  first trial, with the trainer's own checks and against the objective (``eval_loss``
  needs evaluations); ``--stop_after_failures`` trials in a row failing with the same
  error stop the sweep with that error (:mod:`judgetrain.sweep.failures`).

- **Results** (:mod:`judgetrain.sweep.results`): the table of trials, the wandb
  summary run, and ``sweep best``'s recipe with exactly the winning trial's overrides.

README: "`judgetrain sweep`, `judgetrain dashboard`". Storage URLs: ``sqlite:///path.db`` (one machine), ``postgresql://…`` /
``mysql://…`` (many machines), ``journal:path`` or a ``*.journal`` / ``*.log``
file (a journal file on a shared file system).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, cast

from judgetrain.cluster import SlurmArgs
from judgetrain.compat.accelerate import launch_command
from judgetrain.compat.optuna import reopen_trial, trial_id
from judgetrain.config import arg, one_of
from judgetrain.train.accelerate_configs import NAMES

from .failures import FailureStreak, failure_key, failure_reason
from .progress import TrialProgress, escape, format_params, wait_reporting
from .results import best_recipe, print_summary, wandb_summary
from .space import (
    DEFAULT_OBJECTIVE,
    ENV,
    PRUNERS,
    RESULT_FILE,
    Objective,
    SearchSpace,
    SweepError,
    flag_value,
    make_pruner,
    parse_objectives,
)
from .storage import DEFAULT_STORAGE, process_alive, storage_from_url

__all__ = [
    "MAX_SKIPPED",
    "TRIAL_MODULE",
    "SweepConfig",
    "TrialFailed",
    "TrialSkipped",
    "dashboard_storage",
    "main",
    "make_parser",
    "open_study",
    "run_sweep",
    "skip_reason",
    "study_room",
    "trial_command",
    "trial_overrides",
]

# --------------------------------------------------------------------------- orphaned trials


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
        if owner.get("host") == host and owner.get("pid") and not process_alive(int(owner["pid"])):
            if t.user_attrs.get("slurm_job"):  # its job would train on for nobody
                from judgetrain.cluster import cancel

                cancel(t.user_attrs["slurm_job"])
            try:
                reopen_trial(study, trial_id(t)).set_user_attr(
                    "fail_reason", f"controller pid {owner['pid']} died while the trial ran"
                )
                frozen = study.tell(t.number, state=TrialState.FAIL)
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
                continue  # another controller got there first (tell: "Cannot tell a FAIL trial")
            failed.append(t.number)
            if retries:
                RetryHeartbeatStaleTrialCallback(max_retry=retries)(study, frozen)
    return failed


# --------------------------------------------------------------------------- the controller


class TrialFailed(RuntimeError):
    """A trial's training process did not finish; the message is its reason."""


@dataclass
class SweepConfig(SlurmArgs):
    """``judgetrain sweep``'s options, declared once: the command's parser is made from
    them (:func:`make_parser`; ``--config FILE.yaml`` sets them) and :func:`run_sweep`
    takes them. What they imply (the loaded search space, the objectives, the
    enqueued parameter sets) are properties. With ``slurm``, each trial is a SLURM job of
    the :class:`~judgetrain.cluster.SlurmArgs` resources."""

    recipe: Path | None = arg(
        None,
        "recipe YAML to sweep, or `best` to print a finished study's winning recipe (the first word: `judgetrain sweep RECIPE`)",
        positional=True,
    )
    study_name: str | None = arg(
        None, "(with `best`) the study name (the second word: `judgetrain sweep best STUDY`)", positional=True
    )
    space: Path | None = arg(None, "search space YAML (recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)")
    trials: int = arg(50, "finished trials the study should hold (all controllers together)")
    storage: str = arg(DEFAULT_STORAGE, "Optuna storage URL; postgresql://… or journal:FILE to share a study between machines")
    study: str | None = arg(None, "study name (None: the recipe's file name)")
    out: Path | None = arg(None, "trial folders (None: runs/sweeps/STUDY); with `best`, the recipe file to write (None: stdout)")
    objective: str = arg(DEFAULT_OBJECTIVE, "eval_loss or judge:SUBSET/METRIC, comma-separated for several")
    direction: str | None = arg(None, "minimize/maximize per objective (None: from the metric)")
    pruner: str = arg("median", one_of(PRUNERS), choices=PRUNERS)
    warmup_steps: int = arg(0, "median pruner: steps before a trial can be pruned")
    startup_trials: int = arg(2, "median pruner: trials that are never pruned")
    seed: int = arg(
        42,
        "sampler seed; each trial's TPE draw is seeded from (study, seed, trial number), so restarted "
        "and parallel controllers may keep the same seed without repeating each other",
    )
    accelerate_config: str | None = arg(None, f"shipped name ({', '.join(NAMES)}) or accelerate YAML, per trial")
    num_processes: int | None = arg(None, "processes per trial")
    retries: int = arg(0, "re-run a failed (crashed, OOM, killed) trial this many times")
    stop_after_failures: int = arg(
        3,
        "stop the sweep, printing the error, when this many trials in a row fail with the "
        "same error (a configuration every trial shares); 0: never",
    )
    heartbeat: int = arg(60, "RDB storage heartbeat interval in seconds (stale after 2x)")
    enqueue: Path | None = arg(None, "YAML list of parameter sets to try first (e.g. the paper's best)")
    trial: int | None = arg(None, "(with `best`) take this trial instead of the best one")
    parallel: int = arg(1, "trials running at once, from this controller (with --slurm: its jobs in the queue at once)")
    slurm: bool = arg(
        False,
        "each trial its own SLURM job (sbatch; --nodes, --gpus_per_node, --partition, --time, …), "
        "waited for; give a storage every node reaches (postgresql://…)",
    )
    poll: float = arg(
        5.0,
        "seconds between looks at the study: for the values a running trial reports (printed as they "
        "come), and while other controllers' trials fill it",
    )
    overrides: list[str] = arg(
        [],
        "recipe overrides for every trial: on the command line, any argument not listed here "
        "(--field value); in a --config file, a mapping (field: value)",
        passthrough=True,
    )

    def __post_init__(self) -> None:
        if isinstance(self.overrides, dict):  # from a --config file
            self.overrides = [a for k, v in self.overrides.items() for a in (f"--{k}", flag_value(v))]
        self.overrides = [str(a) for a in self.overrides or []]
        for name in ("recipe", "space", "out", "enqueue"):
            if isinstance(getattr(self, name), str):
                setattr(self, name, Path(getattr(self, name)))
        if self.recipe is not None and not self.is_best:
            self.study = self.study or self.recipe.stem
            self.out = self.out or Path("runs") / "sweeps" / self.study

    @property
    def recipe_file(self) -> Path:
        """The sweep's recipe (a sweep, not ``best``, always has one: the parser requires it)."""
        if self.recipe is None:
            raise SweepError("give the recipe to sweep: `judgetrain sweep RECIPE --space SPACE`")
        return self.recipe

    @property
    def trials_dir(self) -> Path:
        """Where the trial folders go (``--out``, else ``runs/sweeps/STUDY``: set with the recipe)."""
        return self.out if self.out is not None else Path("runs") / "sweeps" / str(self.study or self.recipe_file.stem)

    @property
    def is_best(self) -> bool:
        return self.recipe is not None and str(self.recipe) == "best"

    @cached_property
    def search_space(self) -> SearchSpace:
        if self.space is None:
            raise SweepError(
                "--space: give a search space YAML (shipped: recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)"
            )
        return SearchSpace.load(self.space)

    @cached_property
    def world_size(self) -> int:
        """Processes per trial (a searched batch size must divide the recipe's effective batch)."""
        from judgetrain.train.accelerate_configs import world_size

        if self.slurm:  # the job's: one process per GPU of every node
            from judgetrain.cluster import processes

            return self.num_processes or processes(self)
        return world_size(self)

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
            raise SweepError(
                "give the recipe to sweep: `judgetrain sweep RECIPE --space SPACE.yaml …` "
                "(or `judgetrain sweep best STUDY` for a finished study's winner)"
            )
        if not self.recipe.is_file():
            raise SweepError(f"recipe {self.recipe} not found")
        for implied in ("search_space", "objectives", "enqueued"):  # loaded now, so that their errors come first
            getattr(self, implied)
        from judgetrain.cluster import check_slurm, require_slurm
        from judgetrain.train.accelerate_configs import accelerate_args, launch_problems

        check_slurm(self, self.slurm)
        if self.parallel < 1:
            raise SweepError(f"--parallel {self.parallel}: give at least 1")
        if self.slurm:
            require_slurm()
        self._check_overrides()
        accelerate_args(self)  # an unknown --accelerate_config fails here, not in the first trial
        problems = [] if self.slurm else launch_problems(self)  # a job's GPUs are its nodes', not this machine's
        if problems:
            raise SweepError(problems[0])

    def _check_overrides(self) -> None:
        """An argument the sweep does not know is a recipe override; one that is no recipe field
        either fails here, with the closest of the sweep's options and the recipe's fields
        (``--trails`` → ``--trials``), rather than in the first trial."""
        from judgetrain.errors import did_you_mean
        from judgetrain.train.parser import make_parser as recipe_parser

        recipe_flags = {o for a in recipe_parser()._actions for o in a.option_strings}
        own = {o for a in make_parser()._actions for o in a.option_strings if o not in ("-h", "--help")}
        unknown = [a.split("=", 1)[0] for a in self.overrides if a.startswith("--") and a.split("=", 1)[0] not in recipe_flags]
        if unknown:
            raise SweepError(
                "; ".join(
                    f"unknown argument {a!r}{did_you_mean(a, sorted(own | recipe_flags))} (neither a sweep "
                    "option nor a recipe field: `judgetrain sweep --help`, `judgetrain train --help`)"
                    for a in unknown
                )
            )


TRIAL_MODULE = "judgetrain.sweep"  # its __main__ is the trial entry (trial_main)


def trial_command(cfg: SweepConfig, overrides: list[str]) -> list[str]:
    """``accelerate launch [config] -m judgetrain.sweep --config RECIPE overrides``, run by this
    interpreter (:func:`judgetrain.compat.accelerate.launch_command`)."""
    from judgetrain.train.accelerate_configs import accelerate_args

    return [*launch_command(), *accelerate_args(cfg), "-m", TRIAL_MODULE, "--config", str(cfg.recipe), *overrides]


class TrialSkipped(TrialFailed):
    """A trial that was not trained: its parameters repeat another trial's, or the study
    was already full when it started (two controllers asked at the same moment)."""


MAX_SKIPPED = 50  # duplicates in a row before the space counts as exhausted


def skip_reason(study, trial, values: dict[str, Any], size: int) -> str | None:
    """Why ``trial`` (with sampled ``values``) must not be trained, else ``None``: another
    finished or running trial has the same parameters, or ``size`` trials numbered before
    it are finished or running. Marks the trial with ``duplicate_of`` / ``surplus``."""
    from .sampler import TAKEN, first_duplicate

    others = study.get_trials(deepcopy=False)
    duplicate = first_duplicate(others, trial.number, values)
    if duplicate is not None:
        trial.set_user_attr("duplicate_of", duplicate)
        return f"same parameters as trial {duplicate}: skipped, never trained twice"
    ahead = sum(t.number < trial.number and t.state in TAKEN for t in others)
    if ahead >= size:
        trial.set_user_attr("surplus", True)
        return f"{ahead} earlier trials are finished or running (--trials {size}): skipped"
    return None


def _trial_env(cfg: SweepConfig, trial) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV] = json.dumps(
        {
            "storage": cfg.storage,
            "study": cfg.study,
            "trial_id": trial_id(trial),
            "trial_number": trial.number,
            # a SLURM job runs on another machine, where this pid means nothing: the heartbeat watches the controller instead
            "objectives": [[o.name, o.direction] for o in cfg.objectives],
            "controller_pid": None if cfg.slurm else os.getpid(),
            # the pruner lives in the controller's Study object, not in the storage: the trial rebuilds it
            "pruner": [cfg.pruner, cfg.warmup_steps, cfg.startup_trials],
        }
    )
    # wandb: every trial a run in the study's group
    env.setdefault("WANDB_RUN_GROUP", str(cfg.study))
    env["WANDB_JOB_TYPE"] = "trial"
    return env


def trial_overrides(cfg: SweepConfig, values: dict[str, Any]) -> list[str]:
    """What a trial runs on top of the recipe, as ``--field value`` flags: the space's fixed
    fields, the sampled values, then the sweep's overrides (which
    win, as on the command line). Stored with the trial, for ``sweep best``."""
    return cfg.search_space.overrides(values) + list(cfg.overrides)


def _train_trial(
    cfg: SweepConfig, trial, overrides: list[str], out: Path, progress: TrialProgress
) -> tuple[int, Path, str | None]:
    """Run one trial's training process, here or (``--slurm``) as a SLURM job; the values it
    reports to the study go to the console while it runs (every ``--poll`` seconds). Its exit
    code, its log (``out/train.log``, or node 0's of the job) and, for a job that did not
    complete, why."""
    name = f"{cfg.study}-trial-{trial.number:04d}"
    if "--run_name" not in cfg.overrides:
        overrides = overrides + ["--run_name", name]
    t0 = time.monotonic()
    if cfg.slurm:
        from .jobs import run_slurm_trial

        env = _trial_env(cfg, trial)
        exported = {k: env[k] for k in (ENV, "WANDB_RUN_GROUP", "WANDB_JOB_TYPE")}
        rc, log, reason = run_slurm_trial(cfg, trial, name, overrides + ["--output_dir", str(out)], exported, out, progress.check)
    else:
        cmd = trial_command(cfg, overrides + ["--output_dir", str(out)])
        log, reason = out / "train.log", None
        with open(log, "ab") as fh:
            fh.write(("$ " + " ".join(cmd) + "\n").encode())
            fh.flush()
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_trial_env(cfg, trial), cwd=os.getcwd())
            rc = wait_reporting(proc, cfg.poll, progress.check)
    trial.set_user_attr("seconds", round(time.monotonic() - t0, 1))
    return rc, log, reason


def _objective_fn(cfg: SweepConfig, console):
    import optuna

    skipped_in_a_row = [0]

    def objective(trial: optuna.Trial):
        values = cfg.search_space.suggest(trial)
        trial.set_user_attr("controller", {"host": socket.gethostname(), "pid": os.getpid()})
        skip = skip_reason(trial.study, trial, values, cfg.trials)
        if skip:
            console.print(f"[bold]trial #{trial.number}[/]: {escape(format_params(values))}: {skip}")
            trial.set_user_attr("fail_reason", skip)
            skipped_in_a_row[0] += 1
            if skipped_in_a_row[0] >= MAX_SKIPPED:
                raise SweepError(
                    f"the sampler proposed {MAX_SKIPPED} parameter sets in a row that the study already holds: "
                    f"the search space {cfg.space} is exhausted; widen it or lower --trials"
                )
            raise TrialSkipped(skip)
        skipped_in_a_row[0] = 0
        out = (cfg.trials_dir / f"trial-{trial.number:04d}").resolve()
        out.mkdir(parents=True, exist_ok=True)
        (out / RESULT_FILE).unlink(missing_ok=True)
        overrides = trial_overrides(cfg, values)
        trial.set_user_attr("output_dir", str(out))
        trial.set_user_attr("overrides", overrides)
        progress = TrialProgress(console, trial, cfg.trials, [o.name for o in cfg.objectives])
        progress.started(values, out)
        rc, log, reason = _train_trial(cfg, trial, overrides, out, progress)
        return _trial_outcome(trial, rc, out, progress, log, reason)

    return objective


def _trial_outcome(trial, rc: int, out: Path, progress: TrialProgress, log: Path, reason: str | None = None):
    """The trial's value(s) from its ``sweep_result.json``; raises TrialPruned or TrialFailed
    (with ``reason`` when the caller knows it: a SLURM job cancelled or out of time)."""
    import optuna

    result = _read_result(out)
    if reason is not None or rc != 0 or result is None or result.get("state") in ("orphaned", "failed"):
        if reason is None:
            reason = (
                failure_reason(rc, log)
                if rc != 0
                else f"no {RESULT_FILE} written; log: {log}"
                if result is None
                else f"{result.get('reason') or result['state']}; log: {log}"
            )
        trial.set_user_attr("fail_reason", reason)
        trial.set_user_attr("fail_key", failure_key(reason, out))
        progress.finished("failed", reason=reason)
        raise TrialFailed(reason)
    trial.set_user_attr("steps", result.get("step"))
    trial.set_user_attr("metrics", result.get("metrics", {}))
    if result["state"] == "pruned":
        progress.finished("pruned", result["values"], result["step"])
        raise optuna.TrialPruned(f"pruned at step {result['step']}")
    progress.finished("complete", result["values"], result["step"])
    vals = [float(v) for v in result["values"]]
    return vals[0] if len(vals) == 1 else vals


def _read_result(out: Path) -> dict | None:
    path = out / RESULT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def open_study(cfg: SweepConfig):
    import optuna

    storage = storage_from_url(cfg.storage, heartbeat_interval=cfg.heartbeat, retries=cfg.retries)
    from .sampler import TrialSeededSampler

    study = optuna.create_study(
        study_name=cfg.study,
        storage=storage,
        load_if_exists=True,
        sampler=TrialSeededSampler(cfg.seed),
        pruner=make_pruner(cfg.pruner, cfg.warmup_steps, cfg.startup_trials),
        directions=[cast("Literal['minimize', 'maximize']", o.direction) for o in cfg.objectives],  # checked by Objective
    )
    have = [d.name.lower() for d in study.directions]
    want = [o.direction for o in cfg.objectives]
    if have != want:
        raise SweepError(
            f"study {cfg.study!r} exists with directions {have}; this sweep asks for {want}. "
            "Use the same --objective/--direction, or another --study"
        )
    attrs = study.user_attrs
    if "recipe" not in attrs:
        study.set_user_attr("recipe", str(cfg.recipe))
        study.set_user_attr("recipe_yaml", cfg.recipe_file.read_text())
        study.set_user_attr("space", str(cfg.search_space.path))
        study.set_user_attr("objectives", [[o.name, o.direction] for o in cfg.objectives])
        study.set_user_attr("fixed", cfg.search_space.fixed)
        study.set_user_attr("extra", cfg.overrides)
    return study


def _finished(study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def study_room(study, size: int) -> tuple[str, int, int]:
    """(``"full"``, ``"room"`` or ``"wait"``, finished, running): full when the study holds
    ``size`` finished (complete or pruned) trials; room when finished + running trials
    are fewer, so another may start; wait while running trials could still fill it."""
    from optuna.trial import TrialState

    finished = _finished(study)
    running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    state = "full" if finished >= size else ("room" if finished + running < size else "wait")
    return state, finished, running


def _wait_for_room(study, cfg: SweepConfig, console) -> bool:
    """True when this controller should start another trial, False when the study is full;
    waits (failing stale and orphaned trials as it goes) while others' trials run."""
    from optuna.storages import fail_stale_trials

    announced = False
    while True:
        state, finished, running = study_room(study, cfg.trials)
        if state != "wait":
            return state == "room"
        if not announced:
            console.print(
                f"study {cfg.study!r}: {finished} finished and {running} running trial(s) make {cfg.trials} "
                "(--trials); waiting for the running ones (other controllers), in case one fails"
            )
            announced = True
        time.sleep(cfg.poll)
        fail_stale_trials(study)  # RDB storage: trials whose controller stopped beating (no-op otherwise)
        _fail_orphans(study, cfg.retries)


def run_sweep(cfg: SweepConfig) -> Any:
    """Run trials until the study holds ``cfg.trials`` finished (complete or pruned) ones."""
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback
    from optuna.trial import TrialState
    from rich.console import Console

    console = Console(stderr=True, soft_wrap=True)  # messages stay on one line in logs
    if len(cfg.objectives) > 1 and cfg.pruner != "none":
        console.print("multi-objective study: Optuna cannot prune it, so --pruner is ignored")
    cfg.search_space.validate(cfg.recipe_file, cfg.overrides, world_size=cfg.world_size, objectives=cfg.objectives)
    cfg.trials_dir.mkdir(parents=True, exist_ok=True)
    study = open_study(cfg)
    orphans = _fail_orphans(study, cfg.retries)
    if orphans:
        console.print(
            f"trials {orphans} were RUNNING under a controller that died: marked failed"
            + (", queued again" if cfg.retries else "")
        )
    for params in cfg.enqueued:
        study.enqueue_trial(params, skip_if_exists=True)
    streak = FailureStreak(cfg.stop_after_failures)
    if not _wait_for_room(study, cfg, console):
        console.print(
            f"study {cfg.study!r} already holds {_finished(study)} finished trials (--trials {cfg.trials}); nothing to run"
        )
    else:

        def retry_failed(study, trial):
            skipped = "duplicate_of" in trial.user_attrs or "surplus" in trial.user_attrs
            if trial.state == TrialState.FAIL and cfg.retries and not skipped:
                RetryHeartbeatStaleTrialCallback(max_retry=cfg.retries)(study, trial)

        def hold_size(study, trial):
            if streak(trial) or not _wait_for_room(study, cfg, console):
                study.stop()

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study.optimize(
            _objective_fn(cfg, console),
            n_trials=None,
            n_jobs=cfg.parallel,
            catch=(TrialFailed,),
            callbacks=[retry_failed, hold_size],
        )
    print_summary(study, cfg, console)
    if streak.stopped:
        raise SweepError(
            f"stopped: the last {streak.count} trials failed with the same error (--stop_after_failures "
            f"{cfg.stop_after_failures}), so the next would too. Fix it and rerun the same command (the "
            f"study keeps its trials):\n  {streak.reason}"
        )
    if "wandb" in _report_to(cfg):
        wandb_summary(study, cfg.trials_dir, [o.name for o in cfg.objectives])
    return study


def _report_to(cfg: SweepConfig) -> list[str]:
    """The trials' report_to: the last --report_to override, else the recipe's."""
    import yaml

    if "--report_to" in cfg.overrides:
        return [cfg.overrides[len(cfg.overrides) - 1 - cfg.overrides[::-1].index("--report_to") + 1]]
    value = (yaml.safe_load(cfg.recipe_file.read_text()) or {}).get("report_to") or []
    return [value] if isinstance(value, str) else list(value)


# --------------------------------------------------------------------------- CLI


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        SweepConfig,
        "judgetrain sweep",
        __doc__.strip().splitlines()[0],
        "examples:\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family qwen3-vl   # the model the tiny recipes name\n"
        "  judgetrain build prism --out data/prism-tiny --synthetic 12 --layouts P0     # the set the tiny PRISM recipe names\n"
        "  judgetrain sweep recipes/tiny/qwen3vl-prism-pairwise-lora.yaml --space recipes/spaces/tiny.yaml \\\n"
        "      --trials 2 --storage sqlite:///runs/sweeps.db --study tiny --objective eval_loss --max_steps 2\n"
        "  judgetrain sweep best tiny --storage sqlite:///runs/sweeps.db --out recipes/best.yaml\n"
        "\nany further --field value is passed to every trial as a recipe override (--max_steps 2 above).\n"
        'the paper\'s search, on GPUs: README, "`judgetrain sweep`, `judgetrain dashboard`".\n',
        usage="judgetrain sweep RECIPE --space SPACE.yaml [options] [--field value …]\n"
        "       judgetrain sweep best STUDY [--storage URL] [--out FILE] [--trial N]",
    )


def main(cfg: SweepConfig) -> int:
    if cfg.is_best:
        name = cfg.study_name or cfg.study  # `sweep best STUDY`, or the study of a sweep's --config file
        if not name:
            raise SweepError("usage: judgetrain sweep best STUDY --storage URL [--out FILE]")
        text, best = best_recipe(cfg.storage, name, cfg.trial, cfg.out)
        if cfg.out:
            from judgetrain.io import write_text

            cfg.out.parent.mkdir(parents=True, exist_ok=True)
            write_text(cfg.out, text)
            print(f"best trial {best.number} ({best.values}) written as a recipe to {cfg.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    cfg.check()
    run_sweep(cfg)
    return 0


# --------------------------------------------------------------------------- dashboard


def dashboard_storage(target: str) -> str:
    """A dashboard argument (URL, ``.db`` file or journal file) as a storage URL."""
    if "://" in target or target.startswith("journal:"):
        return target
    if target.endswith((".journal", ".log")):
        return f"journal:{target}"
    if not Path(target).is_file():
        raise SweepError(
            f"{target}: no such database file; give a storage URL (sqlite:///…, postgresql://…) or a .db/.journal file"
        )
    return f"sqlite:///{target}"
