"""The base of every error whose message already says what to do.

A command that raises one ends with ``error: MESSAGE`` and exit status 2, no traceback:
the ``judgetrain`` CLI and the ``python -m`` / ``accelerate launch -m`` entries of the
evaluations catch :class:`UserError` and nothing narrower. Each concrete error also
derives from the built-in it has always been (``ValueError``, ``OSError``, …), so
existing ``except`` clauses keep working.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable
from typing import Any

__all__ = ["UserError", "did_you_mean", "shown"]


class UserError(Exception):
    """Bad input or a missing file, named with the fix; printed without a traceback."""


# a value echoed in a message: a few items per level, a few levels (a YAML alias bomb is
# never walked in full)
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxtuple, _REPR.maxlist, _REPR.maxdict, _REPR.maxset = 3, 6, 6, 6, 6
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 60, 40, 60


def shown(value: Any, limit: int = 80, *, quote: bool = True) -> str:
    """``value`` as an error message echoes it: its ``repr`` (or, ``quote=False``, a string as
    is), at most ``limit`` characters (a longer one is cut, ending in "…"), at bounded cost
    whatever its size."""
    text = _REPR.repr(value) if quote or not isinstance(value, str) else value
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}…"


def did_you_mean(word: str, known: Iterable[str], *, n: int = 1, cutoff: float = 0.6, sentence: bool = False) -> str:
    """The "did you mean" every message that refuses a name ends with: ``""`` when nothing in
    ``known`` is close to ``word`` (``difflib.get_close_matches``), else ``"; did you mean 'x'?"``
    to end a clause, or with ``sentence=True`` ``" Did you mean 'x'?"`` (several: ``" Did you
    mean: 'x', 'y'?"``) to follow a full stop."""
    close = difflib.get_close_matches(str(word), list(known), n=n, cutoff=cutoff)
    if not close:
        return ""
    if not sentence:
        return f"; did you mean {close[0]!r}?"
    return f" Did you mean {close[0]!r}?" if n == 1 else f" Did you mean: {', '.join(repr(c) for c in close)}?"
