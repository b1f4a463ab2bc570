"""What a build is: its *identity*, what its records depend on. The builder and its version,
every config field but the ones that only say how or where to run (:data:`RUN_ONLY`), and
each input a field names by its content (sha256), never by how its path is spelled, so
``a.jsonl`` and ``/abs/a.jsonl`` are one build. The saved ``build.json`` records it
(:func:`judgetrain.records.save`); :mod:`.outfolder` compares it before a build starts. Also
here: what killed atomic writes (:mod:`judgetrain.io`) leave behind, and its removal.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path
from typing import Any

from judgetrain.config import jsonable
from judgetrain.identity import model_identity, path_identity

__all__ = ["RUN_ONLY", "build_identity", "is_leftover", "sweep_leftovers"]

# fields that say where and how a build runs, never what its records hold
RUN_ONLY = frozenset(
    {
        "out",
        "overwrite",
        "wait",
        "progress",
        "keep_work",
        "strict",
        "device",
        "workers",
        "cache",
        "rpm",
        "timeout",
        "attempts",
        "retry_delay",
        "base_url",
        "batch_size",
    }
)
# what io.atomic_folder (".NAME.partial-1a2b3c4d", ".NAME.old-…") and io.atomic_path (".NAME.1a2b3c4d.tmp",
# ".NAME.1a2b3c4d.part.mp4", ".NAME.1a2b3c4d.tmp.png") leave behind when the process is killed
_LEFTOVER = re.compile(r"^\..+\.((partial|old)-[0-9a-f]{8}|[0-9a-f]{8}\.(tmp|part)(\..+)?)$")


def _field_identity(name: str, value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return path_identity(value)
    if name == "model" and isinstance(value, str) and Path(value).is_dir():
        return model_identity(value)  # a local teacher by its weights, config and tokenizer
    return jsonable(value)


def build_identity(cfg: Any, builder: str, version: str) -> dict[str, Any]:
    """The identity of the build ``cfg`` asks ``builder`` (at ``version``) for: ``builder``,
    ``version``, then every field of ``cfg`` not in :data:`RUN_ONLY` as JSON, a path field by
    :func:`judgetrain.identity.path_identity` (so ``a.jsonl`` and ``/abs/a.jsonl`` are the same build)."""
    ident: dict[str, Any] = {"builder": builder, "version": version}
    for f in dataclasses.fields(cfg):
        if f.name not in RUN_ONLY:
            ident[f.name] = _field_identity(f.name, getattr(cfg, f.name))
    return ident


def is_leftover(name: str) -> bool:
    """Whether ``name`` is what a killed atomic write (:mod:`judgetrain.io`) left behind."""
    return bool(_LEFTOVER.match(name))


def sweep_leftovers(folder: Path) -> list[Path]:
    """Delete every leftover of a killed atomic write anywhere under ``folder``; returns what went."""
    gone: list[Path] = []
    if not folder.is_dir():
        return gone
    for root, dirs, files in os.walk(folder):
        for name in [d for d in dirs if is_leftover(d)]:
            shutil.rmtree(Path(root) / name, ignore_errors=True)
            dirs.remove(name)
            gone.append(Path(root) / name)
        for name in [f for f in files if is_leftover(f)]:
            (Path(root) / name).unlink(missing_ok=True)
            gone.append(Path(root) / name)
    return gone
