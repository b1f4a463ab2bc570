"""The one reader of JSON Lines inputs: manifests, annotation files, teacher replays.

:func:`read_jsonl` reads the file as bytes, splits it on ``\\n`` only (JSON strings may
hold U+2028, U+0085 or a lone ``\\r``, which ``str.splitlines`` would split on),
decodes each line on its own and yields a :class:`JsonLine` per non-blank line: the
1-based line number and the object, or the problem with that line
(``not valid UTF-8 at byte 5179``, ``not JSON …``, ``not a JSON object …``). A bad
line never stops the reading, so a builder reports it as ``MANIFEST:LINE: …``,
counts it in ``build.json`` and goes on (or fails under ``--strict``). :func:`parse_json`
is the one ``json.loads`` of user files: it turns every way that fails (bad syntax, a
4,301-digit number, arrays nested 100,000 deep) into a problem that says so and how to fix it.

:func:`text` and :func:`optional_text` check the common field shapes with messages
of the form ``field: what is wrong; how to fix``.
Docs: "how-to/own-data.md".
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["JsonLine", "inside", "json_kind", "optional_text", "parse_json", "read_jsonl", "text"]


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line of a JSON Lines file: ``row`` (a dict) or ``problem``."""

    path: str
    line: int
    row: dict[str, Any] | None
    problem: str | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem or 'ok'}"


def read_jsonl(path: str | os.PathLike) -> Iterator[JsonLine]:
    """Every non-blank line of ``path``, in order (see the module docstring). A file that
    cannot be read raises ``OSError``; nothing inside it does."""
    data = Path(path).read_bytes()
    start = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        offset, start = start, start + len(raw) + 1
        raw = raw[:-1] if raw.endswith(b"\r") else raw  # CRLF files
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (files saved on Windows)
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield JsonLine(str(path), number, None, f"not valid UTF-8 at byte {offset + e.start}; save the file as UTF-8")
            continue
        problem, row = parse_json(line, "write one JSON object per line")
        if problem:
            yield JsonLine(str(path), number, None, problem)
            continue
        if not isinstance(row, dict):
            yield JsonLine(
                str(path), number, None, f'not a JSON object ({json_kind(row)}); write one {{"field": value, …}} object per line'
            )
            continue
        yield JsonLine(str(path), number, row)


def parse_json(text: str, fix: str = "write valid JSON") -> tuple[str | None, Any]:
    """``(None, value)`` for JSON text, else ``(problem, None)``, the problem ending in its fix:
    every way ``json.loads`` fails, not only bad syntax (``not JSON (… at column C); <fix>``),
    also a number of more digits than Python converts (``ValueError``) and arrays or objects
    nested past the recursion limit (``RecursionError``)."""
    try:
        return None, json.loads(text)
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}" if e.lineno > 1 else f"column {e.colno}"
        return f"not JSON ({e.msg} at {where}); {fix}", None
    except RecursionError:
        return (
            f"not JSON this reader can take: arrays or objects nested more than about {sys.getrecursionlimit()} "
            "levels deep; flatten the nesting"
        ), None
    except ValueError as e:  # int() refuses a number of more than sys.get_int_max_str_digits() digits
        if "digits" in str(e):
            return (
                f"not JSON this reader can take: a number of more than {sys.get_int_max_str_digits()} digits; "
                "write it as a string"
            ), None
        return f"not JSON this reader can take ({e}); {fix}", None


def json_kind(value: Any) -> str:
    """A JSON value's type as a JSON user names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")


def text(row: Mapping[str, Any], name: str, hint: str, *, default: str | None = None, ids: bool = False) -> str:
    """``row[name]`` as a non-empty string. ``ids``: an integer is taken as its decimal
    string (ids often come from a CSV). Missing with ``default`` gives ``default``;
    missing otherwise, or the wrong type, raises ``ValueError("name: …; hint")``."""
    if name not in row or row[name] is None:
        if default is not None:
            return default
        raise ValueError(f"{name}: missing; {hint}")
    value = row[name]
    if ids and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ValueError(f"{name}: {json_kind(value)}, not a string; {hint}")
    if not value.strip():
        raise ValueError(f"{name}: empty; {hint}")
    return value


def optional_text(row: Mapping[str, Any], name: str, hint: str, default: str = "") -> str:
    """``row[name]`` when a string; ``default`` when missing or null; else ``ValueError``."""
    value = row.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{name}: {json_kind(value)}, not a string; {hint}")
    return value


def inside(root: Path, rel: Any, what: str) -> Path:
    """``rel`` resolved against ``root`` (a manifest's folder); ``ValueError`` naming
    ``what`` when it is not a path string or leaves ``root`` (``..``, an absolute
    path, a link out) or cannot be resolved (a symbolic-link loop): manifest paths stay
    inside their data root, and the caller reports the problem at its manifest line."""
    if not isinstance(rel, str) or not rel:
        raise ValueError(f"{what}: give a non-empty path string, relative to the manifest's folder")
    if "\x00" in rel:  # no file system takes one; pathlib would say only "embedded null byte"
        raise ValueError(f"{what}: {rel!r} holds a NUL byte (\\x00), which no file path can; fix the path")
    try:
        path, top = (root / rel).resolve(), root.resolve()
    except (RuntimeError, OSError) as e:  # a link loop: RuntimeError up to Python 3.12, OSError (ELOOP) from 3.13
        raise ValueError(
            f"{what}: {rel!r} cannot be resolved ({e}); a symbolic link on the way loops or cannot be read; "
            "fix or remove the link, or drop the line"
        ) from None
    if not path.is_relative_to(top):
        raise ValueError(f"{what}: {rel!r} points outside the manifest's folder {root}; keep data under the manifest's folder")
    return path
