"""An output folder that overlaps what the command reads, refused before anything is written.

A command's output folder (``build``'s and ``merge``'s ``--out``, an evaluation's ``--out``,
``train``'s ``--output_dir``) must lie apart from each input: not the input itself, not a
folder that holds it (a build or a merge replaces its folder whole, ``--overwrite`` clears
it: the input would go with it), not a folder inside it (a dataset, a model, an adapter or a
manifest's media would get the command's files mixed in). :func:`overlap` names the first
input it meets and the fix. :func:`manifest_media` adds what a JSON Lines manifest lists
(every ``video``, ``frames``, ``images`` and ``image`` value, at any depth, relative to the
manifest's folder), each by its first folder under the manifest's, so that a media folder
counts as an input as the manifest does. Paths are compared as the file system resolves them
(``realpath``: a link and its target are one folder; a link loop never raises here).
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MEDIA_KEYS", "inputs_with_media", "labelled", "manifest_media", "overlap"]

# the manifest fields that name media files, in every manifest judgetrain reads (TimeCatch's video and frames,
# MIRAGE's images, a procedure's steps[k].image, a video-MCQ question's video)
MEDIA_KEYS = ("video", "frames", "images", "image")


def _real(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(path))


def _named(value: Any) -> Iterator[str]:
    """Every media path string in one manifest value, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in MEDIA_KEYS and isinstance(item, str):
                yield item
            elif key in MEDIA_KEYS and isinstance(item, list):
                yield from (x for x in item if isinstance(x, str))
            else:
                yield from _named(item)
    elif isinstance(value, list):
        for item in value:
            yield from _named(item)


def manifest_media(manifest: str | os.PathLike) -> list[Path]:
    """The folders (or files) directly under a JSON Lines manifest's folder that hold the media it
    lists, sorted; lines that are no JSON, and paths that leave the folder or do not exist, are
    left to the command that reads the manifest to report."""
    manifest = Path(manifest)
    tops: set[str] = set()
    try:
        with open(manifest, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                for rel in _named(row):
                    parts = Path(rel).parts
                    if parts and not Path(rel).is_absolute() and parts[0] not in ("..", "."):
                        tops.add(parts[0])
    except OSError:
        return []
    root = manifest.parent
    return sorted(root / top for top in tops if os.path.lexists(root / top))


def inputs_with_media(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` plus, for each ``.jsonl`` file among them, the media folders it lists (labelled
    ``"the media LABEL lists"``)."""
    found = dict(inputs)
    for label, path in inputs.items():
        if isinstance(path, (str, os.PathLike)) and str(path).endswith(".jsonl") and Path(path).is_file():
            for i, media in enumerate(manifest_media(path)):
                found[f"the media {label} lists" + (f" [{i}]" if i else "")] = media
    return found


def _relation(out: Path, path: Path) -> str | None:
    if out == path:
        return "is"
    if path.is_relative_to(out):
        return "holds"
    if out.is_relative_to(path):
        return "lies inside"
    return None


def _harm(relation: str, flag: str, whole: bool) -> str:
    if relation == "lies inside":
        return "this command's files would be written into that input"
    if whole:
        return f"this command replaces {flag} whole, which would delete that input"
    return (
        "this command's files would be mixed with that input's, and --overwrite, which removes them again, "
        "could delete the input's own files"
    )


def overlap(
    out: str | os.PathLike,
    inputs: Mapping[str, Any],
    *,
    flag: str = "--out",
    written: Sequence[str] | None = None,
    whole: bool = True,
) -> str | None:
    """Why ``out`` may not be written given ``inputs`` (``{label: path}``; a path that does not exist,
    such as a hub id, or None is skipped), or None. Each ``.jsonl`` input adds the media it lists
    (:func:`manifest_media`). ``written``: the only names the command writes into ``out`` (a build
    that adds its manifest to a folder of other files): then only those may not be an input.
    ``whole``: the command replaces ``out`` whole (a build, a merge), else it writes its files
    into it (an evaluation, training); the message says which harm follows."""
    targets = [_real(out)] if written is None else [_real(out) / name for name in written]
    for label, path in inputs_with_media(inputs).items():
        if path is None or not isinstance(path, (str, os.PathLike)) or not str(path) or not os.path.lexists(path):
            continue
        for target in targets:
            relation = _relation(target, _real(path))
            if relation is None or (written is not None and relation == "lies inside"):
                continue  # a build that writes a few named files into an input's folder replaces nothing else there
            if written is not None:
                return (
                    f"{flag} {out}: this build writes {target.name} there, which is {label} ({path}); nothing was "
                    f"written. Give {flag} another folder, or move {path} out of the way"
                )
            return (
                f"{flag} {out} {relation} {label} ({path}): {_harm(relation, flag, whole)}. Nothing was written; "
                f"give {flag} a folder apart from {path} (neither it, nor inside it, nor holding it)"
            )
    return None


def labelled(label: str, paths: Any) -> dict[str, Any]:
    """An input option as :func:`overlap` takes it: ``{label: path}`` for one path (or None),
    ``{"label[i]": path}`` for a list of several."""
    if not isinstance(paths, (list, tuple)):
        return {label: paths}
    return {label: paths[0]} if len(paths) == 1 else {f"{label}[{i}]": p for i, p in enumerate(paths)}
