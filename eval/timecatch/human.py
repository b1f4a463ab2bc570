"""Human reference accuracies for TimeCatch's Table 2 (its Human row): ``--human FILE`` of
``eval timecatch`` and ``eval report``.

:func:`load_human` reads a JSON object ``{task: {source: accuracy}}`` or a CSV with columns
``task,source,accuracy`` (a UTF-8 byte-order mark, as Excel writes, is allowed) and returns
``{task: {source: fraction}}``. Accuracies are fractions (0–1) unless one exceeds 1, when all
are read as percentages (0–100). A value that is not a finite number in 0–100, a missing
cell, a repeated (task, source) or a missing column is a :class:`HumanReferenceError` naming
the file, the line and column (CSV) or the key (JSON), and the fix.
Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError

__all__ = ["COLUMNS", "HumanReferenceError", "load_human"]

COLUMNS = ("task", "source", "accuracy")
RANGE = "a fraction in 0–1 or a percentage in 0–100"


class HumanReferenceError(UserError, ValueError):
    """A human reference file that cannot be read as asked; the message names where and the fix."""


def load_human(path: str | os.PathLike) -> dict[str, dict[str, float]]:
    """Human reference accuracies ``{task: {source: fraction}}`` from ``path`` (see the module
    docstring); fractions when every value is at most 1, else every value / 100."""
    path = Path(path)
    if not path.is_file():
        raise HumanReferenceError(
            f"--human {path}: no such file; give a CSV (task,source,accuracy) or JSON {{task: {{source: accuracy}}}} file"
        )
    table = _read_csv(path) if path.suffix.lower() == ".csv" else _read_json(path)
    if any(a > 1 for v in table.values() for a in v.values()):
        table = {t: {s: a / 100 for s, a in v.items()} for t, v in table.items()}
    return table


def _accuracy(value: Any, where: str) -> float:
    """``value`` as a finite accuracy in 0–100; ``where`` starts the message otherwise."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise HumanReferenceError(f"{where}: {value!r} is not a finite number; give {RANGE}")
    if not 0 <= number <= 100:
        raise HumanReferenceError(f"{where}: {value!r} is outside 0–100; give {RANGE}")
    return number


def _read_csv(path: Path) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    first: dict[tuple[str, str], int] = {}
    try:  # utf-8-sig: Excel's "CSV UTF-8" starts with a byte-order mark, which would end up in the first column's name
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            header = [(name or "").strip() for name in reader.fieldnames or []]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise HumanReferenceError(
                    f"{path}, line 1: CSV needs columns {','.join(COLUMNS)}; missing {missing} (header: {header})"
                )
            reader.fieldnames = header
            for row in reader:
                line = reader.line_num  # the row's last physical line: a quoted cell may span several
                key = (_cell(path, line, row, "task"), _cell(path, line, row, "source"))
                if key in first:
                    raise HumanReferenceError(
                        f"{path}, line {line}: task {key[0]!r}, source {key[1]!r} repeats line {first[key]}; keep one"
                    )
                first[key] = line
                accuracy = _accuracy(_cell(path, line, row, "accuracy"), f"{path}, line {line}, column 'accuracy'")
                table.setdefault(key[0], {})[key[1]] = accuracy
    except UnicodeDecodeError as e:
        raise HumanReferenceError(f"{path}: not UTF-8 text ({e}); save the CSV as UTF-8") from None
    return table


def _cell(path: Path, line: int, row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    if value is None or not value.strip():
        raise HumanReferenceError(f"{path}, line {line}, column {column!r}: empty; give a value in every column")
    return value.strip()


def _read_json(path: Path) -> dict[str, dict[str, float]]:
    shape = "expected {task: {source: accuracy}} or a .csv"
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (ValueError, RecursionError) as e:
        raise HumanReferenceError(f"{path}: not JSON ({e}); {shape}") from None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise HumanReferenceError(f"{path}: {shape}")
    return {t: {s: _accuracy(a, f"{path}, [{t!r}][{s!r}]") for s, a in v.items()} for t, v in raw.items()}
