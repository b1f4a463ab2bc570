"""Every PhaseFusion measure, from a run's prediction rows: what ``metrics.json`` holds.

:func:`compute_metrics` (paper 001 §2–4, App. A, E, F, H): per arm accuracy, ordering
flips and cost (Table S8: scoring only, and decoding + scoring at batch 1); Table 1A
(difference to the largest single pass: bootstrap CI, exact McNemar; TOST of ``fusion``
within ±2.5 points); Table 1B (answers changed under an origin shift); the confirmatory
Benjamini–Hochberg family of Table S2 (every other p uncorrected); phase sensitivity,
deployed samplers, accuracy per benchmark, margin flagging, Table S11's reliability
signals and Table S10's in-cell Learn-then-Test. Rates carry Wilson 95% intervals, as the paper's brackets do.
Unless a measure says otherwise it is read at the identity ordering and the first
origin, on the questions that carry every arm it compares. :func:`rerun_floor` compares
two runs. Statistics come from :mod:`judgetrain.eval.core.stats`. Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core import stats
from ..core.runs import identity_changes
from .answers import arm_answers, arm_specs, collect_rows, per_question_answers
from .family import certified_selection, confirmatory_family, tost_reference
from .signals import reliability_signals

__all__ = [
    "FLAG_FRACTION",
    "POSTERIOR_POOLS",
    "RATE_INTERVAL",
    "arm_cost",
    "compute_metrics",
    "flagged_fifth",
    "identity_differences",
    "rerun_floor",
]

# The lowest-margin fifth is flagged (paper 001 §4.3).
FLAG_FRACTION = 0.2
# The interval of every flip / change / disagreement rate: the paper's brackets are Wilson's
# (App. A: 136 of 593 is 22.9 % [19.7, 26.5]); Clopper–Pearson stays where App. H uses it (LTT).
RATE_INTERVAL = "Wilson score"
POSTERIOR_POOLS = ("single", "arithmetic", "geometric")


# --------------------------------------------------------------------------- statistics helpers


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
    return {
        "n": int(len(m)),
        "flagged": int(k),
        "flip_rate_flagged": float(f[flag].mean()),
        "flip_rate_rest": float(f[rest].mean()) if rest.any() else None,
        "flips_caught": float(f[flag].sum() / f.sum()) if f.any() else None,
    }


def _rate(k: int, n: int) -> dict[str, Any]:
    ci = stats.wilson(k, n) if n else (None, None)
    return {"rate": k / n if n else None, "count": int(k), "n": int(n), "ci95": list(ci)}


# --------------------------------------------------------------------------- the measures


def _shared(ids_lists: Iterable[Iterable[str]], order: Sequence[str]) -> list[str]:
    sets = [set(x) for x in ids_lists]
    return [q for q in order if sets and all(q in s for s in sets)]


def _accuracy_cell(pq: Mapping[str, Mapping[str, Any]], ids: Sequence[str]) -> dict[str, Any]:
    n = len(ids)
    if not n:
        return {"n": 0, "accuracy": None, "se": None, "order_avg_accuracy": None, "consensus_accuracy": None, "flip_rate": None}
    acc = float(np.mean([pq[q]["correct"] for q in ids]))
    return {
        "n": n,
        "accuracy": acc,
        "se": math.sqrt(acc * (1 - acc) / n),
        "order_avg_accuracy": float(np.mean([pq[q]["order_avg"] for q in ids])),
        "consensus_accuracy": float(np.mean([pq[q]["consensus_correct"] for q in ids])),
        "flip_rate": float(np.mean([pq[q]["flip"] for q in ids])),
    }


def arm_cost(col: Mapping[str, Any], grid: str, origins: Sequence[str]) -> dict[str, Any]:
    """One grid's cost: scoring time per question (a question's origins averaged; median, mean
    and ``n_latency`` over questions), peak memory, passes, and Table S8's batch-1 measures."""
    rows = [r for o in origins for r in col["costs"].get((o, grid), [])]
    if not rows:
        return {}
    by_question: dict[str, list[float]] = {}
    for r in rows:  # one row per question and origin: a question's scoring time is the mean over its origins
        by_question.setdefault(str(r["id"]), []).append(float(r["latency_s"]))
    lat = [float(np.mean(v)) for v in by_question.values()]
    out = {
        "median_latency_s": float(np.median(lat)),
        "mean_latency_s": float(np.mean(lat)),
        "n_latency": len(lat),
        "peak_memory_bytes": int(max(int(r["peak_memory_bytes"]) for r in rows)),
        "memory_kind": rows[0].get("memory_kind"),
        "passes_per_question": int(rows[0]["passes"]),
        "n_measurements": len(rows),
    }
    # Table S8's measure: this grid's frames decoded alone, then its views scored one at a
    # time at the identity ordering (batch 1); timed at the first origin on some questions
    b1 = [r for r in rows if r.get("batch1_score_s") is not None]
    if b1:
        total = [float(r["batch1_decode_s"]) + float(r["batch1_score_s"]) for r in b1]
        out.update(
            median_batch1_s=float(np.median(total)),
            mean_batch1_s=float(np.mean(total)),
            median_batch1_decode_s=float(np.median([float(r["batch1_decode_s"]) for r in b1])),
            n_batch1=len(b1),
        )
    return out


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
            boot = stats.or_none(stats.paired_bootstrap_ci, x, y, seed=0)
            row["delta_ci95"] = list(boot["ci"]) if boot else None
            mc = stats.or_none(stats.mcnemar_exact, [bool(v) for v in x], [bool(v) for v in y])
            row["mcnemar_p"] = mc["pvalue"] if mc else None
        rows.append(row)
    return {"n": len(ids), "reference": ref["name"] if ref else None, "rows": rows}


