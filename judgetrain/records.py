"""The task record: the one row format every part of judgetrain shares.

A built dataset is a ``datasets.DatasetDict`` saved with ``save_to_disk`` next
to a ``build.json``. Every row is one task instance in TRL's conversational
prompt–completion form (the docs' "The task record" page), so
``trl.SFTTrainer`` consumes it unchanged and the evaluators read labels,
positions and layouts from it instead of re-deriving them.

This module owns the schema (:data:`FEATURES`), row validation that names the
split, row, id and column of every violation, stable ids, per-split content
hashes, and atomic :func:`save` / :func:`load`.
Docs: "concepts/task-record.md", "reference/api/records.md".
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pyarrow
from datasets import Features, Image, List, Value

from judgetrain.compat.datasets import dataset_dict_file, reads_through_indices
from judgetrain.errors import UserError
from judgetrain.io import atomic_folder, write_text

__all__ = [
    "FEATURES",
    "TASKS",
    "CLOSED_TASKS",
    "BUILD_FILE",
    "RecordError",
    "RecordValidationError",
    "IncompleteDatasetError",
    "DamagedDatasetError",
    "make_id",
    "make_record",
    "validate_record",
    "validate_records",
    "content_hash",
    "image_digest",
    "frame_digests",
    "save",
    "load",
    "read_build_info",
    "SEMANTIC",
    "TEMPORAL",
    "POSITIONAL_SUBSET_MAX_FRAMES",
]

TASKS = (
    "temporal_detect",
    "temporal_localize",
    "frame_detect",
    "frame_localize",
    "pairwise",
    "pointwise",
    "ordering",
    "video_mcq",  # one view of a video multiple-choice question (judgetrain build consistency-views)
)
# Tasks answered from a closed set (constrained scoring); `ordering` is free-form.
CLOSED_TASKS = frozenset(TASKS) - {"ordering"}
# PRISM / MIRAGE perturbations (paper 002 §5E, B.2): what a record's `perturbation` column holds.
SEMANTIC = ("semantic-1", "semantic-2", "semantic-3")
TEMPORAL = ("swap", "swap-nonconsecutive", "shuffle")
# Gold sequences of at most this many frames carry meta.positional_subset (paper 002 F.3, Type 1).
POSITIONAL_SUBSET_MAX_FRAMES = 6
ROLES = ("system", "user", "assistant")
CONTENT_TYPES = ("image", "text")
BUILD_FILE = "build.json"

_CONTENT = List({"type": Value("string"), "text": Value("string")})
_MESSAGES = List({"role": Value("string"), "content": _CONTENT})

FEATURES = Features(
    {
        "id": Value("string"),
        "task": Value("string"),
        "images": List(Image()),
        "prompt": _MESSAGES,
        "completion": _MESSAGES,
        "choices": List(Value("string")),
        "label": Value("string"),
        "source": Value("string"),
        "perturbation": Value("string"),
        "position": Value("int32"),
        "n_frames": Value("int32"),
        "layout": Value("string"),
        "meta": Value("string"),
    }
)
COLUMNS = tuple(FEATURES)


@dataclass(frozen=True)
class RecordError:
    """One schema violation: where it is and what is wrong."""

    split: str
    row: int
    id: str | None
    column: str
    message: str

    def __str__(self) -> str:
        ident = f" (id {self.id!r})" if self.id else ""
        return f"{self.split} row {self.row}{ident}, column '{self.column}': {self.message}"


class RecordValidationError(UserError, ValueError):
    """Raised with every violation found, not just the first."""

    def __init__(self, errors: list[RecordError], limit: int = 50):
        self.errors = errors
        shown = "\n".join(f"  - {e}" for e in errors[:limit])
        more = f"\n  … and {len(errors) - limit} more" if len(errors) > limit else ""
        super().__init__(f"{len(errors)} invalid record field(s):\n{shown}{more}")


class IncompleteDatasetError(UserError, FileNotFoundError):
    """A dataset folder without a complete build (e.g. a killed build)."""


class DamagedDatasetError(UserError, OSError):
    """A complete build whose files no longer read back (a truncated ``.arrow`` file)."""


def make_id(*parts: Any, prefix: str = "") -> str:
    """A stable id from ``parts``: the same parts give the same id in every
    process and on every machine (sha256 of their JSON, never Python's salted built-in hash)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"{prefix}{digest[:16]}"


def make_record(
    *,
    id: str,
    task: str,
    images: list,
    instruction: str,
    answer: str,
    choices: list[str],
    label: str,
    source: str,
    perturbation: str,
    position: int,
    n_frames: int,
    layout: str,
    meta: Mapping[str, Any],
    system: str | None = None,
    text_before_images: str | None = None,
    image_labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Build one record with the prompt laid out as DESIGN.md fixes it: the
    images first, in ``images`` order, then the instruction text (optionally
    preceded by ``text_before_images``). ``answer`` is the completion text (the
    label alone, or a rationale followed by the label). ``image_labels``, one
    per image, puts a text item (e.g. ``"Frame 3:"``) right before each image."""
    if image_labels is not None and len(image_labels) != len(images):
        raise ValueError(f"record {id}: {len(image_labels)} image labels for {len(images)} images")
    content: list[dict[str, Any]] = []
    if text_before_images:
        content.append({"type": "text", "text": text_before_images})
    for k in range(len(images)):
        if image_labels is not None:
            content.append({"type": "text", "text": image_labels[k]})
        content.append({"type": "image", "text": None})
    content.append({"type": "text", "text": instruction})
    prompt = [{"role": "user", "content": content}]
    if system:
        prompt.insert(0, {"role": "system", "content": [{"type": "text", "text": system}]})
    return {
        "id": id,
        "task": task,
        "images": list(images),
        "prompt": prompt,
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": answer}]}],
        "choices": list(choices),
        "label": label,
        "source": source,
        "perturbation": perturbation,
        "position": int(position),
        "n_frames": int(n_frames),
        "layout": layout,
        "meta": json.dumps(dict(meta), sort_keys=True),
    }


def _check_messages(value: Any, column: str, err, *, completion: bool) -> int:
    """Check a message list; return how many image placeholders it holds."""
    if not isinstance(value, list) or not value:
        err(column, "must be a non-empty list of messages")
        return 0
    n_images = 0
    for m, msg in enumerate(value):
        where = f"{column}[{m}]"
        if not isinstance(msg, Mapping) or set(msg) - {"role", "content"} or "role" not in msg:
            err(column, f"{where} must be a dict with keys 'role' and 'content'")
            continue
        if msg["role"] not in ROLES:
            err(column, f"{where}.role is {msg['role']!r}; expected one of {list(ROLES)}")
        content = msg.get("content")
        if not isinstance(content, list) or not content:
            err(column, f"{where}.content must be a non-empty list of {{'type', 'text'}} items")
            continue
        for c, item in enumerate(content):
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind not in CONTENT_TYPES:
                err(column, f"{where}.content[{c}].type is {kind!r}; expected 'image' or 'text'")
            elif kind == "text" and not isinstance(item.get("text"), str):
                err(column, f"{where}.content[{c}] is a text item without a string 'text'")
            elif kind == "image":
                n_images += 1
    if completion:
        if len(value) != 1 or value[0].get("role") != "assistant":
            err(column, "must be exactly one message with role 'assistant'")
        elif n_images:
            err(column, "the completion must not contain images")
    else:
        roles = [m.get("role") for m in value if isinstance(m, Mapping)]
        if roles and roles[-1] != "user":
            err(column, f"the last prompt message must have role 'user', not {roles[-1]!r}")
        if "system" in roles[1:]:
            err(column, "a system message may only come first")
    return n_images


def validate_record(row: Mapping[str, Any], *, split: str = "?", index: int = 0) -> list[RecordError]:
    """Check one row against the schema and the record's own consistency rules;
    return every violation (an empty list when the row is valid)."""
    errors: list[RecordError] = []
    rid = row.get("id") if isinstance(row.get("id"), str) else None

    def err(column: str, message: str) -> None:
        errors.append(RecordError(split, index, rid, column, message))

    missing = [c for c in COLUMNS if c not in row]
    extra = [c for c in row if c not in FEATURES]
    for c in missing:
        err(c, "missing column")
    for c in extra:
        err(c, f"unknown column; the record has exactly {list(COLUMNS)}")
    if missing:
        return errors

    for c in ("id", "task", "label", "source", "perturbation", "layout", "meta"):
        if not isinstance(row[c], str):
            err(c, f"must be a string, got {type(row[c]).__name__}")
    for c in ("position", "n_frames"):
        if isinstance(row[c], bool) or not isinstance(row[c], int):
            err(c, f"must be an int, got {type(row[c]).__name__}")
    if errors:
        return errors

    if not row["id"]:
        err("id", "must not be empty")
    if row["task"] not in TASKS:
        err("task", f"{row['task']!r} is not a task; expected one of {list(TASKS)}")
    for c in ("source", "perturbation", "layout"):
        if not row[c]:
            err(c, "must not be empty")

    images = row["images"]
    if not isinstance(images, list):
        err("images", "must be a list of images")
        images = []
    n_placeholders = _check_messages(row["prompt"], "prompt", err, completion=False)
    _check_messages(row["completion"], "completion", err, completion=True)
    if n_placeholders != len(images):
        err("images", f"{len(images)} image(s) but the prompt has {n_placeholders} image placeholder(s)")

    choices = row["choices"]
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        err("choices", "must be a list of strings")
    elif row["task"] in CLOSED_TASKS:
        if len(choices) < 2:
            err("choices", f"task {row['task']!r} is answered from a closed set: give at least 2 choices")
        elif len(set(choices)) != len(choices):
            err("choices", "contains duplicates")
        elif row["label"] not in choices:
            err("label", f"{row['label']!r} is not one of the choices {choices}")
    elif choices and row["task"] in TASKS:
        err("choices", f"must be empty for the free-form task {row['task']!r}")

    if row["n_frames"] < 1:
        err("n_frames", f"must be at least 1, got {row['n_frames']}")
    if row["perturbation"] == "none" and row["position"] != -1:
        err("position", f"must be -1 when perturbation is 'none', got {row['position']}")
    elif row["perturbation"] != "none" and not 0 <= row["position"] < max(row["n_frames"], 1):
        err("position", f"{row['position']} is outside 0..{row['n_frames'] - 1} (0-based frame position)")

    try:
        meta = json.loads(row["meta"])
        if not isinstance(meta, dict):
            err("meta", "must be a JSON object (a dict), not " + type(meta).__name__)
    except json.JSONDecodeError as e:
        err("meta", f"is not valid JSON: {e}")
    return errors


def validate_records(rows: Iterable[Mapping[str, Any]], *, split: str = "?", seen_ids: set | None = None) -> None:
    """Validate rows; raise :class:`RecordValidationError` listing every
    violation. ``seen_ids`` carries ids across splits: ids are unique per dataset."""
    seen = set() if seen_ids is None else seen_ids
    errors: list[RecordError] = []
    for i, row in enumerate(rows):
        errors += validate_record(row, split=split, index=i)
        rid = row.get("id")
        if isinstance(rid, str):
            if rid in seen:
                errors.append(RecordError(split, i, rid, "id", "duplicate id (ids must be unique across all splits)"))
            seen.add(rid)
    if errors:
        raise RecordValidationError(errors)


def stored_rows(ds: datasets.Dataset, batch_size: int = 256) -> Iterable[dict]:
    """Rows as stored, images as ``{"bytes", "path"}`` dicts (nothing decoded)."""
    for table in ds.with_format("arrow").iter(batch_size=batch_size):
        yield from table.to_pylist()


def content_hash(ds: datasets.Dataset) -> str:
    """sha256 over the rows in order: every column as canonical JSON, each image
    by the sha256 of its stored bytes. Identical records give identical hashes
    regardless of Arrow file layout."""
    h = hashlib.sha256()
    for row in stored_rows(ds):
        row = dict(row)
        row["images"] = [image_digest(im) for im in row["images"]]
        h.update(json.dumps(row, sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()


def image_digest(image: Mapping[str, Any]) -> str:
    """The sha256 of a stored image's bytes (read from its path when it holds none)."""
    data = image.get("bytes")
    if data is None and image.get("path"):
        data = Path(image["path"]).read_bytes()
    if data is None:
        raise ValueError("an image holds neither bytes nor a readable path")
    return hashlib.sha256(data).hexdigest()


def frame_digests(ds: datasets.Dataset, indices: Sequence[int]) -> list[list[str]]:
    """:func:`image_digest` of every image of the records at ``indices`` of ``ds``, in prompt
    order, nothing decoded: what an evaluation's prediction row stores as ``frames`` (by which
    ``eval view`` finds, and reuses, each frame's thumbnail)."""
    return [
        [image_digest(im) for im in row["images"]] for row in stored_rows(ds.select(list(indices)).select_columns(["images"]))
    ]


def _fingerprinted(ds: datasets.Dataset, fingerprint: str) -> datasets.Dataset:
    """``ds`` with ``fingerprint`` as its datasets fingerprint (what ``state.json`` records).
    datasets derives it from the arrow cache's path, so two identical builds into two
    folders wrote different state.json files; the content hash is what identifies a split."""
    if reads_through_indices(ds):  # a select/shuffle view: its Arrow table is not its rows, so materialise it first
        ds = ds.flatten_indices()
    return datasets.Dataset(ds.data, info=ds.info, split=ds.split, fingerprint=fingerprint)


def save(
    dataset: datasets.DatasetDict,
    out_dir: str | os.PathLike,
    build_info: Mapping[str, Any],
    *,
    validate: bool = True,
    identity: Mapping[str, Any] | None = None,
) -> dict:
    """Validate, hash and write ``dataset`` to ``out_dir`` with its ``build.json``.

    ``identity`` (what the build's records depend on: see
    :func:`judgetrain.data_builders.core.identity.build_identity`) is recorded as the
    ``identity`` block of ``build.json``; a builder compares it before it writes into a folder.

    Atomic: everything is written into a temporary sibling folder, which is
    renamed onto ``out_dir`` only once complete; ``dataset_dict.json`` and
    ``build.json`` are the last files written into it, so a half-written folder is
    never loadable. A killed save leaves ``out_dir`` as it was (absent, or the
    previous complete build), and the next save removes what it left beside it.
    Returns the build info as written.
    """
    out = Path(out_dir).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    empty = [split for split, ds in dataset.items() if len(ds) == 0]
    if empty:
        # datasets writes no data file for an empty split, and load_from_disk then fails on it
        raise ValueError(f"{out}: split(s) {empty} hold no records; leave them out of the DatasetDict")
    if validate:
        seen: set = set()
        for split, ds in dataset.items():
            validate_records(stored_rows(ds), split=split, seen_ids=seen)
    info = dict(build_info)
    if identity is not None:
        info["identity"] = dict(identity)
    info["splits"] = {split: {"rows": len(ds), "content_hash": content_hash(ds)} for split, ds in dataset.items()}
    dataset = datasets.DatasetDict(
        {split: _fingerprinted(ds, info["splits"][split]["content_hash"][:16]) for split, ds in dataset.items()}
    )
    with atomic_folder(out) as tmp:
        for split, ds in dataset.items():
            ds.save_to_disk(str(tmp / split))
        # DatasetDict's marker last (DatasetDict.save_to_disk writes it first): a save killed
        # before this point leaves a folder that datasets.load_from_disk refuses to open
        write_text(tmp / dataset_dict_file(), json.dumps({"splits": list(dataset)}))
        write_text(tmp / BUILD_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")
    return info


def read_build_info(path: str | os.PathLike, *, builders: Sequence[str] = ()) -> dict:
    """The ``build.json`` of a saved dataset; raises IncompleteDatasetError
    when the folder holds no complete build. ``builders``: the ``judgetrain build`` commands
    whose folders the caller reads (``("prism", "mirage")``), named in the error for a missing
    folder; by default every builder."""
    path = Path(path)
    build = path / BUILD_FILE
    if not path.is_dir():
        names = list(builders) or ["timecatch", "prism", "mirage", "ordering-probe"]
        how = " or ".join(f"`judgetrain build {b} --out {path}`" for b in names)
        raise IncompleteDatasetError(
            f"{path}: no such dataset folder. Build one first: {how} (each command's --help has an offline example)."
        )
    if not build.is_file():
        raise IncompleteDatasetError(
            f"{path}: no {BUILD_FILE}, so this is not a complete judgetrain build (an interrupted build "
            f"never writes it). Rerun the build command that makes it; it resumes its per-video work."
        )
    return json.loads(build.read_text())


def load(path: str | os.PathLike, *, verify: bool = False, builders: Sequence[str] = ()) -> datasets.DatasetDict:
    """Load a dataset written by :func:`save`. With ``verify=True`` every
    split's content hash is recomputed and compared to ``build.json``; ``builders``: as
    :func:`read_build_info` takes it."""
    info = read_build_info(path, builders=builders)
    expected = info.get("splits", {})
    try:
        dataset = datasets.load_from_disk(str(path))
    except (OSError, ValueError, pyarrow.ArrowException) as e:  # pyarrow: ArrowInvalid is a ValueError, ArrowIOError an OSError
        split = next((name for name in expected if _unreadable(Path(path) / name)), None)
        raise DamagedDatasetError(_damaged(path, info, split, f"cannot be read ({e})")) from None
    if not isinstance(dataset, datasets.DatasetDict):
        raise IncompleteDatasetError(f"{path}: expected a DatasetDict saved by judgetrain, found {type(dataset).__name__}")
    if set(expected) != set(dataset):
        raise IncompleteDatasetError(f"{path}: splits on disk {sorted(dataset)} differ from {BUILD_FILE} {sorted(expected)}")
    for split, ds in dataset.items():
        rows = expected[split].get("rows")
        if rows is not None and len(ds) != rows:  # a file cut at a record-batch boundary reads back without error
            raise DamagedDatasetError(_damaged(path, info, split, f"holds {len(ds)} rows, but {BUILD_FILE} says {rows}"))
    if verify:
        for split, ds in dataset.items():
            got = content_hash(ds)
            if got != expected[split]["content_hash"]:
                raise ValueError(
                    f"{path}: split {split!r} content hash {got[:12]}… differs from {BUILD_FILE} ({expected[split]['content_hash'][:12]}…): the files were modified"
                )
    return dataset


def _unreadable(split_dir: Path) -> bool:
    """Whether the saved split in ``split_dir`` fails to load (to name the damaged split)."""
    try:
        datasets.load_from_disk(str(split_dir))
    except (OSError, ValueError, pyarrow.ArrowException):
        return True
    return False


def _damaged(path: str | os.PathLike, info: Mapping[str, Any], split: str | None, what: str) -> str:
    """The message of a :class:`DamagedDatasetError`: which split, what is wrong, how to rebuild it."""
    where = f"split {split!r} ({Path(path) / split})" if split else "a split"
    builder = info.get("builder") or "BUILDER"
    return (
        f"{path}: {where} {what}: its files are truncated or damaged (a copy cut short, a full disk). "
        f"Rebuild the dataset: rerun `judgetrain build {builder} … --out {path} --overwrite` with the arguments "
        f'recorded in {Path(path) / BUILD_FILE} ("args").'
    )
