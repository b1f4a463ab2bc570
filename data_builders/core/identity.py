"""What a build is: its *identity*, what its records depend on. The builder and its version,
every config field but the ones that only say how or where to run (:data:`RUN_ONLY`), and
each input a field names by its content (sha256), never by how its path is spelled, so
``a.jsonl`` and ``/abs/a.jsonl`` are one build. The saved ``build.json`` records it
(:func:`judgetrain.records.save`); :mod:`.outfolder` compares it before a build starts. Also
here: what killed atomic writes (:mod:`judgetrain.io`) leave behind, and its removal.
README: "Build folders".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from judgetrain.config import jsonable
from judgetrain.identity import model_identity, sha256_file
from judgetrain.records import BUILD_FILE

__all__ = ["ANNOTATION_SUFFIXES", "RUN_ONLY", "build_identity", "input_identity", "is_leftover", "sweep_leftovers"]

# fields that say where and how a build runs, never what its records hold
RUN_ONLY = frozenset({
    "out", "overwrite", "progress", "keep_work", "strict", "device", "workers", "cache", "rpm", "timeout", "attempts",
    "retry_delay", "base_url", "batch_size",
})
# inside a folder an input names: files read as text (annotations) count by content, the rest (media) by name and size
ANNOTATION_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".txt", ".yaml", ".yml")
# what io.atomic_folder (".NAME.partial-1a2b3c4d", ".NAME.old-…") and io.atomic_path (".NAME.1a2b3c4d.tmp",
# ".NAME.1a2b3c4d.part.mp4", ".NAME.1a2b3c4d.tmp.png") leave behind when the process is killed
_LEFTOVER = re.compile(r"^\..+\.((partial|old)-[0-9a-f]{8}|[0-9a-f]{8}\.(tmp|part)(\..+)?)$")


def input_identity(path: Path) -> Any:
    """An input a config field names, by content: a file's sha256; a built dataset folder's
    builder and split content hashes (from its ``build.json``); any other folder one sha256 over
    its files (annotation files by content, others by relative name and size)."""
    path = Path(path)
    if path.is_file():
        return {"sha256": sha256_file(path)}
    if (path / BUILD_FILE).is_file():
        info = json.loads((path / BUILD_FILE).read_text())
        return {"builder": info.get("builder"),
                "splits": {s: v.get("content_hash") for s, v in sorted(info.get("splits", {}).items())}}
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(q for q in path.rglob("*") if q.is_file()):
            part = sha256_file(p) if p.suffix.lower() in ANNOTATION_SUFFIXES else str(p.stat().st_size)
            h.update(f"{p.relative_to(path).as_posix()}\0{part}\n".encode("utf-8", "surrogateescape"))
        return {"folder": h.hexdigest()}
    return {"missing": str(path.resolve())}


def _field_identity(name: str, value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return input_identity(Path(value))
    if name == "model" and isinstance(value, str) and Path(value).is_dir():
        return model_identity(value)  # a local teacher by its weights, config and tokenizer
    return jsonable(value)


def build_identity(cfg: Any, builder: str, version: str) -> dict[str, Any]:
    """The identity of the build ``cfg`` asks ``builder`` (at ``version``) for: ``builder``,
    ``version``, then every field of ``cfg`` not in :data:`RUN_ONLY` as JSON, a path field by
    :func:`input_identity` (so ``a.jsonl`` and ``/abs/a.jsonl`` are the same build)."""
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
