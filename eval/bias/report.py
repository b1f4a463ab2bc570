"""``bias.json``, ``bias.md`` and the figures of ``judgetrain eval bias RUN [RUN …]``
(:func:`bias`: into the run folder for one run, into ``--out`` for several), from the runs'
``predictions.jsonl`` through :func:`.metrics.analyze`. ``bias.md`` prints every rate in % with
its Wilson 95% interval and n (:func:`judgetrain.eval.core.markdown.rate`).
Docs: "concepts/positional-bias.md".
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError
from judgetrain.io import no_nan, write_json, write_text

from ..core.markdown import RATE_NOTE, display_name, figures_markdown, fmt, pct, rate, rows_markdown
from ..core.runs import PREDICTIONS, read_run
from .metrics import KINDS, TITLES, analyze, has_data, position_cell, position_columns
from .plots import plot_first_option, plot_positions, plot_timecatch, plot_wavg

__all__ = ["BIAS_JSON", "BIAS_REPORT", "NothingToAnalyseError", "bias", "first_option_rate", "p_value", "presentation_summary"]

BIAS_JSON = "bias.json"
BIAS_REPORT = "bias.md"
# the parts of an analysis (metrics.analyze) that make a run worth a bias report
ANALYSES = ("prism_positions", "timecatch_positions", "first_option", "presentation_flips", "ordering")


class NothingToAnalyseError(UserError, ValueError):
    """A run of ``eval bias`` has no row any of its analyses reads; nothing is written."""


def _refuse_empty(loaded, analyses: Mapping[str, Mapping[str, Any]]) -> None:
    """Raise :class:`NothingToAnalyseError` naming every run with nothing to analyse, what its rows
    are, what ``eval bias`` needs and the fix."""
    empty = [
        (n, p, rows) for n, (p, _, rows) in zip(analyses, loaded, strict=True) if not any(k in analyses[n] for k in ANALYSES)
    ]
    if not empty:
        return
    described = []
    for n, p, rows in empty:
        tasks: dict[str, int] = {}
        for r in rows:
            tasks[str(r.get("task"))] = tasks.get(str(r.get("task")), 0) + 1
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(tasks.items())) or "no rows"
        described.append(f"{p / PREDICTIONS} ({n}: {len(rows)} rows; task {kinds})")
    raise NothingToAnalyseError(
        f"eval bias: nothing to analyse in {'; '.join(described)}. eval bias needs pairwise PRISM / MIRAGE records "
        "(rows of task 'pairwise' with a 'presentation' of gold_first / gold_second, or a semantic-1 / swap "
        "perturbation with a 'position'), a TimeCatch run (`judgetrain eval timecatch`), or an ordering-probe run "
        "(task 'ordering'). Nothing was written. Fix: leave "
        f"{'that run' if len(empty) == 1 else 'those runs'} out, or run `judgetrain eval judge` on a PRISM or MIRAGE "
        "build with pairwise records (or `eval timecatch`) and pass its --out folder."
    )


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


def p_value(p: float | None) -> str:
    """A p-value as the summary prints it: ``= 0.0293``, ``< 0.0001``, or ``= –``."""
    return "= –" if p is None else ("< 0.0001" if p < 1e-4 else f"= {p:.4f}")


def _first_part(f: Mapping[str, Any], label: str) -> str:
    return f"{label} {first_option_rate(f, 'first_rate', 'n_valid')}, binomial p {p_value(f['binomial_p'])}"


def _letter_part(f: Mapping[str, Any], label: str) -> str:
    return f"{label} {first_option_rate(f, 'letter_rate', 'n_valid')}, binomial p {p_value(f['letter_binomial_p'])}"


def _by_first_letter(f: Mapping[str, Any], what: str) -> str:
    """How a rate moves with the letter shown first: ``first`` (first-shown chosen) or ``A`` (A answered)."""
    if what == "first":
        a, b, verb = f["first_rate_a_first"], f["first_rate_b_first"], "the first-shown sequence is chosen"
    else:
        a, b, verb = f["letter_rate_a_first"], f["letter_rate_b_first"], "A is answered"
    return f"{verb} {pct(a)} % where A is shown first (n={f['n_a_first']}), {pct(b)} % where B is (n={f['n_b_first']})"


def presentation_summary(f: Mapping[str, Any]) -> str:
    """One line naming the presentation effect of a :func:`.metrics.first_option_bias` result
    (its ``verdict``): the significant rate first, the other after it, and when one rate is
    explained by the other preference, how the explained one moves with the letter shown first.
    Results written before the letter rate was added print the first-option rate alone."""
    if "verdict" not in f:
        return _first_part(f, "first-option rate")
    verdict, prefers = f["verdict"], "A" if f["letter_rate"] >= 0.5 else "B"
    letter, first = _letter_part(f, "answers A"), _first_part(f, "chooses the first-shown")
    if verdict == "letter":
        tail = f"; first-option rate {first_option_rate(f, 'first_rate', 'n_valid')}, binomial p {p_value(f['binomial_p'])}"
        if f["first_explained_by_letter"]:
            tail += f" — explained by the letter preference ({_by_first_letter(f, 'first')})"
        return f"letter bias (prefers {prefers}): {letter}{tail}"
    if verdict == "first_option":
        tail = f"; A rate {first_option_rate(f, 'letter_rate', 'n_valid')}, binomial p {p_value(f['letter_binomial_p'])}"
        if f["letter_explained_by_first"]:
            tail += f" — explained by the first-option preference ({_by_first_letter(f, 'A')})"
        return f"first-option bias: {first}{tail}"
    if verdict == "both":
        return (
            f"letter bias (prefers {prefers}): {letter}; first-option bias: {first} — each holds with the other "
            f"accounted for (Fisher p {p_value(f['letter_given_position_p'])}, {p_value(f['position_given_letter_p'])})"
        )
    if verdict == "unresolved":
        return (
            f"letter or first-option bias, unresolved: {first}; {letter} — neither rate depends significantly on "
            f"which letter is shown first (Fisher p {p_value(f['position_given_letter_p'])}, "
            f"{p_value(f['letter_given_position_p'])}): more items are needed to tell them apart"
        )
    if verdict == "confounded":
        shown = "A" if f["n_a_first"] else "B"
        return (
            f"first-option or letter bias, confounded: {first}; {letter} — {shown} is shown first in every item, so "
            "the two cannot be told apart; add a layout that shows the other letter first (P4 shows B first)"
        )
    return f"no presentation bias at p < {f['alpha']}: {_first_part(f, 'first-option rate')}; {_letter_part(f, 'A rate')}"


_PRESENTATION_NOTE = (
    "P(first): share of valid answers choosing the sequence shown first (B under P4); P(A): share answering the "
    "letter A. Binomial p: exact two-sided test of rate = 1/2 (an order-blind, letter-blind judge on balanced "
    "presentation), with its exact (Clopper–Pearson) 95% interval. The two rates count the same answers two ways "
    "(where A is shown first, choosing the first is answering A) and come apart only across layouts that show "
    "different letters first, so both are split by the letter shown first: a pure letter preference answers A "
    "as often whichever letter is first (its P(first) is high where A is first and low where B is); a pure "
    "first-option preference chooses the first-shown as often whichever letter that is (its P(A) moves with the "
    "layout). Fisher p (position ∣ letter): does P(A) depend on the letter shown first? — if not, a significant "
    "P(first) is explained by the letter preference. Fisher p (letter ∣ position): does P(first) depend on it? — if "
    "not, a significant P(A) is explained by the first-option preference. Balanced: the mean over the two letters "
    "shown first, what a design showing each first equally often would give; the Fisher tests test it against 1/2. "
)


def _verdict_markdown(fo: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The summary line of every run, then the letter × first-shown table."""
    md = "".join(f"- **{n}**: {presentation_summary(f)}\n" for n, f in fo) + "\n"
    fo = [(n, f) for n, f in fo if "verdict" in f]
    if not fo:
        return md
    return md + rows_markdown(
        (
            "run",
            "P(A)",
            "binomial p (A)",
            "A first / B first",
            "P(first ∣ A first)",
            "P(first ∣ B first)",
            "P(A ∣ B first)",
            "balanced P(first)",
            "Fisher p (position ∣ letter)",
            "balanced P(A)",
            "Fisher p (letter ∣ position)",
            "verdict",
        ),
        [
            [
                n,
                first_option_rate(f, "letter_rate", "n_valid"),
                fmt(f["letter_binomial_p"], 4),
                f"{f['n_a_first']} / {f['n_b_first']}",
                first_option_rate(f, "first_rate_a_first", "n_a_first"),
                first_option_rate(f, "first_rate_b_first", "n_b_first"),
                first_option_rate(f, "letter_rate_b_first", "n_b_first"),
                pct(f["first_rate_balanced"]),
                fmt(f["position_given_letter_p"], 4),
                pct(f["letter_rate_balanced"]),
                fmt(f["letter_given_position_p"], 4),
                f["verdict"].replace("_", "-"),
            ]
            for n, f in fo
        ],
    )


