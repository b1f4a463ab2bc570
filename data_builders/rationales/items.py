"""What rationale distillation asks and what comes back: one :class:`Item` per source record (the teacher's
prompt and its cache key), :class:`TeacherAnswer` / :class:`TeacherRun`, and :class:`TeacherCache`, the
on-disk store of finished answers that lets a killed or partly failed build resume.

Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from judgetrain import records
from judgetrain.io import write_text

from ..core.common import BuildError, Skip
from .prompts import BASE_INSTRUCTIONS, prompt_text, rewrite_prompt, sha256

CACHE_FORMAT = 1


@dataclass(frozen=True)
class Item:
    """One record to ask about. ``prompt`` is what the teacher is sent; ``key`` its cache key."""

    id: str
    split: str
    index: int
    task: str
    layout: str
    choices: tuple[str, ...]
    label: str
    n_frames: int
    prompt: tuple = field(repr=False)
    image_hashes: tuple[str, ...] = field(repr=False)
    key: str = ""

    def record(self, images: list) -> dict:
        """The scoring engine's view of the item (its parser comes from task, choices and n_frames)."""
        return {
            "id": self.id,
            "task": self.task,
            "choices": list(self.choices),
            "n_frames": self.n_frames,
            "prompt": [dict(m) for m in self.prompt],
            "images": images,
        }


@dataclass(frozen=True)
class TeacherAnswer:
    """A teacher's usable answer: its rationale and its choice, as a member of the record's choices."""

    rationale: str
    answer: str
    teacher: str
    usage: dict = field(default_factory=dict)


class TeacherCache:
    """Finished teacher answers on disk, one JSON file per content key, written atomically."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @staticmethod
    def key(*, teacher: str, model: str, prompt: str, settings: Mapping[str, Any], image_hashes: Sequence[str]) -> str:
        """sha256 of everything that determines the answer: teacher, model, prompt as
        sent, the response schema / decoding settings, and the images' sha256."""
        return sha256(
            json.dumps(
                {
                    "format": CACHE_FORMAT,
                    "teacher": teacher,
                    "model": model,
                    "prompt": prompt,
                    "settings": settings,
                    "images": list(image_hashes),
                },
                sort_keys=True,
            )
        )

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> TeacherAnswer | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
            return TeacherAnswer(entry["rationale"], entry["answer"], entry["teacher"], entry.get("usage") or {})
        except (ValueError, KeyError, TypeError) as e:
            raise BuildError(f"{path}: not a teacher cache entry ({e}); delete the file and rerun to ask again") from None

    def put(self, key: str, answer: TeacherAnswer, **extra: Any) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"key": key, **asdict(answer), **extra}, sort_keys=True, ensure_ascii=False) + "\n")


@dataclass
class TeacherRun:
    """What a teacher returned: per item id an answer or a failure reason, and counters."""

    answers: dict[str, TeacherAnswer] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    counters: Counter = field(default_factory=Counter)
    skipped: list[Skip] = field(default_factory=list)  # bad input lines (replay), each naming file:line


def load_rows(data: Path, split: str):
    """The split in arrow format: rows as stored, images as ``{"bytes", "path"}``,
    nothing decoded, nothing written (a cast would put a cache file in the input folder)."""
    return records.load(data)[split].with_format("arrow")


def row_at(ds: Any, index: int) -> dict:
    """Row ``index`` of an arrow-formatted split, as stored."""
    return ds[index].to_pylist()[0]


def from_cache(items: Sequence[Item], cache: TeacherCache, out: TeacherRun) -> dict[str, list[Item]]:
    """Fill ``out`` from the cache; return the items still to ask grouped by key
    (one call per distinct prompt, its answer shared by the group)."""
    todo: dict[str, list[Item]] = {}
    for item in items:
        if item.key in todo:
            todo[item.key].append(item)
            continue
        hit = cache.get(item.key)
        if hit is None:
            todo[item.key] = [item]
        else:
            out.answers[item.id] = hit
            out.counters["cache_hits"] += 1
    return todo


def settle(out: TeacherRun, group: Sequence[Item], got: TeacherAnswer | str) -> None:
    """Record ``got`` (an answer, or why there is none) for every item of ``group``."""
    for item in group:
        if isinstance(got, TeacherAnswer):
            out.answers[item.id] = got
        else:
            out.failures[item.id] = got


def collect_items(data: Path, builder: str, splits: Sequence[str], limit: int | None, teacher) -> list[Item]:
    """The records to ask about (the first ``limit`` of each split, in order), with
    the teacher's prompt and cache key."""
    items = []
    for split in splits:
        ds = load_rows(data, split)
        n = len(ds) if limit is None else min(limit, len(ds))
        for i, row in enumerate(records.stored_rows(ds.select(range(n)))):
            if row["task"] not in BASE_INSTRUCTIONS[builder]:
                raise BuildError(
                    f"{data} {split} row {i} (id {row['id']!r}): task {row['task']!r} has no teacher prompt; "
                    f"rationales are distilled for {sorted(BASE_INSTRUCTIONS[builder])} records of {builder}"
                )
            prompt = rewrite_prompt(
                row["prompt"],
                builder=builder,
                task=row["task"],
                layout=row["layout"],
                closing=teacher.closing[row["task"]],
                rid=row["id"],
            )
            hashes = tuple(sha256(im["bytes"]) for im in row["images"])
            item = Item(
                row["id"],
                split,
                i,
                row["task"],
                row["layout"],
                tuple(row["choices"]),
                row["label"],
                row["n_frames"],
                tuple(prompt),
                hashes,
            )
            settings = teacher.settings(item)
            key = TeacherCache.key(
                teacher=teacher.name,
                model=getattr(teacher, "model", ""),
                prompt=prompt_text(prompt),
                settings=settings,
                image_hashes=hashes,
            )
            items.append(replace(item, key=key))
    return items
