"""The manifest loop every builder shares: JSON Lines in, records and located skips out.

:func:`read_manifest_lines` reads a manifest with :func:`judgetrain.jsonl.read_jsonl`, turns
each object into a record with the builder's own parser, refuses a repeated id, and makes
every bad line a :class:`~.common.Skip` naming ``PATH:LINE`` and ``field: problem; fix``;
:func:`report_skips` prints them and fails the build under ``--strict`` (with that line alone when
there is one); :func:`nothing_left` is the error of a build with nothing left to make records of.
Docs: "concepts/timecatch.md", "concepts/prism-mirage.md".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, overload

from judgetrain.jsonl import read_jsonl, text

from .common import BuildError, Skip

__all__ = ["LINE_ERRORS", "nothing_left", "read_manifest_lines", "report_skips"]

# What making a record of one line may raise: ValueError ("field: problem; fix") from the parser,
# OSError from a file it stats or opens, RecursionError and MemoryError from what a line holds
LINE_ERRORS = (ValueError, OSError, RecursionError, MemoryError)


@overload
def read_manifest_lines(
    path: str | os.PathLike,
    parse: Callable[[dict, str, Path, int], Any],
    *,
    what: str,
    noun: str,
    id_hint: str,
    partial: bool = False,
) -> tuple[list, list[Skip]]: ...


@overload
def read_manifest_lines(
    path: str | os.PathLike,
    parse: Callable[[dict, None, Path, int], Any],
    *,
    what: str,
    noun: str,
    id_hint: None = None,
    partial: bool = False,
) -> tuple[list, list[Skip]]: ...


def read_manifest_lines(
    path: str | os.PathLike,
    parse: Callable[[dict, Any, Path, int], Any],
    *,
    what: str,
    noun: str,
    id_hint: str | None = None,
    partial: bool = False,
) -> tuple[list, list[Skip]]:
    """Every good line of the manifest at ``path`` as a record, and a :class:`Skip` for every bad one.

    ``parse(row, id, path, line)`` makes one record from a line's object (``line`` is 1-based)
    or raises ``ValueError("field: problem; fix")``; with ``partial`` it returns
    ``(record, problems)``, where each problem is a part of the line left out (a skip on that
    line, the record kept). ``id_hint``: the id is read first, as ``text(row, "id", id_hint,
    ids=True)``, so a repeated id is refused before the rest of the line is parsed and every
    skip of the line names it; without it the id is the parsed record's ``id``, named by the
    skip of a repeated id and of a part left out, not by a line the parser refused. A repeated id
    is the skip of its later line, naming the id: ``id: 'x' is also on line N; give every <noun>
    its own id``.
    Nothing raises but a missing manifest (``BuildError``: ``PATH: <what> not found``).
    """
    path = Path(path)
    if not path.is_file():
        raise BuildError(f"{path}: {what} not found")
    found: list = []
    skips: list[Skip] = []
    seen: dict[str, int] = {}

    def check_new(rid: str) -> None:
        if rid in seen:
            raise ValueError(f"id: {rid!r} is also on line {seen[rid]}; give every {noun} its own id")

    for item in read_jsonl(path):
        rid = None
        try:
            if item.row is None:  # a line that is not a JSON object: its problem
                raise ValueError(item.problem)
            if id_hint is not None:
                rid = text(item.row, "id", id_hint, ids=True)
                check_new(rid)
            result = parse(item.row, rid, path, item.line)
            record, problems = result if partial else (result, [])
            if id_hint is None:
                rid = record.id  # a repeated id's skip names it, as every skip of a parsed line does
                check_new(rid)
        except LINE_ERRORS as e:  # one line's failure is its skip, never the build's end
            reason = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}; fix what it names, or drop the line"
            skips.append(Skip(str(path), item.line, reason, rid))
            continue
        seen[rid if rid is not None else record.id] = item.line
        skips += [Skip(str(path), item.line, problem, rid) for problem in problems]
        found.append(record)
    return found, skips


def report_skips(skips: Sequence[Skip], strict: bool, *, name_first: bool = True) -> None:
    """Print each skip as ``warning: skipped PATH:LINE: reason`` on stderr; under ``strict``
    then fail the build (``BuildError``) saying how many, and with ``name_first`` which came first."""
    if not skips:
        return
    for s in skips:
        print(f"warning: skipped {s}", file=sys.stderr)
    if strict and len(skips) == 1:  # the one bad input is the whole message
        raise BuildError(f"{skips[0]} (--strict: fix it, or rerun without --strict to skip it)")
    if strict:
        listed = f"listed above; the first: {skips[0]}" if name_first else "listed above"
        raise BuildError(f"{len(skips)} bad input(s) ({listed}); fix them or rerun without --strict to skip them")


def nothing_left(manifest: str | os.PathLike, noun: str, read: int, skips: Sequence[Skip], why: str) -> BuildError:
    """The error of a build left with nothing to make records of: a manifest with no line at all
    (``read`` items and no skip) is said to be empty; else ``why`` (the counts), pointing at the
    skip warnings only when there are some."""
    if read == 0 and not skips:
        return BuildError(
            f"{manifest}: holds no {noun} (the file is empty or has only blank lines); "
            f"write one JSON object per {noun}, one per line"
        )
    return BuildError(why + ("; the skipped lines are listed above" if skips else ""))
