"""Library output a judgetrain command's user cannot act on, filtered one message at a time
when a command starts (never by silencing a library, or warnings, as a whole): a command
prints its own progress and results, and every warning not listed here still reaches the
user.

Importing judgetrain as a library changes nothing; :func:`quiet_libraries` is called by the
``judgetrain`` command line, the ``python -m`` entries of the evaluations, the tiny-model
builder and the training process.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

__all__ = ["FILTERED_WARNINGS", "quiet_libraries"]

# (category, message regex, why the user cannot act on it)
FILTERED_WARNINGS: tuple[tuple[type[Warning], str, str], ...] = (
    (
        FutureWarning,
        r"`(is_)?gradient_checkpointing(_enable|_disable|_kwargs)?` is deprecated",
        "transformers 5 renamed it to activation_checkpointing; PEFT and TRL still call or set the old name",
    ),
    (
        UserWarning,
        r"'pin_memory' argument is set as true but no accelerator is found",
        "pinned batches are the Trainer's default for GPUs; on a machine without one torch skips them, harmlessly",
    ),
)

# DeepSpeed's logger names the accelerator it falls back to when torch sees no GPU: on a machine
# without one (a CPU run, the tiny models) that is the expected state, not news
_DEEPSPEED_CPU = "Setting accelerator to CPU"


class _NoCpuFallbackNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_DEEPSPEED_CPU):
            return True
        torch = sys.modules.get("torch")  # DeepSpeed asked torch just before logging this
        return torch is not None and torch.cuda.device_count() > 0  # kept where a GPU exists but was not detected


def quiet_libraries() -> None:
    """Filter the messages of :data:`FILTERED_WARNINGS` and DeepSpeed's CPU-fallback note, and turn
    off datasets' own progress bars (``Generating train split``, ``Saving the dataset``: the
    builders and evaluations draw their own); the environment variable is inherited by the
    processes a command launches. A user's ``HF_DATASETS_DISABLE_PROGRESS_BARS=0`` wins."""
    for category, message, _why in FILTERED_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    deepspeed_logger = logging.getLogger("DeepSpeed")  # DeepSpeed's own, made again (filters kept) when it loads
    if not any(isinstance(f, _NoCpuFallbackNote) for f in deepspeed_logger.filters):
        deepspeed_logger.addFilter(_NoCpuFallbackNote())
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "datasets" in sys.modules and os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1":
        sys.modules["datasets"].disable_progress_bars()
