"""SLURM's own commands for a job: submit (``sbatch --parsable``), look (``scontrol show job``),
cancel (``scancel``), and wait until it has ended for good.

A requeued job (preempted, a failed node, ``scontrol requeue``) keeps its id and goes back
to PENDING: :func:`wait_for_job` goes on waiting through it, and returns once the job is in
a state it does not leave (:data:`ENDED`). A controller that stalls or restarts is waited
through (:data:`PATIENCE`), the job left running; a job SLURM has forgotten (past
``MinJobAge``) is answered by ``sacct`` where accounting is kept, else by the exit record its
script wrote last.
Docs: "how-to/cluster.md".
"""

from __future__ import annotations

import json
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
    "read_exit_record",
    "require_slurm",
    "sacct_state",
    "submit",
    "submit_script",
    "wait_for_job",
]

# seconds a silent controller is waited for (a slurmctld restart or failover takes a few minutes)
PATIENCE = 900.0
# seconds sacct is given to answer (it asks slurmdbd, which can stall as slurmctld can)
SACCT_TIMEOUT = 60.0
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
    """SLURM's controller (or its accounting daemon) did not answer: a stall, a restart, a
    failover. The job is as it was; asking again later may work."""


# what scontrol and sacct say when slurmctld or slurmdbd does not answer, rather than about the job
_TRANSIENT = (
    "timed out",
    "unable to contact slurm controller",
    "connection refused",
    "connection reset",
    "standby mode",
    "zero bytes were transmitted",
    "try again",
    "problem talking to the database",
    "persistent connection",
)


def _transient(stderr: str) -> bool:
    return any(t in stderr.lower() for t in _TRANSIENT)


def _state_word(word: str) -> str:
    """SLURM's state without its detail (``CANCELLED by 0`` → ``CANCELLED``)."""
    return word.split()[0].rstrip("+") if word.strip() else "UNKNOWN"


def _exit_code(state: str, code: str) -> int | None:
    """``STATUS:SIGNAL`` as one exit code (128 + the signal when killed); None while the job has
    not ended, or when SLURM gave no code."""
    status, _, sig = code.strip().partition(":")
    if state not in ENDED or not (status.isdigit() and sig.isdigit()):
        return None
    return int(status) or (128 + int(sig) if int(sig) else 0)


def job_state(job_id: str, run_dir: Path | None = None) -> JobState:
    """The job's state: ``scontrol show job``; for a job SLURM has forgotten (past
    ``MinJobAge``), :func:`forgotten_job_state` (``sacct``, else the exit record the job's script
    left in ``run_dir``, else ``UNKNOWN``). Raises :class:`ControllerUnavailable` when the
    controller does not answer (a time-out, a refused connection, any ``slurm_load_jobs``
    error but "Invalid job id"), :class:`ClusterError` when scontrol cannot run at all."""
    proc = _run(["scontrol", "show", "job", "-o", str(job_id)])
    error = proc.stderr.strip()
    if proc.returncode != 0 and "invalid job id" not in error.lower():
        if _transient(error) or "slurm_load_jobs error" in error.lower():
            raise ControllerUnavailable(f"scontrol show job {job_id}: {error}")
        raise ClusterError(
            f"scontrol show job {job_id} failed: {error}; check that this machine's SLURM configuration "
            "(SLURM_CONF) reaches the cluster: `scontrol ping`"
        )
    fields = dict(word.split("=", 1) for word in proc.stdout.split() if "=" in word) if proc.returncode == 0 else {}
    if "JobState" not in fields:  # "Invalid job id", or an answer without the job: SLURM has forgotten it
        return forgotten_job_state(job_id, run_dir)
    state, restarts = fields["JobState"], fields.get("Restarts", "0")
    return JobState(state, _exit_code(state, fields.get("ExitCode", "")), int(restarts) if restarts.isdigit() else 0)


def sacct_state(text: str) -> JobState | None:
    """The job's state in ``sacct -n -X -P -o State,ExitCode``'s answer (its last line, the job's
    latest run); None when accounting has no line for the job. ``CANCELLED by 0`` is
    ``CANCELLED``; a job that has not ended (``RUNNING``, ``REQUEUED``, ``PENDING``) has no exit
    code."""
    rows = [line.split("|") for line in text.splitlines() if "|" in line]
    if not rows:
        return None
    state = _state_word(rows[-1][0])
    return JobState(state, _exit_code(state, rows[-1][1]))


