"""``bias.json``, ``bias.md`` and the figures of ``judgetrain eval bias RUN [RUN …]``
(:func:`bias`: into the run folder for one run, into ``--out`` for several), from the runs'
``predictions.jsonl`` through :func:`.metrics.analyze`. ``bias.md`` prints every rate in % with
its Wilson 95% interval and n (:func:`judgetrain.eval.core.markdown.rate`).
README: "`judgetrain eval judge`, `eval bias`".
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.io import no_nan, write_json, write_text

from ..core.markdown import RATE_NOTE, display_name, figures_markdown, fmt, pct, rate, rows_markdown
from ..core.runs import read_run
from .metrics import KINDS, TITLES, analyze, has_data, position_cell, position_columns
from .plots import plot_first_option, plot_positions, plot_timecatch, plot_wavg

__all__ = ["BIAS_JSON", "BIAS_REPORT", "bias", "first_option_rate"]

BIAS_JSON = "bias.json"
BIAS_REPORT = "bias.md"


def _grid_markdown(labelled: Sequence[tuple[Sequence[str], Mapping[str, Any]]], first: Sequence[str], text) -> str:
    """A markdown table of position tables: label columns, then one column per position and W_avg."""
    cols = position_columns([t for _, t in labelled])
    body = [[*labels, *("–" if (cell := position_cell(t, c)) is None else text(cell) for c in cols)] for labels, t in labelled]
    return rows_markdown((*first, *cols), body)


def _prism_text(c: Mapping[str, Any]) -> str:
    """A PRISM position cell: accuracy over valid answers (Wilson interval, n valid) / macro-F1, in %."""
    return f"{rate(c['accuracy'], c.get('accuracy_ci95'), c['n_valid'])} / {pct(c['f1'])}"


def _position_markdown(named: Sequence[tuple[str, Mapping[str, Any] | None]], first: str) -> str:
    md = ""
    for kind in KINDS:
        tables = [((n,), p[kind]["all"]) for n, p in named if p and kind in p and has_data(p[kind]["all"])]
        if tables:
            md += f"\n**{TITLES[kind]}** — accuracy [Wilson 95%] (n valid) / macro-F1, %\n\n"
            md += _grid_markdown(tables, (first,), _prism_text)
    return md


def first_option_rate(f: Mapping[str, Any], key: str, n_key: str) -> str:
    """Rate ``key`` of a :func:`.metrics.first_option_bias` result as the report prints it: in %,
    with its Wilson 95% interval (``wilson95[key]``) and its n (``f[n_key]``)."""
    return rate(f[key], (f.get("wilson95") or {}).get(key), f[n_key])


def _first_option_markdown(fo: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    md = (
        "\n## First-option bias (paper 002 F.3)\n\n"
        "P(first): share of valid answers choosing the sequence shown first; binomial p: exact two-sided test of "
        "P(first) = 1/2 (an order-blind judge on balanced presentation), with its exact (Clopper–Pearson) 95% "
        f"interval. {RATE_NOTE} Gap: accuracy gold first − gold second, in points; Fisher p: presentation "
        "order × correct.\n\n"
    )
    gf, gs = ("n_gold_first", "n_gold_second")
    md += rows_markdown(
        (
            "run",
            "gold first / second",
            "P(first)",
            "exact 95% CI",
            "binomial p",
            "P(first ∣ gold first)",
            "P(first ∣ gold second)",
            "P(A ∣ gold first)",
            "P(A ∣ gold second)",
            "Acc gold first",
            "Acc gold second",
            "gap",
            "Fisher p",
        ),
        [
            [
                n,
                f"{f[gf]} / {f[gs]}",
                first_option_rate(f, "first_rate", "n_valid"),
                f"{pct(f['first_rate_ci95'][0])}–{pct(f['first_rate_ci95'][1])}",
                fmt(f["binomial_p"], 4),
                first_option_rate(f, "first_rate_gold_first", gf),
                first_option_rate(f, "first_rate_gold_second", gs),
                first_option_rate(f, "a_rate_gold_first", gf),
                first_option_rate(f, "a_rate_gold_second", gs),
                first_option_rate(f, "accuracy_gold_first", gf),
                first_option_rate(f, "accuracy_gold_second", gs),
                "–" if f["accuracy_gap"] is None else f"{100 * f['accuracy_gap']:+.1f}",
                fmt(f["fisher_p"], 4),
            ]
            for n, f in fo
        ],
    )
    md += "\nBy layout:\n\n"
    md += rows_markdown(
        ("run", "layout", "P(first)", "binomial p", "Acc gold first", "Acc gold second"),
        [
            [
                n,
                lay,
                first_option_rate(x, "first_rate", "n_valid"),
                fmt(x["binomial_p"], 4),
                first_option_rate(x, "accuracy_gold_first", gf),
                first_option_rate(x, "accuracy_gold_second", gs),
            ]
            for n, f in fo
            for lay, x in f["by_layout"].items()
            if x
        ],
    )
    return md


def _ordering_markdown(od: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    md = (
        "\n## Chronological-ordering probe (paper 002 App. G)\n\n"
        "Answers by position: items answered in the label order (1, 2, …, n: the order shown) or its reverse. "
        f"{RATE_NOTE}\n\n"
    )
    return md + rows_markdown(
        ("run", "exact match", "invalid rate", "label order", "reverse", "by position (share)"),
        [
            [
                n,
                rate(o["exact_match"], o.get("exact_match_ci95"), o["n"]),
                rate(o["invalid_rate"], o.get("invalid_rate_ci95"), o["n"]),
                str(o["label_order"]),
                str(o["reverse_label_order"]),
                rate(o["by_position_share"], o.get("by_position_share_ci95"), o["n"]),
            ]
            for n, o in od
        ],
    )


def bias(
    runs: Sequence[str | os.PathLike], names: Sequence[str] | None = None, out: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Analyse the runs' predictions and write ``bias.json``, ``bias.md`` and figures to ``out``
    (default: the run folder when there is one run). Returns the ``bias.json`` contents."""
    paths = [Path(r) for r in runs]
    if not paths:
        raise ValueError("give at least one run folder")
    if out is None:
        if len(paths) > 1:
            raise ValueError("several runs: pass --out DIR for the combined analysis")
        out = paths[0]
    out = Path(out)
    loaded = []
    for p in paths:
        rows, info = read_run(p, "pass the --out folder of `judgetrain eval judge` or `eval timecatch`")
        loaded.append((p, info, rows))
    if names is None:
        names = [display_name(info, rows) for _, info, rows in loaded]
        if len(set(names)) < len(names):
            names = [p.name for p, _, _ in loaded]
    if len(names) != len(paths):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(paths)} run(s); give one per run")
    analyses = {n: analyze(rows) for n, (_, _, rows) in zip(names, loaded, strict=False)}
    out.mkdir(parents=True, exist_ok=True)

    figures: list[tuple[str, str]] = []
    named_pos = [(n, a.get("prism_positions")) for n, a in analyses.items()]
    if plot_positions(named_pos, out / "bias_positions.png", "PRISM Type-1 by position"):
        figures.append(("PRISM Type-1 accuracy by position (model × position)", "bias_positions.png"))
    by_layout = [
        (
            f"{n} · {lay}" if len(analyses) > 1 else lay,
            {k: {"all": v["by_layout"][lay]} for k, v in (a.get("prism_positions") or {}).items() if lay in v["by_layout"]},
        )
        for n, a in analyses.items()
        for lay in sorted({lay for v in (a.get("prism_positions") or {}).values() for lay in v["by_layout"]})
    ]
    if plot_positions(by_layout, out / "bias_positions_by_layout.png", "PRISM Type-1 by layout and position"):
        figures.append(("PRISM Type-1 accuracy by layout and position", "bias_positions_by_layout.png"))
    if plot_wavg(named_pos, out / "bias_wavg.png"):
        figures.append(("Weighted-average accuracy and macro-F1 over positions", "bias_wavg.png"))
    if plot_first_option([(n, a.get("first_option")) for n, a in analyses.items()], out / "bias_first_option.png"):
        figures.append(("First-option bias", "bias_first_option.png"))
    if plot_timecatch([(n, a.get("timecatch_positions")) for n, a in analyses.items()], out / "bias_timecatch_positions.png"):
        figures.append(("TimeCatch accuracy by true position", "bias_timecatch_positions.png"))

    result = no_nan(
        {
            "runs": {n: {"path": str(p), **analyses[n]} for n, (p, _, _) in zip(names, loaded, strict=False)},
            "figures": [f for _, f in figures],
        }
    )
    write_json(out / BIAS_JSON, result)
    write_text(out / BIAS_REPORT, _markdown(result, named_pos, by_layout, figures, paths, names, out))
    return result


