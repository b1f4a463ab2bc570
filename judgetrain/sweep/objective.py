"""What a trial is to the study: the objective ``study.optimize`` calls (:func:`trial_objective`),
which samples a trial's parameters, skips it when another trial already has them or the study is
full (:func:`skip_reason`, :class:`TrialSkipped`), trains it (:mod:`judgetrain.sweep.launch`), and
reads its value(s) from the ``sweep_result.json`` the trial wrote, or records why it failed
(:class:`TrialFailed`, with ``fail_reason`` and ``fail_key``).
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from judgetrain.compat.optuna import reopen_trial, trial_id

from .config import SweepConfig
from .failures import failure_key, failure_reason
from .launch import train_trial, trial_overrides
from .progress import TrialProgress, escape, format_params
from .results import recipe_with_overrides
from .space import RESULT_FILE, SweepError

__all__ = ["MAX_SKIPPED", "TrialFailed", "TrialSkipped", "TakeOver", "adopt_trials", "skip_reason", "trial_objective"]


class TrialFailed(RuntimeError):
    """A trial's training process did not finish; the message is its reason."""


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


def trial_objective(cfg: SweepConfig, console):
    """The objective ``study.optimize`` calls: per trial, sample the parameters, skip the trial
    (:class:`TrialSkipped`) when :func:`skip_reason` says so, else train it in its folder
    ``trials_dir/trial-NNNN`` (:func:`~judgetrain.sweep.launch.train_trial`), printing its progress
    on ``console``, and return its value(s) (:func:`_trial_outcome`). :class:`SweepError` after
    :data:`MAX_SKIPPED` skipped trials in a row: the space is exhausted."""
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
        # the same, typed as the trainer's parser reads them: what `sweep best` writes, without loading that parser
        from judgetrain.train.parser import recipe_method

        method = recipe_method(["--config", str(cfg.recipe_file), *overrides])  # GRPO's and reward's fields parse as theirs
        trial.set_user_attr("recipe_overrides", recipe_with_overrides({}, overrides, method=method))
        progress = TrialProgress(console, trial, cfg.trials, [o.name for o in cfg.objectives])
        progress.started(values, out)
        rc, log, reason = train_trial(cfg, trial, overrides, out, progress)
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
    """The trial's ``sweep_result.json`` in its folder ``out``, or None when it wrote none."""
    path = out / RESULT_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


class TakeOver:
    """A controller's care of the RUNNING trials of dead controllers of its host
    (:func:`~judgetrain.sweep.study.orphans`), called when it starts and while it waits for room:
    a trial whose SLURM job is known (:func:`~judgetrain.sweep.study.orphan_job`) is taken over
    (:func:`adopt_trials`), the others failed and queued again
    (:func:`~judgetrain.sweep.study.fail_orphans`). ``threads``: the taken-over trials' waits,
    to join before the summary. Safe to call from several of the controller's threads."""

    def __init__(self, cfg: SweepConfig, study, console) -> None:
        import threading

        self.cfg, self.study, self.console = cfg, study, console
        self.taken: set[int] = set()
        self.threads: list = []
        self.lock = threading.Lock()

    def __call__(self) -> list[int]:
        """Take over what can be taken over; the numbers of the trials failed instead."""
        from .study import fail_orphans, orphan_job, orphans

        with self.lock:
            found = [(t, orphan_job(t)) for t in orphans(self.study) if t.number not in self.taken]
            adopted = [(t, fate) for t, fate in found if fate]
            self.threads += adopt_trials(self.cfg, self.study, adopted, self.console)
            self.taken.update(t.number for t, _ in adopted)
            return fail_orphans(self.study, self.cfg.retries, keep=frozenset(self.taken))


def adopt_trials(cfg: SweepConfig, study, trials: list[tuple[Any, str]], console) -> list:
    """Take over ``trials``, (trial, ``"runs"`` or ``"ended"``) pairs of RUNNING trials of a
    controller that died and what became of their SLURM jobs: each becomes this controller's
    (its ``controller`` attribute, its heartbeat) and is waited for in a thread of its own, then
    told as the objective tells a trial it ran (its ``sweep_result.json``; a failure retried
    ``--retries`` times): the job's work is neither lost nor trained again. The threads, to join
    before the summary."""
    import threading

    threads = []
    for frozen, fate in trials:
        trial = reopen_trial(study, trial_id(frozen))
        trial.set_user_attr("controller", {"host": socket.gethostname(), "pid": os.getpid()})
        job = frozen.user_attrs["slurm_job"]
        console.print(
            f"[bold]trial #{frozen.number}[/]: its controller died; "
            + (
                f"SLURM job {job} still runs for it: this controller takes it over"
                if fate == "runs"
                else f"SLURM job {job} ended meanwhile: this controller records its result"
            )
        )
        thread = threading.Thread(target=_finish_adopted, args=(cfg, study, trial, frozen, console), daemon=True)
        thread.start()
        threads.append(thread)
    return threads


def _finish_adopted(cfg: SweepConfig, study, trial, frozen, console) -> None:
    """Wait for an adopted trial's job (beating its heartbeat), then tell the study its outcome."""
    import optuna
    from optuna.trial import TrialState

    from judgetrain.cluster import rank_log, wait_for_job

    from .failures import job_failure_reason
    from .storage import storage_from_url
    from .study import retry_trial

    storage = storage_from_url(cfg.storage, heartbeat_interval=cfg.heartbeat)
    beat = getattr(storage, "record_heartbeat", None)  # RDB storage; a journal file has no heartbeat
    job, out = frozen.user_attrs["slurm_job"], Path(frozen.user_attrs["output_dir"])
    progress = TrialProgress(console, trial, cfg.trials, [o.name for o in cfg.objectives])
    state = wait_for_job(job, cfg.poll, (lambda: beat(trial_id(frozen))) if beat else (lambda: None), run_dir=out)
    log = rank_log(out, cfg.job_name or f"{cfg.study}-trial-{frozen.number:04d}", job)
    trial.set_user_attr("slurm_restarts", state.restarts)
    rc = state.exit_code if state.exit_code is not None else 1
    try:
        values = _trial_outcome(trial, rc, out, progress, log, job_failure_reason(job, state, log))
        study.tell(frozen.number, values)
    except optuna.TrialPruned:
        study.tell(frozen.number, state=TrialState.PRUNED)
    except TrialFailed:
        told = study.tell(frozen.number, state=TrialState.FAIL)
        if cfg.retries:
            retry_trial(study, told, cfg.retries)
