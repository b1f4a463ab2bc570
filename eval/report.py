"""Results of an evaluation run: ``predictions.jsonl`` I/O, ``metrics.json``, ``report.md``, plots, ``compare``.

A run folder holds:

- ``predictions.jsonl``: one JSON object per item, appended, flushed and fsync'd as
  scoring goes, so a killed run resumes where it stopped. A partial last line (a
  kill in the middle of a write) is dropped on resume; a bad line anywhere else is
  an error naming the file and line.
- ``run.json``: how the run was made (model, adapter, data, split, world size, the
  command); optional ``human`` reference accuracies.
- ``metrics.json``, ``report.md`` and the PNG figures, all recomputed from
  ``predictions.jsonl`` (plus ``run.json`` for the header) by :func:`report` —
  ``judgetrain eval report RUN``.

``judgetrain eval compare RUN1 RUN2 …`` (:func:`compare`) puts runs side by side
per task × source with each run's difference to the first (paper 000 Tables 4–5).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from .metrics import ALL, TASK_ABBREV, TASK_TITLES, TIMECATCH_TASKS, compute_metrics

__all__ = [
    "METRICS",
    "PREDICTIONS",
    "REPORT",
    "RUN_INFO",
    "PredictionsError",
    "PredictionWriter",
    "check_same_run",
    "compare",
    "compare_main",
    "configure_compare_parser",
    "configure_report_parser",
    "figures_markdown",
    "load_human",
    "plot_confusion",
    "plot_lpips",
    "read_predictions",
    "read_run",
    "repair_predictions",
    "report",
    "report_main",
    "write_json",
    "write_rows",
    "write_text",
    "EvalInputError",
]

PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
REPORT = "report.md"
RUN_INFO = "run.json"


def run_as_module(prog: str, configure_parser: Callable[[argparse.ArgumentParser], None],
                  main: Callable[[argparse.Namespace], int]) -> None:
    """``python -m`` / ``accelerate launch -m`` entry of a data-parallel evaluation: parse,
    run, then tear the process group down on every rank together (a rank that exits
    while another still holds the gloo group can make that one abort)."""
    parser = argparse.ArgumentParser(prog=prog)
    configure_parser(parser)
    code = main(parser.parse_args())
    from accelerate import PartialState

    PartialState().destroy_process_group()
    sys.exit(code)


class PredictionsError(ValueError):
    """A predictions file that cannot be read (not just a partial last line)."""


class EvalInputError(ValueError):
    """An evaluation asked for data that is not there (a split, a task); the message says what is."""


def check_same_run(out: Path, info: Mapping[str, Any], identity: Sequence[str]) -> dict[str, Any]:
    """The ``run.json`` already in ``out`` (``{}`` when none), after checking it agrees with
    ``info`` on every ``identity`` key: predictions of two differently configured runs
    must never mix in one folder. Raises :class:`PredictionsError` naming what differs."""
    path = Path(out) / RUN_INFO
    old = json.loads(path.read_text()) if path.is_file() else {}
    diff = [k for k in identity if old and old.get(k) != info[k]]
    if diff:
        raise PredictionsError(f"{out} holds predictions of another run "
                               f"({', '.join(f'{k}: {old.get(k)!r} vs {info[k]!r}' for k in diff)}). "
                               "Use a new --out, or delete that folder to start over.")
    return old


# --------------------------------------------------------------------------- predictions.jsonl


def _scan(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Rows of a predictions file, and whether its last line lacks its newline (a kill
    mid-write). Such a line counts as a row when it is a complete object, else it is
    dropped; a bad line that did end with a newline is an error."""
    if not path.exists():
        return [], False
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        row = _parse(line)
        if row is None:
            raise PredictionsError(f"{path}, line {i + 1}: not a prediction row. Delete that line (or the file, to "
                                   "start the run over) and rerun.")
        rows.append(row)
    if not tail.strip():
        return rows, bool(tail)
    row = _parse(tail)
    return rows + ([row] if row is not None else []), True


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and "id" in row else None


