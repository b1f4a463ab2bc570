"""What every builder shares: the build error, skipped-input entries, and the
rule that manifest paths stay inside the manifest's folder. Kept free of heavy
imports so that reading a manifest never pulls in torch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BuildError", "Skip", "inside"]


class BuildError(RuntimeError):
    """A build that cannot go on (bad arguments, or bad input under --strict)."""


@dataclass
class Skip:
    """An input left out of the build, and why."""

    path: str
    line: int | None
    reason: str
    id: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


def inside(root: Path, rel: Any, what: str) -> Path:
    """Resolve ``rel`` against ``root``; refuse anything that leaves ``root``."""
    if not isinstance(rel, str) or not rel:
        raise ValueError(f"'{what}' must be a non-empty path string")
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"'{what}' {rel!r} points outside the manifest's folder {root}; keep data under the manifest's folder")
    return path
