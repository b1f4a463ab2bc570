"""Put evaluation runs side by side, with each later run's difference to the first.

``judgetrain eval compare RUN1 RUN2 …`` works on runs of any one evaluation
(TimeCatch, judge, PhaseFusion): each run's numbers come from its evaluation's
``cells(metrics)`` (:mod:`judgetrain.eval.core.registry`), as percentages, and the Δ rows
are differences in percentage points (paper 000 Tables 4–5). An evaluation whose module
also offers ``paired(first_run, other_run) -> {column: {"pvalue", "n", "test"}}``
(PhaseFusion: :mod:`judgetrain.eval.phasefusion.paired`) gets a ``p`` row after each Δ
row: the paired test of each column against the first run, on the items both runs scored,
blank where a column has none; the markdown names each column's test and the pairs.
Runs of different evaluations are refused; runs on different data (by content: dataset
content hashes, a manifest's and its videos' sha256, never their paths), splits or item
sets are refused too unless ``--allow-different-data``, which marks them (their tests then
pair the items both runs hold). Each difference reads ``field: first run's → other's``, and
runs on different items get a plain line saying how many items each holds that the other lacks.

An evaluation whose module also offers ``cell_counts(metrics) -> {column: (k | None, n)}``
(TimeCatch, judge) gets the n behind every cell: a rate (``k`` successes of ``n``) prints as
``75.0 [30.1, 95.4] (n=4)`` with its Wilson 95% interval (:func:`judgetrain.eval.core.stats.wilson`),
another number (a macro-F1, ``k`` None) as ``66.7 (n=4)``, and a Δ cell gives the difference of
two rates with its 95% interval (Newcombe's, :func:`judgetrain.eval.core.stats.difference_interval`)
and names the two runs and the n of each, ``+25.0 [-28.1, +69.9] (FT vs ZS, n=4/4)``. Cells
without counts print the bare value. The cells' formats are public (:func:`rate_cell`,
:func:`delta_cell`, :func:`p_cell`) for the run browser's table.
Docs: "reference/commands/eval-compare.md", "concepts/timecatch.md".
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
from judgetrain.identity import differences as identity_differences

from .metrics import ci95
from .registry import evaluation_of, module_for, paired_tests_for
from .runs import METRICS, PREDICTIONS, PredictionsError
from .stats import difference_interval

__all__ = ["CompareConfig", "compare", "delta_cell", "main", "make_parser", "p_cell", "rate_cell", "table_rows"]


def _what_was_evaluated(info: Mapping[str, Any]) -> dict[str, Any]:
    """What must agree between compared runs: the data by content (its identity: content
    hashes, never a path), the split and the items."""
    identity = info.get("identity") or {}
    return {"data": identity.get("data"), "split": info.get("split"), "items": (info.get("items") or {}).get("ids")}


def _differences(first: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """What ``other`` evaluated differently from ``first``, each ``field: first's → other's``."""
    out = identity_differences({k: first[k] for k in ("data", "split")}, {k: other[k] for k in ("data", "split")})
    if first["items"] != other["items"]:
        if first["items"] is not None and other["items"] is not None:
            out.append(
                f"items: {len(first['items'])} → {len(other['items'])} ids, "
                f"{len(set(first['items']) ^ set(other['items']))} not in both"
            )
        else:  # a run of an older judgetrain records no item ids: say so rather than print thousands of ids

            def ids(items: Any) -> str:
                return "not recorded" if items is None else f"{len(items)} ids"

            out.append(f"items: {ids(first['items'])} → {ids(other['items'])}")
    return out


def _item_overlap(first: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, int] | None:
    """How the item sets of two runs differ (``only_first``, ``only_other`` and each run's
    ``n_first`` / ``n_other``), or None where they are the same or either run records no ids."""
    a, b = first["items"], other["items"]
    if a is None or b is None or set(a) == set(b):
        return None
    return {
        "n_first": len(set(a)),
        "n_other": len(set(b)),
        "only_first": len(set(a) - set(b)),
        "only_other": len(set(b) - set(a)),
    }


def _metrics(run: Path, module: Any) -> dict[str, Any]:
    if (run / METRICS).is_file():
        return json.loads((run / METRICS).read_text())
    if (run / PREDICTIONS).is_file():
        return module.report(run)
    raise FileNotFoundError(f"{run} holds neither {METRICS} nor {PREDICTIONS}: is it an evaluation run folder?")


def compare(
    runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None, *, allow_different_data: bool = False
) -> dict[str, Any]:
    """Several runs' cells side by side, with each later run's difference to the first.

    Returns ``{"evaluation", "names", "columns": [label], "rows": [(name, [value|None],
    is_delta)], "counts": [[(k, n)|None per column] per run], "paired": [{"name", "label",
    "pvalues": [p|None], "n": {column: pairs}}], "tests": {column: test}, "differences": {name:
    [what differs]}, "items": {name: {"n_first", "n_other", "only_first", "only_other"}},
    "markdown"}``; values are percentages, Δ rows (labelled ``"Δ name"``) signed differences;
    ``counts`` (aligned with ``names``) the k of n behind each cell, where the evaluation has them;
    ``items`` the later runs evaluated on other items than the first. ``paired`` holds one
    entry per later run (labelled ``"p name"``, shown after its Δ row) when the evaluation
    has paired tests, none otherwise; ``pvalues`` are aligned with ``columns``, ``None``
    where a column has no test."""
    if not runs:
        raise ValueError("compare needs at least one run folder")
    paths = [Path(r) for r in runs]
    names = list(names) if names is not None else [p.name for p in paths]
    if len(names) != len(paths):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(paths)} run(s); give one per run")
    kinds = [evaluation_of(p) for p in paths]
    if len({k for k, _ in kinds}) > 1:
        raise PredictionsError(
            "runs of different evaluations cannot be compared: "
            + ", ".join(f"{p} ({k})" for p, (k, _) in zip(paths, kinds, strict=False))
        )
    evaluation = kinds[0][0]
    first = _what_was_evaluated(kinds[0][1])
    others = [(n, _what_was_evaluated(info)) for n, (_, info) in zip(names[1:], kinds[1:], strict=True)]
    differences = {n: d for n, other in others if (d := _differences(first, other))}
    if differences and not allow_different_data:
        raise PredictionsError(
            "these runs evaluated different data, so their numbers are not comparable (each "
            "field: the first run's → the other's):\n"
            + "\n".join(f"  - {names[0]} → {n}: {'; '.join(d)}" for n, d in differences.items())
            + "\nRerun them on the same data, split and items, or pass --allow-different-data "
            "to compare them anyway (they are marked)."
        )
    items = {n: o for n, other in others if (o := _item_overlap(first, other))}
    module = module_for(evaluation)
    metrics = [_metrics(p, module) for p in paths]
    cells = [module.cells(m) for m in metrics]
    counted = [module.cell_counts(m) for m in metrics] if hasattr(module, "cell_counts") else [{} for _ in metrics]
    columns = list(dict.fromkeys(label for c in cells for label in c))
    counts = [[c.get(col) for col in columns] for c in counted]
    shown = [f"{n} *" if n in differences else n for n in names]
    base = [cells[0].get(c) for c in columns]
    rows: list[tuple[str, list[float | None], bool]] = [(shown[0], base, False)]
    for name, c in zip(shown[1:], cells[1:], strict=False):
        vals = [c.get(col) for col in columns]
        rows.append((name, vals, False))
        rows.append((f"Δ {name}", [None if v is None or b is None else v - b for v, b in zip(vals, base, strict=True)], True))
    paired, tests = _paired(paired_tests_for(evaluation), paths, names, shown, columns)
    result = {
        "evaluation": evaluation,
        "names": names,
        "columns": columns,
        "rows": rows,
        "counts": counts,
        "paired": paired,
        "tests": tests,
        "differences": differences,
        "items": items,
    }
    return {**result, "markdown": _markdown(result)}


def _paired(
    paired_tests: Any, paths: Sequence[Path], names: Sequence[str], shown: Sequence[str], columns: Sequence[str]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Each later run's p row against the first run, and the test of each tested column;
    nothing for an evaluation without paired tests (``paired_tests`` None)."""
    if paired_tests is None:
        return [], {}
    out, tests = [], {}
    for name, label, path in zip(names[1:], shown[1:], paths[1:], strict=False):
        got = paired_tests(paths[0], path)
        out.append(
            {
                "name": name,
                "label": f"p {label}",
                "pvalues": [got[c]["pvalue"] if c in got else None for c in columns],
                "n": {c: got[c]["n"] for c in columns if c in got},
            }
        )
        tests.update({c: got[c]["test"] for c in columns if c in got})
    return out, tests