def _tost(arms: list[dict[str, Any]], pq: Mapping[str, dict], order: Sequence[str], reference: str | None) -> list[dict]:
    names = {a["name"] for a in arms}
    out: list[dict] = []
    if "fusion" not in names:
        return out
    for other in dict.fromkeys(x for x in (reference, "union") if x is not None and x in names and x != "fusion"):
        ids = _shared((pq["fusion"], pq[other]), order)
        x = [float(pq["fusion"][q]["correct"]) for q in ids]
        y = [float(pq[other][q]["correct"]) for q in ids]
        res = stats.or_none(stats.tost_paired, x, y)
        entry: dict[str, Any] = {"a": "fusion", "b": other, "n": len(ids), "margin": stats.EQUIVALENCE_MARGIN}
        if res is None or not math.isfinite(res["pvalue"]) or not res["se"] > 0:  # a t-test needs variation
            entry.update(pvalue=None, note="undefined (fewer than two items, or no variation in the paired differences)")
        else:
            entry.update(difference=res["difference"], ci90=list(res["ci"]), pvalue=res["pvalue"], equivalent=res["equivalent"])
        out.append(entry)
    return out


def _table_b(arms: list[dict[str, Any]], col: Mapping[str, Any], origins: Sequence[str], order: Sequence[str]) -> list[dict]:
    """Answers changed between the first origin and each other one, per origin-dependent arm."""
    shifting = [a for a in arms if not a["origin_free"]]
    out = []
    for shifted in origins[1:]:
        pq0 = {a["name"]: per_question_answers(col, a, origins[0]) for a in shifting}
        pq1 = {a["name"]: per_question_answers(col, a, shifted) for a in shifting}
        ids = _shared([*pq0.values(), *pq1.values()], order)
        changed = {a: [pq0[a][q]["identity"] != pq1[a][q]["identity"] for q in ids] for a in pq0}
        rows = []
        for a in shifting:
            name = a["name"]
            c = changed[name]
            row = {
                "arm": name,
                "changed": _rate(sum(c), len(ids)),
                "consensus_changed": _rate(sum(pq0[name][q]["consensus"] != pq1[name][q]["consensus"] for q in ids), len(ids)),
                "accuracy_first": float(np.mean([pq0[name][q]["correct"] for q in ids])) if ids else None,
                "accuracy_shifted": float(np.mean([pq1[name][q]["correct"] for q in ids])) if ids else None,
            }
            if "fusion" in changed and name != "fusion" and ids:
                mc = stats.or_none(stats.mcnemar_exact, c, changed["fusion"])
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
            pq[qid] = {
                "correct": answers[0] == gold,
                "order_avg": float(np.mean([x == gold for x in answers])),
                "consensus": consensus,
                "consensus_correct": consensus == gold,
                "flip": stats.flipped(answers),
            }
        per_view[view["name"]] = pq
    ids = _shared(per_view.values(), order)
    out: dict[str, Any] = {"views": views, "n": len(ids), "accuracy": {v: _accuracy_cell(pq, ids) for v, pq in per_view.items()}}
    if views >= 2 and ids:
        by_view = {v: [pq[q]["consensus"] for q in ids] for v, pq in per_view.items()}
        pairs = stats.pairwise_disagreement(by_view)
        out["pairwise_disagreement"] = [{**p, "ci95": list(stats.wilson(p["changed"], p["n"]))} for p in pairs]
        out["mean_pairwise_disagreement"] = float(np.mean([p["rate"] for p in pairs]))
        anyc = stats.any_change_rate(by_view)
        out["any_change"] = _rate(round(anyc * len(ids)), len(ids))
    if any(a["name"] == "single" for a in arms):
        single = per_question_answers(col, {"grid": "single", "pool": "single"}, origin)
        ids_r = _shared((single, per_view["phase 0"]), order)
        if ids_r:
            k = sum(single[q]["consensus"] != per_view["phase 0"][q]["consensus"] for q in ids_r)
            out["rerun_floor"] = {
                **_rate(k, len(ids_r)),
                "compares": "single (phase 0 scored alone) vs phase 0 scored with the other phases",
            }
    return out


