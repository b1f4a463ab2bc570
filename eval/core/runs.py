"""Evaluation run folders: ``predictions.jsonl`` I/O, ``run.json`` and when a rerun may resume.

A run folder holds ``predictions.jsonl`` (one JSON object per item, appended, flushed
and fsync'd as scoring goes), ``run.json`` (how the run was made) and what the
evaluation's report writes from them (``metrics.json``, ``report.md``, PNGs).

``run.json`` is :func:`run_info`: the command's config (``asdict``), the evaluation's
name, the items the config selects, and an ``identity`` block (:func:`config_identity`):
every config field marked ``identity=True``, by content and not by spelling (the model's
weights, config and tokenizer files and the adapter's files by sha256, any other path by
its bytes, the dtype as it resolves), plus the data read by content (each dataset split's
content hash from its ``build.json``; a manifest's sha256 and every video read). Hashes
come from :mod:`judgetrain.identity`, cached by path, size and times, so a large
checkpoint is read once. A rerun into the same folder resumes only when the identity
blocks are equal; otherwise :func:`check_resume` names each differing field (old → new)
and the two ways out. It also records the package versions, the git commit of a checkout
and whether it had uncommitted changes, start and finish times and the exact command line.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from judgetrain.errors import UserError
from judgetrain.identity import adapter_identity, differences, git_state, model_identity, path_identity
from judgetrain.io import write_json, write_rows
from judgetrain.models.registry import dtype_name

__all__ = [
    "METRICS",
    "PREDICTIONS",
    "REPORT",
    "RUN_INFO",
    "EvalInputError",
    "PredictionsError",
    "check_resume",
    "check_unique",
    "clear_run",
    "config_identity",
    "dataset_identity",
    "evaluated_model",
    "finish_run",
    "identity_changes",
    "items_count",
    "read_predictions",
    "read_run",
    "repair_predictions",
    "resolved_dtype",
    "row_key",
    "run_info",
    "selected",
    "write_run_info",
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


def _scan(path: Path) -> tuple[list[dict[str, Any]], bool, list[int]]:
    """Rows of a predictions file, whether its last line lacks its newline (a kill
    mid-write), and each row's line number (1-based). Such a last line counts as a row when
    it is a complete object, else it is dropped; a bad line that did end with a newline is an error."""
    if not path.exists():
        return [], False, []
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    rows: list[dict[str, Any]] = []
    numbers: list[int] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        row = _parse(line)
        if row is None:
            raise PredictionsError(
                f"{path}, line {i + 1}: not a prediction row. Delete that line (or the file, to start the run over) and rerun."
            )
        rows.append(row)
        numbers.append(i + 1)
    if not tail.strip():
        return rows, bool(tail), numbers
    row = _parse(tail)
    if row is None:
        return rows, True, numbers
    return [*rows, row], True, [*numbers, len(lines) + 1]


# what tells apart the rows of one item in an evaluation that writes several (PhaseFusion: a question's
# `pass` rows per origin, grid, phase and ordering, a `cost` row per origin and grid, one closing `question` row)
_ROW_PARTS = ("kind", "origin", "grid", "phase", "ordering")


def row_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    """What one prediction row is the row of: its ``id``, and for a row that says its ``kind`` (an
    evaluation writing several rows per item) that kind and its pass coordinates (``origin``,
    ``grid``, ``phase``, ``ordering``, where present). Two rows of one key are one item counted twice."""
    if "kind" not in row:
        return (str(row["id"]),)
    return (str(row["id"]), *(f"{part}={row[part]}" for part in _ROW_PARTS if part in row))


def check_unique(path: str | os.PathLike) -> None:
    """Raise :class:`PredictionsError` naming the file, the line and the id when two rows of a
    predictions file have one key (:func:`row_key`): two runs wrote the folder at once, or lines
    were copied, and every count and interval built on it would count that item twice."""
    path = Path(path)
    rows, _, numbers = _scan(path)
    first: dict[tuple[str, ...], int] = {}
    for row, line in zip(rows, numbers, strict=True):
        key = row_key(row)
        if key in first:
            what = f" ({', '.join(key[1:])})" if len(key) > 1 else ""
            raise PredictionsError(
                f"{path}, line {line}: a second row for id {row['id']!r}{what}, the first at line {first[key]}. Two runs "
                "wrote this folder at once (before judgetrain kept one writer per folder), or lines were copied; its "
                "metrics would count that item twice. Delete the repeated rows and rerun, or start the run afresh "
                "in a new --out."
            )
        first[key] = line


def read_predictions(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``predictions.jsonl`` in file order, without a partial last line
    (left by a kill mid-write); a missing file reads as no rows."""
    return _scan(Path(path))[0]


