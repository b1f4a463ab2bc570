"""Atomic file writes shared by builders, evaluations and the trainer.

Every output file judgetrain writes goes through here: the content is written to a
temporary file beside the target, flushed and fsync'd, then renamed onto it, so a
reader (or a resumed run) sees the old file or the new one, never half of one.
README: "Run folders".
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "no_nan", "write_json", "write_rows", "write_text"]


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


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temp file beside it, fsync, rename."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON atomically; NaN becomes ``null``."""
    write_text(path, json.dumps(no_nan(obj), indent=2) + "\n")


def write_rows(path: str | os.PathLike, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` with ``rows`` as JSON Lines, atomically."""
    write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
