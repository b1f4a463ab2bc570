"""The trial side of a sweep: the training process a controller launches
(``accelerate launch -m judgetrain.sweep …``) runs :func:`trial_main`, which is
``judgetrain.train`` with :class:`~judgetrain.sweep.reporting.SweepCallback` added
(the callback that reports, prunes and writes ``sweep_result.json``). With ``judgetrain
sweep --slurm`` that launch is a SLURM job (:mod:`judgetrain.sweep.jobs`).
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import json
import os
from typing import Any

from .space import ENV

__all__ = ["sweep_callback", "trial_main"]


def _sweep_env() -> dict | None:
    raw = os.environ.get(ENV)
    return json.loads(raw) if raw else None


def sweep_callback(eval_records, processor, training_args) -> Any | None:
    """The trial's callback when this process was started by a sweep controller, else
    ``None`` (a ``judgetrain.train`` callback factory, see ``train.setup``)."""
    env = _sweep_env()
    if env is None:
        return None
    from .reporting import SweepCallback

    return SweepCallback(env, eval_records, processor, training_args)


def trial_main(argv: list[str] | None = None) -> int:
    """A trial's training process (``accelerate launch -m judgetrain.sweep --config
    RECIPE …``): ``judgetrain.train`` with :class:`SweepCallback`, so that the trainer
    knows nothing of sweeps. User errors print as one message (exit code 2)."""
    from judgetrain.train.run import script

    return script(argv, callbacks=[sweep_callback])