def read_exit_record(path: Path) -> JobState:
    """The state a job's script recorded as its last act
    (:func:`~judgetrain.cluster.slurm.exit_record`: ``{"state": "COMPLETED"|"FAILED",
    "exit_code": int, "restarts": int}``); ClusterError for a file that is not such a record."""
    try:
        record = json.loads(Path(path).read_text())
        state = JobState(str(record["state"]), int(record["exit_code"]), int(record.get("restarts", 0)))
        if not state.ended:
            raise ValueError(f"state {state.state!r} is not one a job ends in")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ClusterError(
            f"{path}: not a job's exit record ({e}); judgetrain's sbatch script writes "
            '{"state": "COMPLETED", "exit_code": 0, "restarts": 0} there as its last act: remove the file, '
            "and the job's state is read as UNKNOWN"
        ) from e
    return state


def forgotten_job_state(job_id: str, run_dir: Path | None) -> JobState:
    """A job ``scontrol`` no longer knows: ``sacct``'s answer where SLURM keeps accounting, else
    the job's exit record in ``run_dir`` (:func:`read_exit_record`), else ``UNKNOWN``. Raises
    :class:`ControllerUnavailable` when sacct could not reach slurmdbd and no record says."""
    from .slurm import exit_record

    unreachable = None
    if shutil.which("sacct"):
        cmd = ["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State,ExitCode"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SACCT_TIMEOUT)
        except subprocess.TimeoutExpired:
            unreachable = f"sacct -j {job_id}: no answer within {SACCT_TIMEOUT:.0f} s"
        else:
            state = sacct_state(proc.stdout) if proc.returncode == 0 else None
            if state is not None:
                return state
            if _transient(proc.stderr):  # slurmdbd is down; not "accounting storage is disabled"
                unreachable = f"sacct -j {job_id}: {proc.stderr.strip()}"
    record = exit_record(run_dir, job_id) if run_dir is not None else None
    if record is not None and record.is_file():
        return read_exit_record(record)
    if unreachable:
        raise ControllerUnavailable(unreachable)
    return JobState("UNKNOWN")


def cancel(job_id: str) -> None:
    """``scancel`` the job (nothing happens if it has ended); says so on stderr when SLURM could not
    be asked (a stalled controller), as the job may then run on."""
    proc = _run(["scancel", str(job_id)])
    error = proc.stderr.strip()
    if proc.returncode != 0 and "invalid job id" not in error.lower() and "completed" not in error.lower():
        print(
            f"scancel {job_id} failed: {error}; the job may still run: look with `squeue -j {job_id}` and "
            f"cancel it with `scancel {job_id}`",
            file=sys.stderr,
            flush=True,
        )


def wait_for_job(
    job_id: str,
    every: float,
    check: Callable[[], None] = lambda: None,
    run_dir: Path | None = None,
    patience: float = PATIENCE,
) -> JobState:
    """Wait until the job has ended, calling ``check`` every ``every`` seconds while it is queued,
    runs or is requeued, and once at the end; its final state (:func:`job_state`, which reads
    ``run_dir``'s exit record for a job SLURM has forgotten), ``UNKNOWN`` when nothing says.
    A controller that does not answer is waited for up to ``patience`` seconds in a row
    (default :data:`PATIENCE`, 900 s; the job runs on meanwhile), then a :class:`ClusterError`
    leaves the job as it is. Interrupted (Ctrl-C) or stopped by ``check``, it cancels the job
    before raising, as the local launch kills its process."""
    silent_since: float | None = None
    looking = False  # an error while SLURM is asked leaves the job alone: it may run fine
    try:
        while True:
            looking = True
            try:
                state = job_state(job_id, run_dir)
            except ControllerUnavailable as e:
                silent_since = _still_waiting(job_id, e, silent_since, patience)
                time.sleep(every)
                continue
            looking, silent_since = False, None
            if state.ended or state.state == "UNKNOWN":
                break
            check()
            time.sleep(every)
    except ClusterError:
        if not looking:
            cancel(job_id)
        raise
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
            f"SLURM's controller has not answered for {patience:.0f} s ({error}); job {job_id} was left as it is "
            f"(it may be running fine): look with `squeue -j {job_id}` or `sacct -j {job_id}`, and rerun the "
            "command once the controller answers"
        )
    return since
