"""What both modes of ``judgetrain build video-mcq`` share: the builder's name and version,
the file names it writes, one manifest row and the writing of the manifest (which must read
back through :func:`judgetrain.mcq.manifest.load_manifest`), and how a config reports its
problems. Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgetrain.mcq.manifest import load_manifest

from ..core.common import BuildError

__all__ = ["BUILDER", "BUILD_INFO", "MANIFEST", "VERSION", "manifest_row", "post_init_base", "raise_problems", "write_manifest"]

BUILDER = "video-mcq"
VERSION = "1.0.0"
MANIFEST = "manifest.jsonl"
BUILD_INFO = "build.json"


def manifest_row(
    qid: str,
    video: str,
    question: str,
    options: Sequence[str],
    answer: int,
    benchmark: str,
    duration: float | None = None,
    num_frames: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One manifest line (``judgetrain.mcq.manifest``): the required fields, ``duration`` (seconds)
    and ``num_frames`` when known, then ``extra`` (``qtype``, ``evidence_s``, a benchmark's metadata)."""
    row = {"id": qid, "video": video, "question": question, "options": list(options), "answer": answer, "benchmark": benchmark}
    if duration is not None:
        row["duration"] = duration
    if num_frames is not None:
        row["num_frames"] = num_frames
    return row | extra


def write_manifest(out: Path, rows: list[dict[str, Any]]) -> Path:
    """Write ``out/manifest.jsonl`` and read it back with the loader; returns its path."""
    from judgetrain.io import write_rows

    path = out / MANIFEST
    write_rows(path, rows)
    load_manifest(path)  # what was written must read back
    return path


def raise_problems(problems: list[str]) -> None:
    """One BuildError listing every problem of a config, if there is any."""
    if problems:
        raise BuildError("invalid video-mcq build options:\n" + "\n".join(f"  - {p}" for p in problems))


def post_init_base(cfg: Any, cls: type) -> None:
    """The next ``__post_init__`` up the MRO, if any (the command config joins both modes' configs)."""
    parent = getattr(super(cls, cfg), "__post_init__", None)
    if parent is not None:
        parent()
