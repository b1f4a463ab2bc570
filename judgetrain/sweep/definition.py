"""What defines a study, so that its trials stay comparable: the recipe's content (sha256 of
its text), the search space's content (every distribution and fixed field), the objectives
with their directions, and the recipe overrides every trial gets. The first controller
records it in the study (user attribute ``definition``); every later one, restarted or on
another machine, must ask for the same, or is refused with each difference (old → new)
before any trial starts, and told to name a new study (``--study``). A trial pruned by
comparison with trials of other settings (2 steps against 8) says nothing.

A study made before this record (judgetrain ≤ the version that added it) holds its recipe
text, objectives, fixed fields and overrides, but not its space's distributions: those
parts are compared, and this controller's space is recorded, with a note.
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

from .config import SweepConfig
from .space import SearchSpace, SweepError

__all__ = ["DEFINITION", "check_definition", "differences", "overrides_by_field", "study_definition"]

DEFINITION = "definition"  # the study's user attribute
NONE = "(none)"


def overrides_by_field(args: list[str]) -> dict[str, str]:
    """Recipe overrides as ``{--field: value}`` (the last one of a field wins, as on the
    trainer's command line; ``--field=value`` and ``--field-name`` spellings are the same)."""
    out: dict[str, str] = {}
    flag = None
    for a in args:
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            flag = "--" + name[2:].replace("-", "_")
            out[flag] = value if eq else ""
        elif flag is not None:
            out[flag] = f"{out[flag]} {a}" if out[flag] else a
    return dict(sorted(out.items()))


def _space(space: SearchSpace) -> dict[str, Any]:
    params = {
        p.name: {k: v for k, v in (("choices", p.choices), ("low", p.low), ("high", p.high), ("step", p.step)) if v is not None}
        | {"type": p.kind, "log": p.log}
        for p in space.params
    }
    return {"params": dict(sorted(params.items())), "fixed": dict(sorted(space.fixed.items()))}


def study_definition(cfg: SweepConfig) -> dict[str, Any]:
    """What defines ``cfg``'s study, as JSON stores it (so that a stored one compares equal)."""
    definition = {
        "recipe_sha256": hashlib.sha256(cfg.recipe_file.read_text().encode()).hexdigest(),
        "space": _space(cfg.search_space),
        "objectives": [[o.name, o.direction] for o in cfg.objectives],
        "overrides": overrides_by_field(cfg.overrides),
    }
    return json.loads(json.dumps(definition))


def _legacy(attrs: dict[str, Any]) -> dict[str, Any]:
    """The parts of the definition that a study of an older judgetrain recorded."""
    return {
        "recipe_sha256": hashlib.sha256(str(attrs.get("recipe_yaml", "")).encode()).hexdigest(),
        "space": {"fixed": dict(sorted((attrs.get("fixed") or {}).items()))},
        "objectives": attrs.get("objectives"),
        "overrides": overrides_by_field([str(a) for a in attrs.get("extra") or []]),
    }


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """``{dotted.key: leaf}``; an empty mapping has no leaves (no overrides = none of each)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}.{key}" if prefix else key).items()}
    return {prefix: value}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Each leaf of the two definitions that differs, as ``where: old → new``; a whole part
    that differs in shape is compared as one value."""
    a, b = _flat(old, ""), _flat(new, "")
    out = []
    for key in sorted(set(a) | set(b)):
        before, after = a.get(key, NONE), b.get(key, NONE)
        if before != after:
            out.append(f"{key}: {_show(before)} → {_show(after)}")
    return out


def _show(value: Any) -> str:
    if value == NONE:
        return NONE
    if isinstance(value, str) and not value.startswith(("{", "[")):
        return _hash(value) or value or '""'
    return json.dumps(value, ensure_ascii=False)


def _hash(value: str) -> str | None:
    if len(value) == 64 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a content hash
    return None


def check_definition(study: Any, cfg: SweepConfig) -> None:
    """Record ``cfg``'s definition in a study that has none; refuse (``SweepError``, every
    difference old → new) a controller whose definition differs from the recorded one."""
    want = study_definition(cfg)
    attrs = study.user_attrs
    have = attrs.get(DEFINITION)
    if have is None and "recipe_yaml" in attrs:  # recorded by an older judgetrain: compare what it kept
        old = _legacy(attrs)
        have = old | {"space": want["space"] | old["space"]}
        print(
            f"note: study {cfg.study!r} was made before studies recorded their search space; its recipe, objectives, "
            f"fixed fields and overrides are checked, and this sweep's space ({cfg.search_space.path}) is recorded as its own",
            file=sys.stderr,
            flush=True,
        )
    if have is not None:
        found = differences(have, want)
        if found:
            raise SweepError(
                f"study {cfg.study!r} in {cfg.storage} was made with other settings, and trials of both would be "
                "compared (and pruned) as one study:\n"
                + "\n".join(f"  - {d}" for d in found)
                + f"\nRun with the study's settings to add trials to it, or name a new study: --study {cfg.study}-2"
            )
    if attrs.get(DEFINITION) is None:
        study.set_user_attr(DEFINITION, want)