def repair_predictions(path: str | os.PathLike) -> int:
    """Rewrite ``path`` without a partial last line, atomically; returns the rows kept.
    A complete last object missing only its newline gets the newline."""
    path = Path(path)
    rows, partial, _ = _scan(path)
    if partial:
        write_rows(path, rows)
    return len(rows)


_RowT = TypeVar("_RowT", bound=Mapping[str, Any])


def selected(rows: Sequence[_RowT], info: Mapping[str, Any]) -> list[_RowT]:
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
    raises ``FileNotFoundError`` ending in ``how`` (what to run or pass instead); rows that
    repeat a key (:func:`check_unique`) raise :class:`PredictionsError`."""
    run_dir = Path(run_dir)
    if not (run_dir / PREDICTIONS).is_file():
        raise FileNotFoundError(f"{run_dir} holds no {PREDICTIONS}; {how}")
    info = json.loads((run_dir / RUN_INFO).read_text()) if (run_dir / RUN_INFO).is_file() else {}
    check_unique(run_dir / PREDICTIONS)
    rows = read_predictions(run_dir / PREDICTIONS)
    chosen = selected(rows, info)
    ignored = len({r["id"] for r in rows} - {r["id"] for r in chosen})
    if ignored:
        info["ignored_items"] = ignored  # in memory only: what the report says it left out
        print(
            f"warning: {run_dir / PREDICTIONS}: predictions of {ignored} item(s) are left out of the metrics: "
            f"{RUN_INFO}'s config does not select them (a run with a larger --limit, other --tasks or another "
            f"split wrote them); rerun with that config to include them",
            file=sys.stderr,
            flush=True,
        )
    return chosen, info


# --------------------------------------------------------------------------- identity


def dataset_identity(data: str | os.PathLike, splits: Sequence[str]) -> dict[str, Any]:
    """A built dataset: the content hash of each split read, from its ``build.json``."""
    from judgetrain import records

    info = records.read_build_info(data)
    hashes = {s: (info.get("splits", {}).get(s) or {}).get("content_hash") for s in splits}
    return {"builder": info.get("builder"), "content_hash": hashes}


def evaluated_model(model: str | os.PathLike) -> dict[str, Any]:
    """``--model`` by content (:func:`judgetrain.identity.model_identity`): a relative and an
    absolute spelling of one folder are one model, the same ``config.json`` over other
    weights is another. An adapter folder given as the model (its base recorded in
    ``adapter_config.json``) is that adapter's files and its base's."""
    folder = Path(model)
    if (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file():
        from judgetrain.models.adapters import adapter_base

        try:
            base: dict[str, Any] | None = model_identity(adapter_base(folder))
        except (UserError, OSError, ValueError):
            base = None  # no loadable base: the load fails and names it, before run.json is written
        return {"adapter": adapter_identity(folder), "base": base}
    return model_identity(model)


def _checkpoint_dtype(model: str | os.PathLike) -> str | None:
    """The dtype a local checkpoint's ``config.json`` records (what ``dtype="auto"`` loads)."""
    path = Path(model) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    found = config.get("dtype") or config.get("torch_dtype") or (config.get("text_config") or {}).get("dtype")
    return str(found).replace("torch.", "") if found else None


def resolved_dtype(dtype: Any, model: str | os.PathLike, device_type: str) -> str:
    """What ``--dtype`` loads the weights in, so equal settings spelled differently are one run:
    ``None`` is float32 on CPU and the checkpoint's dtype (``"auto"``) on an accelerator;
    ``"auto"`` is the dtype the checkpoint's ``config.json`` records (``"auto"`` when it
    records none: the model's content hashes then tell checkpoints apart); ``fp32``,
    ``bf16``, … are their full names."""
    if dtype is None:
        dtype = "float32" if device_type == "cpu" else "auto"
    name = dtype_name(dtype)
    if name == "auto":
        return _checkpoint_dtype(model) or "auto"
    return name


