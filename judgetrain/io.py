"""Atomic file writes shared by builders, evaluations and the trainer.

Every output file judgetrain writes goes through here: the content is written to a
temporary file beside the target, flushed and fsync'd, then renamed onto it, so a
reader (or a resumed run) sees the old file or the new one, never half of one.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = [
    "RowAppender",
    "atomic_folder",
    "atomic_path",
    "no_nan",
    "remove_leftovers",
    "write_bytes",
    "write_json",
    "write_rows",
    "write_text",
]


def no_nan(obj: Any) -> Any:
    """``obj`` with every float NaN replaced by ``None`` (standard JSON has no NaN)."""
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: no_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [no_nan(v) for v in obj]
    return obj


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; renamed onto ``path`` when the block
    ends without an error, removed otherwise. ``suffix`` keeps the extension a writer
    may infer the format from (``.tmp.png``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temp file beside it, fsync, rename."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temp file beside it, fsync, rename."""
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically; NaN becomes ``null``."""
    write_text(path, json.dumps(no_nan(obj), indent=2) + "\n")


def _lines(rows: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def write_rows(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` with ``rows`` as JSON Lines, atomically."""
    write_text(path, _lines(rows))


class RowAppender:
    """Appends JSON Lines rows to a file; every :meth:`write` is one ``write()`` call
    followed by flush + fsync, so what it returned from survives a SIGKILL or a power
    cut, and a kill leaves whole lines plus at most one partial last line."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # held open across write() calls and closed by close() / __exit__, so no `with` block here
        self._f: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self._f.write(_lines(rows))
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> RowAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def remove_leftovers(path: str | os.PathLike) -> None:
    """Delete what killed :func:`atomic_folder` blocks for ``path`` left beside it
    (``.NAME.partial-*``, ``.NAME.old-*``)."""
    path = Path(path)
    for pattern in (f".{path.name}.partial-*", f".{path.name}.old-*"):
        for stale in path.parent.glob(pattern):
            shutil.rmtree(stale, ignore_errors=True)


@contextmanager
def atomic_folder(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary folder beside ``path`` to fill; when the block ends without an error
    it replaces ``path`` (the folder appears complete or not at all), otherwise it is
    removed. What an earlier killed block left beside ``path`` is removed first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    tmp = path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
