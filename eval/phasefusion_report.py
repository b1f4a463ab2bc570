"""PhaseFusion measures, ``metrics.json``, ``report.md`` (paper 001 Table 1 layout) and plots.

Everything here is a function of the rows of a run's ``predictions.jsonl`` (see
:mod:`judgetrain.eval.phasefusion`) for the questions its ``run.json`` selects;
``run.json``, when present, also names the model, the arms in the order asked and
the command. ``judgetrain eval report RUN [--rerun-of RUN2]`` calls :func:`report`;
``judgetrain eval compare`` reads :func:`cells`. Statistics come from
:mod:`judgetrain.eval.stats`. Unless a section says otherwise a measure is read
at the identity ordering and the first origin, on the questions that carry every
arm it compares (paper 001: "each uses the items that carry all of its arms").

Measures (paper 001 §2–4, App. A, E, F, H):

- per arm: accuracy (identity ordering; also averaged over orderings, and of the
  consensus answer — the plurality content index over orderings, ties to the
  lowest), ordering flip rate (the answer is not constant across orderings),
  cost (attention units ``views·b²``, median latency per question, peak memory);
- Table 1A: accuracy and its difference to the reference arm (the single-view arm
  of largest budget, e.g. ``dense32``) with a question-resampled bootstrap CI and
  the exact McNemar p; TOST equivalence of ``fusion`` against the reference (and
  the union pass) within ±2.5 points;
- Table 1B: answers changed between two origins (identity ordering), with
  Clopper–Pearson CIs and McNemar against ``fusion``; p-values of 1A, 1B and the
  TOSTs form one Benjamini–Hochberg family;
- phases: per-phase accuracy, pairwise disagreement of the phases' consensus
  answers, the any-of-S rate, and the re-run floor (phase 0 scored alone by
  ``single`` against phase 0 scored in the phase batch, at the consensus level);
- deployed samplers: their accuracies and pairwise consensus disagreement (Fig. 2);
- margin (top-1 minus top-2 posterior at the identity ordering): AUROC for
  predicting an ordering flip and correctness, the flagged lowest-margin fifth,
  and Learn-then-Test certified thresholds (App. H; the whole run is the
  calibration set), for the single pass and read off the fused posterior.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judgetrain.io import write_json
from judgetrain.plotting import pyplot

from . import stats
from .runs import METRICS, PREDICTIONS, REPORT, RUN_INFO, PredictionsError, items_count, read_predictions, read_run

__all__ = ["FIGURES", "arm_answers", "cells", "compute_metrics", "flagged_fifth", "print_summary", "report",
           "rerun_floor"]

FIGURES = {
    "accuracy_vs_cost.png": "Accuracy against visual-prefix attention cost per arm",
    "phase_disagreement.png": "Answers that change with the phase, the origin and the re-run",
    "margin.png": "The one-pass margin: flips, calibration and risk–coverage",
}
# The lowest-margin fifth is flagged (paper 001 §4.3).
FLAG_FRACTION = 0.2
LTT_ALPHAS = (0.30, 0.25)
POSTERIOR_POOLS = ("single", "arithmetic", "geometric")


# --------------------------------------------------------------------------- from rows to answers


def _collect(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Questions, errors, per-(origin, grid, id) posterior blocks [phase][ordering][option] and cost rows."""
    questions: dict[str, Mapping[str, Any]] = {}
    errors: list[Mapping[str, Any]] = []
    blocks: dict[tuple[str, str], dict[str, dict[tuple[int, int], list[float]]]] = {}
    costs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    grid_shape: dict[str, tuple[int, int]] = {}
    for r in rows:
        kind = r.get("kind")
        if kind == "question":
            questions[r["id"]] = r
        elif kind == "error":
            errors.append(r)
        elif kind == "pass":
            blocks.setdefault((r["origin"], r["grid"]), {}).setdefault(r["id"], {})[(r["phase"], r["ordering"])] = \
                r["posterior"]
        elif kind == "cost":
            costs.setdefault((r["origin"], r["grid"]), []).append(r)
            grid_shape[r["grid"]] = (int(r["views"]), int(r["budget"]))
    posteriors: dict[tuple[str, str], dict[str, list[list[list[float]]]]] = {}
    for key, by_id in blocks.items():
        for qid, cells in by_id.items():
            if qid not in questions:
                continue  # rows of an unfinished question (never in a repaired file)
            views = 1 + max(s for s, _ in cells)
            k = 1 + max(o for _, o in cells)
            posteriors.setdefault(key, {})[qid] = [[cells[(s, o)] for o in range(k)] for s in range(views)]
    return {"questions": questions, "errors": errors, "posteriors": posteriors, "costs": costs, "grids": grid_shape}


def arm_answers(block: Sequence[Sequence[Sequence[float]]], pool: str) -> tuple[list[int], list[list[float]] | None]:
    """One question's answers per ordering under an arm, and its posterior per ordering.

    ``block[s][k]`` is the content-space posterior of view ``s`` under ordering ``k``.
    ``pool``: ``"single"`` (view 0), ``"arithmetic"`` / ``"geometric"`` (pooled posterior,
    Eq. 2) or ``"vote"`` (plurality of the views' argmax answers, ties to the lowest
    content index; no posterior). Argmax ties go to the lowest content index.
    """
    from .phasefusion import pool as pool_posteriors

    n_orderings = len(block[0])
    if pool == "vote":
        answers = [stats.consensus_answer([int(np.argmax(view[k])) for view in block]) for k in range(n_orderings)]
        return answers, None
    if pool == "single":
        post = [list(map(float, block[0][k])) for k in range(n_orderings)]
    elif pool in ("arithmetic", "geometric"):
        post = [pool_posteriors([view[k] for view in block], pool) for k in range(n_orderings)]
    else:
        raise ValueError(f"unknown pooling {pool!r}")
    return [int(np.argmax(p)) for p in post], post


