"""A sweep's trial as a SLURM job (``judgetrain sweep --slurm``): the sbatch script of the
trial's launch (``accelerate launch -m judgetrain.sweep …`` on every node of the job, the
trial's identity exported) kept in the trial's folder, submitted, and waited for. A requeued
job (preempted, a lost node, ``scontrol requeue``) trains the same trial again, resuming from
its newest checkpoint; a job that SLURM ended fails the trial, which the controller retries.
Docs: "how-to/cluster.md".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

__all__ = ["run_slurm_trial"]


def run_slurm_trial(
    cfg: Any, trial, name: str, trial_args: list[str], env: dict[str, str], out: Path, check: Callable[[], None]
) -> tuple[int, Path, str | None]:
    """Train one trial as a SLURM job of ``cfg``'s resources (a sweep's config): ``accelerate
    launch -m judgetrain.sweep --config RECIPE TRIAL_ARGS --resume_from_checkpoint auto`` on
    every node, ``env`` (the trial's identity, the study's storage URL) handed to the job by
    sbatch's environment (never written to a file), the script kept as ``out/slurm/job.sbatch``
    and the files it reads copied beside it (the recipe, the accelerate config, its DeepSpeed
    JSON). Waits for the job (``check`` every ``cfg.poll`` seconds), through requeues. Its exit code, node 0's log, and why it failed when SLURM ended it (None else)."""
    from judgetrain.cluster import (
        keep_accelerate_config,
        keep_recipe,
        processes,
        rank_log,
        sbatch_script,
        submit,
        wait_for_job,
        write_script,
    )
    from judgetrain.train.accelerate_configs import accelerate_args

    from .failures import job_failure_reason

    launch = SimpleNamespace(accelerate_config=cfg.accelerate_config, num_processes=cfg.num_processes or processes(cfg))
    options = keep_accelerate_config(accelerate_args(launch), out)
    module_args = ["--config", str(keep_recipe(Path(cfg.recipe), out)), *trial_args]
    if not any(a.split("=", 1)[0] == "--resume_from_checkpoint" for a in trial_args):
        module_args += ["--resume_from_checkpoint", "auto"]
    script = write_script(
        out,
        sbatch_script(
            cfg,
            job_name=cfg.job_name or name,
            run_dir=out,
            launch_options=options,
            module="judgetrain.sweep",
            module_args=module_args,
        ),
    )
    job = submit(script, env=env)  # SLURM keeps the environment for a requeue; no secret in the script
    jobs = [*trial.user_attrs.get("slurm_jobs", []), job]  # a retried trial's earlier jobs stay listed
    trial.set_user_attr("slurm_job", job)
    trial.set_user_attr("slurm_jobs", jobs)
    state = wait_for_job(job, cfg.poll, check, run_dir=out)
    log = rank_log(out, cfg.job_name or name, job)
    trial.set_user_attr("slurm_restarts", state.restarts)
    return (state.exit_code if state.exit_code is not None else 1), log, job_failure_reason(job, state, log)