def read_predictions(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a ``predictions.jsonl`` in file order, without a partial last line
    (left by a kill mid-write); a missing file reads as no rows."""
    return _scan(Path(path))[0]


def repair_predictions(path: str | os.PathLike) -> int:
    """Rewrite ``path`` without a partial last line, atomically; returns the rows kept.
    A complete last object missing only its newline gets the newline."""
    path = Path(path)
    rows, partial = _scan(path)
    if partial:
        write_rows(path, rows)
    return len(rows)


def read_run(run_dir: str | os.PathLike, how: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run folder's prediction rows and its ``run.json`` (``{}`` when absent). A folder
    without ``predictions.jsonl`` raises ``FileNotFoundError`` ending in ``how`` (what to
    run or pass instead)."""
    run_dir = Path(run_dir)
    if not (run_dir / PREDICTIONS).is_file():
        raise FileNotFoundError(f"{run_dir} holds no {PREDICTIONS}; {how}")
    info = json.loads((run_dir / RUN_INFO).read_text()) if (run_dir / RUN_INFO).is_file() else {}
    return read_predictions(run_dir / PREDICTIONS), info


def write_rows(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Replace ``path`` with ``rows`` as JSON Lines, atomically (temp file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class PredictionWriter:
    """Appends prediction rows to a JSON Lines file; every :meth:`write` ends with
    flush + fsync, so what it returned from survives a SIGKILL or a power cut."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] = open(self.path, "a")

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        # one write() per batch: a kill leaves whole lines plus at most one partial line
        self._f.write("".join(json.dumps(r) + "\n" for r in rows))
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write JSON atomically; ``nan`` becomes ``null`` (standard JSON has no NaN)."""
    write_text(path, json.dumps(_no_nan(obj), indent=2) + "\n")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temp file beside it, then a rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _no_nan(obj: Any) -> Any:
    if isinstance(obj, float) and math.isnan(obj):
        return None
    if isinstance(obj, Mapping):
        return {k: _no_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_no_nan(v) for v in obj]
    return obj


# --------------------------------------------------------------------------- human reference


def load_human(path: str | os.PathLike) -> dict[str, dict[str, float]]:
    """Human reference accuracies ``{task: {source: fraction}}`` from a JSON file
    (``{"temporal_detect": {"clevrer": 0.85, ...}, ...}``) or a CSV with columns
    ``task,source,accuracy``. Values are fractions (0–1) unless any exceeds 1, in
    which case all are read as percentages."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"human reference {path} not found")
    if path.suffix.lower() == ".csv":
        table: dict[str, dict[str, float]] = {}
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"task", "source", "accuracy"} - set(reader.fieldnames or [])
            if missing:
                raise ValueError(f"{path}: CSV needs columns task,source,accuracy; missing {sorted(missing)}")
            for line, row in enumerate(reader, start=2):
                try:
                    table.setdefault(row["task"].strip(), {})[row["source"].strip()] = float(row["accuracy"])
                except ValueError:
                    raise ValueError(f"{path}, line {line}: accuracy {row['accuracy']!r} is not a number") from None
    else:
        try:
            raw = json.loads(path.read_text())
        except ValueError as e:
            raise ValueError(f"{path}: not JSON ({e}); expected {{task: {{source: accuracy}}}} or a .csv") from None
        if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
            raise ValueError(f"{path}: expected {{task: {{source: accuracy}}}}")
        table = {t: {s: float(a) for s, a in v.items()} for t, v in raw.items()}
    values = [a for v in table.values() for a in v.values()]
    if any(a > 1 for a in values):
        table = {t: {s: a / 100 for s, a in v.items()} for t, v in table.items()}
    return table


# --------------------------------------------------------------------------- plots


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on clusters
    import matplotlib.pyplot as plt

    return plt


def plot_confusion(conf: Mapping[str, Any], task: str, path: str | os.PathLike) -> None:
    """Row-normalised confusion matrix (true position down, predicted across), counts annotated."""
    plt = _pyplot()
    labels, counts, norm = conf["labels"], conf["counts"], conf["normalized"]
    k = len(labels)
    fig, ax = plt.subplots(figsize=(1.2 + 0.45 * k, 1.0 + 0.45 * k))
    im = ax.imshow(norm, cmap="Blues", vmin=0.0, vmax=1.0)
    for i in range(k):
        for j in range(k):
            if counts[i][j]:
                ax.text(j, i, str(counts[i][j]), ha="center", va="center", fontsize=7,
                        color="white" if norm[i][j] > 0.5 else "black")
    ax.set_xticks(range(k), [str(x) for x in labels], fontsize=7)
    ax.set_yticks(range(k), [str(x) for x in labels], fontsize=7)
    what = "first frame of predicted pair" if task == "temporal_localize" else "predicted frame"
    ax.set_xlabel(what)
    ax.set_ylabel("true frame" if task == "frame_localize" else "true swap (first frame)")
    ax.set_title(f"{TASK_TITLES.get(task, task)}: row-normalised (counts annotated)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_lpips(bins: Sequence[Mapping[str, Any]], path: str | os.PathLike, chance: float = 0.5) -> None:
    """Temporal-detection accuracy per LPIPS bin of the swapped pair; n on each bar."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(bins) + 1.5), 3.2))
    xs = range(len(bins))
    accs = [0.0 if b["accuracy"] is None or math.isnan(b["accuracy"]) else 100 * b["accuracy"] for b in bins]
    bars = ax.bar(xs, accs, color="#4C72B0")
    for bar, b in zip(bars, bins):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 1, f"n={b['n']}", ha="center", fontsize=7)
    ax.axhline(100 * chance, color="grey", linestyle="--", linewidth=1, label="chance")
    ax.set_xticks(list(xs), [f"{b['lo']:.1f}–{b['hi']:.1f}" for b in bins], fontsize=7, rotation=30)
    ax.set_ylim(0, 110)
    ax.set_xlabel("LPIPS distance of the swapped frames")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Temporal detection accuracy by LPIPS bin (swapped sequences)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- report


def _pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _columns(table: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(task, source) columns: each task's sources, then its "all" when it has several."""
    cols = []
    for task, cells in table.items():
        sources = [s for s in cells if s != ALL]
        cols += [(task, s) for s in sources] + ([(task, ALL)] if len(sources) > 1 else [])
    return cols


def _header(cols: Sequence[tuple[str, str]]) -> str:
    cells, prev = [], None
    for task, source in cols:
        title = f"**{TASK_TITLES.get(task, task)}**<br>" if task != prev else "<br>"
        cells.append(f"{title}{source}")
        prev = task
    return "| | " + " | ".join(cells) + " |\n|---|" + "---:|" * len(cols) + "\n"


def table2_markdown(metrics: Mapping[str, Any], name: str, human: Mapping[str, Mapping[str, float]] | None = None) -> str:
    """Accuracy (%) per task × source, paper 000 Table 2 layout: Random, the model,
    n, and the human reference when given."""
    table = metrics["by_task_source"]
    cols = _columns(table)
    out = _header(cols)
    out += "| Random | " + " | ".join(_pct(table[t][s]["random"]) for t, s in cols) + " |\n"
    out += f"| {name} | " + " | ".join(_pct(table[t][s]["accuracy"]) for t, s in cols) + " |\n"
    if human:
        out += "| Human | " + " | ".join(_pct(human.get(t, {}).get(s)) for t, s in cols) + " |\n"
    out += "| n | " + " | ".join(str(table[t][s]["n"]) for t, s in cols) + " |\n"
    return out


def _subset_markdown(metrics: Mapping[str, Any]) -> str:
    subsets: list[str] = []
    for cells in metrics["by_subset"].values():
        subsets += [s for s in cells if s not in subsets and s != ALL]
    subsets.append(ALL)
    out = "| task | " + " | ".join(f"{s} acc | {s} random | {s} n" for s in subsets) + " |\n"
    out += "|---|" + "---:|" * (3 * len(subsets)) + "\n"
    for task, cells in metrics["by_subset"].items():
        parts = []
        for s in subsets:
            c = cells.get(s)
            parts += [_pct(c["accuracy"]), _pct(c["random"]), str(c["n"])] if c else ["–", "–", "0"]
        out += f"| {TASK_TITLES.get(task, task)} | " + " | ".join(parts) + " |\n"
    return out


def _lpips_markdown(bins: Sequence[Mapping[str, Any]]) -> str:
    out = "| LPIPS bin | accuracy (%) | n |\n|---|---:|---:|\n"
    for b in bins:
        out += f"| {b['lo']:.1f}–{b['hi']:.1f} | {_pct(b['accuracy'])} | {b['n']} |\n"
    return out


def report(run_dir: str | os.PathLike, human: str | os.PathLike | Mapping | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json``, ``report.md`` and the figures of a run folder from its
    ``predictions.jsonl`` (``run.json``, when present, names the model and the
    command). ``human``: a reference file (see :func:`load_human`) or table; by
    default the one recorded in ``run.json``. Returns the metrics."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, f"run `judgetrain eval timecatch --out {run_dir} …` first")
    if human is None:
        human_table = info.get("human")
    elif isinstance(human, Mapping):
        human_table = dict(human)
    else:
        human_table = load_human(human)
    metrics = {"run": {k: info.get(k) for k in ("model", "adapter", "data", "split", "world_size")}}
    metrics.update(compute_metrics(rows))
    if human_table:
        metrics["human"] = human_table

    figures: list[tuple[str, str]] = []
    for task, conf in metrics["confusion"].items():
        name = f"confusion_{task}.png"
        plot_confusion(conf, task, run_dir / name)
        figures.append((f"{TASK_TITLES[task]}: predicted vs true position", name))
    bins = metrics["lpips_bins"].get("temporal_detect") or []
    if bins:
        name = "lpips_temporal_detect.png"
        plot_lpips(bins, run_dir / name)
        figures.append(("Temporal detection accuracy by LPIPS bin of the swapped pair", name))
    metrics["figures"] = [f for _, f in figures]
    metrics = _no_nan(metrics)
    write_json(run_dir / METRICS, metrics)

    model_name = _display_name(info, rows)
    md = [f"# TimeCatch evaluation: {model_name}\n\n"]
    md.append(f"- model: `{info.get('model') or _from_rows(rows, 'model')}`"
              + (f", adapter: `{info['adapter']}`" if info.get("adapter") else "") + "\n")
    if info.get("data"):
        md.append(f"- data: `{info['data']}`, split `{info.get('split')}`\n")
    md.append(f"- items: {len(rows)}" + (f", processes: {info['world_size']}" if info.get("world_size") else "") + "\n")
    md.append("\n## Accuracy (%) per task and source\n\n")
    md.append("Random: the expected accuracy of a uniform guess over each item's own choices, averaged over items.\n\n")
    md.append(table2_markdown(metrics, model_name, human_table))
    md.append("\n## Accuracy (%) by sequence length\n\nmain: 4–8 frames, long: 9–16 frames.\n\n")
    md.append(_subset_markdown(metrics))
    if bins:
        md.append("\n## Temporal detection by LPIPS distance of the swapped pair\n\n")
        md.append("Swapped sequences only (intact ones have no swapped pair); 0.1-wide bins.\n\n")
        md.append(_lpips_markdown(bins))
    md.append(figures_markdown(figures))
    md.append("\n## Reproduce\n\n```bash\n")
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n```\n")
    write_text(run_dir / REPORT, "".join(md))
    return metrics


def figures_markdown(figures: Sequence[tuple[str, str]]) -> str:
    """A report's "Figures" section: each (title, file name) as a heading and a linked image; "" for none."""
    if not figures:
        return ""
    return "\n## Figures\n\n" + "".join(f"### {title}\n\n[![{title}]({name})]({name})\n\n" for title, name in figures)


def _from_rows(rows: Sequence[Mapping[str, Any]], key: str) -> Any:
    return rows[0].get(key) if rows else None


def _display_name(info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    model = info.get("model") or _from_rows(rows, "model") or "model"
    adapter = info.get("adapter") if info else _from_rows(rows, "adapter")
    name = Path(str(model).rstrip("/")).name or str(model)
    return f"{name} + {Path(str(adapter).rstrip('/')).name}" if adapter else name


# --------------------------------------------------------------------------- compare


def _run_metrics(run_dir: Path) -> dict[str, Any]:
    if (run_dir / METRICS).is_file():
        return json.loads((run_dir / METRICS).read_text())
    if (run_dir / PREDICTIONS).is_file():
        return report(run_dir)
    raise FileNotFoundError(f"{run_dir} holds neither {METRICS} nor {PREDICTIONS}: is it an evaluation run folder?")


def compare(runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None) -> dict[str, Any]:
    """Accuracy per task × source of several runs side by side, with each later run's
    difference to the first in percentage points (paper 000 Tables 4–5, Δ rows).

    Returns ``{"names", "columns": [(task, source)], "rows": [(label, [value|None], is_delta)],
    "markdown"}``; values are percentages, Δ rows (labelled ``"Δ name"``) signed differences."""
    if len(runs) < 1:
        raise ValueError("compare needs at least one run folder")
    paths = [Path(r) for r in runs]
    if names is None:
        names = [p.name for p in paths]
    if len(names) != len(paths):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(paths)} run(s); give one per run")
    metrics = [_run_metrics(p) for p in paths]
    cols: list[tuple[str, str]] = []
    for m in metrics:
        for task, cells in m["by_task_source"].items():
            for s in cells:
                if s != ALL and (task, s) not in cols:
                    cols.append((task, s))
    order = {t: i for i, t in enumerate(TIMECATCH_TASKS)}
    cols.sort(key=lambda c: (order.get(c[0], len(order)), c[0], c[1]))

    def value(m: Mapping[str, Any], col: tuple[str, str]) -> float | None:
        cell = m["by_task_source"].get(col[0], {}).get(col[1])
        acc = None if cell is None else cell.get("accuracy")
        return None if acc is None or (isinstance(acc, float) and math.isnan(acc)) else 100 * acc

    base = [value(metrics[0], c) for c in cols]
    rows: list[tuple[str, list[float | None], bool]] = [(names[0], base, False)]
    for name, m in zip(names[1:], metrics[1:]):
        vals = [value(m, c) for c in cols]
        rows.append((name, vals, False))
        rows.append((f"Δ {name}", [None if v is None or b is None else v - b for v, b in zip(vals, base)], True))

    md = f"Accuracy (%) per task and source; Δ rows: difference to {names[0]} in percentage points.\n\n"
    md += _header(cols)
    for label, vals, delta in rows:
        md += f"| {label} | " + " | ".join(_fmt_cell(v, delta) for v in vals) + " |\n"
    return {"names": list(names), "columns": cols, "rows": rows, "markdown": md}


def _fmt_cell(v: float | None, delta: bool) -> str:
    if v is None:
        return "–"
    return f"{v:+.1f}" if delta else f"{v:.1f}"


# --------------------------------------------------------------------------- CLI


def configure_report_parser(p: argparse.ArgumentParser) -> None:
    p.description = "Recompute metrics.json, report.md and the figures of an evaluation run from its predictions.jsonl."
    p.epilog = ("example:\n  judgetrain eval report quickstart/results/lora\n"
                "  judgetrain eval report results/qwen3vl-2b --human human_accuracy.csv   # adds a Human row\n")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("run", type=Path, help="run folder (the --out of `judgetrain eval timecatch`)")
    p.add_argument("--human", type=Path, default=None,
                   help="human reference accuracies: JSON {task: {source: acc}} or CSV task,source,accuracy")


def report_main(args: argparse.Namespace) -> int:
    report(args.run, human=args.human)
    print(f"Report written to {args.run / REPORT} (metrics in {args.run / METRICS})", flush=True)
    return 0


def configure_compare_parser(p: argparse.ArgumentParser) -> None:
    p.description = "Put evaluation runs side by side per task × source, with differences to the first run."
    p.epilog = "example:\n  judgetrain eval compare results/base results/lora --names base,lora --out results/compare.md\n"
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("runs", type=Path, nargs="+", help="run folders; the first is the reference for the Δ rows")
    p.add_argument("--names", default=None, help="comma-separated display names, one per run (default: folder names)")
    p.add_argument("--out", type=Path, default=None, help="write the table as markdown to this file")


def compare_main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    names = [n.strip() for n in args.names.split(",")] if args.names else None
    result = compare(args.runs, names)
    t = Table(title="Accuracy (%) per task and source; Δ: difference to " + result["names"][0])
    t.add_column("run")
    for task, source in result["columns"]:
        t.add_column(f"{TASK_ABBREV.get(task, task)} {source}", justify="right")
    for label, vals, delta in result["rows"]:
        cells = []
        for v in vals:
            s = _fmt_cell(v, delta)
            cells.append(s if not delta or v is None or v == 0 else f"[{'green' if v > 0 else 'red'}]{s}[/]")
        t.add_row(label, *cells)
    Console().print(t)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(result["markdown"])
        print(f"Comparison written to {args.out}", flush=True)
    return 0


if __name__ == "__main__":  # python -m judgetrain.eval.report RUN
    _p = argparse.ArgumentParser(prog="python -m judgetrain.eval.report")
    configure_report_parser(_p)
    sys.exit(report_main(_p.parse_args()))