def flagged_fifth(margins: Sequence[float], flips: Sequence[bool], fraction: float = FLAG_FRACTION) -> dict[str, Any]:
    """Flag the lowest-margin ``fraction`` of items (``round(fraction·n)``, at least one; ties
    keep input order) and compare flip rates inside and outside the flagged set (§4.3).

    Returns ``{"n", "flagged", "flip_rate_flagged", "flip_rate_rest", "flips_caught"}``:
    ``flips_caught`` is the share of all flipping items that are flagged (``None``
    without flips), a rate is ``None`` for an empty set."""
    m = np.asarray(margins, dtype=float)
    f = np.asarray(flips, dtype=bool)
    if m.ndim != 1 or len(m) != len(f) or not len(m):
        raise stats.StatsError("flagged_fifth needs aligned, non-empty margins and flips")
    k = min(len(m), max(1, round(fraction * len(m))))
    flag = np.zeros(len(m), bool)
    flag[np.argsort(m, kind="stable")[:k]] = True
    rest = ~flag
    return {"n": int(len(m)), "flagged": int(k), "flip_rate_flagged": float(f[flag].mean()),
            "flip_rate_rest": float(f[rest].mean()) if rest.any() else None,
            "flips_caught": float(f[flag].sum() / f.sum()) if f.any() else None}


