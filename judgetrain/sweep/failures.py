"""Why a sweep's trial failed, and when failures in a row mean the sweep should stop: a
configuration every trial shares (a recipe that cannot be measured, another run's output
folder, …) fails every trial the same way, so after ``--stop_after_failures`` identical
failures the controller stops with that error instead of launching more.
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

__all__ = ["FailureStreak", "failure_key", "failure_reason", "job_failure_reason"]


def failure_reason(rc: int, log: Path) -> str:
    """Why a trial's training process failed, from its exit code and the tail of its log: the
    signal that killed it, out of memory, the training process's own ``error: …`` message, or
    the log's last line; then the log's path."""
    tail = log.read_text(errors="replace")[-20000:] if log.is_file() else ""
    # accelerate launch exits 1 when its training process dies of a signal, and says which
    died = re.findall(r"died with <Signals\.(SIG[A-Z]+)", tail)
    if rc < 0 or died:
        name = died[-1] if died else {s.value: s.name for s in signal.Signals}.get(-rc, str(-rc))
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "") + f"; log: {log}"
    if "OutOfMemoryError" in tail or "CUDA out of memory" in tail:
        return f"out of GPU memory; log: {log}"
    error = _training_error(tail) or _exception(tail)
    if error:  # the training process's own message, not the launcher's CalledProcessError after it
        return f"exited with code {rc}: {error}; log: {log}"
    last = [line for line in tail.splitlines() if line.strip()][-1:] or [""]
    return f"exited with code {rc}: {last[0][-300:]}; log: {log}"


def _training_error(tail: str) -> str | None:
    """The last ``error: …`` message a training process printed (a user error: configuration,
    data, model), with its indented lines, or None."""
    lines = tail.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    if not starts:
        return None
    block = [lines[starts[-1]]]
    for line in lines[starts[-1] + 1 :]:
        if not (line.startswith("  ") and line.strip()):
            break
        block.append(line)
    return "\n".join(block)[:2000]


# the last line of a traceback: the exception and its message (`IndexError: too many indices …`)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)(?::\s.*)?$")


def _exception(tail: str) -> str | None:
    """The training process's last exception line, not the launcher's ``CalledProcessError`` after it (whose
    message repeats the trial's own command, parameters and folder, so no two trials' would match), or None."""
    found = [
        line.strip()
        for line in tail.splitlines()
        if _EXCEPTION.match(line.strip()) and not line.strip().startswith("subprocess.CalledProcessError")
    ]
    return found[-1][:300] if found else None


def job_failure_reason(job_id: str, state, log: Path) -> str | None:
    """Why a trial's SLURM job (its final :class:`~judgetrain.cluster.JobState`) failed, or None
    when it completed: a job that SLURM ended (cancelled, out of time, its node lost) says so;
    one whose script failed, as :func:`failure_reason` from its exit code and node 0's log."""
    if state.state == "COMPLETED" and not state.exit_code:
        return None
    if state.state == "FAILED" and state.exit_code:
        return f"SLURM job {job_id} FAILED, " + failure_reason(state.exit_code, log)
    why = {
        "CANCELLED": " (scancel, or preempted without requeue)",
        "TIMEOUT": " (its --time limit)",
        "UNKNOWN": " (SLURM no longer knows it)",
    }.get(state.state, "")
    return f"SLURM job {job_id} {state.state}{why}; log: {log}"


def failure_key(reason: str, out: Path) -> str:
    """What two trials' failures share when they are the same error: the reason without its
    log path or SLURM job id, with the trial's own folder as ``TRIAL``."""
    return re.sub(r"SLURM job \d+", "SLURM job", reason.rsplit("; log: ", 1)[0].replace(str(out), "TRIAL"))


class FailureStreak:
    """Counts trials in a row that failed with the same error (:func:`failure_key`); called with
    each finished trial, True once ``limit`` of them (0: never) say the sweep should stop.
    Skipped trials (duplicates, surplus) do not count; a complete or pruned one ends a streak."""

    def __init__(self, limit: int):
        self.limit, self.count, self.key, self.reason, self.stopped = limit, 0, None, "", False

    def __call__(self, trial) -> bool:
        from optuna.trial import TrialState

        attrs = trial.user_attrs
        if trial.state != TrialState.FAIL or "duplicate_of" in attrs or "surplus" in attrs:
            if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
                self.count, self.key = 0, None
            return False
        key = attrs.get("fail_key") or attrs.get("fail_reason")
        self.count = self.count + 1 if key == self.key else 1
        self.key, self.reason = key, attrs.get("fail_reason", "")
        self.stopped = bool(self.limit) and self.count >= self.limit
        return self.stopped
