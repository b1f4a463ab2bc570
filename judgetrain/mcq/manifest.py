"""The video multiple-choice manifest (DESIGN.md, "Video multiple-choice items"): its schema and its reader.

One JSON object per line: ``id``, ``video`` (a path relative to the manifest's folder,
which it may not leave), ``question``, ``options`` (gold order), ``answer`` (0-based
index), ``benchmark``; optional ``duration``, ``num_frames`` and a ``start``/``end``
segment in seconds; any further keys are kept in :attr:`VideoQuestion.extra`.
``judgetrain build video-mcq`` writes such manifests and ``judgetrain eval
phasefusion`` reads them, so the reader lives here, below both.
Docs: "concepts/phasefusion.md", "how-to/own-data.md".
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from judgetrain.errors import UserError
from judgetrain.jsonl import inside, read_jsonl
from judgetrain.jsonl import text as text_field

__all__ = ["ManifestError", "VideoQuestion", "check_line", "load_manifest"]

MAX_REPORTED_PROBLEMS = 20
_FIELDS = ("id", "video", "question", "options", "answer", "benchmark", "duration", "num_frames", "start", "end")


class ManifestError(UserError, ValueError):
    """A manifest that cannot be read; the message names file:line: field and the fix."""


@dataclass(frozen=True)
class VideoQuestion:
    """One multiple-choice question about one video (a manifest line, DESIGN.md).

    ``video`` is absolute (resolved inside the manifest's folder); ``options`` are
    in gold order and ``answer`` indexes them (0-based); ``duration`` (seconds) and
    ``num_frames`` are None when the manifest does not give them; ``start``/``end``
    (seconds) bound the segment the question is about (None: the whole video); ``extra`` keeps
    any further keys of the line (e.g. ``qtype``), ``line`` is the 1-based line number.
    """

    id: str
    video: Path
    question: str
    options: tuple[str, ...]
    answer: int
    benchmark: str
    duration: float | None = None
    num_frames: int | None = None
    start: float | None = None
    end: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    line: int = 0


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


_HINTS = {
    "id": "give a non-empty string naming the question (ids must be unique)",
    "question": "give the question, a non-empty string",
    "benchmark": 'give a non-empty string naming the benchmark, e.g. "mvbench"',
}


def _text(obj: Mapping[str, Any], key: str, problems: list[str]) -> str | None:
    try:
        return text_field(obj, key, _HINTS[key], ids=key == "id")  # an integer id is taken as its string
    except ValueError as e:
        problems.append(str(e))
        return None


def check_line(obj: Any, root: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """The validated fields of one manifest object, or the problems found (each ``field: what and how to fix``)."""
    if not isinstance(obj, dict):
        return None, [f"(line): expected a JSON object with {', '.join(_FIELDS[:6])}, got {type(obj).__name__}"]
    problems: list[str] = []
    qid, question, benchmark = (_text(obj, k, problems) for k in ("id", "question", "benchmark"))
    video = None
    if "video" not in obj:
        problems.append("video: missing; give the video's path relative to the manifest's folder")
    else:
        try:
            video = inside(root, obj["video"], "video")
        except ValueError as e:
            problems.append(str(e))  # inside() names the field itself ("video: …")
    options = obj.get("options")
    if not (isinstance(options, list) and len(options) >= 2 and all(isinstance(o, str) and o.strip() for o in options)):
        problems.append(f"options: must be a list of at least two non-empty strings, got {options!r}")
        options = None
    elif len(set(options)) != len(options):
        dup = next(o for o, c in Counter(options).items() if c > 1)
        problems.append(f"options: {dup!r} appears more than once; options must be distinct")
        options = None
    answer = obj.get("answer")
    if not _is_int(answer):
        problems.append(f"answer: must be the 0-based index of the correct option (an integer), got {answer!r}")
    elif options is not None and not 0 <= answer < len(options):
        problems.append(f"answer: {answer} is not an index into the {len(options)} options (0..{len(options) - 1})")
    duration = obj.get("duration")
    if duration is not None and not (
        isinstance(duration, (int, float)) and not isinstance(duration, bool) and math.isfinite(duration) and duration > 0
    ):
        problems.append(f"duration: must be the video's length in seconds (a number > 0) or absent, got {duration!r}")
    num_frames = obj.get("num_frames")
    if num_frames is not None and not (_is_int(num_frames) and num_frames >= 1):
        problems.append(f"num_frames: must be the video's frame count (an integer >= 1) or absent, got {num_frames!r}")
    bounds = {k: obj.get(k) for k in ("start", "end")}
    for k, v in bounds.items():
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            problems.append(f"{k}: must be a time in seconds (a number >= 0) or absent, got {v!r}")
            bounds[k] = None
    if (bounds["start"] is None) != (bounds["end"] is None) and not any(p.startswith(("start", "end")) for p in problems):
        given = "start" if bounds["start"] is not None else "end"
        problems.append(f"{given}: a segment needs both start and end (seconds); add the other or drop {given}")
    elif bounds["start"] is not None and bounds["end"] is not None and bounds["start"] >= bounds["end"]:
        problems.append(f"start: {bounds['start']} must be before end ({bounds['end']}); swap or fix them")
    if problems:
        return None, problems
    assert options is not None  # a bad options field is one of the problems returned above
    return {
        "id": qid,
        "video": video,
        "question": question,
        "options": tuple(options),
        "answer": answer,
        "benchmark": benchmark,
        "duration": None if duration is None else float(duration),
        "num_frames": num_frames,
        "start": None if bounds["start"] is None else float(bounds["start"]),
        "end": None if bounds["end"] is None else float(bounds["end"]),
        "extra": {k: v for k, v in obj.items() if k not in _FIELDS},
    }, []


def _raise(path: Path, problems: list[str]) -> None:
    shown = problems[:MAX_REPORTED_PROBLEMS]
    more = f"\n  … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    raise ManifestError(
        f"{path}: {len(problems)} problem(s) in the video-MCQ manifest (fields: DESIGN.md, "
        f"'Video multiple-choice items'):\n  " + "\n  ".join(shown) + more
    )


def load_manifest(path: str | os.PathLike) -> list[VideoQuestion]:
    """Read and validate a video-MCQ manifest (JSON Lines, read with
    :func:`judgetrain.jsonl.read_jsonl`); ManifestError naming ``file:line: field``
    for every bad line (not UTF-8, not JSON, not an object, a bad field; up to 20
    shown), duplicate ids, or a ``video`` path leaving the manifest's folder. Blank
    lines are allowed; an integer ``id`` is taken as its string. Video files need
    not exist here (the evaluation reports unreadable ones)."""
    path = Path(path)
    if not path.is_file():
        raise ManifestError(
            f"{path}: no such manifest; build one with `judgetrain build video-mcq --out DIR --synthetic N` "
            "or convert a benchmark with `--from egoschema|mvbench|videomme|nextqa`"
        )
    root = path.parent
    questions: list[VideoQuestion] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for item in read_jsonl(path):  # bytes split on \n only, each line decoded on its own: a bad line is one problem
        ln = item.line
        if item.problem:
            problems.append(f"{path}:{ln}: {item.problem}")
            continue
        fields, bad = check_line(item.row, root)
        problems += [f"{path}:{ln}: {p}" for p in bad]
        if fields is None:
            continue
        if fields["id"] in seen:
            problems.append(f"{path}:{ln}: id: {fields['id']!r} is already used on line {seen[fields['id']]}; ids must be unique")
            continue
        seen[fields["id"]] = ln
        questions.append(VideoQuestion(**fields, line=ln))
    if problems:
        _raise(path, problems)
    if not questions:
        raise ManifestError(f"{path}: the manifest holds no questions")
    return questions
