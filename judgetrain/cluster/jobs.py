"""SLURM's own commands for a job: submit (``sbatch --parsable``), look (``scontrol show job``),
cancel (``scancel``), and wait until it has ended for good.

A requeued job (preempted, a failed node, ``scontrol requeue``) keeps its id and goes back
to PENDING: :func:`wait_for_job` goes on waiting through it, and returns once the job is in
a state it does not leave (:data:`ENDED`).
README: "`judgetrain sweep --slurm`, SLURM".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from judgetrain.errors import UserError

__all__ = ["ENDED", "ClusterError", "JobState", "cancel", "job_state", "require_slurm", "submit", "submit_script", "wait_for_job"]

# states a job does not leave (a requeued one goes back to PENDING instead)
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


class ClusterError(UserError):
    """SLURM's commands are missing, or one of them refused what it was asked."""


@dataclass(frozen=True)
class JobState:
    """What ``scontrol show job`` says of a job: its state, the exit code of its script
    (None while it runs) and how often it was requeued."""

    state: str
    exit_code: int | None = None
    restarts: int = 0

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def require_slurm(*commands: str) -> None:
    """ClusterError unless SLURM's ``commands`` (default: sbatch, scontrol, scancel) are on PATH."""
    missing = [c for c in commands or ("sbatch", "scontrol", "scancel") if shutil.which(c) is None]
    if missing:
        raise ClusterError(
            f"{', '.join(missing)}: not found. Run on a SLURM login node (Debian/Ubuntu package "
            "slurm-client), or leave out --slurm/--submit and submit the written script yourself"
        )


def _run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    require_slurm(cmd[0])
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env} if env else None)


def submit(script: Path, env: dict[str, str] | None = None) -> str:
    """Submit ``script`` with ``sbatch --parsable``; the job id. ``env`` joins the environment
    sbatch hands to the job (its default ``--export=ALL``; SLURM keeps it for a requeue), so a
    secret in it is never written into the script."""
    proc = _run(["sbatch", "--parsable", str(script)], env)
    if proc.returncode != 0:
        raise ClusterError(
            f"sbatch {script} failed: {proc.stderr.strip() or proc.stdout.strip()} "
            "(the script's #SBATCH lines: partition, account, time, GPUs)"
        )
    return proc.stdout.strip().split(";")[0]  # "ID;CLUSTER" on a multi-cluster setup


def submit_script(script: Path, submit_it: bool, job_name: str) -> str | None:
    """Submit the written ``script`` (``--submit``) and say where its logs go, or say how to
    submit it; the job id, or None."""
    if not submit_it:
        print(f"wrote {script}; submit it with: sbatch {script}")
        return None
    job = submit(script)
    print(
        f"submitted SLURM job {job}: {script}\n  logs: {script.parent}/{job_name}-{job}.log (the script), "
        f"{job_name}-{job}-N.log (node N); squeue -j {job}"
    )
    return job


def job_state(job_id: str) -> JobState:
    """The job's state (``UNKNOWN`` once SLURM has forgotten it, after ``MinJobAge``)."""
    proc = _run(["scontrol", "show", "job", "-o", str(job_id)])
    if proc.returncode != 0:
        if "Invalid job id" in proc.stderr:
            return JobState("UNKNOWN")
        raise ClusterError(f"scontrol show job {job_id} failed: {proc.stderr.strip()}")
    fields = dict(word.split("=", 1) for word in proc.stdout.split() if "=" in word)
    state = fields.get("JobState", "UNKNOWN")
    code, restarts = fields.get("ExitCode", ""), fields.get("Restarts", "0")
    exit_code = None
    if state in ENDED and ":" in code:
        status, sig = (int(x) for x in code.split(":", 1))
        exit_code = status or (128 + sig if sig else 0)
    return JobState(state, exit_code, int(restarts) if restarts.isdigit() else 0)


def cancel(job_id: str) -> None:
    """``scancel`` the job (nothing happens if it has ended)."""
    _run(["scancel", str(job_id)])


def wait_for_job(job_id: str, every: float, check: Callable[[], None] = lambda: None) -> JobState:
    """Wait until the job has ended, calling ``check`` every ``every`` seconds while it is queued,
    runs or is requeued, and once at the end; its final state. Interrupted (Ctrl-C), it
    cancels the job before raising, as the local launch kills its process."""
    try:
        while True:
            state = job_state(job_id)
            if state.ended or state.state == "UNKNOWN":
                break
            check()
            time.sleep(every)
    except BaseException:
        cancel(job_id)
        raise
    check()
    return state