def _first_option_markdown(fo: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    md = (
        "\n## First-option and letter bias (paper 002 F.3, C.3)\n\n"
        f"{_PRESENTATION_NOTE}{RATE_NOTE} Gap: accuracy gold first − gold second, in points; Fisher p: presentation "
        "order × correct.\n\n"
    )
    md += _verdict_markdown(fo)
    gf, gs = ("n_gold_first", "n_gold_second")
    md += "\nBy presentation order of the gold sequence:\n\n"
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
    md += "\nBy layout (one letter is shown first in each, so P(first) and P(A) cannot be told apart within one):\n\n"
    md += rows_markdown(
        ("run", "layout", "P(first)", "binomial p", "Acc gold first", "Acc gold second", "P(A)"),
        [
            [
                n,
                lay,
                first_option_rate(x, "first_rate", "n_valid"),
                fmt(x["binomial_p"], 4),
                first_option_rate(x, "accuracy_gold_first", gf),
                first_option_rate(x, "accuracy_gold_second", gs),
                first_option_rate(x, "letter_rate", "n_valid"),
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
    _refuse_empty(loaded, analyses)
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
        figures.append(("First-option and letter bias", "bias_first_option.png"))
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
    md.append(figures_markdown(figures))
    cmd = "judgetrain eval bias " + " ".join(shlex.quote(str(p)) for p in paths)
    if len(paths) > 1:
        cmd += f" --names {shlex.quote(','.join(names))} --out {shlex.quote(str(out))}"
    md.append(f"\n## Reproduce\n\n```bash\n{cmd}\n```\n")
    return "".join(md)
