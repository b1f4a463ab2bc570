"""Reading a benchmark's published annotation files for ``judgetrain build video-mcq --from …``:
JSON (parsed whole), JSON Lines and CSV, each item located (``file:line`` or ``file[index]``) so
that one broken item is one counted skip and the others are read; and :class:`Item`, one
converted question before its video is checked. The readers of :mod:`.benchmarks` build on these.
Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judgetrain.jsonl import json_kind, parse_json, read_jsonl

from ..core.common import BuildError

__all__ = ["AnnotationRow", "Item", "annotation_rows", "csv_rows", "read_json", "whole_number"]


@dataclass
class Item:
    """One converted question before its video is checked: where it came from, and its manifest fields."""

    path: str  # the annotation file (JSON Lines), or "file[index]" (an item of a JSON list, a parquet row)
    line: int | None  # the line of a JSON Lines file
    id: str | None  # None when the item is too broken to name
    video: Path | None = None  # absolute
    question: Any = None
    options: Any = None
    answer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: tuple[str, str] | None = None  # (kind, what is wrong) when the annotation itself is unusable

    @property
    def where(self) -> str:
        """``file:line`` or ``file[index]``, for messages."""
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class AnnotationRow:
    """One item of an annotation file, as read: the object, or what is wrong with its line."""

    path: str
    line: int | None
    index: int  # 0-based position among the file's items
    row: Any
    problem: str | None = None

    def check(self, keys: Sequence[str], fmt: str, id_key: str | None) -> Item | None:
        """None when the row is an object with ``keys``; else the item that reports why not."""
        problem = self.problem
        if problem is None and not isinstance(self.row, dict):
            problem = f"not an object ({json_kind(self.row)}); each item is an object with {', '.join(keys)} ({fmt})"
        missing = [k for k in keys if k not in self.row] if problem is None else []
        if missing:
            problem = f"field(s) {', '.join(repr(m) for m in missing)} missing; is this {fmt}? (the item has {sorted(self.row)})"
        if problem is None:
            return None
        rid = self.row.get(id_key) if id_key and isinstance(self.row, dict) else None
        kind = "bad line" if self.problem else "bad annotation"
        return Item(self.path, self.line, None if rid is None else str(rid), problem=(kind, problem))


def read_json(path: Path) -> Any:
    """A plain JSON file, parsed whole; an error names the file (and the line, for bad JSON)."""
    if not path.is_file():
        raise BuildError(f"{path}: no such annotation file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BuildError(f"{path}: not valid UTF-8 at byte {e.start}; save the file as UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BuildError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except (ValueError, RecursionError):  # a 4,301-digit number, arrays nested 100,000 deep: said as parse_json says them
        raise BuildError(f"{path}: {parse_json(text)[0]}") from None


def annotation_rows(path: Path, what: str) -> list[AnnotationRow]:
    """The items of an annotation file: JSON Lines (``.jsonl``) through
    :func:`judgetrain.jsonl.read_jsonl`, so that a line that is not UTF-8, not JSON or not
    an object is one located bad item and the others are read; any other file is one JSON
    list (``what`` names it in the error when it is not a list)."""
    if path.suffix == ".jsonl":
        if not path.is_file():
            raise BuildError(f"{path}: no such annotation file")
        return [AnnotationRow(str(path), it.line, i, it.row, it.problem) for i, it in enumerate(read_jsonl(path))]
    rows = read_json(path)
    if not isinstance(rows, list):
        raise BuildError(f"{path}: expected {what} (a JSON list of questions, or JSON Lines with one per line)")
    return [AnnotationRow(f"{path}[{i}]", None, i, row) for i, row in enumerate(rows)]


def csv_rows(path: Path, columns: Sequence[str], header_of: Sequence[str], fmt: str) -> list[AnnotationRow]:
    """The records of a CSV file with a header line, as :class:`AnnotationRow` objects keyed by the
    header's names; ``line`` is the record's first line (a quoted field may span lines). A
    file whose header lacks one of ``columns`` (``header_of`` is ``fmt``'s whole header, for
    the message), or that the csv module cannot parse, raises BuildError naming the file and
    line; a record with the wrong number of fields or with bytes that are not UTF-8 is one
    located bad item, and the others are read."""
    if not path.is_file():
        raise BuildError(f"{path}: no such annotation file")
    # surrogateescape keeps a stray byte in its record, so that one bad line does not sink the file
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader, [])]
        missing = [c for c in columns if c not in header]
        if missing:
            shown = ",".join(header).encode("utf-8", "surrogateescape").decode("utf-8", "replace") or "empty"
            raise BuildError(
                f"{path}:1: column(s) {', '.join(missing)} missing from the header line; is this {fmt}? "
                f"(its header is {shown}; expected {','.join(header_of)})"
            )
        rows: list[AnnotationRow] = []
        start = reader.line_num + 1
        for record in reader:
            line, start = start, reader.line_num + 1
            if not record:  # a blank line
                continue
            # a record with more or fewer fields than the header is reported as the problem below
            row = dict(zip(header, record, strict=False))
            problem = None
            if len(record) != len(header):
                problem = f'{len(record)} fields, but the header has {len(header)}; quote a field that holds a comma ("a, b")'
            bad = next((k for k, v in zip(header, record, strict=False) if any("\udc80" <= ch <= "\udcff" for ch in v)), None)
            if bad is not None:
                problem = f"not valid UTF-8 (in column {bad!r}); save the file as UTF-8"
                row = {k: v.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for k, v in row.items()}
            rows.append(AnnotationRow(str(path), line, len(rows), row, problem))
    except csv.Error as e:
        raise BuildError(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None
    return rows


def whole_number(text: str) -> int | None:
    """``text`` (surrounding blanks ignored) as a non-negative integer written in ASCII digits, or None."""
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None
