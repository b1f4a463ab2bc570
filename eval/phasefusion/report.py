"""PhaseFusion's ``report.md`` (paper 001 Table 1 layout), figures and ``eval compare`` cells.

:func:`report` (``judgetrain eval report RUN [--rerun-of RUN2]``) rebuilds a run's
``metrics.json`` (:mod:`judgetrain.eval.phasefusion.metrics`), ``report.md`` and figures
(:mod:`judgetrain.eval.phasefusion.plots`) from its ``predictions.jsonl`` and ``run.json``;
:func:`cells` gives ``judgetrain eval compare`` its numbers (and
:func:`judgetrain.eval.phasefusion.paired.paired` its p rows); :func:`print_summary` is
Table 1 in the terminal. Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.io import write_json, write_text

from ..core.markdown import RATE_NOTE, rate, rate_of
from ..core.runs import METRICS, PREDICTIONS, REPORT, RUN_INFO, PredictionsError, items_count, read_predictions, read_run
from .family import run_row
from .metrics import RATE_INTERVAL, compute_metrics, identity_differences, rerun_floor
from .plots import write_figures

__all__ = ["FIGURES", "cell_counts", "cells", "print_summary", "report"]

FIGURES = {
    "accuracy_vs_cost.png": "Accuracy against visual-prefix attention cost per arm",
    "phase_disagreement.png": "Answers that change with the phase, the origin and the re-run",
    "margin.png": "The one-pass margin: flips, calibration and risk–coverage",
}


# --------------------------------------------------------------------------- report.md


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def _ci(ci: Sequence[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return "–"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _rate(x: float | None, n: int) -> str:
    """A rate of ``n`` questions as every report prints it, ``75.0 [30.1, 95.4] (n=4)``: its
    count is ``x · n`` (each question right or wrong), its interval Wilson's."""
    return rate(None, None, n) if x is None or not n else rate_of(round(x * n), n)


def _mib(x: int | None) -> str:
    return "–" if x is None else f"{x / 2**20:.0f}"


def _markdown(metrics: Mapping[str, Any], info: Mapping[str, Any], run_dir: Path) -> str:
    """``report.md``: the run's header, then one section per measure that the run holds."""
    first = metrics["origins"][0] if metrics["origins"] else "0"
    sections = [
        _md_header(metrics, info),
        _md_table_a(metrics, first),
        _when(metrics["equivalence"], _md_equivalence),
        _md_table_b(metrics["table_b"]),
        _when(metrics.get("bh_family"), _md_family, _phases_of(metrics, info)),
        _when(metrics.get("phases"), _md_phases, first),
        _when(metrics.get("rerun_floor_across_runs"), _md_rerun_across_runs),
        _md_by_benchmark(metrics.get("by_benchmark") or {}),
        _when(metrics.get("phase_offset_split"), _md_phase_offset_split),
        _when(metrics.get("samplers"), _md_samplers),
        _when(metrics["margin"], _md_margin),
        _when(metrics.get("reliability"), _md_reliability, metrics),
        _when((metrics.get("certified_selection") or {}).get("rows") and metrics["certified_selection"], _md_certified),
        _when(metrics["table_a"]["rows"] and metrics, _md_latency),
        _when(metrics["cost"].get("decode"), _md_decoding, metrics["n_questions"]),
        _when(metrics["errors"], _md_errors),
        _md_figures(run_dir),
        _md_reproduce(info, run_dir),
    ]
    return "".join(part for section in sections for part in section)


def _when(value: Any, render: Callable[..., list[str]], *args: Any) -> list[str]:
    """The section ``render`` writes of ``value``; none when the run has no such measure (empty or missing)."""
    return render(value, *args) if value else []


