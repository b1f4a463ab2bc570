"""The candidate manifest of ``judgetrain score``: image sequences to rank, one a line.

One JSON object per line: ``id`` (unique), ``group`` (the prompt or question whose candidates
are ranked together), ``frames`` (image paths in the order shown: relative to the manifest's
folder, which they may not leave, or absolute), optional ``title`` (shown as "Task: …") and
``steps`` (the step texts shown with every candidate of the prompt); any further keys are kept
(:attr:`Candidate.extra`) and written back beside each score. Every bad line (not JSON, a
missing or mistyped field, a path out of the folder, a missing or unreadable image, an id used
before) is reported at once as ``MANIFEST:LINE: field: problem; fix``.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgetrain.data_builders.core.images import check_image
from judgetrain.errors import UserError
from judgetrain.jsonl import inside, json_kind, optional_text, read_jsonl, text

__all__ = ["FIELDS", "Candidate", "CandidateManifestError", "candidate_from_row", "read_candidates"]

FIELDS = ("id", "group", "frames", "title", "steps")
MAX_REPORTED_PROBLEMS = 20


class CandidateManifestError(UserError, ValueError):
    """A candidate manifest that cannot be read; the message names every ``file:line: field`` and the fix."""


@dataclass(frozen=True)
class Candidate:
    """One candidate image sequence: ``frames`` are absolute paths in the order shown; ``steps``
    the step texts shown with it (may be empty); ``line`` its 1-based manifest line (0: made in code)."""

    id: str
    group: str
    frames: tuple[Path, ...]
    title: str = ""
    steps: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    line: int = 0


def _frames(row: dict[str, Any], root: Path, check: bool) -> tuple[list[Path], list[str]]:
    raw = row.get("frames")
    fix = "give a non-empty list of image paths (relative to the manifest's folder, or absolute) in the order shown"
    if raw is None:
        return [], [f"frames: missing; {fix}"]
    if not isinstance(raw, list) or not raw:
        return [], [f"frames: {'empty' if raw == [] else json_kind(raw) + ', not an array'}; {fix}"]
    frames, problems = [], []
    for k, rel in enumerate(raw):
        what = f"frames[{k}]"
        try:
            path = Path(rel) if isinstance(rel, str) and os.path.isabs(rel) else inside(root, rel, what)
            if not path.is_file():
                raise ValueError(f"{what}: {path}: no such image file; fix the path or write the image first")
            if check:
                check_image(path, what)
        except ValueError as e:
            problems.append(str(e))
            continue
        frames.append(path)
    return frames, problems


def _steps(row: dict[str, Any]) -> tuple[tuple[str, ...], list[str]]:
    raw = row.get("steps")
    if raw is None:
        return (), []
    fix = "give a list of non-empty step texts in order, or leave it out"
    if not isinstance(raw, list):
        return (), [f"steps: {json_kind(raw)}, not an array; {fix}"]
    bad = next((k for k, s in enumerate(raw) if not (isinstance(s, str) and s.strip())), None)
    if bad is not None:
        return (), [f"steps[{bad}]: {json_kind(raw[bad])}, not a non-empty string; {fix}"]
    return tuple(s.strip() for s in raw), []


def candidate_from_row(row: Any, root: Path, *, line: int = 0, check_images: bool = True) -> tuple[Candidate | None, list[str]]:
    """One manifest object as a :class:`Candidate` (paths resolved against ``root``), or the problems
    found (each ``field: what is wrong; the fix``). ``check_images``: decode every frame fully."""
    if not isinstance(row, dict):
        return None, [f"(line): expected a JSON object with {', '.join(FIELDS[:3])}, got {json_kind(row)}"]
    problems: list[str] = []
    values: dict[str, str] = {}
    hints = {
        "id": "give a non-empty string naming the candidate (ids must be unique)",
        "group": "give the prompt or question the candidate answers (candidates of one group are ranked together)",
    }
    for key, hint in hints.items():
        try:
            values[key] = text(row, key, hint, ids=True)
        except ValueError as e:
            problems.append(str(e))
    try:
        title = optional_text(row, "title", "give the sequence's title text, or leave it out").strip()
    except ValueError as e:
        title = ""
        problems.append(str(e))
    steps, bad_steps = _steps(row)
    frames, bad_frames = _frames(row, root, check_images)
    problems += bad_steps + bad_frames
    if problems:
        return None, problems
    extra = {k: v for k, v in row.items() if k not in FIELDS}
    return Candidate(values["id"], values["group"], tuple(frames), title, steps, extra, line), []


def read_candidates(path: str | os.PathLike, *, check_images: bool = True) -> list[Candidate]:
    """Every candidate of the manifest ``path``, in file order; :class:`CandidateManifestError`
    naming each bad line (up to 20 shown), a repeated id, or an empty manifest."""
    path = Path(path)
    if not path.is_file():
        raise CandidateManifestError(
            f"--sequences {path}: no such manifest; write one JSON object per candidate "
            '({"id": …, "group": …, "frames": [image paths]}), or make a demo one with '
            "`python -m judgetrain.rank.candidates --out data/candidates`"
        )
    root, found, problems = path.parent, [], []
    seen: dict[str, int] = {}
    for item in read_jsonl(path):
        if item.problem:
            problems.append(f"{path}:{item.line}: {item.problem}")
            continue
        candidate, bad = candidate_from_row(item.row, root, line=item.line, check_images=check_images)
        problems += [f"{path}:{item.line}: {p}" for p in bad]
        if candidate is None:
            continue
        if candidate.id in seen:
            problems.append(
                f"{path}:{item.line}: id: {candidate.id!r} is already used on line {seen[candidate.id]}; ids must be unique"
            )
            continue
        seen[candidate.id] = item.line
        found.append(candidate)
    if problems:
        shown = problems[:MAX_REPORTED_PROBLEMS]
        more = f"\n  … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise CandidateManifestError(
            f"{path}: {len(problems)} problem(s) in the candidate manifest (fields: {', '.join(FIELDS)}):\n  "
            + "\n  ".join(shown)
            + more
        )
    if not found:
        raise CandidateManifestError(f"{path}: the manifest holds no candidates; write one JSON object per candidate")
    return found
