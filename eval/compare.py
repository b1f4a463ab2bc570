"""Put evaluation runs side by side, with each later run's difference to the first.

``judgetrain eval compare RUN1 RUN2 …`` works on runs of any one evaluation
(TimeCatch, judge, PhaseFusion): each run's numbers come from its evaluation's
``cells(metrics)`` (:mod:`judgetrain.eval.registry`), as percentages, and the Δ rows
are differences in percentage points (paper 000 Tables 4–5). Runs of different
evaluations are refused; runs on different data (dataset content hashes), splits or
item sets are refused too unless ``--allow-different-data``, which marks them.
README: "`judgetrain eval timecatch`, `eval report`, `eval compare`".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.config import arg, comma_list
from judgetrain.config import make_parser as make_config_parser

from .registry import evaluation_of, module_for
from .runs import METRICS, PREDICTIONS, PredictionsError

__all__ = ["CompareConfig", "compare", "main", "make_parser"]


def _what_was_evaluated(info: Mapping[str, Any]) -> dict[str, Any]:
    """What must agree between compared runs: the data's identity, the split and the items."""
    identity = info.get("identity") or {}
    return {"data": identity.get("data"), "split": info.get("split"), "manifest": info.get("manifest"),
            "items": (info.get("items") or {}).get("ids")}


def _differences(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    out = []
    for key in ("data", "split", "manifest", "items"):
        if first.get(key) != other.get(key):
            if key == "items" and first.get(key) is not None and other.get(key) is not None:
                out.append(f"items: {len(first[key])} vs {len(other[key])} ids, {len(set(first[key]) ^ set(other[key]))} "
                           "not in both")
            else:
                out.append(f"{key}: {first.get(key)!r} vs {other.get(key)!r}")
    return out


def _metrics(run: Path, module: Any) -> dict[str, Any]:
    if (run / METRICS).is_file():
        return json.loads((run / METRICS).read_text())
    if (run / PREDICTIONS).is_file():
        return module.report(run)
    raise FileNotFoundError(f"{run} holds neither {METRICS} nor {PREDICTIONS}: is it an evaluation run folder?")


def compare(runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None, *,
            allow_different_data: bool = False) -> dict[str, Any]:
    """Several runs' cells side by side, with each later run's difference to the first.

    Returns ``{"evaluation", "names", "columns": [label], "rows": [(name, [value|None],
    is_delta)], "differences": {name: [what differs]}, "markdown"}``; values are
    percentages, Δ rows (labelled ``"Δ name"``) signed differences."""
    if not runs:
        raise ValueError("compare needs at least one run folder")
    paths = [Path(r) for r in runs]
    names = list(names) if names is not None else [p.name for p in paths]
    if len(names) != len(paths):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(paths)} run(s); give one per run")
    kinds = [evaluation_of(p) for p in paths]
    if len({k for k, _ in kinds}) > 1:
        raise PredictionsError("runs of different evaluations cannot be compared: "
                               + ", ".join(f"{p} ({k})" for p, (k, _) in zip(paths, kinds)))
    evaluation = kinds[0][0]
    first = _what_was_evaluated(kinds[0][1])
    differences = {n: d for n, (_, info) in zip(names[1:], kinds[1:]) if (d := _differences(first, _what_was_evaluated(info)))}
    if differences and not allow_different_data:
        raise PredictionsError("these runs evaluated different data, so their numbers are not comparable:\n"
                               + "\n".join(f"  - {n} vs {names[0]}: {'; '.join(d)}" for n, d in differences.items())
                               + "\nRerun them on the same data, split and items, or pass --allow-different-data "
                                 "to compare them anyway (they are marked).")
    module = module_for(evaluation)
    cells = [module.cells(_metrics(p, module)) for p in paths]
    columns = list(dict.fromkeys(label for c in cells for label in c))
    shown = [f"{n} *" if n in differences else n for n in names]
    base = [cells[0].get(c) for c in columns]
    rows: list[tuple[str, list[float | None], bool]] = [(shown[0], base, False)]
    for name, c in zip(shown[1:], cells[1:]):
        vals = [c.get(col) for col in columns]
        rows.append((name, vals, False))
        rows.append((f"Δ {name}", [None if v is None or b is None else v - b for v, b in zip(vals, base)], True))
    md = f"{evaluation}: values in %; Δ rows: difference to {names[0]} in percentage points.\n\n"
    md += "| | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns) + "\n"
    for label, vals, delta in rows:
        md += f"| {label} | " + " | ".join(_fmt_cell(v, delta) for v in vals) + " |\n"
    if differences:
        md += "\n" + "".join(f"\\* {n}: other data than {names[0]} ({'; '.join(d)})\n\n" for n, d in differences.items())
    return {"evaluation": evaluation, "names": names, "columns": columns, "rows": rows, "differences": differences,
            "markdown": md}


def _fmt_cell(v: float | None, delta: bool) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}" if delta else f"{v:.1f}"


@dataclass(kw_only=True)
class CompareConfig:
    """``judgetrain eval compare``."""

    runs: list[Path] = arg(help="run folders, the first the reference of the Δ rows; also the leading bare words",
                           positional=True)
    names: list[str] | None = arg(None, "display names, one per run (default: the folder names)")
    out: Path | None = arg(None, "write the table as markdown to this file")
    allow_different_data: bool = arg(False, "compare runs on different data, splits or items (marked with *)")

    def __post_init__(self) -> None:
        self.runs = [Path(r) for r in self.runs]
        self.names = comma_list(self.names) if self.names else None


def make_parser():
    return make_config_parser(
        CompareConfig, "judgetrain eval compare",
        "Put evaluation runs side by side, with each run's difference to the first.",
        "examples:\n  judgetrain eval compare results/base results/lora --names base,lora --out results/compare.md\n"
        "  judgetrain eval compare results/judge-base results/judge-ft      # judge runs: accuracy / F1 per subset\n")


def main(cfg: CompareConfig) -> int:
    from rich.console import Console
    from rich.table import Table

    result = compare(cfg.runs, cfg.names, allow_different_data=cfg.allow_different_data)
    t = Table(title=f"{result['evaluation']} (%); Δ: difference to {result['names'][0]}")
    t.add_column("run")
    for label in result["columns"]:
        t.add_column(label, justify="right")
    for label, vals, delta in result["rows"]:
        cells = []
        for v in vals:
            s = _fmt_cell(v, delta)
            cells.append(s if not delta or v is None or v == 0 else f"[{'green' if v > 0 else 'red'}]{s}[/]")
        t.add_row(label, *cells)
    Console().print(t)
    for name, diff in result["differences"].items():
        print(f"* {name}: other data than {result['names'][0]} ({'; '.join(diff)})")
    if cfg.out:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        cfg.out.write_text(result["markdown"])
        print(f"Comparison written to {cfg.out}", flush=True)
    return 0
