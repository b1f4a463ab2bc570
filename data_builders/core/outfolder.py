"""What a build's ``--out`` folder may already hold, looked at before any model loads or work
starts (:func:`already_built`): the same build (:func:`.identity.build_identity`), complete,
is a no-op and nothing is rewritten; the same build unfinished (a killed build, failures to
retry) resumes; another build, or a folder that holds no build, is refused naming each
difference ``old → new`` and the two ways out (another ``--out``, or ``--overwrite``, which
replaces it once the new build is complete). :func:`build_in_place` does the same for a
builder that writes into ``OUT`` itself (video-mcq).
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from judgetrain import writer
from judgetrain.identity import differences
from judgetrain.io import atomic_folder, write_json
from judgetrain.overlap import overlap
from judgetrain.records import BUILD_FILE

from .common import BuildError
from .identity import RUN_ONLY, build_identity, is_leftover, sweep_leftovers

__all__ = ["WAYS_OUT", "already_built", "build_in_place"]


def _previous(out: Path, parts: Sequence[str]) -> dict[str, dict]:
    """``{part: build.json}`` of the builds ``out`` holds (``"."``: ``out`` itself)."""
    found = {}
    for part in parts or (".",):
        path = out / part / BUILD_FILE
        if path.is_file():
            try:
                found[part] = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise BuildError(
                    f"{path}:{e.lineno}: unreadable {BUILD_FILE} ({e.msg}); build into another folder "
                    "(--out NEW) or replace this one (--overwrite)"
                ) from None
    return found


def _stray(out: Path, cfg: Any, keep: Sequence[str], writes: Sequence[str] | None) -> list[str]:
    """What ``out`` holds that is neither a build's own leftover, one of ``keep``, nor a path the config
    names for the build's own use (a ``--cache`` inside it; an input inside ``out`` was refused before,
    :func:`_inputs`); with ``writes`` (a build that writes only these names into a folder of other files),
    those of them it holds."""
    if writes is not None:
        return sorted(name for name in writes if (out / name).exists())
    own = set()
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name != "out" and isinstance(value, os.PathLike) and Path(os.path.realpath(value)).is_relative_to(out):
            rel = Path(os.path.realpath(value)).relative_to(out)
            own.add(rel.parts[0] if rel.parts else "")
    return sorted(p.name for p in out.iterdir() if p.name not in {*keep, *own} and not is_leftover(p.name))


def _inputs(cfg: Any) -> dict[str, Any]:
    """Every input the config names, ``{--option: path}``: its path fields (not the run-only ones,
    such as ``--out`` and a cache) and a local ``--model``; :func:`judgetrain.overlap.overlap`
    adds the media a manifest lists."""
    found: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        local_model = f.name == "model" and isinstance(value, str) and Path(value).is_dir()
        if f.name not in RUN_ONLY and (isinstance(value, os.PathLike) or local_model):
            found[f"--{f.name.replace('_', '-')}"] = value
    return found


def _refusal(out: Path, infos: dict[str, dict], new: dict) -> str | None:
    """Why the builds in ``out`` (as the user spelled it) are not the one ``new`` identifies (None when they are)."""
    for part, info in infos.items():
        old = info.get("identity")
        where = out if part == "." else out / part
        if old is None and info.get("complete") is False and info.get("builder") == new["builder"]:
            continue  # an unfinished build that records no identity yet: the builder checks what it resumes
        if old is None:
            return (
                f"--out {where}: holds a {info.get('builder', 'judgetrain')} build whose {BUILD_FILE} records no "
                "identity (built before judgetrain recorded one), so it cannot be told apart from this one"
            )
        diff = differences(old, new)
        if diff:
            listed = "\n".join(f"  - {d}" for d in diff)
            return (
                f"--out {where}: holds a {old.get('builder')} build made with other settings ({BUILD_FILE}: old → new):\n{listed}"
            )
    return None


def _finished(infos: dict[str, dict], parts: Sequence[str], cfg: Any) -> bool:
    """Whether every part is built and final: nothing left to retry (failures), to finish
    (``complete: false``) or to fail on (inputs skipped, now under ``--strict``)."""
    if len(infos) < max(len(parts), 1):
        return False
    for info in infos.values():
        if info.get("failures") or info.get("complete") is False or (getattr(cfg, "strict", False) and info.get("skipped")):
            return False
    return True


WAYS_OUT = (
    "Build into another folder (--out NEW) or replace this one (--overwrite: the old build stays until the new one is complete)."
)


def already_built(
    cfg: Any,
    builder: str,
    version: str,
    *,
    parts: Sequence[str] = (),
    keep: Sequence[str] = (),
    writes: Sequence[str] | None = None,
) -> Any:
    """Look at ``cfg.out`` before a build starts. Returns its ``build.json`` (``{part: build.json}``
    with ``parts``, the sub-folders one build writes) when it already holds this very build,
    complete and final: a no-op, said on stdout; nothing is written. Returns None when the
    build is to run: ``out`` absent, empty, holding only ``keep`` (what an unfinished build of
    this builder leaves, e.g. a cache), inputs the config names, or an unfinished build of the
    same identity; or ``--overwrite``. ``writes``: the only names the build writes into ``out``
    (which may hold anything else, e.g. a benchmark's videos); only they make it "not empty".
    Otherwise raises BuildError naming every difference ``old → new`` and the two ways out.
    Unless it raises, what killed atomic writes left under ``OUT.work/`` is removed.

    First of all, an ``out`` that is, holds or lies inside an input (with ``writes``: an input
    that is one of those names) is refused, ``--overwrite`` or not; then this process takes
    ``out``'s writer lock (:func:`judgetrain.writer.hold`, ``--wait`` to wait for another
    writer) and keeps it until it ends (or :func:`judgetrain.writer.release_all`)."""
    clash = overlap(cfg.out, _inputs(cfg), written=None if writes is None else [*writes, BUILD_FILE])
    if clash:
        raise BuildError(clash)
    writer.hold(cfg.out, wait=getattr(cfg, "wait", False))
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    new = build_identity(cfg, builder, version)
    overwrite = getattr(cfg, "overwrite", False)
    if out.exists() and not out.is_dir():
        if not overwrite:
            raise BuildError(f"--out {cfg.out}: is a file, not a build folder. {WAYS_OUT}")
    elif out.is_dir():
        infos = _previous(out, parts)
        if not overwrite:
            stray = [] if infos else _stray(out, cfg, keep, writes)
            if stray:
                shown = ", ".join(stray[:5])
                raise BuildError(
                    f"--out {cfg.out}: exists and holds no {BUILD_FILE}, so it is no judgetrain build, but "
                    f"it is not empty ({shown}). {WAYS_OUT.replace('the old build', 'what it holds')}"
                )
            why = _refusal(Path(cfg.out), infos, new)
            if why:
                raise BuildError(f"{why}\n{WAYS_OUT}")
            if _finished(infos, parts, cfg):
                sweep_leftovers(work)
                print(
                    f"{cfg.out}: already built with these settings (the same identity in {BUILD_FILE}); nothing "
                    "rewritten. Add --overwrite to build it again.",
                    flush=True,
                )
                return infos if parts else infos["."]
    sweep_leftovers(work)
    return None


def _record_identity(folder: Path, cfg: Any, identity: dict) -> dict:
    """Add ``identity`` to ``folder/build.json`` (``args.out`` set to ``cfg.out``); returns its content."""
    path = folder / BUILD_FILE
    info = json.loads(path.read_text())
    if isinstance(info.get("args"), dict) and "out" in info["args"]:
        info["args"]["out"] = str(cfg.out)
    info["identity"] = identity
    write_json(path, info)
    return info


def build_in_place(
    cfg: Any, builder: str, version: str, build: Callable[[Any], dict], *, movable: bool, writes: Sequence[str] = ()
) -> dict:
    """:func:`already_built`, then ``build(cfg)`` for a builder that writes into ``OUT`` itself
    (video-mcq), and its identity added to the ``build.json`` it wrote. ``movable``: everything
    the build writes is its own (no input lives in ``OUT``), so ``--overwrite`` over a folder
    that holds anything builds into a temporary sibling that replaces ``OUT`` once complete;
    otherwise (``writes``: the names it writes there) ``--overwrite`` rewrites those in place and
    leaves everything else be."""
    previous = already_built(cfg, builder, version, writes=None if movable else writes)
    if previous is not None:
        return previous
    identity = build_identity(cfg, builder, version)
    out = Path(cfg.out)
    if movable:  # its temporary files are in OUT itself (a killed video's .NAME.*.part.mp4)
        sweep_leftovers(out)
    if movable and getattr(cfg, "overwrite", False) and out.exists() and (not out.is_dir() or any(out.iterdir())):
        with atomic_folder(out.resolve()) as tmp:
            build(dataclasses.replace(cfg, out=tmp))
            info = _record_identity(tmp, cfg, identity)
        return info
    build(cfg)
    return _record_identity(out, cfg, identity)
