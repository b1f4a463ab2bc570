"""The base of every error whose message already says what to do.

A command that raises one ends with ``error: MESSAGE`` and exit status 2, no traceback:
the ``judgetrain`` CLI and the ``python -m`` / ``accelerate launch -m`` entries of the
evaluations catch :class:`UserError` and nothing narrower. Each concrete error also
derives from the built-in it has always been (``ValueError``, ``OSError``, …), so
existing ``except`` clauses keep working.
README: "Commands".
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """Bad input or a missing file, named with the fix; printed without a traceback."""
