"""Whether a wandb run judgetrain opens logs online or offline: online where a key is
configured (``WANDB_API_KEY``, or ``~/.netrc`` as ``wandb login`` leaves it) or ``WANDB_MODE``
says how, offline otherwise, so a machine without a key never fails or blocks on a login
prompt (upload later with ``wandb sync``). Training, the sweep's summary run and every
evaluation's ``--report_to wandb`` decide by this one rule; the key itself is never read
here beyond its presence. Where wandb is not used, nothing says anything about it
(:func:`offline_mode_hidden`).
Docs: "how-to/wandb.md".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["netrc_key_configured", "offline_mode_hidden", "offline_without_a_key"]


def netrc_key_configured() -> bool:
    """True when ~/.netrc holds a wandb API key (as ``wandb login`` leaves it)."""
    import netrc

    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def offline_without_a_key() -> bool:
    """True when nothing says how to log: no ``WANDB_API_KEY``, no key in ~/.netrc, no ``WANDB_MODE``."""
    return not os.environ.get("WANDB_API_KEY") and os.environ.get("WANDB_MODE") is None and not netrc_key_configured()


@contextmanager
def offline_mode_hidden(hide: bool = True) -> Iterator[None]:
    """With ``hide``: ``WANDB_MODE=offline`` out of the environment for the block, put back after
    it (any other value stays). For code that does not use wandb but first imports what reads
    it at import time: transformers' reporting integrations, which building a
    ``TrainingArguments`` imports, print "[INFO] Running in WANDB offline mode" on stdout
    then, a line about wandb where nothing reports to it. Not for a block that opens a wandb
    run; the process's first such import happens once, so call it before any threads start."""
    mode = os.environ.get("WANDB_MODE")
    hidden = hide and mode == "offline"
    if hidden:
        del os.environ["WANDB_MODE"]
    try:
        yield
    finally:
        if hidden:
            os.environ["WANDB_MODE"] = "offline"
