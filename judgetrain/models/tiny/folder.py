"""The folder a tiny build goes into: one that already holds a model is kept, never silently replaced.

Each build is written to a staging folder beside its target (``.NAME.partial-…``) and compared
with what the target holds, file by file. The same bytes leave the target untouched (nothing is
rewritten, so its mtimes stay, and so does the identity that evaluation and training runs
recorded of it); other weights, or files that are no tiny model of judgetrain's, are refused
with :class:`TinyModelExistsError` (the folder, what it holds, the fixes) unless ``overwrite``,
which replaces the folder whole by renames (a reader sees the old model or the new one, never
a mix of both). Every build records what made it in :data:`RECORD_FILE` (builder, family,
seed), so a refusal can say "seed 42"; a folder built before that record existed is judged by
its files alone, and is not given one when it holds this very build.
Docs: "reference/api/registry.md".
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError
from judgetrain.io import write_json

__all__ = [
    "BUILDER",
    "DEFAULT_SEED",
    "RECORD_FILE",
    "TinyModelExistsError",
    "build_folders",
    "differing",
    "place_all",
    "read_record",
    "refusal",
    "staging_folder",
    "write_record",
]

BUILDER = "judgetrain.models.tiny"
# The seed of the tiny models the examples build: `judgetrain quickstart`'s default and the command line's,
# so `python -m judgetrain.models.tiny --out quickstart/models` after the quickstart changes no byte.
DEFAULT_SEED = 42
RECORD_FILE = "tiny_build.json"  # not build.json: that names a dataset folder (judgetrain.identity.path_identity)


class TinyModelExistsError(UserError, FileExistsError):
    """A tiny build's folder already holds another model, or files that are none; the message
    names the folder, what it holds and the fixes."""


def staging_folder(out: Path) -> Path:
    """A new, empty folder beside ``out`` to build into (``.NAME.partial-…``); the caller removes it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.with_name(f".{out.name}.partial-{uuid.uuid4().hex[:8]}")
    stage.mkdir()
    return stage


def write_record(folder: Path, family: str, seed: int) -> None:
    """Record in ``folder`` what built it: :data:`BUILDER`, ``family`` and ``seed``."""
    write_json(folder / RECORD_FILE, {"builder": BUILDER, "family": family, "seed": seed})


def read_record(folder: Path) -> dict[str, Any] | None:
    """What built ``folder`` (``{"builder", "family", "seed"}``), or None when it holds no
    readable record of a tiny build."""
    try:
        record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("builder") != BUILDER:
        return None
    if not isinstance(record.get("family"), str) or not isinstance(record.get("seed"), int):
        return None
    return record


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def differing(out: Path, staged: Path) -> list[str] | None:
    """The files of the build ``staged`` that ``out`` does not hold byte for byte: ``[]`` when it
    holds this very build (files of its own besides are left alone), ``None`` when there is
    nothing at ``out`` (no such path, or an empty folder). A folder without :data:`RECORD_FILE`
    (built before it was written) is judged by its other files."""
    if not out.exists() and not out.is_symlink():
        return None
    if not out.is_dir():
        return [out.name]
    if not any(out.iterdir()):
        return None
    wrong = []
    for name in _files(staged):
        if name == RECORD_FILE and not (out / name).exists():
            continue
        if not (out / name).is_file() or not filecmp.cmp(staged / name, out / name, shallow=False):
            wrong.append(name)
    return wrong


def _listed(names: list[str], limit: int = 4) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _differ(names: list[str]) -> str:
    return f"its {_listed(names)} {'differs' if len(names) == 1 else 'differ'}"


def refusal(out: Path, staged: Path, wrong: list[str]) -> tuple[str, int | None]:
    """Why ``out`` is not replaced by the build ``staged`` whose files ``wrong`` it does not hold:
    one sentence naming the folder and what it holds, and the seed it was built with (None when
    unknown) for the fix."""
    this = read_record(staged) or {}
    build = f"the tiny {this.get('family')} of seed {this.get('seed')}"
    if not out.is_dir():
        return f"{out} is a file, not a model folder; this build would replace it with {build}.", None
    held = read_record(out)
    if held is not None:
        what = f"the tiny {held['family']} built with seed {held['seed']}"
        if (held["family"], held["seed"]) != (this.get("family"), this.get("seed")):
            seed = held["seed"] if held["family"] == this.get("family") else None  # --seed builds it again
            return f"{out} already holds {what}, not {build} that this build makes.", seed
        return (
            f"{out} already holds {what}, but {_differ(wrong)} from what this build writes "
            "(written by another version of judgetrain or transformers, or changed since).",
            None,
        )
    present = _files(out)
    if "config.json" in present or any(n.endswith(".safetensors") for n in present):
        return (
            f"{out} already holds a model other than {build} ({_differ(wrong)}) and no {RECORD_FILE} "
            "saying how it was built (built before judgetrain recorded that, or not a tiny model of judgetrain's).",
            None,
        )
    return f"{out} already holds files that are not a tiny model built by judgetrain ({_listed(present)}).", None


def _message(refused: list[tuple[str, int | None]]) -> str:
    """The refusal of every folder in ``refused`` (sentence, seed it holds) and, once, the fixes."""
    it, holds = ("it", "it holds") if len(refused) == 1 else ("them", "they hold")
    seeds = {seed for _, seed in refused}
    keep = f", or pass --seed {seeds.pop()} to build what {holds}" if len(seeds) == 1 and None not in seeds else ""
    fix = (
        f"Pass --overwrite to replace {it} (evaluation and training runs that used {it} will then refuse to "
        f"resume), choose another --out{keep}."
    )
    return "\n".join([*(sentence for sentence, _ in refused), fix])


def _replace(staged: Path, out: Path) -> None:
    """Put the folder ``staged`` at ``out`` by renames, moving whatever was there out of the way first."""
    if out.exists() or out.is_symlink():
        old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(out, old)
        os.replace(staged, out)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    else:
        os.replace(staged, out)


def place_all(builds: Mapping[Path, Path], *, overwrite: bool = False) -> None:
    """Put each staged build (``{target folder: staging folder}``) at its target: a target that
    holds it already is left untouched; one that holds anything else is replaced with
    ``overwrite``, otherwise nothing at all is written and :class:`TinyModelExistsError` names
    every such target with the fixes."""
    wrong = {out: differing(out, staged) for out, staged in builds.items()}
    refused = [refusal(out, builds[out], names) for out, names in wrong.items() if names]
    if refused and not overwrite:
        raise TinyModelExistsError(_message(refused))
    for out, staged in builds.items():
        if wrong[out] != []:
            _replace(staged, out)


def build_folders(
    targets: Mapping[str, Path], seed: int, save: Callable[[str, Path, int], None], *, overwrite: bool = False
) -> dict[str, Path]:
    """Build each ``{name: folder}`` of ``targets`` with ``save(name, staging folder, seed)`` beside
    its folder, recorded (:func:`write_record`), then put them in place (:func:`place_all`): all
    of them, or, when one is refused, none; return ``targets``. The staging folders are gone when
    this returns or raises."""
    staged: dict[Path, Path] = {}
    try:
        for name, out in targets.items():
            staged[out] = staging_folder(out)
            save(name, staged[out], seed)
            write_record(staged[out], name, seed)
        place_all(staged, overwrite=overwrite)
    finally:
        for stage in staged.values():
            shutil.rmtree(stage, ignore_errors=True)
    return dict(targets)
