"""Evaluation run folders: ``predictions.jsonl`` I/O, ``run.json`` and when a rerun may resume.

A run folder holds ``predictions.jsonl`` (one JSON object per item, appended, flushed
and fsync'd as scoring goes), ``run.json`` (how the run was made) and what the
evaluation's report writes from them (``metrics.json``, ``report.md``, PNGs).

``run.json`` is :func:`run_info`: the command's config (``asdict``), the evaluation's
name, the items the config selects, and an ``identity`` block: every config field
marked ``identity=True`` plus the content hash of every dataset split read (from its
``build.json``), the model's config hash and the adapter's weights hash. A rerun into
the same folder resumes only when the identity blocks are equal; otherwise
:func:`check_resume` names each differing field (old → new) and the two ways out.
It also records the package versions, the git commit of a checkout, start and
finish times and the exact command line. See the README's "Run folders" section.
README: "Run folders".
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError
from judgetrain.io import write_json, write_rows

__all__ = [
    "METRICS", "PREDICTIONS", "REPORT", "RUN_INFO", "EvalInputError", "PredictionsError",
    "check_resume", "clear_run", "items_count", "dataset_identity", "file_identity", "finish_run", "model_identity", "read_predictions",
    "read_run", "repair_predictions", "run_info", "selected", "write_run_info",
]

PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
REPORT = "report.md"
RUN_INFO = "run.json"
_PACKAGES = ("judgetrain", "torch", "transformers", "peft", "trl", "accelerate", "datasets")


class PredictionsError(UserError, ValueError):
    """A run folder that cannot be used as asked (unreadable predictions, another run's folder)."""


class EvalInputError(UserError, ValueError):
    """An evaluation asked for data that is not there (a split, a task); the message says what is."""


# --------------------------------------------------------------------------- predictions.jsonl


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and "id" in row else None


def _scan(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Rows of a predictions file, and whether its last line lacks its newline (a kill
    mid-write). Such a line counts as a row when it is a complete object, else it is
    dropped; a bad line that did end with a newline is an error."""
    if not path.exists():
        return [], False
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        row = _parse(line)
        if row is None:
            raise PredictionsError(f"{path}, line {i + 1}: not a prediction row. Delete that line (or the file, to "
                                   "start the run over) and rerun.")
        rows.append(row)
    if not tail.strip():
        return rows, bool(tail)
    row = _parse(tail)
    return rows + ([row] if row is not None else []), True


def read_predictions(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``predictions.jsonl`` in file order, without a partial last line
    (left by a kill mid-write); a missing file reads as no rows."""
    return _scan(Path(path))[0]


def repair_predictions(path: str | os.PathLike) -> int:
    """Rewrite ``path`` without a partial last line, atomically; returns the rows kept.
    A complete last object missing only its newline gets the newline."""
    path = Path(path)
    rows, partial = _scan(path)
    if partial:
        write_rows(path, rows)
    return len(rows)


def selected(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The rows of the items the run's current config selects (``run.json["items"]``), in
    file order; every row when ``run.json`` lists no items (a run of an older judgetrain).
    Predictions of items a smaller ``--limit`` or other ``--tasks`` left out stay in the
    file for a later run, but never in the metrics."""
    ids = (info.get("items") or {}).get("ids")
    if ids is None:
        return list(rows)
    wanted = set(ids)
    return [r for r in rows if r["id"] in wanted]


def items_count(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> dict[str, int]:
    """``{"selected", "evaluated"}``: items the run's config selects, and how many of them have
    predictions (fewer after a kill, until the run is resumed)."""
    return {"selected": int((info.get("items") or {}).get("n", len(rows))), "evaluated": len(rows)}


def read_run(run_dir: str | os.PathLike, how: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run folder's prediction rows of the items its config selects (see :func:`selected`)
    and its ``run.json`` (``{}`` when absent). A folder without ``predictions.jsonl``
    raises ``FileNotFoundError`` ending in ``how`` (what to run or pass instead)."""
    run_dir = Path(run_dir)
    if not (run_dir / PREDICTIONS).is_file():
        raise FileNotFoundError(f"{run_dir} holds no {PREDICTIONS}; {how}")
    info = json.loads((run_dir / RUN_INFO).read_text()) if (run_dir / RUN_INFO).is_file() else {}
    return selected(read_predictions(run_dir / PREDICTIONS), info), info


# --------------------------------------------------------------------------- identity


def file_identity(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_identity(model: str) -> dict[str, Any]:
    """A base model: its name as given and, for a local folder, the sha256 of its
    ``config.json`` (a hub id is identified by its name; weights are not hashed, they
    can be tens of GB)."""
    config = Path(model) / "config.json"
    return {"name": str(model), "config_sha256": file_identity(config) if config.is_file() else None}


def adapter_identity(adapter: str | None) -> dict[str, Any] | None:
    """A PEFT adapter folder: its path and the sha256 of its weights and config, so an
    adapter retrained in place is a different run."""
    if not adapter:
        return None
    folder = Path(adapter)
    files = {name: file_identity(folder / name) for name in ("adapter_model.safetensors", "adapter_config.json")
             if (folder / name).is_file()}
    return {"name": str(adapter), **files}


def dataset_identity(data: str | os.PathLike, splits: Sequence[str]) -> dict[str, Any]:
    """A built dataset: the content hash of each split read, from its ``build.json``."""
    from judgetrain import records

    info = records.read_build_info(data)
    hashes = {s: (info.get("splits", {}).get(s) or {}).get("content_hash") for s in splits}
    return {"builder": info.get("builder"), "content_hash": hashes}


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_info(evaluation: str, cfg: Any, *, data: Mapping[str, Any], items: Sequence[str], world_size: int = 1,
             command: str | None = None) -> dict[str, Any]:
    """``run.json`` for a run of ``evaluation`` configured by dataclass ``cfg`` over the
    items ``items`` (ids, in order) of the data identified by ``data``."""
    from judgetrain import config

    fields = config.jsonable(cfg)
    identity = {**config.identity(cfg), "data": dict(data), "model": model_identity(cfg.model),
                "adapter": adapter_identity(getattr(cfg, "adapter", None))}
    return {"evaluation": evaluation, **fields, "identity": identity, "items": {"n": len(items), "ids": list(items)},
            "world_size": world_size, "versions": _versions(), "git_commit": _git_commit(), "started": _now(),
            "finished": None, "command": command or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "argv": list(sys.argv)}


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(k), new.get(k), f"{prefix}{k}.")
        return out
    return [] if old == new else [f"{prefix[:-1]}: {old!r} → {new!r}"]


def clear_run(out: str | os.PathLike) -> None:
    """Remove what an evaluation wrote into ``out`` (predictions, run.json, metrics, report,
    figures); anything else in the folder stays."""
    out = Path(out)
    for pattern in ("predictions*.jsonl", RUN_INFO, METRICS, REPORT, "*.png"):
        for path in out.glob(pattern):
            path.unlink()


def check_resume(out: str | os.PathLike, info: Mapping[str, Any], *, overwrite: bool = False) -> dict[str, Any]:
    """The ``run.json`` already in ``out`` (``{}`` when none) when ``info`` may resume it:
    same evaluation and equal identity blocks. Otherwise :class:`PredictionsError` listing
    each differing field (old → new) and the two ways out, or, with ``overwrite``, the
    folder's old run is removed (:func:`clear_run`) and ``{}`` returned."""
    out = Path(out)
    path = out / RUN_INFO
    old = json.loads(path.read_text()) if path.is_file() else {}
    if not old and not (out / PREDICTIONS).is_file():
        return {}
    if old.get("evaluation") != info["evaluation"]:
        diff = [f"evaluation: {old.get('evaluation')!r} → {info['evaluation']!r}"]
    else:
        diff = _differences(old.get("identity"), info["identity"]) if "identity" in old else \
            ["identity: not recorded (a run of an older judgetrain)"]
    if not diff:
        return old
    if overwrite:
        clear_run(out)
        return {}
    raise PredictionsError(f"{out} holds predictions of another run:\n" + "\n".join(f"  - {d}" for d in diff)
                           + f"\nEither write this run elsewhere (--out NEW_FOLDER), or pass --overwrite to replace "
                             f"the run in {out}.")


def write_run_info(out: str | os.PathLike, info: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``run.json``, keeping the first run's start time when resuming ``old``."""
    info = dict(info)
    if old and old.get("started"):
        info["first_started"] = old.get("first_started", old["started"])
    Path(out).mkdir(parents=True, exist_ok=True)
    write_json(Path(out) / RUN_INFO, info)
    return info


def finish_run(out: str | os.PathLike) -> None:
    """Stamp ``run.json`` with the time the run finished."""
    path = Path(out) / RUN_INFO
    info = json.loads(path.read_text())
    info["finished"] = _now()
    write_json(path, info)
