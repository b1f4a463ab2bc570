"""TimeCatch's ``metrics.json`` and ``report.md`` (paper 000 Table 2 layout, the long set, accuracy by
length and by LPIPS bin of the swapped pair), its figures, and the cells ``eval compare`` shows.

:func:`report` recomputes all of them from a run folder's ``predictions.jsonl`` (plus
``run.json`` for the header and the optional ``human`` reference accuracies, read by
:func:`~judgetrain.eval.timecatch.human.load_human`); it is what ``judgetrain eval report RUN`` runs for a TimeCatch run.
The run folder itself (``predictions.jsonl`` written as scoring goes, ``run.json``, resume)
is every evaluation's: :mod:`judgetrain.eval.core.runs`. :func:`cells` gives ``judgetrain
eval compare`` its numbers, per task × source (paper 000 Tables 4–5), and :func:`cell_counts`
the correct count and n behind each, so that compare prints the n and Wilson interval of every
cell. Every accuracy in ``report.md`` is printed in % with its Wilson 95% interval and n.
Docs: "concepts/identity.md", "concepts/timecatch.md".
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.io import no_nan, write_json, write_text

from ..core.markdown import RATE_NOTE, display_name, figures_markdown, pct, rate, run_header
from ..core.runs import METRICS, PREDICTIONS, REPORT, items_count, read_run
from .human import load_human
from .metrics import ALL, TASK_ABBREV, TASK_TITLES, TIMECATCH_TASKS
from .plots import plot_confusion, plot_lpips
from .tables import balanced_interval, compute_metrics

__all__ = ["cell_counts", "cells", "report"]

# --------------------------------------------------------------------------- report


def _rate(cell: Mapping[str, Any] | None) -> str:
    return "– (n=0)" if not cell else rate(cell.get("accuracy"), cell.get("ci95"), cell["n"])


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


def table2_markdown(
    table: Mapping[str, Mapping[str, Any]], name: str, human: Mapping[str, Mapping[str, float]] | None = None
) -> str:
    """Accuracy (%) per task × source of one ``accuracy_table`` in paper 000 Table 2
    layout: Random (from this table's own items), the model (each cell with its Wilson 95%
    interval and n), the human reference when given, n."""
    cols = _columns(table)
    out = _header(cols)
    out += "| Random | " + " | ".join(pct(table[t][s]["random"]) for t, s in cols) + " |\n"
    out += f"| {name} | " + " | ".join(_rate(table[t][s]) for t, s in cols) + " |\n"
    if human:
        out += "| Human | " + " | ".join(pct(human.get(t, {}).get(s)) for t, s in cols) + " |\n"
    out += "| n | " + " | ".join(str(table[t][s]["n"]) for t, s in cols) + " |\n"
    return out


def _subset_markdown(metrics: Mapping[str, Any]) -> str:
    subsets: list[str] = []
    for cells in metrics["by_subset"].values():
        subsets += [s for s in cells if s not in subsets and s != ALL]
    subsets.append(ALL)
    out = "| task | " + " | ".join(f"{s} acc | {s} random" for s in subsets) + " |\n"
    out += "|---|" + "---:|" * (2 * len(subsets)) + "\n"
    for task, cells in metrics["by_subset"].items():
        parts = []
        for s in subsets:
            c = cells.get(s)
            parts += [_rate(c), pct(c["random"]) if c else "–"]
        out += f"| {TASK_TITLES.get(task, task)} | " + " | ".join(parts) + " |\n"
    return out


def _lpips_markdown(bins: Sequence[Mapping[str, Any]]) -> str:
    out = "| LPIPS bin | swapped: said anomalous | intact partner: said intact | balanced accuracy |\n|---|---:|---:|---:|\n"
    for b in bins:
        out += (
            f"| {b['lo']:.1f}–{b['hi']:.1f} | {_rate(b['swapped'])} | {_rate(b['intact'])} "
            f"| {rate(b['balanced_accuracy'], b.get('balanced_accuracy_ci95') or balanced_interval(b), b['n'])} |\n"
        )
    return out


_TABLE2_NOTE = (
    f"{RATE_NOTE} Random: the expected accuracy of a uniform guess over each item's own choices, "
    "averaged over the table's own items.\n\n"
)
_LPIPS_NOTE = (
    "0.1-wide bins of the LPIPS distance of the swapped pair. Each bin holds its swapped items and their "
    "intact partners (same sequence and prompt, unswapped): accuracy per class, and the balanced accuracy "
    "(their mean; scikit-learn `balanced_accuracy_score`), whose chance level is 50%. A swapped item "
    'alone has no chance level: a model that always answers "anomaly" is right on every one. '
    f"{RATE_NOTE} The balanced accuracy is the mean of the two classes' rates beside it (n: both "
    "classes' items); its interval combines the two Wilson intervals as for a sum of independent rates (MOVER, "
    "Zou & Donner 2008).\n\n"
)


def _figures(metrics: Mapping[str, Any], run_dir: Path) -> list[tuple[str, str]]:
    figures: list[tuple[str, str]] = []
    for task, conf in metrics["confusion"].items():
        name = f"confusion_{task}.png"
        plot_confusion(conf, task, run_dir / name)
        figures.append((f"{TASK_TITLES[task]}: predicted vs true position", name))
    if bins := metrics["lpips_bins"].get("temporal_detect"):
        name = "lpips_temporal_detect.png"
        plot_lpips(bins, run_dir / name)
        figures.append(("Temporal detection by LPIPS bin of the swapped pair: each class and balanced accuracy", name))
    return figures


def _markdown(
    run_dir: Path,
    metrics: Mapping[str, Any],
    info: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    human: Mapping[str, Mapping[str, float]] | None,
    figures: Sequence[tuple[str, str]],
) -> str:
    name = display_name(info, rows)
    md = [
        f"# TimeCatch evaluation: {name}\n\n",
        run_header(info, rows, f"items: {len(rows)} of the {metrics['items']['selected']} the run selects"),
    ]
    tables = metrics["table2"]
    md.append("\n## Table 2: accuracy (%) per task and source, main set (4–8 frames)\n\n")
    md.append(_TABLE2_NOTE)
    md.append(table2_markdown(tables["main"], name, human) if "main" in tables else "No main-set item in this run.\n")
    if "long" in tables:
        md.append("\n## Long set (9–16 frames): accuracy (%) per task and source\n\n")
        md.append(
            f"Reported apart from Table 2, as paper 000 does (§3.3, §6.5); Random from the long items alone. {RATE_NOTE}\n\n"
        )
        md.append(table2_markdown(tables["long"], name))
    md.append(
        f"\n## Accuracy (%) by sequence length\n\nmain: 4–8 frames, long: 9–16 frames; all sources together. {RATE_NOTE}\n\n"
    )
    md.append(_subset_markdown(metrics))
    if bins := metrics["lpips_bins"].get("temporal_detect"):
        md.append("\n## Temporal detection by LPIPS distance of the swapped pair\n\n")
        md.append(_LPIPS_NOTE)
        md.append(_lpips_markdown(bins))
    md.append(figures_markdown(figures))
    md.append("\n## Reproduce\n\n```bash\n")
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n```\n")
    return "".join(md)


def report(run_dir: str | os.PathLike, human: str | os.PathLike | Mapping | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json``, ``report.md`` and the figures of a run folder from its
    ``predictions.jsonl`` (``run.json``, when present, names the model and the
    command). ``human``: a reference file (see :func:`~judgetrain.eval.timecatch.human.load_human`) or table; by
    default the one recorded in ``run.json``. Returns the metrics.

    The metrics are :func:`~judgetrain.eval.timecatch.tables.compute_metrics`' (Table 2's main
    and long sets apart, LPIPS bins by class) plus the run's header and ``figures``."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, f"run `judgetrain eval timecatch --out {run_dir} …` first")
    if human is None:
        human_table = info.get("human")
    elif isinstance(human, Mapping):
        human_table = dict(human)
    else:
        human_table = load_human(human)
    metrics = {
        "run": {k: info.get(k) for k in ("model", "adapter", "data", "split", "split_chosen", "world_size")},
        "items": items_count(rows, info),
    }
    metrics.update(compute_metrics(rows))
    if human_table:
        metrics["human"] = human_table
    figures = _figures(metrics, run_dir)
    metrics["figures"] = [f for _, f in figures]
    metrics = no_nan(metrics)
    write_json(run_dir / METRICS, metrics)
    write_text(run_dir / REPORT, _markdown(run_dir, metrics, info, rows, human_table, figures))
    return metrics


# --------------------------------------------------------------------------- compare


def _compare_cells(metrics: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(label, accuracy cell) of every column ``eval compare`` shows, in order (:func:`cells`)."""
    order = {t: i for i, t in enumerate(TIMECATCH_TASKS)}
    tables = metrics.get("table2") or {"main": metrics["by_task_source"]}
    out = []
    for subset, table in tables.items():
        suffix = "" if subset == "main" else f" {subset}"
        cols = sorted(
            ((task, s) for task, by in table.items() for s in by if s != ALL),
            key=lambda c: (order.get(c[0], len(order)), c[0], c[1]),
        )
        out += [(f"{TASK_ABBREV.get(task, task)} {source}{suffix}", table[task][source]) for task, source in cols]
    return out


def cells(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """What ``eval compare`` shows of a TimeCatch run: accuracy (%) per task × source of
    Table 2's main set (``"TD clevrer"``, …), then of the long set (``"TD craft long"``),
    tasks in paper order. A metrics.json written before the sets were split has one
    table over all lengths; its cells carry no suffix."""
    out: dict[str, float | None] = {}
    for label, cell in _compare_cells(metrics):
        acc = cell.get("accuracy")
        out[label] = None if acc is None or (isinstance(acc, float) and math.isnan(acc)) else 100 * acc
    return out


def cell_counts(metrics: Mapping[str, Any]) -> dict[str, tuple[int | None, int]]:
    """``{label: (correct, n)}`` behind each of :func:`cells`' accuracies, for the n and Wilson
    interval ``eval compare`` prints; a cell of a metrics.json that records no n is left out."""
    return {label: (cell.get("correct"), int(cell["n"])) for label, cell in _compare_cells(metrics) if "n" in cell}