def _device_type(world_size: int) -> str:
    """Where an evaluation's scorer loads: CUDA when available (``judgetrain.eval.core.sharded``),
    except for a multi-process launch that accelerate puts on CPU."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    if world_size > 1:
        from accelerate.utils import parse_flag_from_env

        return "cpu" if parse_flag_from_env("ACCELERATE_USE_CPU") else "cuda"
    return "cuda"


def config_identity(cfg: Any, world_size: int = 1) -> dict[str, Any]:
    """The identity block of a config: its fields marked ``identity=True``, with paths by
    content (the model by :func:`evaluated_model`, the adapter by
    :func:`judgetrain.identity.adapter_identity`, any other path field by
    :func:`judgetrain.identity.path_identity`) and
    the dtype as it resolves (:func:`resolved_dtype`)."""
    from dataclasses import fields

    from judgetrain import config

    identity = config.identity(cfg)
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if f.name in identity and isinstance(value, os.PathLike) and f.name not in ("model", "adapter"):
            identity[f.name] = path_identity(value)
    if "model" in identity:
        identity["model"] = evaluated_model(cfg.model)
    if "adapter" in identity:
        identity["adapter"] = adapter_identity(cfg.adapter)
    if "dtype" in identity:
        identity["dtype"] = resolved_dtype(cfg.dtype, cfg.model, _device_type(world_size))
    return identity


def _media(identity: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    media = ((identity or {}).get("data") or {}).get("media")
    return media if isinstance(media, Mapping) else None


def identity_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two identity blocks, ``"field: old → new"`` (old first). A
    ``data.media`` mapping (``{file: sha256}`` of the media a run read) is compared on the
    files both runs read: a file read only by one of them (a larger ``--limit``, a video
    that was missing) is no difference; the same file with other bytes is."""
    old_media, new_media = _media(old), _media(new)
    if old_media is not None and new_media is not None:
        shared = set(old_media) & set(new_media)
        old = {**old, "data": {**old["data"], "media": {k: old_media[k] for k in shared}}}
        new = {**new, "data": {**new["data"], "media": {k: new_media[k] for k in shared}}}
    return differences(old, new)


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


def run_info(
    evaluation: str,
    cfg: Any,
    *,
    data: Mapping[str, Any],
    items: Sequence[str],
    world_size: int = 1,
    command: str | None = None,
    prefill: Any = None,
    sampling: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``run.json`` for a run of ``evaluation`` configured by dataclass ``cfg`` over the
    items ``items`` (ids, in order) of the data identified by ``data`` (content hashes).
    ``prefill`` (a :class:`~judgetrain.eval.core.prefill.RunPrefill`): the text scored after,
    recorded as ``prefill`` (in place of the ``--prefill`` setting) with ``prefill_from``, and
    in the identity, so a run with another prefill is never resumed into this one. ``sampling``
    (:func:`~judgetrain.eval.core.sample.sample_identity`): a ``--sample`` run's seed and strata, in the
    identity (N is not: a larger one extends the run, as ``--limit`` does)."""
    from judgetrain import config

    identity = {**config_identity(cfg, world_size), "data": dict(data)}
    identity.setdefault("model", evaluated_model(cfg.model))
    identity.setdefault("adapter", adapter_identity(getattr(cfg, "adapter", None)))
    used = {} if prefill is None else {"prefill": prefill.text, "prefill_from": prefill.source}
    if prefill is not None:
        identity["prefill"] = prefill.text
    if sampling is not None:
        identity["sample"] = dict(sampling)
    git = git_state()
    return {
        "evaluation": evaluation,
        **config.jsonable(cfg),
        **used,
        "identity": identity,
        "items": {"n": len(items), "ids": list(items)},
        "world_size": world_size,
        "versions": _versions(),
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "started": _now(),
        "finished": None,
        "command": command or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "argv": list(sys.argv),
    }


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
        diff = (
            identity_changes(old["identity"], info["identity"])
            if "identity" in old
            else ["identity: not recorded (a run of an older judgetrain)"]
        )
    if not diff:
        return old
    if overwrite:
        clear_run(out)
        return {}
    raise PredictionsError(
        f"{out} holds predictions of another run (old → new):\n"
        + "\n".join(f"  - {d}" for d in diff)
        + f"\nEither write this run elsewhere (--out NEW_FOLDER), or pass --overwrite to replace "
        f"the run in {out}."
    )


def write_run_info(out: str | os.PathLike, info: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``run.json``, keeping the first run's start time when resuming ``old``, and the
    media files ``old`` read (``identity.data.media``) beside this run's, so that a later
    rerun still checks the media behind every prediction in the folder."""
    info = dict(info)
    if old and old.get("started"):
        info["first_started"] = old.get("first_started", old["started"])
    old_media, new_media = _media(old.get("identity") if old else None), _media(info.get("identity"))
    if old_media is not None and new_media is not None:
        identity = info["identity"]
        info["identity"] = {**identity, "data": {**identity["data"], "media": dict(sorted({**old_media, **new_media}.items()))}}
    Path(out).mkdir(parents=True, exist_ok=True)
    write_json(Path(out) / RUN_INFO, info)
    return info


def finish_run(out: str | os.PathLike) -> None:
    """Stamp ``run.json`` with the time the run finished."""
    path = Path(out) / RUN_INFO
    info = json.loads(path.read_text())
    info["finished"] = _now()
    write_json(path, info)
