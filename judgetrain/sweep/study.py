"""The study that every controller of a sweep shares: opening (or joining) it
(:func:`open_study`), how full it is (:func:`study_room`: ``--trials`` is the size of the study,
all controllers together), waiting while other controllers' trials may still fill it
(:func:`wait_for_room`), and the RUNNING trials of controllers of this host that died: those whose
SLURM job is known taken over (:func:`orphan_job`), the others failed (:func:`fail_orphans`).
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, cast

from judgetrain.compat.optuna import name_values, reopen_trial, requeue_failed, trial_id
from judgetrain.writer import process_alive

from .config import SweepConfig
from .definition import check_definition
from .space import SweepError, make_pruner
from .storage import storage_from_url, study_lock

__all__ = [
    "PER_RUN",
    "fail_orphans",
    "finished_trials",
    "open_study",
    "orphan_job",
    "orphans",
    "retry_trial",
    "study_room",
    "wait_for_room",
]


def open_study(cfg: SweepConfig):
    """The sweep's study in ``cfg.storage``, created or joined (another controller's, a restarted
    one's), with the per-trial seeded TPE sampler and ``cfg``'s pruner. ``SweepError`` when the
    study exists with other directions than the objectives', or was made with other settings
    (:func:`~judgetrain.sweep.definition.check_definition`: recipe content, space, objectives,
    overrides). A new study records what the sweep is (recipe and its text, space, objectives,
    fixed fields, overrides) for ``sweep best``, and its definition."""
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
    with study_lock(cfg.storage):  # two new controllers at once: one records its definition, the other is checked against it
        check_definition(study, cfg)  # before anything else is recorded: a refused controller leaves the study as it was
    attrs = study.user_attrs
    if "recipe" not in attrs:
        study.set_user_attr("recipe", str(cfg.recipe))
        study.set_user_attr("recipe_yaml", cfg.recipe_file.read_text())
        study.set_user_attr("space", str(cfg.search_space.path))
        study.set_user_attr("objectives", [[o.name, o.direction] for o in cfg.objectives])
        study.set_user_attr("fixed", cfg.search_space.fixed)
        study.set_user_attr("extra", cfg.overrides)
    if study.metric_names is None:  # what optuna-dashboard and the study's dataframe call each value ("Objective 0" without)
        name_values(study, [o.name for o in cfg.objectives])
    return study


def finished_trials(study) -> int:
    """How many trials of ``study`` are finished: complete or pruned."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def study_room(study, size: int) -> tuple[str, int, int]:
    """(``"full"``, ``"room"`` or ``"wait"``, finished, running): full when the study holds
    ``size`` finished (complete or pruned) trials; room when finished + running trials
    are fewer, so another may start; wait while running trials could still fill it."""
    from optuna.trial import TrialState

    finished = finished_trials(study)
    running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    state = "full" if finished >= size else ("room" if finished + running < size else "wait")
    return state, finished, running


def wait_for_room(study, cfg: SweepConfig, console, tend_orphans: Callable[[], object]) -> bool:
    """True when this controller should start another trial, False when the study is full;
    waits while others' trials run, failing stale trials and calling ``tend_orphans`` (the
    RUNNING trials of dead controllers of this host: taken over or failed) as it goes."""
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
        tend_orphans()


# what one run of a trial left in its attributes: its retry starts without them
PER_RUN = ("fail_reason", "fail_key", "slurm_job", "slurm_restarts", "controller", "seconds", "steps", "metrics")


def retry_trial(study, trial, retries: int) -> None:
    """Queue ``trial`` (FAILed) again with its parameters, ``retries`` times at most, without the
    attributes of its failed run (:data:`PER_RUN`: its ``fail_reason`` is not the retry's)."""
    requeue_failed(study, trial, retries, PER_RUN)


def orphans(study) -> list:
    """RUNNING trials of ``study`` whose controller on this host is gone (a controller on another
    host is the heartbeat's to judge)."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    found = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.user_attrs.get("controller") or {}
        if owner.get("host") == host and owner.get("pid") and not process_alive(int(owner["pid"])):
            found.append(t)
    return found


def orphan_job(trial) -> str | None:
    """What became of the SLURM job of ``trial`` (an orphan): ``"runs"`` while it is queued or
    running (or SLURM's controller cannot say: the job is given the benefit of the doubt),
    ``"ended"`` once it has ended (SLURM, its accounting, or the exit record the job left in the
    trial's folder say so), None when the trial has no job or nobody knows it any more. A
    controller takes the trial over unless None: it waits for a running job, and records an ended
    job's result, instead of failing work that was done or is being done."""
    from judgetrain.cluster import ControllerUnavailable, job_state

    job, out = trial.user_attrs.get("slurm_job"), trial.user_attrs.get("output_dir")
    if not job:
        return None
    try:
        state = job_state(job, Path(out) if out else None)
    except ControllerUnavailable:
        return "runs"
    return None if state.state == "UNKNOWN" else "ended" if state.ended else "runs"


def fail_orphans(study, retries: int, keep: frozenset[int] = frozenset()) -> list[int]:
    """FAIL (and re-queue, ``retries`` times) RUNNING trials whose controller on this host is gone
    (:func:`orphans`) but those numbered in ``keep`` (taken over), cancelling a trial's SLURM
    job; their numbers. A killed controller leaves its trials RUNNING forever in journal
    storage, and until the heartbeat grace period in RDB storage."""
    import optuna
    from optuna.trial import TrialState

    failed = []
    for t in orphans(study):
        if t.number not in keep:
            owner = t.user_attrs["controller"]
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
                retry_trial(study, frozen, retries)
    return failed
