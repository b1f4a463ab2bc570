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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from judgetrain.errors import UserError

__all__ = [
    "ENDED",
    "PATIENCE",
    "ClusterError",
    "ControllerUnavailable",
    "JobState",
    "cancel",
    "forgotten_job_state",
    "job_state",
    "require_slurm",
    "submit",
    "submit_script",
    "wait_for_job",
]

# seconds a silent controller is waited for (a slurmctld restart or failover takes a few minutes)
PATIENCE = 900.0
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


class ControllerUnavailable(ClusterError):
    """SLURM's controller did not answer (a stall, a restart, a failover): the job is as it was."""


# what scontrol and sacct say when the controller does not answer, rather than about the job
_TRANSIENT = (
    "timed out",
    "unable to contact slurm controller",
    "connection refused",
    "connection reset",
    "standby mode",
    "zero bytes were transmitted",
    "try again",
)


def _ended_state(word: str) -> str:
    """SLURM's state word without its detail (``CANCELLED by 0`` → ``CANCELLED``)."""
    return word.split()[0].rstrip("+") if word.strip() else "UNKNOWN"


def _exit_code(state: str, code: str) -> int | None:
    """``STATUS:SIGNAL`` as one exit code (128 + the signal when killed), None while running."""
    if state not in ENDED or ":" not in code:
        return None
    status, sig = (int(x) for x in code.split(":", 1))
    return status or (128 + sig if sig else 0)


def job_state(job_id: str, run_dir: Path | None = None) -> JobState:
    """The job's state: ``scontrol show job``; for a job SLURM has forgotten (past
    ``MinJobAge``), SLURM's accounting (``sacct``) where it is kept, else the record the job's
    script left in ``run_dir`` (:func:`~judgetrain.cluster.slurm.exit_record`), else
    ``UNKNOWN``. Raises :class:`ControllerUnavailable` when the controller does not answer."""
    proc = _run(["scontrol", "show", "job", "-o", str(job_id)])
    if proc.returncode != 0:
        if "invalid job id" not in proc.stderr.lower():
            if any(t in proc.stderr.lower() for t in _TRANSIENT):
                raise ControllerUnavailable(f"scontrol show job {job_id}: {proc.stderr.strip()}")
            raise ClusterError(f"scontrol show job {job_id} failed: {proc.stderr.strip()}")
        return forgotten_job_state(job_id, run_dir)
    fields = dict(word.split("=", 1) for word in proc.stdout.split() if "=" in word)
    state = fields.get("JobState", "UNKNOWN")
    restarts = fields.get("Restarts", "0")
    return JobState(state, _exit_code(state, fields.get("ExitCode", "")), int(restarts) if restarts.isdigit() else 0)


def forgotten_job_state(job_id: str, run_dir: Path | None) -> JobState:
    """A job ``scontrol`` no longer knows: ``sacct``'s answer where accounting is kept, else the
    job's own exit record in ``run_dir``, else ``UNKNOWN``."""
    import json

    from .slurm import exit_record

    if shutil.which("sacct"):
        proc = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State,ExitCode"], capture_output=True, text=True
        )
        rows = [line.split("|") for line in proc.stdout.splitlines() if "|" in line] if proc.returncode == 0 else []
        if rows:
            state = _ended_state(rows[-1][0])
            return JobState(state, _exit_code(state, rows[-1][1]))
    record = exit_record(run_dir, job_id) if run_dir is not None else None
    if record is not None and record.is_file():
        ended = json.loads(record.read_text())
        return JobState(str(ended["state"]), int(ended["exit_code"]), int(ended.get("restarts", 0)))
    return JobState("UNKNOWN")


def cancel(job_id: str) -> None:
    """``scancel`` the job (nothing happens if it has ended)."""
    _run(["scancel", str(job_id)])


def wait_for_job(
    job_id: str,
    every: float,
    check: Callable[[], None] = lambda: None,
    run_dir: Path | None = None,
    patience: float = PATIENCE,
) -> JobState:
    """Wait until the job has ended, calling ``check`` every ``every`` seconds while it is queued,
    runs or is requeued, and once at the end; its final state (:func:`job_state`, which reads
    ``run_dir``'s exit record for a job SLURM has forgotten). A controller that does not answer
    is waited for up to ``patience`` seconds in a row (the job runs on meanwhile), then a
    :class:`ClusterError` leaves the job as it is. Interrupted (Ctrl-C), it cancels the job
    before raising, as the local launch kills its process."""
    silent_since: float | None = None
    try:
        while True:
            try:
                state = job_state(job_id, run_dir)
                silent_since = None
            except ControllerUnavailable as e:
                silent_since = _still_waiting(job_id, e, silent_since, patience)
                time.sleep(every)
                continue
            if state.ended or state.state == "UNKNOWN":
                break
            check()
            time.sleep(every)
    except ClusterError:
        raise  # SLURM's answer, not ours to act on: the job is left as it is
    except BaseException:
        cancel(job_id)
        raise
    check()
    return state


def _still_waiting(job_id: str, error: ControllerUnavailable, since: float | None, patience: float) -> float:
    """When the controller first went silent; says so once, and gives up after ``patience``."""
    now = time.monotonic()
    if since is None:
        print(
            f"SLURM's controller does not answer ({error}); still waiting for job {job_id}, up to {patience:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        return now
    if now - since > patience:
        raise ClusterError(
            f"SLURM's controller has not answered for {patience:.0f} s ({error}); job {job_id} was left as it is: "
            f"look with `squeue -j {job_id}` or `sacct -j {job_id}`, and rerun the command once it answers"
        )
    return since