def rerun_floor(
    rows: Sequence[Mapping[str, Any]], other_rows: Sequence[Mapping[str, Any]], origin: str = "0"
) -> dict[str, Any] | None:
    """The re-run floor across two runs (paper 001 §2.1): phase 0 at ``origin`` of each run
    (the ``phase`` grid's view 0, else the ``single`` pass), compared at the consensus level
    on the questions both carry. Meaningful when the runs share model, frames and prompts;
    ``None`` when they share no such question."""
    consensus = []
    for r in (rows, other_rows):
        col = collect_rows(r)
        grid = "phase" if (origin, "phase") in col["posteriors"] else "single"
        consensus.append(
            {q: x["consensus"] for q, x in per_question_answers(col, {"grid": grid, "pool": "single"}, origin).items()}
        )
    ids = [q for q in consensus[0] if q in consensus[1]]
    if not ids:
        return None
    return _rate(sum(consensus[0][q] != consensus[1][q] for q in ids), len(ids))


def identity_differences(info: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """What differs between two runs' ``run.json`` identity blocks (``field: other → this``,
    the other run being the older one), empty when the re-run floor may compare them.
    Identities are content hashes, so a model or adapter at another path (another
    machine) is the same; videos only one run read are no difference
    (:func:`~judgetrain.eval.core.runs.identity_changes`)."""
    if not info.get("identity") or not other.get("identity"):
        missing = [w for w, x in (("this run", info), ("the other run", other)) if not x.get("identity")]
        return [f"identity: not recorded for {' and '.join(missing)} (no run.json, or one of an older judgetrain)"]
    return identity_changes(other["identity"], info["identity"])


def _samplers(col: Mapping[str, Any], arms: list[dict[str, Any]], origin: str, order: Sequence[str]) -> dict[str, Any] | None:
    conventions = [a for a in arms if a["origin_free"]]
    if len(conventions) < 2:
        return None
    pq = {a["name"]: per_question_answers(col, a, origin) for a in conventions}
    ids = _shared(pq.values(), order)
    if not ids:
        return None
    consensus = {a: [pq[a][q]["consensus"] for q in ids] for a in pq}
    pairs = stats.pairwise_disagreement(consensus)
    return {
        "n": len(ids),
        "accuracy": {a: _accuracy_cell(pq[a], ids) for a in pq},
        "pairwise_disagreement": [{**p, "ci95": list(stats.wilson(p["changed"], p["n"]))} for p in pairs],
        "any_change": _rate(round(stats.any_change_rate(consensus) * len(ids)), len(ids)),
    }


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
        entry = {
            "n": len(ids),
            "median_margin": float(np.median(m)),
            "flip_rate": float(np.mean(flips)),
            "auroc_flip": stats.or_none(stats.auroc, [-x for x in m], flips),
            "auroc_correct": stats.or_none(stats.auroc, m, correct),
            "flagged_fifth": flagged_fifth(m, flips),
        }
        out[a["name"]] = entry
    return out


def _by_benchmark(
    col: Mapping[str, Any], arms: list[dict[str, Any]], pq: Mapping[str, dict], order: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Accuracy cells per benchmark × arm, on the questions carrying every arm."""
    ids = _shared(pq.values(), order)
    benchmarks = sorted({str(col["questions"][q].get("benchmark")) for q in ids})
    return {
        b: {
            a["name"]: _accuracy_cell(pq[a["name"]], [q for q in ids if str(col["questions"][q].get("benchmark")) == b])
            for a in arms
        }
        for b in benchmarks
    }


def _phase_offset_split(
    col: Mapping[str, Any], pq: Mapping[str, dict], order: Sequence[str], phases: int, budget: int
) -> dict[str, Any] | None:
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


def compute_metrics(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every PhaseFusion measure from prediction rows (and ``run.json``'s ``info`` for the arm list)."""
    info = dict(info or {})
    col = collect_rows(rows)
    order = list(col["questions"])
    origins = list(info.get("origins") or sorted({o for o, _ in col["posteriors"]}, key=_origin_value))
    arms = (
        [a for a in arm_specs(info, col["grids"]) if any((o, a["grid"]) in col["posteriors"] for o in origins)]
        if col["grids"]
        else []
    )
    first = origins[0] if origins else "0"
    pq = {a["name"]: per_question_answers(col, a, first) for a in arms}
    table_a = _table_a(arms, pq, order) if arms else {"n": 0, "reference": None, "rows": []}
    tost = _tost(arms, pq, order, table_a["reference"])
    table_b = _table_b(arms, col, origins, order) if len(origins) > 1 else []
    # the family is Table S2's, fixed in advance: which arms ran never adds a test to it
    bh = confirmatory_family(col, arms, pq, origins, order, tost_reference(_budget(arms))) if arms else {}
    metrics: dict[str, Any] = {
        "n_questions": len(order),
        "n_errors": len(col["errors"]),
        "errors": [{k: e.get(k) for k in ("id", "video", "line", "error")} for e in col["errors"]],
        "origins": origins,
        "arms": {
            a["name"]: {**a, "accuracy": _accuracy_cell(pq[a["name"]], [q for q in order if q in pq[a["name"]]])} for a in arms
        },
        "table_a": table_a,
        "equivalence": tost,
        "table_b": table_b,
        "bh_family": bh,
        "by_benchmark": _by_benchmark(col, arms, pq, order) if arms else {},
        "phase_offset_split": _phase_offset_split(col, pq, order, _views(arms), _budget(arms)),
        "phases": _phases(col, arms, first, order),
        "samplers": _samplers(col, arms, first, order),
        "margin": _margins(arms, pq, order),
        "reliability": reliability_signals(pq, order),
        "certified_selection": certified_selection(
            col, {a["name"]: pq[a["name"]] for a in arms if a["pool"] in POSTERIOR_POOLS}, order
        ),
        "rate_interval": RATE_INTERVAL,
        "cost": {a["name"]: {"attention_units": a["attention_units"], **arm_cost(col, a["grid"], origins)} for a in arms},
    }
    qs = list(col["questions"].values())
    if qs:
        videos = {q["video"] for q in qs}
        metrics["cost"]["decode"] = {
            "median_decode_s": float(np.median([q["decode_s"] for q in qs])),
            "decoding_passes": int(sum(q["decode_passes"] for q in qs)),
            "videos": len(videos),
            "median_decoded_frames": float(np.median([q["decoded_frames"] for q in qs])),
        }
    return metrics


def _views(arms: Sequence[Mapping[str, Any]]) -> int:
    return max((a["views"] for a in arms), default=1)


def _budget(arms: Sequence[Mapping[str, Any]]) -> int:
    return next((a["budget"] for a in arms if a["grid"] in ("phase", "single")), 1)


def _origin_value(text: str) -> float:
    from judgetrain.video import parse_fraction

    return float(parse_fraction(text, "origin"))