def table_rows(result: Mapping[str, Any]) -> list[tuple[str, list[str], str, list[float | None], int]]:
    """The table's rows in display order: (label, cells as text, kind, values, run), kind ``run``,
    ``delta`` or ``p``, run the index of the run the row belongs to; each later run's p row (if
    any) follows its Δ row. The console, Markdown and the run browser all lay out these rows."""
    p_rows = iter(result["paired"])
    names = result["names"]
    counts = result.get("counts") or [[None] * len(result["columns"]) for _ in names]
    out, run = [], -1
    for label, vals, delta in result["rows"]:
        if not delta:
            run += 1
            texts = [rate_cell(v, c) for v, c in zip(vals, counts[run], strict=False)]
        else:
            texts = [delta_cell(v, names[run], names[0], c, c0) for v, c, c0 in zip(vals, counts[run], counts[0], strict=True)]
        out.append((label, texts, "delta" if delta else "run", vals, run))
        if delta and (p := next(p_rows, None)) is not None:
            out.append((p["label"], [p_cell(v) for v in p["pvalues"]], "p", p["pvalues"], run))
    return out


def _markdown(result: Mapping[str, Any]) -> str:
    names, columns = result["names"], result["columns"]
    md = f"{result['evaluation']}: values in %; Δ rows: difference to {names[0]} in percentage points"
    md += f"; p rows: two-sided p-value of the paired test against {names[0]} (uncorrected).\n\n" if result["paired"] else ".\n\n"
    if any(c is not None for row in result.get("counts") or [] for c in row):
        md += (
            "Run cells: value [Wilson 95% interval] (n = the items the cell counts; no interval for a "
            "number that is not a rate); Δ cells name the two runs and each one's n.\n\n"
        )
    md += "".join(f"{line}\n\n" for line in _items_lines(result))
    md += "| | " + " | ".join(columns) + " |\n|---|" + "---:|" * len(columns) + "\n"
    for label, texts, _, _, _ in table_rows(result):
        md += f"| {label} | " + " | ".join(texts) + " |\n"
    if result["paired"]:
        md += "\n" + _tests_note(result) + "\n"
    if result["differences"]:
        md += "\n" + "".join(
            f"\\* {n}: other data than {names[0]} ({'; '.join(d)})\n\n" for n, d in result["differences"].items()
        )
    return md


