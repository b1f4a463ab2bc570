"""What makes two builds, training runs or evaluations the same work: content, not spellings.

A folder judgetrain writes into (a dataset, an ``--output_dir``, an evaluation's
``--out``) records an *identity*: the settings that change its results plus the
content hashes of what it read. A rerun with an equal identity resumes (or finds
nothing to do); any other is refused with :func:`differences` (``field: old → new``)
unless the user passes ``--overwrite``.

- :func:`sha256_file` hashes a file's bytes once per (path, size, mtime, ctime,
  inode): the digest is cached under :func:`cache_dir`, so a 16 GB checkpoint is read
  once, not per run, and a file replaced or rewritten in place is hashed again.
- :func:`model_identity` is a local model folder's weight, config and tokenizer
  files by content (a relative and an absolute spelling of one folder are the same
  model; the same ``config.json`` over other weights is not), or a hub id by name.
- :func:`git_state` is the checkout's commit and whether it had uncommitted changes.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from judgetrain.io import write_text

__all__ = [
    "ANNOTATION_SUFFIXES",
    "CACHE_ENV",
    "MODEL_FILES",
    "adapter_identity",
    "cache_dir",
    "differences",
    "files_identity",
    "folder_hashes",
    "git_state",
    "model_identity",
    "path_identity",
    "sha256_file",
]

CACHE_ENV = "JUDGETRAIN_CACHE"
# what a model folder's outputs depend on: weights, configs, tokenizer and chat template
MODEL_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.json", "*.model", "*.txt", "*.jinja", "*.tiktoken")
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin", "adapter_config.json")
# inside a folder a path names: files read as text (annotations) count by content, the rest (media) by name and size
ANNOTATION_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet", ".txt", ".yaml", ".yml")
_MEMORY: dict[str, str] = {}


def cache_dir() -> Path:
    """Where content hashes are cached: ``$JUDGETRAIN_CACHE``, else ``~/.cache/judgetrain``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "judgetrain")


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}"


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, cached by path, size, mtime, ctime and inode (a file
    changed in any way that keeps all five is not something a user can do)."""
    path = Path(path).resolve()
    key = _stat_key(path)
    if key in _MEMORY:
        return _MEMORY[key]
    entry = cache_dir() / "sha256" / hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:40]
    try:
        digest = entry.read_text().strip()
    except OSError:
        digest = ""
    if len(digest) != 64:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        digest = h.hexdigest()
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_text(entry, digest + "\n")
        except OSError:
            pass  # a read-only home: hash again next time
    _MEMORY[key] = digest
    return digest


def folder_hashes(folder: str | os.PathLike, patterns: Iterable[str] = MODEL_FILES) -> dict[str, str]:
    """``{file name: sha256}`` of the files directly in ``folder`` matching ``patterns``."""
    folder = Path(folder)
    names = sorted({p.name for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    return {name: sha256_file(folder / name) for name in names}


def files_identity(paths: Iterable[str | os.PathLike]) -> str:
    """One sha256 over the contents of ``paths`` in the order given (media a run read,
    say): equal for byte-identical files wherever they are stored."""
    h = hashlib.sha256()
    for path in paths:
        h.update(sha256_file(path).encode())
        h.update(b"\n")
    return h.hexdigest()


def path_identity(path: str | os.PathLike) -> dict[str, Any]:
    """A path a config names, by content, never by its spelling: a file's sha256; a built
    dataset folder's builder and split content hashes (from its ``build.json``); any other
    folder one sha256 over its files (annotation files by content, others by relative name
    and size); a missing path by its absolute name."""
    path = Path(path)
    if path.is_file():
        return {"sha256": sha256_file(path)}
    if (path / "build.json").is_file():  # judgetrain.records.BUILD_FILE (records loads `datasets`)
        info = json.loads((path / "build.json").read_text())
        return {
            "builder": info.get("builder"),
            "splits": {s: v.get("content_hash") for s, v in sorted(info.get("splits", {}).items())},
        }
    if path.is_dir():
        h = hashlib.sha256()
        for p in sorted(q for q in path.rglob("*") if q.is_file()):
            part = sha256_file(p) if p.suffix.lower() in ANNOTATION_SUFFIXES else str(p.stat().st_size)
            h.update(f"{p.relative_to(path).as_posix()}\0{part}\n".encode("utf-8", "surrogateescape"))
        return {"folder": h.hexdigest()}
    return {"missing": str(path.resolve())}


def model_identity(model: str | os.PathLike) -> dict[str, Any]:
    """A base model by content: ``{"files": {name: sha256}}`` for a local folder (its
    weights, configs and tokenizer; see :data:`MODEL_FILES`), ``{"hub_id": model}``
    for a name that is no local folder."""
    folder = Path(model)
    if folder.is_dir():
        return {"files": folder_hashes(folder)}
    return {"hub_id": str(model)}


def adapter_identity(adapter: str | os.PathLike | None) -> dict[str, Any] | None:
    """A PEFT adapter folder by content (its weights and ``adapter_config.json``), so an
    adapter retrained in place is other work and a copy elsewhere is the same."""
    if not adapter:
        return None
    return {"files": folder_hashes(adapter, ADAPTER_FILES)}


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Every leaf where two identities differ, as ``"a.b: old → new"``, sorted by key."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += differences(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [f"{prefix[:-1] or 'value'}: {old!r} → {new!r}"]


def git_state(start: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the git checkout holding ``start`` (default: this
    package); ``dirty`` is whether tracked files had uncommitted changes. Both ``None``
    outside a checkout or without git."""
    here = Path(start or __file__).resolve()
    root = next((p for p in [here, *here.parents] if (p / ".git").exists()), None)
    if root is None:
        return {"commit": None, "dirty": None}
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return {"commit": None, "dirty": None}
    if commit.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": commit.stdout.strip() or None, "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
