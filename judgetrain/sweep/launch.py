"""A trial's training process: the command that launches it (``accelerate launch -m
judgetrain.sweep --config RECIPE <trial overrides>``, :func:`trial_command`), the overrides it
runs on top of the recipe (:func:`trial_overrides`), the environment through which it finds its
study and trial, and :func:`train_trial`, which runs it here or as a SLURM job and waits.
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from judgetrain.compat.accelerate import launch_command
from judgetrain.compat.optuna import trial_id

from .config import SweepConfig
from .progress import TrialProgress, wait_reporting
from .space import ENV

__all__ = ["TRIAL_MODULE", "train_trial", "trial_command", "trial_overrides"]

TRIAL_MODULE = "judgetrain.sweep"  # its __main__ is the trial entry (trial_main)


def trial_command(cfg: SweepConfig, overrides: list[str]) -> list[str]:
    """``accelerate launch [config] -m judgetrain.sweep --config RECIPE overrides``, run by this
    interpreter (:func:`judgetrain.compat.accelerate.launch_command`)."""
    from judgetrain.train.accelerate_configs import accelerate_args

    return [*launch_command(), *accelerate_args(cfg), "-m", TRIAL_MODULE, "--config", str(cfg.recipe), *overrides]


def _trial_env(cfg: SweepConfig, trial) -> dict[str, str]:
    """This process's environment for ``trial``'s training process, plus the trial's identity as
    JSON in :data:`~judgetrain.sweep.space.ENV` (storage, study, trial, objectives, the pruner to
    rebuild, the controller's pid to watch) and its wandb group (the study) and job type."""
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


def train_trial(
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