def _md_header(metrics: Mapping[str, Any], info: Mapping[str, Any]) -> list[str]:
    model = info.get("model") or "model"
    name = Path(str(model).rstrip("/")).name + (
        f" + {Path(str(info['adapter']).rstrip('/')).name}" if info.get("adapter") else ""
    )
    md = [f"# PhaseFusion evaluation: {name}\n\n"]
    md.append(f"- model: `{model}`" + (f", adapter: `{info['adapter']}`" if info.get("adapter") else "") + "\n")
    if info.get("manifest"):
        md.append(f"- manifest: `{info['manifest']}`\n")
    md.append(
        f"- questions: {metrics['n_questions']}"
        + (f" ({metrics['n_errors']} not scored: see Errors)" if metrics["n_errors"] else "")
        + _unfinished(metrics)
        + "\n"
    )
    if info.get("budget"):
        md.append(
            f"- budget b = {info['budget']}, phases S = {info['phases']}, orderings K = {info['orderings']} "
            f"(identity first), origins δ = {', '.join(metrics['origins'])} (grid steps), prefill: {info.get('prefill')!r}\n"
        )
    if info.get("device"):
        md.append(f"- device: {info['device']}, dtype {info.get('model_dtype')}\n")
    return md


def _md_table_a(metrics: Mapping[str, Any], first: str) -> list[str]:
    ta = metrics["table_a"]
    ref, n = ta["reference"], ta["n"]
    md = [f"\n## A. Cost and accuracy per arm (identity ordering, δ = {first}, n = {n} paired questions)\n\n"]
    md.append(
        "Attention units: views · frames² of the visual prefix. Scoring s/q: median model time per question "
        "summed over all orderings, views batched, frame decoding excluded (Table S8's decoding + scoring at "
        "batch 1 is under Cost). Peak memory: "
        f"{_memory_words(metrics)}. {RATE_NOTE} "
        + (
            f"Reference: `{ref}`, the single pass with the most attention units; Δ (accuracy points), its 95% CI "
            f"(question bootstrap) and exact McNemar p are each arm's against `{ref}`; "
            if ref
            else "No reference arm (the run has no single pass with an origin): no Δ; "
        )
        + "p† is uncorrected (outside the confirmatory family, see Multiplicity). "
        "Order-avg.: accuracy averaged over the orderings (a mean of K accuracies, no Wilson interval); "
        "consensus: accuracy of the plurality answer over orderings; "
        "flip: the answer is not the same under every ordering.\n\n"
    )
    vs = f"`{ref}`" if ref else "ref. (none)"
    md.append(
        f"| arm | frames | attn. | scoring s/q | peak MiB | acc. % | Δ vs {vs} (points) | 95% CI of Δ | p† | "
        "order-avg. % | consensus % | flip % |\n"
    )
    md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in ta["rows"]:
        a, c = metrics["arms"][r["arm"]], metrics["cost"].get(r["arm"], {})
        delta = r.get("delta_vs_reference")
        md.append(
            f"| {r['arm']} | {a['frames']} | {a['attention_units']} | "
            f"{'–' if 'median_latency_s' not in c else format(c['median_latency_s'], '.3f')} | "
            f"{_mib(c.get('peak_memory_bytes'))} | {_rate(r['accuracy'], r['n'])} | "
            f"{'reference' if r['arm'] == ref else '–' if delta is None else format(100 * delta, '+.2f')} | "
            f"{_ci(r.get('delta_ci95'))} | {_p(r.get('mcnemar_p'))} | {_pct(r['order_avg_accuracy'])} | "
            f"{_rate(r['consensus_accuracy'], r['n'])} | {_rate(r['flip_rate'], r['n'])} |\n"
        )
    return md