def _markdown(result, named_pos, by_layout, figures, paths, names, out) -> str:
    runs = result["runs"]
    md = ["# Positional bias\n\n", "".join(f"- {n}: `{r['path']}` ({r['n']} predictions)\n" for n, r in runs.items())]
    if any(p for _, p in named_pos):
        md.append("\n## PRISM Type-1 by position (paper 002 Tables S4, S17a, S19)\n\n")
        md.append(
            "Accuracy over valid answers / macro-F1 (valid answers); W_avg weights positions by their valid answers "
            f"(for accuracy: correct of valid over all positions). {RATE_NOTE}\n"
        )
        md.append(_position_markdown(named_pos, "run"))
        md.append("\n## By layout (Tables S17b, S20)\n")
        md.append(_position_markdown(by_layout, "layout"))
    tc = [(n, r["timecatch_positions"]) for n, r in runs.items() if r.get("timecatch_positions")]
    if tc:
        md.append("\n## TimeCatch by true position of the anomaly\n\n")
        md.append(f"Accuracy on the anomalous records by 1-based frame of the anomaly (swap: the earlier frame). {RATE_NOTE}\n\n")
        md.append(
            _grid_markdown(
                [((n, task), t) for n, tasks in tc for task, t in tasks.items()],
                ("run", "task"),
                lambda c: rate(c["accuracy"], c.get("ci95"), c["n"]),
            )
        )
    fo = [(n, r["first_option"]) for n, r in runs.items() if r.get("first_option")]
    if fo:
        md.append(_first_option_markdown(fo))
    flips = [(n, r["presentation_flips"]) for n, r in runs.items() if r.get("presentation_flips")]
    if flips:
        md.append("\n## Presentation flips (twin pairs)\n\n")
        md.append(
            "Pairs whose preference changes when the two sequences swap places: each pairwise item of a `--twins` build "
            "is shown both ways round, and a pair flips when the judge prefers the gold sequence in one presentation "
            f"and the other sequence in the other (pairs with both answers valid). {RATE_NOTE}\n\n"
        )
        md.append("| run | flip rate | twin missing | invalid answer |\n| --- | --- | --- | --- |\n")
        md += [
            f"| {n} | {rate(f['rate'], f['ci95'], f['n'])} | {f['skipped']['twin_missing']} | {f['skipped']['invalid']} |\n"
            for n, f in flips
        ]
    od = [(n, r["ordering"]) for n, r in runs.items() if r.get("ordering")]
    if od:
        md.append(_ordering_markdown(od))
    if not any(
        k in r
        for r in runs.values()
        for k in ("prism_positions", "timecatch_positions", "first_option", "presentation_flips", "ordering")
    ):
        md.append("\nNo row of these runs has a position, a presentation order or an ordering answer to analyse.\n")
    md.append(figures_markdown(figures))
    cmd = "judgetrain eval bias " + " ".join(shlex.quote(str(p)) for p in paths)
    if len(paths) > 1:
        cmd += f" --names {shlex.quote(','.join(names))} --out {shlex.quote(str(out))}"
    md.append(f"\n## Reproduce\n\n```bash\n{cmd}\n```\n")
    return "".join(md)