def _attempt(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A statistic, or ``None`` where the data leave it undefined (one class only, no variance…)."""
    try:
        out = fn(*args, **kwargs)
    except stats.StatsError:
        return None
    if isinstance(out, float) and not math.isfinite(out):
        return None
    return out


def _rate(k: int, n: int) -> dict[str, Any]:
    ci = stats.clopper_pearson(k, n) if n else (None, None)
    return {"rate": k / n if n else None, "count": int(k), "n": int(n), "ci95": list(ci)}


# --------------------------------------------------------------------------- the measures


def _arm_specs(info: Mapping[str, Any], grids: Mapping[str, tuple[int, int]]) -> list[dict[str, Any]]:
    from .phasefusion import parse_arms

    names = info.get("arms")
    if not names:  # no run.json: every arm the grids support
        names = [n for g in grids for n in (("fusion", "fusion-geo", "vote") if g == "phase" else (g,))]
    budget = info.get("budget") or (grids["single"][1] if "single" in grids else next(iter(grids.values()))[1])
    phases = info.get("phases") or (grids["phase"][0] if "phase" in grids else 1)
    arms, parsed = parse_arms(names, int(budget), int(phases))
    out = []
    for a in arms:
        g = parsed[a.grid]
        frames = f"{g.views}×{g.budget}f" if g.views > 1 else f"{g.budget}f"
        out.append({"name": a.name, "grid": a.grid, "pool": a.pool, "frames": frames, "views": g.views,
                    "budget": g.budget, "attention_units": g.attention_units, "origin_free": g.origin_free})
    return out


def _per_question(col: Mapping[str, Any], arm: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """Per question id: answers per ordering, identity posterior, correctness, consensus, flip, margin."""
    out = {}
    for qid, block in col["posteriors"].get((origin, arm["grid"]), {}).items():
        gold = int(col["questions"][qid]["answer"])
        answers, post = arm_answers(block, arm["pool"])
        consensus = stats.consensus_answer(answers)
        out[qid] = {"answers": answers, "identity": answers[0], "correct": answers[0] == gold,
                    "order_avg": float(np.mean([a == gold for a in answers])), "consensus": consensus,
                    "consensus_correct": consensus == gold, "flip": stats.flipped(answers),
                    "margin": stats.answer_margin(post[0]) if post is not None else None,
                    "top1": float(max(post[0])) if post is not None else None}
    return out


def _shared(ids_lists: Iterable[Iterable[str]], order: Sequence[str]) -> list[str]:
    sets = [set(x) for x in ids_lists]
    return [q for q in order if sets and all(q in s for s in sets)]


def _accuracy_cell(pq: Mapping[str, Mapping[str, Any]], ids: Sequence[str]) -> dict[str, Any]:
    n = len(ids)
    if not n:
        return {"n": 0, "accuracy": None, "se": None, "order_avg_accuracy": None, "consensus_accuracy": None,
                "flip_rate": None}
    acc = float(np.mean([pq[q]["correct"] for q in ids]))
    return {"n": n, "accuracy": acc, "se": math.sqrt(acc * (1 - acc) / n),
            "order_avg_accuracy": float(np.mean([pq[q]["order_avg"] for q in ids])),
            "consensus_accuracy": float(np.mean([pq[q]["consensus_correct"] for q in ids])),
            "flip_rate": float(np.mean([pq[q]["flip"] for q in ids]))}


def _cost(col: Mapping[str, Any], grid: str, origins: Sequence[str]) -> dict[str, Any]:
    rows = [r for o in origins for r in col["costs"].get((o, grid), [])]
    if not rows:
        return {}
    lat = [float(r["latency_s"]) for r in rows]
    return {"median_latency_s": float(np.median(lat)), "mean_latency_s": float(np.mean(lat)),
            "peak_memory_bytes": int(max(int(r["peak_memory_bytes"]) for r in rows)),
            "memory_kind": rows[0].get("memory_kind"), "passes_per_question": int(rows[0]["passes"]),
            "n_measurements": len(rows)}


def _table_a(arms: list[dict[str, Any]], pq: Mapping[str, dict], order: Sequence[str]) -> dict[str, Any]:
    ids = _shared((pq[a["name"]] for a in arms), order)
    singles = [a for a in arms if a["pool"] == "single" and a["views"] == 1 and not a["origin_free"]]
    ref = max(singles, key=lambda a: (a["attention_units"], a["name"] == "union"), default=None) if singles else None
    rows = []
    for a in arms:
        cell = _accuracy_cell(pq[a["name"]], ids)
        row = {"arm": a["name"], **cell}
        if ref is not None and a["name"] != ref["name"] and ids:
            x = [float(pq[a["name"]][q]["correct"]) for q in ids]
            y = [float(pq[ref["name"]][q]["correct"]) for q in ids]
            row["delta_vs_reference"] = float(np.mean(x) - np.mean(y))
            boot = _attempt(stats.paired_bootstrap_ci, x, y, seed=0)
            row["delta_ci95"] = list(boot["ci"]) if boot else None
            mc = _attempt(stats.mcnemar_exact, [bool(v) for v in x], [bool(v) for v in y])
            row["mcnemar_p"] = mc["pvalue"] if mc else None
        rows.append(row)
    return {"n": len(ids), "reference": ref["name"] if ref else None, "rows": rows}


def _tost(arms: list[dict[str, Any]], pq: Mapping[str, dict], order: Sequence[str], reference: str | None) -> list[dict]:
    names = {a["name"] for a in arms}
    out = []
    if "fusion" not in names:
        return out
    for other in dict.fromkeys(x for x in (reference, "union") if x in names and x != "fusion"):
        ids = _shared((pq["fusion"], pq[other]), order)
        x = [float(pq["fusion"][q]["correct"]) for q in ids]
        y = [float(pq[other][q]["correct"]) for q in ids]
        res = _attempt(stats.tost_paired, x, y)
        entry = {"a": "fusion", "b": other, "n": len(ids), "margin": stats.EQUIVALENCE_MARGIN}
        if res is None or not math.isfinite(res["pvalue"]) or not res["se"] > 0:  # a t-test needs variation
            entry.update(pvalue=None, note="undefined (fewer than two items, or no variation in the paired differences)")
        else:
            entry.update(difference=res["difference"], ci90=list(res["ci"]), pvalue=res["pvalue"],
                         equivalent=res["equivalent"])
        out.append(entry)
    return out


def _table_b(arms: list[dict[str, Any]], col: Mapping[str, Any], origins: Sequence[str], order: Sequence[str]) -> list[dict]:
    """Answers changed between the first origin and each other one, per origin-dependent arm."""
    shifting = [a for a in arms if not a["origin_free"]]
    out = []
    for shifted in origins[1:]:
        pq0 = {a["name"]: _per_question(col, a, origins[0]) for a in shifting}
        pq1 = {a["name"]: _per_question(col, a, shifted) for a in shifting}
        ids = _shared([*pq0.values(), *pq1.values()], order)
        changed = {a: [pq0[a][q]["identity"] != pq1[a][q]["identity"] for q in ids] for a in pq0}
        rows = []
        for a in shifting:
            name = a["name"]
            c = changed[name]
            row = {"arm": name, "changed": _rate(sum(c), len(ids)),
                   "consensus_changed": _rate(sum(pq0[name][q]["consensus"] != pq1[name][q]["consensus"] for q in ids), len(ids)),
                   "accuracy_first": float(np.mean([pq0[name][q]["correct"] for q in ids])) if ids else None,
                   "accuracy_shifted": float(np.mean([pq1[name][q]["correct"] for q in ids])) if ids else None}
            if "fusion" in changed and name != "fusion" and ids:
                mc = _attempt(stats.mcnemar_exact, c, changed["fusion"])
                row["mcnemar_p_vs_fusion"] = mc["pvalue"] if mc else None
            rows.append(row)
        out.append({"origins": [origins[0], shifted], "n": len(ids), "rows": rows})
    return out


def _phases(col: Mapping[str, Any], arms: list[dict[str, Any]], origin: str, order: Sequence[str]) -> dict[str, Any] | None:
    block = col["posteriors"].get((origin, "phase"), {})
    if not block:
        return None
    views = len(next(iter(block.values())))
    per_view = {}
    for s in range(views):
        view = {"name": f"phase {s}", "grid": "phase", "pool": "single"}
        pq = {}
        for qid, b in block.items():
            gold = int(col["questions"][qid]["answer"])
            answers, _ = arm_answers([b[s]], "single")
            consensus = stats.consensus_answer(answers)
            pq[qid] = {"correct": answers[0] == gold, "order_avg": float(np.mean([x == gold for x in answers])),
                       "consensus": consensus, "consensus_correct": consensus == gold, "flip": stats.flipped(answers)}
        per_view[view["name"]] = pq
    ids = _shared(per_view.values(), order)
    out: dict[str, Any] = {"views": views, "n": len(ids),
                           "accuracy": {v: _accuracy_cell(pq, ids) for v, pq in per_view.items()}}
    if views >= 2 and ids:
        consensus = {v: [pq[q]["consensus"] for q in ids] for v, pq in per_view.items()}
        pairs = stats.pairwise_disagreement(consensus)
        out["pairwise_disagreement"] = [{**p, "ci95": list(stats.clopper_pearson(p["changed"], p["n"]))} for p in pairs]
        out["mean_pairwise_disagreement"] = float(np.mean([p["rate"] for p in pairs]))
        anyc = stats.any_change_rate(consensus)
        out["any_change"] = _rate(round(anyc * len(ids)), len(ids))
    if any(a["name"] == "single" for a in arms):
        single = _per_question(col, {"grid": "single", "pool": "single"}, origin)
        ids_r = _shared((single, per_view["phase 0"]), order)
        if ids_r:
            k = sum(single[q]["consensus"] != per_view["phase 0"][q]["consensus"] for q in ids_r)
            out["rerun_floor"] = {**_rate(k, len(ids_r)),
                                  "compares": "single (phase 0 scored alone) vs phase 0 scored with the other phases"}
    return out


def rerun_floor(rows: Sequence[Mapping[str, Any]], other_rows: Sequence[Mapping[str, Any]],
                origin: str = "0") -> dict[str, Any] | None:
    """The re-run floor across two runs (paper 001 §2.1): phase 0 at ``origin`` of each run
    (the ``phase`` grid's view 0, else the ``single`` pass), compared at the consensus level
    on the questions both carry. Meaningful when the runs share model, frames and prompts;
    ``None`` when they share no such question."""
    consensus = []
    for r in (rows, other_rows):
        col = _collect(r)
        grid = "phase" if (origin, "phase") in col["posteriors"] else "single"
        consensus.append({q: x["consensus"] for q, x in _per_question(col, {"grid": grid, "pool": "single"}, origin).items()})
    ids = [q for q in consensus[0] if q in consensus[1]]
    if not ids:
        return None
    return _rate(sum(consensus[0][q] != consensus[1][q] for q in ids), len(ids))


def _samplers(col: Mapping[str, Any], arms: list[dict[str, Any]], origin: str, order: Sequence[str]) -> dict[str, Any] | None:
    conventions = [a for a in arms if a["origin_free"]]
    if len(conventions) < 2:
        return None
    pq = {a["name"]: _per_question(col, a, origin) for a in conventions}
    ids = _shared(pq.values(), order)
    if not ids:
        return None
    consensus = {a: [pq[a][q]["consensus"] for q in ids] for a in pq}
    pairs = stats.pairwise_disagreement(consensus)
    return {"n": len(ids), "accuracy": {a: _accuracy_cell(pq[a], ids) for a in pq},
            "pairwise_disagreement": [{**p, "ci95": list(stats.clopper_pearson(p["changed"], p["n"]))} for p in pairs],
            "any_change": _rate(round(stats.any_change_rate(consensus) * len(ids)), len(ids))}


def _margins(arms: list[dict[str, Any]], pq: Mapping[str, dict], order: Sequence[str]) -> dict[str, Any]:
    out = {}
    for a in arms:
        if a["pool"] not in POSTERIOR_POOLS:
            continue
        ids = [q for q in order if q in pq[a["name"]]]
        if not ids:
            continue
        m = [pq[a["name"]][q]["margin"] for q in ids]
        flips = [pq[a["name"]][q]["flip"] for q in ids]
        correct = [pq[a["name"]][q]["correct"] for q in ids]
        entry = {"n": len(ids), "median_margin": float(np.median(m)), "flip_rate": float(np.mean(flips)),
                 "auroc_flip": _attempt(stats.auroc, [-x for x in m], flips),
                 "auroc_correct": _attempt(stats.auroc, m, correct),
                 "flagged_fifth": flagged_fifth(m, flips), "ltt": []}
        for alpha in LTT_ALPHAS:
            res = _attempt(stats.learn_then_test, m, [not c for c in correct], alpha)
            if res is not None:
                entry["ltt"].append({k: res[k] for k in ("alpha", "delta", "threshold", "coverage", "answered",
                                                         "errors", "upper", "n")})
        out[a["name"]] = entry
    return out


def _by_benchmark(col: Mapping[str, Any], arms: list[dict[str, Any]], pq: Mapping[str, dict],
                  order: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Accuracy cells per benchmark × arm, on the questions carrying every arm."""
    ids = _shared(pq.values(), order)
    benchmarks = sorted({str(col["questions"][q].get("benchmark")) for q in ids})
    return {b: {a["name"]: _accuracy_cell(pq[a["name"]], [q for q in ids if str(col["questions"][q].get("benchmark")) == b])
                for a in arms} for b in benchmarks}


def _phase_offset_split(col: Mapping[str, Any], pq: Mapping[str, dict], order: Sequence[str], phases: int,
                        budget: int) -> dict[str, Any] | None:
    """Fusion's gain over the single pass where adjacent phases lie under / at least 1 s apart
    (offset = duration / (S·b); paper 001 §4.4, exploratory)."""
    if "fusion" not in pq or "single" not in pq or phases < 2:
        return None
    ids = [q for q in _shared((pq["fusion"], pq["single"]), order) if col["questions"][q].get("duration")]
    out = {}
    for name, keep in (("under 1 s", lambda d: d < 1.0), ("1 s or more", lambda d: d >= 1.0)):
        sel = [q for q in ids if keep(float(col["questions"][q]["duration"]) / (phases * budget))]
        if sel:
            f = float(np.mean([pq["fusion"][q]["correct"] for q in sel]))
            s1 = float(np.mean([pq["single"][q]["correct"] for q in sel]))
            out[name] = {"n": len(sel), "fusion": f, "single": s1, "gain": f - s1}
    return out or None


def _bh(table_a: dict, table_b: list[dict], tost: list[dict]) -> dict[str, Any]:
    """One Benjamini–Hochberg family over Table 1A, 1B and the equivalence tests; q-values are written back."""
    entries: list[tuple[str, dict, str]] = []
    for r in table_a["rows"]:
        if r.get("mcnemar_p") is not None:
            entries.append((f"A: {r['arm']} vs {table_a['reference']} (McNemar)", r, "mcnemar_p"))
    for block in table_b:
        for r in block["rows"]:
            if r.get("mcnemar_p_vs_fusion") is not None:
                entries.append((f"B {block['origins'][0]}→{block['origins'][1]}: {r['arm']} vs fusion (McNemar)", r,
                                "mcnemar_p_vs_fusion"))
    for t in tost:
        if t.get("pvalue") is not None:
            entries.append((f"TOST: {t['a']} vs {t['b']} (±{100 * t['margin']:.1f} points)", t, "pvalue"))
    if not entries:
        return {"alpha": 0.05, "tests": []}
    reject, q = stats.benjamini_hochberg([e[1][e[2]] for e in entries], 0.05)
    q_key = {"mcnemar_p": "mcnemar_q", "mcnemar_p_vs_fusion": "mcnemar_q_vs_fusion", "pvalue": "qvalue"}
    for (_, row, key), qv in zip(entries, q):
        row[q_key[key]] = qv
    return {"alpha": 0.05, "tests": [{"test": name, "pvalue": row[key], "qvalue": qv, "reject": rj}
                                     for (name, row, key), qv, rj in zip(entries, q, reject)]}


def compute_metrics(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every PhaseFusion measure from prediction rows (and ``run.json``'s ``info`` for the arm list)."""
    info = dict(info or {})
    col = _collect(rows)
    order = list(col["questions"])
    origins = list(info.get("origins") or sorted({o for o, _ in col["posteriors"]}, key=_origin_value))
    arms = [a for a in _arm_specs(info, col["grids"]) if any((o, a["grid"]) in col["posteriors"] for o in origins)] \
        if col["grids"] else []
    first = origins[0] if origins else "0"
    pq = {a["name"]: _per_question(col, a, first) for a in arms}
    table_a = _table_a(arms, pq, order) if arms else {"n": 0, "reference": None, "rows": []}
    tost = _tost(arms, pq, order, table_a["reference"])
    table_b = _table_b(arms, col, origins, order) if len(origins) > 1 else []
    bh = _bh(table_a, table_b, tost)
    metrics: dict[str, Any] = {
        "n_questions": len(order),
        "n_errors": len(col["errors"]),
        "errors": [{k: e.get(k) for k in ("id", "video", "line", "error")} for e in col["errors"]],
        "origins": origins,
        "arms": {a["name"]: {**a, "accuracy": _accuracy_cell(pq[a["name"]], [q for q in order if q in pq[a["name"]]])}
                 for a in arms},
        "table_a": table_a,
        "equivalence": tost,
        "table_b": table_b,
        "bh_family": bh,
        "by_benchmark": _by_benchmark(col, arms, pq, order) if arms else {},
        "phase_offset_split": _phase_offset_split(col, pq, order, _views(arms), _budget(arms)),
        "phases": _phases(col, arms, first, order),
        "samplers": _samplers(col, arms, first, order),
        "margin": _margins(arms, pq, order),
        "cost": {a["name"]: {"attention_units": a["attention_units"], **_cost(col, a["grid"], origins)} for a in arms},
    }
    qs = list(col["questions"].values())
    if qs:
        videos = {q["video"] for q in qs}
        metrics["cost"]["decode"] = {
            "median_decode_s": float(np.median([q["decode_s"] for q in qs])),
            "decoding_passes": int(sum(q["decode_passes"] for q in qs)), "videos": len(videos),
            "median_decoded_frames": float(np.median([q["decoded_frames"] for q in qs]))}
    return metrics


def _views(arms: Sequence[Mapping[str, Any]]) -> int:
    return max((a["views"] for a in arms), default=1)


def _budget(arms: Sequence[Mapping[str, Any]]) -> int:
    return next((a["budget"] for a in arms if a["grid"] in ("phase", "single")), 1)


def _origin_value(text: str) -> float:
    from judgetrain.video import parse_fraction

    return float(parse_fraction(text, "origin"))


# --------------------------------------------------------------------------- plots


def plot_accuracy_vs_cost(metrics: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Identity-ordering accuracy (±1 SE) against attention units per arm; pooled arms starred."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    rows = {r["arm"]: r for r in metrics["table_a"]["rows"]}
    singles = sorted((a for a in metrics["arms"].values() if a["pool"] == "single" and a["name"] in rows
                      and rows[a["name"]]["accuracy"] is not None), key=lambda a: a["attention_units"])
    if singles:
        ax.errorbar([a["attention_units"] for a in singles], [100 * rows[a["name"]]["accuracy"] for a in singles],
                    yerr=[100 * rows[a["name"]]["se"] for a in singles], marker="o", color="#4C72B0", capsize=3,
                    label="single pass")
        at: dict[tuple[int, float], list[str]] = {}
        for a in singles:  # arms on the same point (e.g. samplers of one budget) share one label
            at.setdefault((a["attention_units"], 100 * rows[a["name"]]["accuracy"]), []).append(a["name"])
        for xy, names in at.items():
            ax.annotate(", ".join(names), xy, fontsize=7, xytext=(4, 4), textcoords="offset points")
    styles = {"arithmetic": ("*", "#C44E52", 14), "geometric": ("P", "#8172B2", 9), "vote": ("D", "#55A868", 7)}
    for a in metrics["arms"].values():
        if a["pool"] in styles and rows.get(a["name"], {}).get("accuracy") is not None:
            marker, color, size = styles[a["pool"]]
            ax.errorbar([a["attention_units"]], [100 * rows[a["name"]]["accuracy"]], yerr=[100 * rows[a["name"]]["se"]],
                        marker=marker, color=color, markersize=size, capsize=3, linestyle="none",
                        label=f"{a['name']} ({a['frames']})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("visual-prefix attention units (views · frames²)")
    ax.set_ylabel("accuracy at the identity ordering (%)")
    ax.set_title(f"Accuracy vs cost (n = {metrics['table_a']['n']} paired questions)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_phase_disagreement(metrics: Mapping[str, Any], path: str | os.PathLike) -> None:
    """Left: pairwise phase disagreement of consensus answers, any-of-S and the re-run floor.
    Right: answers changed under each origin shift per arm."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.4))
    ph = metrics.get("phases") or {}
    bars = [(f"{p['a'].split()[-1]} vs {p['b'].split()[-1]}", p["rate"], p["ci95"]) for p in ph.get("pairwise_disagreement", [])]
    if ph.get("any_change"):
        bars.append((f"any of {ph['views']}", ph["any_change"]["rate"], ph["any_change"]["ci95"]))
    if ph.get("rerun_floor"):
        bars.append(("re-run", ph["rerun_floor"]["rate"], ph["rerun_floor"]["ci95"]))
    if metrics.get("rerun_floor_across_runs"):
        rr = metrics["rerun_floor_across_runs"]
        bars.append(("re-run\n(2 runs)", rr["rate"], rr["ci95"]))
    _bars(left, bars, "#4C72B0")
    left.set_title("Consensus answers that differ (phases)", fontsize=9)
    b_rows = []
    for block in metrics.get("table_b", []):
        for r in block["rows"]:
            b_rows.append((f"{r['arm']}\n{block['origins'][0]}→{block['origins'][1]}", r["changed"]["rate"], r["changed"]["ci95"]))
    _bars(right, b_rows, "#C44E52")
    right.set_title("Answers changed under an origin shift", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _bars(ax: Any, bars: Sequence[tuple[str, float | None, Sequence[float | None]]], color: str) -> None:
    if not bars:
        ax.text(0.5, 0.5, "not measured in this run", ha="center", va="center", transform=ax.transAxes, fontsize=8)
        ax.set_axis_off()
        return
    vals = [100 * (v or 0.0) for _, v, _ in bars]
    lo = [max(0.0, v - 100 * (ci[0] if ci[0] is not None else v / 100)) for v, (_, _, ci) in zip(vals, bars)]
    hi = [max(0.0, 100 * (ci[1] if ci[1] is not None else v / 100) - v) for v, (_, _, ci) in zip(vals, bars)]
    xs = range(len(bars))
    ax.bar(xs, vals, yerr=[lo, hi], color=color, capsize=3)
    ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=7)
    ax.set_ylabel("% of questions (95% CI)")
    ax.set_ylim(0, max(10.0, min(100.0, max(v + h for v, h in zip(vals, hi)) * 1.15)))


def plot_margin(metrics: Mapping[str, Any], per_question: Mapping[str, Sequence[Mapping[str, Any]]],
                path: str | os.PathLike) -> None:
    """Margin histograms split by ordering flip, reliability of the top-1 posterior, and
    risk–coverage when abstaining on the lowest margins (App. H)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.3))
    colors = ["#4C72B0", "#C44E52", "#55A868", "#8172B2", "#CCB974", "#64B5CD"]
    for i, (name, items) in enumerate(per_question.items()):
        color = colors[i % len(colors)]
        m = np.array([x["margin"] for x in items])
        flips = np.array([x["flip"] for x in items], bool)
        correct = np.array([x["correct"] for x in items], bool)
        top1 = np.array([x["top1"] for x in items])
        bins = np.linspace(0, 1, 11)
        if i == 0:
            axes[0].hist([m[flips], m[~flips]], bins=bins, label=[f"{name}: flips", f"{name}: stable"],
                         color=["#C44E52", "#4C72B0"], alpha=0.8)
        edges = np.quantile(top1, np.linspace(0, 1, min(6, len(top1)) + 1))
        idx = np.clip(np.searchsorted(edges, top1, side="right") - 1, 0, len(edges) - 2)
        xs = [top1[idx == k].mean() for k in range(len(edges) - 1) if (idx == k).any()]
        ys = [correct[idx == k].mean() for k in range(len(edges) - 1) if (idx == k).any()]
        axes[1].plot(xs, ys, marker="o", color=color, label=name)
        order = np.argsort(-m, kind="stable")
        answered = np.arange(1, len(m) + 1)
        axes[2].plot(answered / len(m), 100 * np.cumsum(correct[order]) / answered, color=color, label=name)
    axes[0].set_xlabel("margin (top-1 − top-2), identity ordering")
    axes[0].set_ylabel("questions")
    axes[0].set_title("Margin of flipping vs stable questions", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
    axes[1].set_xlabel("top-1 posterior (quantile bins)")
    axes[1].set_ylabel("accuracy")
    axes[1].set_title("Reliability", fontsize=9)
    axes[1].legend(fontsize=7)
    axes[2].set_xlabel("coverage (answered, highest margin first)")
    axes[2].set_ylabel("accuracy on answered (%)")
    axes[2].set_title("Risk–coverage by margin", fontsize=9)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- report.md


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}"


def _p(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"


def _ci(ci: Sequence[float | None] | None) -> str:
    if not ci or ci[0] is None:
        return "–"
    return f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def _mib(x: int | None) -> str:
    return "–" if x is None else f"{x / 2**20:.0f}"


def _markdown(metrics: Mapping[str, Any], info: Mapping[str, Any], run_dir: Path) -> str:
    model = info.get("model") or "model"
    name = Path(str(model).rstrip("/")).name + (f" + {Path(str(info['adapter']).rstrip('/')).name}" if info.get("adapter") else "")
    md = [f"# PhaseFusion evaluation: {name}\n\n"]
    md.append(f"- model: `{model}`" + (f", adapter: `{info['adapter']}`" if info.get("adapter") else "") + "\n")
    if info.get("manifest"):
        md.append(f"- manifest: `{info['manifest']}`\n")
    md.append(f"- questions: {metrics['n_questions']}" + (f" ({metrics['n_errors']} not scored: see Errors)" if metrics["n_errors"] else "")
              + _unfinished(metrics) + "\n")
    if info.get("budget"):
        md.append(f"- budget b = {info['budget']}, phases S = {info['phases']}, orderings K = {info['orderings']} "
                  f"(identity first), origins δ = {', '.join(metrics['origins'])} (grid steps), prefill: {info.get('prefill')}\n")
    if info.get("device"):
        md.append(f"- device: {info['device']}, dtype {info.get('model_dtype')}\n")

    ta = metrics["table_a"]
    first = metrics["origins"][0] if metrics["origins"] else "0"
    md.append(f"\n## A. Cost and accuracy per arm (identity ordering, δ = {first}, n = {ta['n']} paired questions)\n\n")
    md.append("Attention units: views · frames² of the visual prefix. Latency: median model time per question "
              "(all orderings; frame decoding excluded, see below). Peak memory: "
              f"{_memory_words(metrics)}. Δ, 95% CI (question bootstrap) and exact McNemar p: against "
              f"`{ta['reference'] or '–'}`; q: Benjamini–Hochberg over this report's tests. Order-avg.: accuracy "
              "averaged over the orderings; consensus: of the plurality answer over orderings; flip: the answer "
              "is not the same under every ordering.\n\n")
    md.append("| arm | frames | attn. | s/q | peak MiB | acc. % | Δ vs ref. | 95% CI | p | q | order-avg. % | consensus % | flip % |\n")
    md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in ta["rows"]:
        a, c = metrics["arms"][r["arm"]], metrics["cost"].get(r["arm"], {})
        delta = r.get("delta_vs_reference")
        md.append(f"| {r['arm']} | {a['frames']} | {a['attention_units']} | "
                  f"{'–' if 'median_latency_s' not in c else format(c['median_latency_s'], '.3f')} | "
                  f"{_mib(c.get('peak_memory_bytes'))} | {_pct(r['accuracy'])} | "
                  f"{'–' if delta is None else format(100 * delta, '+.2f')} | {_ci(r.get('delta_ci95'))} | "
                  f"{_p(r.get('mcnemar_p'))} | {_p(r.get('mcnemar_q'))} | {_pct(r['order_avg_accuracy'])} | "
                  f"{_pct(r['consensus_accuracy'])} | {_pct(r['flip_rate'])} |\n")
    if metrics["equivalence"]:
        md.append("\nEquivalence (two one-sided tests, ±2.5 points, 90% CI):\n\n| test | n | Δ points | 90% CI | p | q | equivalent |\n|---|---:|---:|---:|---:|---:|---|\n")
        for t in metrics["equivalence"]:
            if t.get("pvalue") is None:
                md.append(f"| {t['a']} vs {t['b']} | {t['n']} | – | – | – | – | {t.get('note', '')} |\n")
            else:
                md.append(f"| {t['a']} vs {t['b']} | {t['n']} | {100 * t['difference']:+.2f} | {_ci(t['ci90'])} | "
                          f"{_p(t['pvalue'])} | {_p(t.get('qvalue'))} | {'yes' if t['equivalent'] else 'no'} |\n")

    for block in metrics["table_b"]:
        o0, o1 = block["origins"]
        md.append(f"\n## B. Answers changed under an origin shift (δ = {o0} → {o1}, identity ordering, n = {block['n']})\n\n")
        md.append("Every grid of an arm moves by the same absolute time, δ grid steps of the b-frame grid. p: exact "
                  "McNemar of the changed indicators against `fusion`.\n\n")
        md.append("| arm | changed % | 95% CI | p vs fusion | q | consensus changed % | acc. % at δ = "
                  f"{o0} | acc. % at δ = {o1} |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
        for r in block["rows"]:
            md.append(f"| {r['arm']} | {_pct(r['changed']['rate'])} | {_ci(r['changed']['ci95'])} | "
                      f"{_p(r.get('mcnemar_p_vs_fusion'))} | {_p(r.get('mcnemar_q_vs_fusion'))} | "
                      f"{_pct(r['consensus_changed']['rate'])} | {_pct(r['accuracy_first'])} | {_pct(r['accuracy_shifted'])} |\n")

    ph = metrics.get("phases")
    if ph:
        md.append(f"\n## Phase sensitivity (δ = {first}, n = {ph['n']})\n\n| view | acc. % | order-avg. % | consensus % | flip % |\n|---|---:|---:|---:|---:|\n")
        for v, c in ph["accuracy"].items():
            md.append(f"| {v} | {_pct(c['accuracy'])} | {_pct(c['order_avg_accuracy'])} | {_pct(c['consensus_accuracy'])} | {_pct(c['flip_rate'])} |\n")
        if ph.get("pairwise_disagreement"):
            md.append("\nConsensus answers (plurality over orderings) that differ between phases:\n\n| pair | differ % | 95% CI |\n|---|---:|---:|\n")
            for p in ph["pairwise_disagreement"]:
                md.append(f"| {p['a']} vs {p['b']} | {_pct(p['rate'])} | {_ci(p['ci95'])} |\n")
            md.append(f"| mean of pairs | {_pct(ph['mean_pairwise_disagreement'])} | |\n")
            md.append(f"| any of the {ph['views']} phases | {_pct(ph['any_change']['rate'])} | {_ci(ph['any_change']['ci95'])} |\n")
        if ph.get("rerun_floor"):
            rf = ph["rerun_floor"]
            md.append(f"| re-run floor ({rf['compares']}) | {_pct(rf['rate'])} | {_ci(rf['ci95'])} |\n")
    rr = metrics.get("rerun_floor_across_runs")
    if rr:
        md.append(f"\nRe-run floor across runs (phase 0, consensus answers, against `{rr['other_run']}`, n = {rr['n']}): "
                  f"{_pct(rr['rate'])}% {_ci(rr['ci95'])}.\n")

    bb = metrics.get("by_benchmark") or {}
    if len(bb) > 1:
        arms_b = list(next(iter(bb.values())))
        md.append("\n## Accuracy (%) per benchmark (identity ordering)\n\n| benchmark | n | " + " | ".join(arms_b) + " |\n")
        md.append("|---|---:|" + "---:|" * len(arms_b) + "\n")
        for b, cells in bb.items():
            n = next(iter(cells.values()))["n"]
            md.append(f"| {b} | {n} | " + " | ".join(_pct(cells[a]["accuracy"]) for a in arms_b) + " |\n")
    split = metrics.get("phase_offset_split")
    if split:
        md.append("\n## Fusion gain by the time between adjacent phases (duration / (S·b); exploratory, §4.4)\n\n"
                  "| offset | n | single % | fusion % | gain (points) |\n|---|---:|---:|---:|---:|\n")
        for name, c in split.items():
            md.append(f"| {name} | {c['n']} | {_pct(c['single'])} | {_pct(c['fusion'])} | {100 * c['gain']:+.2f} |\n")

    sm = metrics.get("samplers")
    if sm:
        md.append(f"\n## Deployed samplers (Fig. 2; n = {sm['n']})\n\n| sampler | acc. % | consensus % |\n|---|---:|---:|\n")
        for s, c in sm["accuracy"].items():
            md.append(f"| {s} | {_pct(c['accuracy'])} | {_pct(c['consensus_accuracy'])} |\n")
        md.append("\n| pair | consensus differs % | 95% CI |\n|---|---:|---:|\n")
        for p in sm["pairwise_disagreement"]:
            md.append(f"| {p['a']} vs {p['b']} | {_pct(p['rate'])} | {_ci(p['ci95'])} |\n")
        md.append(f"| any pair | {_pct(sm['any_change']['rate'])} | {_ci(sm['any_change']['ci95'])} |\n")

    if metrics["margin"]:
        md.append("\n## Flagging order fragility by the margin (§4.3, App. H)\n\n")
        md.append("Margin: top-1 minus top-2 posterior at the identity ordering (for pooled arms, of the fused posterior). "
                  "Flagged: the lowest-margin fifth. LTT: fixed-sequence Learn-then-Test of the abstention threshold "
                  "with one-sided Clopper–Pearson bounds at δ = 10%, the whole run as calibration set.\n\n")
        md.append("| arm | n | flip % | AUROC flip | AUROC correct | flagged flip % | rest flip % | flips caught % |"
                  + "".join(f" LTT α={a:.2f}: threshold / coverage % |" for a in LTT_ALPHAS) + "\n")
        md.append("|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(LTT_ALPHAS) + "\n")
        for arm, e in metrics["margin"].items():
            ff = e["flagged_fifth"]
            ltt = {x["alpha"]: x for x in e["ltt"]}
            cells = []
            for a in LTT_ALPHAS:
                x = ltt.get(a)
                cells.append("–" if x is None else ("none / 0.0" if x["threshold"] is None else f"{x['threshold']:.3f} / {_pct(x['coverage'])}"))
            md.append(f"| {arm} | {e['n']} | {_pct(e['flip_rate'])} | {_num(e['auroc_flip'])} | {_num(e['auroc_correct'])} | "
                      f"{_pct(ff['flip_rate_flagged'])} | {_pct(ff['flip_rate_rest'])} | {_pct(ff['flips_caught'])} | "
                      + " | ".join(cells) + " |\n")

    dec = metrics["cost"].get("decode")
    if dec:
        md.append(f"\n## Decoding\n\n{dec['decoding_passes']} decoding pass(es) for {metrics['n_questions']} question(s) over "
                  f"{dec['videos']} video(s) (one pass per video for the union of every grid); median "
                  f"{dec['median_decode_s']:.3f} s and {dec['median_decoded_frames']:.0f} distinct frames per question.\n")
    if metrics["errors"]:
        md.append("\n## Errors\n\nQuestions not scored (rerun the command to retry them):\n\n")
        for e in metrics["errors"]:
            md.append(f"- `{e['id']}` ({e.get('video')}): {e['error']}\n")
    figures = [f for f in FIGURES if (run_dir / f).is_file()]
    if figures:
        md.append("\n## Figures\n\n")
        for f in figures:
            md.append(f"### {FIGURES[f]}\n\n[![{FIGURES[f]}]({f})]({f})\n\n")
    md.append("\n## Reproduce\n\n```bash\n")
    if info.get("command"):
        md.append(info["command"] + "\n")
    md.append(f"judgetrain eval report {shlex.quote(str(run_dir))}   # metrics, report and figures from {PREDICTIONS}\n```\n")
    return "".join(md)


def _unfinished(metrics: Mapping[str, Any]) -> str:
    items = metrics.get("items") or {}
    left = items.get("selected", 0) - items.get("evaluated", 0) - metrics["n_errors"]
    return f" of {items['selected']} selected; {left} not scored yet (rerun the command to finish)" if left > 0 else ""


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _memory_words(metrics: Mapping[str, Any]) -> str:
    kinds = {c.get("memory_kind") for c in metrics["cost"].values() if isinstance(c, dict) and c.get("memory_kind")}
    words = {"cuda_max_memory_allocated": "torch.cuda.max_memory_allocated over the arm's passes",
             "process_rss_peak": "peak resident set of the process during the arm's passes (CPU; reset per arm)",
             "process_rss_peak_since_start": "peak resident set of the process since it started (CPU)"}
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
        other = Path(rerun_of)
        if not (other / PREDICTIONS).is_file():
            raise PredictionsError(f"--rerun-of {other} holds no {PREDICTIONS}; pass the --out folder of a second "
                                   "`judgetrain eval phasefusion` run of the same model, manifest and settings")
        kind = json.loads((other / RUN_INFO).read_text()).get("evaluation") if (other / RUN_INFO).is_file() else None
        if kind not in (None, "phasefusion"):
            raise PredictionsError(f"--rerun-of {other} holds a {kind} run, not a PhaseFusion one")
        info["rerun_of"] = str(other.resolve())
        write_json(run_dir / RUN_INFO, info)
    metrics = compute_metrics(rows, info)
    # questions, not rows: a question has many rows and counts as evaluated once its closing row is in
    metrics["items"] = items_count([r for r in rows if r.get("kind") == "question"], info)
    if info.get("rerun_of") and (Path(info["rerun_of"]) / PREDICTIONS).is_file():
        floor = rerun_floor(rows, read_predictions(Path(info["rerun_of"]) / PREDICTIONS), metrics["origins"][0]
                            if metrics["origins"] else "0")
        metrics["rerun_floor_across_runs"] = None if floor is None else {**floor, "other_run": info["rerun_of"]}
    metrics["run"] = {k: info.get(k) for k in ("model", "adapter", "manifest", "budget", "phases", "orderings",
                                                "device", "model_dtype", "memory_kind")}
    for f in FIGURES:
        (run_dir / f).unlink(missing_ok=True)
    if metrics["table_a"]["rows"]:
        plot_accuracy_vs_cost(metrics, run_dir / "accuracy_vs_cost.png")
        plot_phase_disagreement(metrics, run_dir / "phase_disagreement.png")
        col = _collect(rows)
        first = metrics["origins"][0]
        singles = [n for n, a in metrics["arms"].items() if a["pool"] == "single"]
        shown = [n for n in dict.fromkeys(["single" if "single" in singles else next(iter(singles), None), "fusion"])
                 if n in metrics["arms"]]
        per_q = {n: items for n in shown if (items := list(_per_question(col, metrics["arms"][n], first).values()))}
        if per_q:
            plot_margin(metrics, per_q, run_dir / "margin.png")
    metrics["figures"] = [f for f in FIGURES if (run_dir / f).is_file()]
    write_json(run_dir / METRICS, metrics)
    metrics = json.loads((run_dir / METRICS).read_text())
    tmp = run_dir / f".{REPORT}.tmp"
    tmp.write_text(_markdown(metrics, info, run_dir))
    os.replace(tmp, run_dir / REPORT)
    return metrics


def cells(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """What ``judgetrain eval compare`` puts side by side, in %: per arm its accuracy and
    ordering flip rate at the identity ordering and first origin (Table 1A, on the paired
    questions), then the answers it changed under each origin shift (Table 1B)."""
    def pct(x: Any) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else 100 * float(x)

    rows = (metrics.get("table_a") or {}).get("rows") or []
    out: dict[str, float | None] = {f"acc {r['arm']}": pct(r.get("accuracy")) for r in rows}
    out.update({f"flip {r['arm']}": pct(r.get("flip_rate")) for r in rows})
    for block in metrics.get("table_b") or []:
        o0, o1 = block["origins"]
        out.update({f"changed {r['arm']} {o0}→{o1}": pct(r["changed"]["rate"]) for r in block["rows"]})
    return out


def print_summary(metrics: Mapping[str, Any], out: str | os.PathLike) -> None:
    """Table 1 in the terminal, and where the files went."""
    from rich.console import Console
    from rich.table import Table

    out = Path(out)
    t = Table(title=f"PhaseFusion — {metrics['n_questions']} questions (identity ordering)")
    for c in ("arm", "frames", "attn.", "s/q", "acc. %", "Δ vs ref.", "flip %", "changed %"):
        t.add_column(c, justify="left" if c in ("arm", "frames") else "right")
    changed = {r["arm"]: r["changed"]["rate"] for r in (metrics["table_b"][0]["rows"] if metrics["table_b"] else [])}
    for r in metrics["table_a"]["rows"]:
        a, c = metrics["arms"][r["arm"]], metrics["cost"].get(r["arm"], {})
        delta = r.get("delta_vs_reference")
        t.add_row(r["arm"], a["frames"], str(a["attention_units"]),
                  "–" if "median_latency_s" not in c else f"{c['median_latency_s']:.3f}", _pct(r["accuracy"]),
                  "–" if delta is None else f"{100 * delta:+.2f}", _pct(r["flip_rate"]), _pct(changed.get(r["arm"])))
    Console().print(t)
    if metrics["n_errors"]:
        print(f"{metrics['n_errors']} question(s) could not be scored; see report.md (rerun to retry).", flush=True)
    print(f"Predictions in {out / PREDICTIONS}; metrics in {out / METRICS}; report in {out / REPORT}", flush=True)