def _tests_note(result: Mapping[str, Any]) -> str:
    """Which test each column uses (``–`` for the rest) and how many items each p row pairs."""
    by_test: dict[str, list[str]] = {}
    for column, test in result["tests"].items():
        by_test.setdefault(test, []).append(column)
    lines = [f"- {test}: {', '.join(f'`{c}`' for c in cols)}\n" for test, cols in by_test.items()]
    if len(result["tests"]) < len(result["columns"]):
        lines.append("- no paired test (–): the other columns\n")
    for p in result["paired"]:
        by_n: dict[int, list[str]] = {}
        for column, n in p["n"].items():
            by_n.setdefault(n, []).append(column)
        if not by_n:
            pairs = "no items both runs scored"
        elif len(by_n) == 1:
            pairs = f"n = {next(iter(by_n))} paired items (by id)"
        else:
            pairs = "; ".join(f"n = {n} ({', '.join(cols)})" for n, cols in by_n.items()) + " paired items (by id)"
        lines.append(f"- {p['label']}: {pairs}\n")
    return "Paired tests, per column:\n\n" + "".join(lines)


def _items_lines(result: Mapping[str, Any]) -> list[str]:
    """One plain sentence per later run evaluated on other items than the first."""
    first = result["names"][0]
    return [
        f"{name} and {first} were evaluated on different items (missing from {name}: {o['only_first']} of "
        f"{first}'s {o['n_first']}; missing from {first}: {o['only_other']} of {name}'s {o['n_other']}); each cell "
        "counts its own run's items."
        for name, o in (result.get("items") or {}).items()
    ]


def rate_cell(v: float | None, count: tuple[int | None, int] | None = None) -> str:
    """A run's cell: the value, with its Wilson interval (a rate, ``k`` known) and n where counted."""
    if count is None:
        return "–" if v is None else f"{v:.1f}"
    k, n = count
    if v is None:
        return f"– (n={n})"
    interval = ci95(k, n) if k is not None else None
    return f"{v:.1f}" + ("" if interval is None else f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]") + f" (n={n})"