def _md_equivalence(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    md = [
        "\nEquivalence (two one-sided tests, ±2.5 points, 90% CI; p uncorrected here, the test against Table A's "
        "reference is corrected under Multiplicity):\n\n| test | n | Δ points | 90% CI | p | equivalent |\n"
        "|---|---:|---:|---:|---:|---|\n"
    ]
    for t in tests:
        if t.get("pvalue") is None:
            md.append(f"| {t['a']} vs {t['b']} | {t['n']} | – | – | – | {t.get('note', '')} |\n")
        else:
            md.append(
                f"| {t['a']} vs {t['b']} | {t['n']} | {100 * t['difference']:+.2f} | {_ci(t['ci90'])} | "
                f"{_p(t['pvalue'])} | {'yes' if t['equivalent'] else 'no'} |\n"
            )
    return md


def _md_table_b(table_b: Sequence[Mapping[str, Any]]) -> list[str]:
    md = []
    for block in table_b:
        o0, o1 = block["origins"]
        md.append(f"\n## B. Answers changed under an origin shift (δ = {o0} → {o1}, identity ordering, n = {block['n']})\n\n")
        md.append(
            f"Every grid of an arm moves by the same absolute time, δ grid steps of the b-frame grid. {RATE_NOTE} 95% CI: "
            f"{RATE_INTERVAL}. p†: exact McNemar of the changed indicators against `fusion`, uncorrected (union "
            "vs fusion at the first shift is corrected under Multiplicity).\n\n"
        )
        md.append(
            "| arm | changed % | 95% CI | p† vs fusion | consensus changed % | acc. % at δ = "
            f"{o0} | acc. % at δ = {o1} |\n|---|---:|---:|---:|---:|---:|---:|\n"
        )
        for r in block["rows"]:
            md.append(
                f"| {r['arm']} | {_pct(r['changed']['rate'])} | {_ci(r['changed']['ci95'])} | "
                f"{_p(r.get('mcnemar_p_vs_fusion'))} | "
                f"{_pct(r['consensus_changed']['rate'])} | {_rate(r['accuracy_first'], block['n'])} | "
                f"{_rate(r['accuracy_shifted'], block['n'])} |\n"
            )
    return md


def _phases_of(metrics: Mapping[str, Any], info: Mapping[str, Any]) -> int | None:
    """S, the phases this run fused: the ``fusion`` arm's views, else ``run.json``'s ``phases``."""
    fusion = metrics["arms"].get("fusion") or {}
    return fusion.get("views") or info.get("phases")


def _md_family(bh: Mapping[str, Any], phases: int | None) -> list[str]:
    """The confirmatory family of Table S2: what it is, then each cell's tests with p and q. A row
    the paper words with its own S (3) is worded with this run's ``phases``."""
    o = bh.get("origins") or []
    md = [
        f"\n## Multiplicity: the confirmatory family (paper 001 Table S2; Benjamini–Hochberg, q = {bh['alpha']})\n\n"
        "The family is fixed in advance, as the paper's: its eight pre-registered comparisons, of which one run of "
        "one model computes the rows below, one family per benchmark × scoring cell (scoring: "
        f"{bh['scoring']}) and one for the run pooled over benchmarks. Arms the run scores besides never enter "
        "it: every other p in this report (marked †) is uncorrected and descriptive. Identity ordering; "
        f"origin shift {' → '.join(o) if len(o) > 1 else 'none'}. The step-up runs over the m = "
        f"{next(iter(bh['cells'].values()))['m'] if bh['cells'] else 0} members one run can compute, in every cell "
        "whichever arms ran; a member not computed here counts at p = 1 (conservative) and gets no q. "
        "Δ points: the accuracy difference, or for the "
        "margin rows the AUROC difference (margin − the other signal), × 100.\n\n"
        "| Table S2 row | how this run tests it |\n|---|---|\n"
    ]
    for m in bh["members"]:
        row = run_row(m["key"], phases)
        paper = "" if row == m["row"] else " (Table S2's row at the paper's S = 3)"
        md.append(f"| {row}{paper} | {m['test'] or 'not computed: ' + m['not_computed']} |\n")
    md.append("\n| cell | test | against | n | Δ points | p | q | rejected |\n|---|---|---|---:|---:|---:|---:|---|\n")
    for cell, c in bh["cells"].items():
        for t in c["tests"]:
            diff = t.get("difference")
            md.append(
                f"| {cell} | {run_row(t['key'], phases)} | {t.get('against', '–')} | {t.get('n', '–')} | "
                f"{'–' if diff is None else format(100 * diff, '+.2f')} | {_p(t.get('pvalue'))} | "
                f"{_p(t.get('qvalue'))} | {'yes' if t.get('reject') else ('no' if 'reject' in t else t.get('note', '–'))} |\n"
            )
    return md


def _md_certified(cs: Mapping[str, Any]) -> list[str]:
    """Table S10: certified coverage and test-half violations over seeded calibration / test splits."""
    md = [
        f"\n## Certified selective risk (App. H, Table S10: {cs['n_splits']} splits per cell)\n\n"
        "Per (model, benchmark) cell: the items are split in half at random (calibration / test, seeded by "
        "sha256, the same on every machine); fixed-sequence Learn-then-Test walks the thresholds of the "
        "calibration half from strict to permissive, starting at its "
        f"{cs['min_answered']} highest-scoring items, accepting each while the one-sided Clopper–Pearson upper "
        f"bound (confidence 1 − δ, δ = {cs['delta']:.2f}) on its selective error is at most α, and stops at the "
        "first failure. The test half is answered at the selected threshold: cov. is its mean coverage over "
        "splits, viol. the share of splits whose test-half selective error exceeds α (a split answering nothing "
        "does not violate). Each signal is scored on the answers its protocol deploys: the plurality over the K "
        "orderings for the vote share, the identity pass's for the others. Pooled: the mean over cells "
        f"({', '.join(f'`{c}`' for c in cs['cells'])}).\n\n"
    ]
    md.append("| arm | signal |" + "".join(f" α={a:.2f} viol. % | α={a:.2f} cov. % |" for a in cs["alphas"]) + " n per cell |\n")
    md.append("|---|---|" + "---:|---:|" * len(cs["alphas"]) + "---|\n")
    by: dict[tuple[str, str], dict[float, dict[str, Any]]] = {}
    for r in cs["rows"]:
        by.setdefault((r["arm"], r["signal"]), {})[r["alpha"]] = r
    for (arm, signal), per_alpha in by.items():
        cells = ", ".join(f"{k} {v['n']}" for k, v in next(iter(per_alpha.values()))["cells"].items())
        md.append(
            f"| {arm} | {signal} |"
            + "".join(
                f" {_pct(per_alpha[a]['violation_rate'])} | {_pct(per_alpha[a]['coverage'])} |" if a in per_alpha else " – | – |"
                for a in cs["alphas"]
            )
            + f" {cells} |\n"
        )
    return md


def _md_latency(metrics: Mapping[str, Any]) -> list[str]:
    """Table S8 beside this run's own scoring time: both measures, labelled."""
    md = [
        "\n## Cost (Table S8)\n\n"
        "Two measures per arm, medians over questions. Decoding + scoring at batch 1 (the paper's Table S8): "
        "this grid's frames decoded from the video alone, then each view scored by itself at the identity "
        "ordering, one after another; measured at the first origin on the questions of the manifest's first "
        "100 lines. Scoring only: the model time this run spent on one question for the arm at one origin "
        "(a question's origins averaged, then the median over questions), all orderings, views batched, "
        "frames already decoded.\n\n"
        "| arm | attn. | decoding + scoring, batch 1 (s/q) | of which decoding (s/q) | questions timed | "
        "scoring only, all orderings (s/q) | peak MiB |\n|---|---:|---:|---:|---:|---:|---:|\n"
    ]
    for r in metrics["table_a"]["rows"]:
        c = metrics["cost"].get(r["arm"], {})
        md.append(
            f"| {r['arm']} | {metrics['arms'][r['arm']]['attention_units']} | {_sec(c.get('median_batch1_s'))} | "
            f"{_sec(c.get('median_batch1_decode_s'))} | {c.get('n_batch1', 0)} | "
            f"{_sec(c.get('median_latency_s'))} | {_mib(c.get('peak_memory_bytes'))} |\n"
        )
    return md


def _sec(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _md_phases(ph: Mapping[str, Any], first: str) -> list[str]:
    md = [
        f"\n## Phase sensitivity (δ = {first}, n = {ph['n']})\n\n{RATE_NOTE} Order-avg.: a mean of K accuracies, no "
        "Wilson interval.\n\n| view | acc. % | order-avg. % | consensus % | flip % |\n|---|---:|---:|---:|---:|\n"
    ]
    for v, c in ph["accuracy"].items():
        md.append(
            f"| {v} | {_rate(c['accuracy'], c['n'])} | {_pct(c['order_avg_accuracy'])} | "
            f"{_rate(c['consensus_accuracy'], c['n'])} | {_rate(c['flip_rate'], c['n'])} |\n"
        )
    if ph.get("pairwise_disagreement"):
        md.append(
            f"\nConsensus answers (plurality over orderings) that differ between phases (95% CI: {RATE_INTERVAL}):"
            "\n\n| pair | differ % | 95% CI |\n|---|---:|---:|\n"
        )
        for p in ph["pairwise_disagreement"]:
            md.append(f"| {p['a']} vs {p['b']} | {_pct(p['rate'])} | {_ci(p['ci95'])} |\n")
        md.append(f"| mean of pairs | {_pct(ph['mean_pairwise_disagreement'])} | |\n")
        md.append(f"| any of the {ph['views']} phases | {_pct(ph['any_change']['rate'])} | {_ci(ph['any_change']['ci95'])} |\n")
    if ph.get("rerun_floor"):
        rf = ph["rerun_floor"]
        md.append(f"| re-run floor ({rf['compares']}) | {_pct(rf['rate'])} | {_ci(rf['ci95'])} |\n")
    return md


def _md_rerun_across_runs(rr: Mapping[str, Any]) -> list[str]:
    if rr.get("differences"):
        return [
            f"\nRe-run floor across runs: not computed. `{rr['other_run']}` is not a re-run of this run; its "
            "identity (run.json) differs (other run → this run):\n\n"
            + "".join(f"- {d}\n" for d in rr["differences"])
            + "\nA re-run floor compares runs of the same model, data and settings only.\n"
        ]
    if rr.get("rate") is None:
        return [f"\nRe-run floor across runs: `{rr['other_run']}` shares no scored question with this run.\n"]
    return [
        f"\nRe-run floor across runs (phase 0, consensus answers, against `{rr['other_run']}`, identity equal, "
        f"n = {rr['n']}): {_pct(rr['rate'])}% {_ci(rr['ci95'])} ({RATE_INTERVAL}).\n"
    ]


def _md_by_benchmark(bb: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if len(bb) <= 1:  # one benchmark: Table A already says it
        return []
    arms_b = list(next(iter(bb.values())))
    md = ["\n## Accuracy (%) per benchmark (identity ordering)\n\n| benchmark | n | " + " | ".join(arms_b) + " |\n"]
    md.append("|---|---:|" + "---:|" * len(arms_b) + "\n")
    for b, cells in bb.items():
        n = next(iter(cells.values()))["n"]
        md.append(f"| {b} | {n} | " + " | ".join(_pct(cells[a]["accuracy"]) for a in arms_b) + " |\n")
    return md


def _md_phase_offset_split(split: Mapping[str, Mapping[str, Any]]) -> list[str]:
    md = [
        "\n## Fusion gain by the time between adjacent phases (duration / (S·b); exploratory, §4.4)\n\n"
        "| offset | n | single % | fusion % | gain (points) |\n|---|---:|---:|---:|---:|\n"
    ]
    for name, c in split.items():
        md.append(f"| {name} | {c['n']} | {_pct(c['single'])} | {_pct(c['fusion'])} | {100 * c['gain']:+.2f} |\n")
    return md


def _md_samplers(sm: Mapping[str, Any]) -> list[str]:
    md = [
        f"\n## Deployed samplers (Fig. 2; n = {sm['n']})\n\n{RATE_NOTE}\n\n| sampler | acc. % | consensus % |\n|---|---:|---:|\n"
    ]
    for s, c in sm["accuracy"].items():
        md.append(f"| {s} | {_rate(c['accuracy'], c['n'])} | {_rate(c['consensus_accuracy'], c['n'])} |\n")
    md.append(f"\n| pair | consensus differs % | 95% CI ({RATE_INTERVAL}) |\n|---|---:|---:|\n")
    for p in sm["pairwise_disagreement"]:
        md.append(f"| {p['a']} vs {p['b']} | {_pct(p['rate'])} | {_ci(p['ci95'])} |\n")
    md.append(f"| any pair | {_pct(sm['any_change']['rate'])} | {_ci(sm['any_change']['ci95'])} |\n")
    return md


def _md_margin(margin: Mapping[str, Mapping[str, Any]]) -> list[str]:
    md = ["\n## Flagging order fragility by the margin (§4.3, App. H)\n\n"]
    md.append(
        "Margin: top-1 minus top-2 posterior at the identity ordering (for pooled arms, of the fused posterior). "
        "Flagged: the lowest-margin fifth. Certified thresholds (Learn-then-Test) are in the next section.\n\n"
    )
    md.append("| arm | n | flip % | AUROC flip | AUROC correct | flagged flip % | rest flip % | flips caught % |\n")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|\n")
    for arm, e in margin.items():
        ff = e["flagged_fifth"]
        md.append(
            f"| {arm} | {e['n']} | {_pct(e['flip_rate'])} | {_num(e['auroc_flip'])} | {_num(e['auroc_correct'])} | "
            f"{_pct(ff['flip_rate_flagged'])} | {_pct(ff['flip_rate_rest'])} | {_pct(ff['flips_caught'])} |\n"
        )
    return md


def _md_reliability(rel: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    """Table S11: every signal of the single pass on the same questions, for flips and correctness."""
    md = [
        f"\n## Reliability signals (App. I, Table S11; n = {rel['n']}, K = {rel['orderings']} orderings)\n\n"
        "AUROC of each signal of the single pass (low predicts a flip; high predicts that the identity pass is "
        "right, the target every signal shares). The vote share is the share of the K orderings giving their "
        "plurality answer (the paper's ten-pass vote at K = 10); it has no flip AUROC, the flip being read off the "
        "same orderings. p vs margin†: DeLong's test of two correlated AUROCs, two-sided, uncorrected (the MSP flip "
        "and vote-share correctness comparisons are Table S2's, corrected there). Fused margins are read on each "
        "arm's own answers.\n\n| signal | passes | AUROC flip | p vs margin† | AUROC correct | p vs margin† |\n"
        "|---|---:|---:|---:|---:|---:|\n"
    ]
    for r in rel["rows"]:
        md.append(
            f"| {r['signal']} | {r['passes']} | {_num(r['auroc_flip'])} | {_p(r['p_vs_margin_flip'])} | "
            f"{_num(r['auroc_correct'])} | {_p(r['p_vs_margin_correct'])} |\n"
        )
    for arm, r in metrics["margin"].items():  # the margin table's fused rows, each on its arm's own answers
        if arm.startswith("fusion"):
            md.append(
                f"| fused margin (`{arm}`, n = {r['n']}) | {metrics['arms'][arm]['views']} | {_num(r['auroc_flip'])} | – | "
                f"{_num(r['auroc_correct'])} | – |\n"
            )
    return md


def _md_decoding(dec: Mapping[str, Any], n_questions: int) -> list[str]:
    return [
        f"\n## Decoding\n\n{dec['decoding_passes']} decoding pass(es) for {n_questions} question(s) over "
        f"{dec['videos']} video(s) (one pass per video for the union of every grid); median "
        f"{dec['median_decode_s']:.3f} s and {dec['median_decoded_frames']:.0f} distinct frames per question.\n"
    ]


def _md_errors(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    md = ["\n## Errors\n\nQuestions not scored (rerun the command to retry them):\n\n"]
    for e in errors:
        md.append(f"- `{e['id']}` ({e.get('video')}): {e['error']}\n")
    return md


def _md_figures(run_dir: Path) -> list[str]:
    figures = [f for f in FIGURES if (run_dir / f).is_file()]
    if not figures:
        return []
    md = ["\n## Figures\n\n"]
    for f in figures:
        md.append(f"### {FIGURES[f]}\n\n[![{FIGURES[f]}]({f})]({f})\n\n")
    return md


def _md_reproduce(info: Mapping[str, Any], run_dir: Path) -> list[str]:
    md = ["\n## Reproduce\n\n```bash\n"]
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n```\n")
    return md


def _unfinished(metrics: Mapping[str, Any]) -> str:
    items = metrics.get("items") or {}
    left = items.get("selected", 0) - items.get("evaluated", 0) - metrics["n_errors"]
    return f" of {items['selected']} selected; {left} not scored yet (rerun the command to finish)" if left > 0 else ""


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _memory_words(metrics: Mapping[str, Any]) -> str:
    kinds = {c["memory_kind"] for c in metrics["cost"].values() if isinstance(c, dict) and c.get("memory_kind")}
    words = {
        "cuda_max_memory_allocated": "torch.cuda.max_memory_allocated over the arm's passes",
        "process_rss_peak": "peak resident set of the process during the arm's passes (CPU; reset per arm)",
        "process_rss_peak_since_start": "peak resident set of the process since it started (CPU)",
    }
    return "; ".join(words.get(k, k) for k in sorted(kinds)) or "not measured"


# --------------------------------------------------------------------------- entry points


def report(run_dir: str | os.PathLike, rerun_of: str | os.PathLike | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json``, ``report.md`` and the figures of a PhaseFusion run folder
    from its ``predictions.jsonl``, over the questions its ``run.json`` selects (which also
    names the model and the arms); ``judgetrain eval report RUN``. Returns the metrics as
    written (JSON types); ``metrics["items"]`` counts the questions selected and scored.

    ``rerun_of``: a second run of the same model, frames and prompts (another process or
    machine); its phase-0 consensus answers give the re-run floor across runs. The folder
    is remembered in ``run.json``, so later reports keep the comparison."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, f"run `judgetrain eval phasefusion --out {run_dir} …` first")
    if rerun_of is not None:
        _remember_rerun_of(run_dir, info, Path(rerun_of))
    metrics = compute_metrics(rows, info)
    # questions, not rows: a question has many rows and counts as evaluated once its closing row is in
    metrics["items"] = items_count([r for r in rows if r.get("kind") == "question"], info)
    if info.get("rerun_of") and (Path(info["rerun_of"]) / PREDICTIONS).is_file():
        metrics["rerun_floor_across_runs"] = _rerun_across(rows, info, Path(info["rerun_of"]), metrics["origins"])
    metrics["run"] = {
        k: info.get(k)
        for k in ("model", "adapter", "manifest", "budget", "phases", "orderings", "device", "model_dtype", "memory_kind")
    }
    write_figures(metrics, rows, run_dir, FIGURES)
    metrics["figures"] = [f for f in FIGURES if (run_dir / f).is_file()]
    write_json(run_dir / METRICS, metrics)
    metrics = json.loads((run_dir / METRICS).read_text())
    write_text(run_dir / REPORT, _markdown(metrics, info, run_dir))
    return metrics


def _rerun_across(
    rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any], other: Path, origins: Sequence[str]
) -> dict[str, Any]:
    """The re-run floor against ``other`` when both runs' identity blocks agree; otherwise
    what differs, and no floor: runs of other settings (K, the model, the data) are no re-run."""
    other_info = json.loads((other / RUN_INFO).read_text()) if (other / RUN_INFO).is_file() else {}
    differences = identity_differences(info, other_info)
    if differences:
        return {"other_run": str(other), "comparable": False, "differences": differences, "rate": None}
    floor = rerun_floor(rows, read_predictions(other / PREDICTIONS), origins[0] if origins else "0")
    return {"other_run": str(other), "comparable": True, **(floor or {"rate": None, "n": 0})}


def _remember_rerun_of(run_dir: Path, info: dict[str, Any], other: Path) -> None:
    """Check that ``other`` holds a PhaseFusion run and record it in ``run_dir``'s ``run.json``."""
    if not (other / PREDICTIONS).is_file():
        raise PredictionsError(
            f"--rerun-of {other} holds no {PREDICTIONS}; pass the --out folder of a second "
            "`judgetrain eval phasefusion` run of the same model, manifest and settings"
        )
    kind = json.loads((other / RUN_INFO).read_text()).get("evaluation") if (other / RUN_INFO).is_file() else None
    if kind not in (None, "phasefusion"):
        raise PredictionsError(f"--rerun-of {other} holds a {kind} run, not a PhaseFusion one")
    info["rerun_of"] = str(other.resolve())
    write_json(run_dir / RUN_INFO, info)


def cells(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """What ``judgetrain eval compare`` puts side by side, in %: per arm its accuracy and
    ordering flip rate at the identity ordering and first origin (Table 1A, on the paired
    questions), then per arm with an option posterior its median margin (top-1 minus top-2
    posterior at the identity ordering, ×100, on the questions that carry the arm; §4.3),
    then the answers it changed under each origin shift (Table 1B). :func:`paired` gives the
    paired tests of these columns between two runs."""

    def pct(x: Any) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100 * float(x)

    rows = (metrics.get("table_a") or {}).get("rows") or []
    out: dict[str, float | None] = {f"acc {r['arm']}": pct(r.get("accuracy")) for r in rows}
    out.update({f"flip {r['arm']}": pct(r.get("flip_rate")) for r in rows})
    out.update({f"margin {arm}": pct(e.get("median_margin")) for arm, e in (metrics.get("margin") or {}).items()})
    for block in metrics.get("table_b") or []:
        o0, o1 = block["origins"]
        out.update({f"changed {r['arm']} {o0}→{o1}": pct(r["changed"]["rate"]) for r in block["rows"]})
    return out


def cell_counts(metrics: Mapping[str, Any]) -> dict[str, tuple[int | None, int]]:
    """``{label: (k, n)}`` behind :func:`cells`, for ``eval compare``'s n and Wilson interval;
    the median margin is not a rate (k None: its n only)."""
    out: dict[str, tuple[int | None, int]] = {}
    for r in (metrics.get("table_a") or {}).get("rows") or []:
        if r.get("n") and r.get("accuracy") is not None:
            out[f"acc {r['arm']}"] = (round(r["accuracy"] * r["n"]), r["n"])
            out[f"flip {r['arm']}"] = (round(r["flip_rate"] * r["n"]), r["n"])
    out.update({f"margin {arm}": (None, e["n"]) for arm, e in (metrics.get("margin") or {}).items()})
    for block in metrics.get("table_b") or []:
        o0, o1 = block["origins"]
        out.update({f"changed {r['arm']} {o0}→{o1}": (r["changed"]["count"], r["changed"]["n"]) for r in block["rows"]})
    return out


def print_summary(metrics: Mapping[str, Any], out: str | os.PathLike) -> None:
    """Table 1 in the terminal, and where the files went."""
    from rich.console import Console
    from rich.table import Table

    out = Path(out)
    t = Table(title=f"PhaseFusion — {metrics['n_questions']} questions (identity ordering)")
    ref = metrics["table_a"]["reference"]
    for c in ("arm", "frames", "attn.", "s/q", "acc. %", f"Δ vs {ref or 'ref. (none)'}", "flip %", "changed %"):
        t.add_column(c, justify="left" if c in ("arm", "frames") else "right")
    changed = {r["arm"]: r["changed"]["rate"] for r in (metrics["table_b"][0]["rows"] if metrics["table_b"] else [])}
    for r in metrics["table_a"]["rows"]:
        a, c = metrics["arms"][r["arm"]], metrics["cost"].get(r["arm"], {})
        delta = r.get("delta_vs_reference")
        t.add_row(
            r["arm"],
            a["frames"],
            str(a["attention_units"]),
            "–" if "median_latency_s" not in c else f"{c['median_latency_s']:.3f}",
            _pct(r["accuracy"]),
            "–" if delta is None else f"{100 * delta:+.2f}",
            _pct(r["flip_rate"]),
            _pct(changed.get(r["arm"])),
        )
    Console().print(t)
    if metrics["n_errors"]:
        print(f"{metrics['n_errors']} question(s) could not be scored; see report.md (rerun to retry).", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)
