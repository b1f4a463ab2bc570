"""A polite stop: SIGTERM (``kill``, SLURM's preemption or ``scancel``) or SIGUSR1 (SLURM's
warning before the time limit, ``#SBATCH --signal=B:USR1@N``, or ``scancel --signal=USR1``)
asks training to save a checkpoint at the next step boundary and stop there.

:class:`StopRequests` holds the signal handlers (installed when the training process starts,
so a signal during loading is not lost); :class:`SaveOnSignal`, a ``TrainerCallback``, turns a
request into the Trainer's own ``should_save`` and ``should_training_stop`` at the end of a
step. Every process stops at the same step: the request is reduced over the processes at
each step end (one integer), so a signal that reaches the ranks a step apart cannot leave
one rank saving a checkpoint the others never join. The process then exits with 128 + the
signal's number (:func:`stop_exit_code`) without writing the final adapter; the same command
with ``--resume_from_checkpoint auto`` goes on from the checkpoint, and a SLURM job's script
requeues itself.
Docs: "reference/recipes.md", "how-to/cluster.md".
"""

from __future__ import annotations

import signal
import sys
from typing import Any

from transformers import TrainerCallback

__all__ = ["STOP_SIGNALS", "SaveOnSignal", "StopRequests", "stop_exit_code"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


def stop_exit_code(signum: int) -> int:
    """The exit code of a process that stopped, after saving, on signal ``signum`` (as a shell
    reports a process ended by it: 143 for SIGTERM, 138 for SIGUSR1)."""
    return 128 + int(signum)


class StopRequests:
    """The stop signals' handlers: the first signal received is :attr:`signum` (None before any).
    A second signal changes nothing: the step still ends and the checkpoint is saved."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def install(self) -> StopRequests:
        """Handle :data:`STOP_SIGNALS` in this (main) thread until :meth:`restore`."""
        for sig in STOP_SIGNALS:
            self.previous[sig] = signal.signal(sig, self.handle)
        return self

    def handle(self, signum: int, frame: object) -> None:
        if self.signum is None:
            self.signum = signum
            print(
                f"judgetrain train: {signal.Signals(signum).name} received: saving a checkpoint at the end of this "
                "step, then stopping",
                file=sys.stderr,
                flush=True,
            )

    def restore(self) -> None:
        """The handlers from before :meth:`install`."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous.clear()


class SaveOnSignal(TrainerCallback):
    """At each step end: if any process has a stop request, save a checkpoint now and stop.
    :attr:`stopped_at` is the step it stopped at and :attr:`signum` the signal (None both when
    training ran to its end)."""

    def __init__(self, requests: StopRequests, accelerator: Any) -> None:
        self.requests = requests
        self.accelerator = accelerator
        self.stopped_at: int | None = None
        self.signum: int | None = None

    def agreed_signal(self) -> int:
        """The largest signal number any process received (0: none), the same on every process."""
        import torch
        import torch.distributed as dist

        mine = self.requests.signum or 0
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return mine
        value = torch.tensor([mine], dtype=torch.int64, device=self.accelerator.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return int(value.item())

    def on_step_end(self, args, state, control, **kwargs):
        signum = self.agreed_signal()
        if signum:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at, self.signum = state.global_step, signum
        return control