def delta_cell(
    v: float | None, name: str, first: str, count: tuple[int | None, int] | None, first_count: tuple[int | None, int] | None
) -> str:
    """A Δ cell: the signed difference in points; where both runs' cells are counted, its 95% interval
    (two rates: :func:`~judgetrain.eval.core.stats.difference_interval`, Newcombe's, from the two
    Wilson intervals), which runs and each one's n, ``+25.0 [-28.1, +69.9] (FT vs ZS, n=4/4)``."""
    if v is None:
        return "–"
    if count is None or first_count is None:
        return f"{v:+.1f}"
    shown = ""
    if count[0] is not None and first_count[0] is not None and count[1] and first_count[1]:
        lo, hi = difference_interval(first_count[0], first_count[1], count[0], count[1])
        shown = f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return f"{v:+.1f}{shown} ({name} vs {first}, n={count[1]}/{first_count[1]})"


def p_cell(p: float | None) -> str:
    """A p row's cell: three decimals, or ``1.2e-04`` below 0.001; ``–`` without a test."""
    if p is None:
        return "–"
    return f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


@dataclass(kw_only=True)
class CompareConfig:
    """``judgetrain eval compare``."""

    runs: list[Path] = arg(
        help="run folders, the first the reference of the Δ rows; also the leading bare words", positional=True
    )
    names: list[str] | None = arg(None, "display names, one per run (default: the folder names)")
    out: Path | None = arg(None, "write the table as markdown to this file")
    allow_different_data: bool = arg(False, "compare runs on different data, splits or items (marked with *)")

    def __post_init__(self) -> None:
        self.runs = [Path(r) for r in self.runs]
        self.names = comma_list(self.names) if self.names else None


def make_parser():
    return make_config_parser(
        CompareConfig,
        "judgetrain eval compare",
        "Put evaluation runs side by side, with each run's difference to the first.",
        "examples:\n  judgetrain quickstart        # first: a zero-shot and a LoRA run under quickstart/results\n"
        "  judgetrain eval compare quickstart/results/zero-shot quickstart/results/lora --names base,lora --out results/compare.md\n"
        "  judgetrain eval compare quickstart/results/zero-shot quickstart/results/lora   # the table on the terminal only\n"
        "\njudge runs: accuracy / F1 per subset (see `judgetrain eval judge --help`).\n",
    )


def _console_table(result: Mapping[str, Any], wide: bool):
    """The comparison for the terminal: runs as rows (as in the markdown) when ``wide``, else
    transposed, one row per column of the markdown, so that many arms stay readable."""
    from rich.table import Table

    rows = []
    for label, texts, kind, values, _ in table_rows(result):
        if kind == "delta":  # colour the sign of each difference
            texts = [
                s if v is None or v == 0 else f"[{'green' if v > 0 else 'red'}]{s}[/]" for s, v in zip(texts, values, strict=True)
            ]
        rows.append((label, texts))
    t = Table(
        title=f"{result['evaluation']} (%); Δ: difference to {result['names'][0]}"
        + ("; p: paired test against it" if result["paired"] else "")
    )
    if wide:
        t.add_column("run")
        for label in result["columns"]:
            t.add_column(label, justify="right")
        for label, texts in rows:
            t.add_row(label, *texts)
        return t
    t.add_column("", no_wrap=True)
    for label, _ in rows:
        t.add_column(label, justify="right")
    for j, column in enumerate(result["columns"]):
        t.add_row(column, *(texts[j] for _, texts in rows))
    return t


def main(cfg: CompareConfig) -> int:
    from rich.console import Console
    from rich.measure import Measurement

    from judgetrain.io import write_text

    result = compare(cfg.runs, cfg.names, allow_different_data=cfg.allow_different_data)
    console = Console()
    table = _console_table(result, wide=True)
    natural = Measurement.get(console, console.options.update(width=10_000), table).maximum  # unwrapped width
    if natural > console.width:  # too many columns side by side: one row per column
        table = _console_table(result, wide=False)
    console.print(table)
    if result["paired"]:
        print(_tests_note(result).replace("`", ""), end="")
    for line in _items_lines(result):
        print(line)
    for name, diff in result["differences"].items():
        print(f"* {name}: other data than {result['names'][0]} ({'; '.join(diff)})")
    if cfg.out:
        cfg.out.parent.mkdir(parents=True, exist_ok=True)
        write_text(cfg.out, result["markdown"])
        print(f"Comparison written to {cfg.out}", flush=True)
    return 0
