"""PhaseFusion's confirmatory Benjamini–Hochberg family, fixed in advance as paper 001's
(App. A "Multiplicity", Table S2), and its in-cell Learn-then-Test (App. H, Table S10).

:func:`confirmatory_family`: the Table S2 comparisons one run of one model can compute,
one family per benchmark × scoring cell (letter log-probabilities, the logit path) plus the
run pooled over benchmarks; which arms a run happened to score never adds a test, and
every other p-value of the report is descriptive, uncorrected. :func:`certified_selection`:
Table S10's coverage and test-half violation rate over seeded calibration / test splits.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core import stats
from .answers import per_question_answers
from .signals import SIGNALS, VOTE_SHARE, deployed_error, signal_value

__all__ = [
    "BH_ALPHA",
    "LTT_ALPHAS",
    "LTT_SIGNALS",
    "SCORING",
    "TABLE_S2",
    "certified_selection",
    "confirmatory_family",
    "run_row",
    "tost_reference",
]

BH_ALPHA = 0.05
LTT_ALPHAS = (0.30, 0.25)
SCORING = "letter log-probabilities, the logit path"
# Table S2's eight rows: (key, the paper's row, how one run tests it, or None and why it cannot).
TABLE_S2: tuple[tuple[str, str, str | None, str], ...] = (
    (
        "margin_vs_msp",
        "Margin vs. MSP, flip prediction",
        "the single pass's answer margin vs its top-1 probability as predictors of an ordering flip "
        "(both negated: low predicts a flip), DeLong's test of the two correlated AUROCs, two-sided",
        "",
    ),
    ("s3_vs_s2", "S = 3 vs. S = 2 phase count", None, "needs a second run at S = 2 on the same items"),
    (
        "tost_vs_reference",
        "Fusion vs. 32f, clustered TOST",
        "fusion vs the dense pass of 4·b frames (the paper's 32f at b = 8: the arm dense<4b>), two one-sided paired "
        "t-tests, ±2.5 points; never against another arm standing in",
        "",
    ),
    (
        "fusion_vs_own_view",
        "S = 3 vs. its own single views",
        "fusion vs its phase-0 view (the standard sampler, App. G's first view), exact McNemar on correctness",
        "",
    ),
    (
        "origin_shift_vs_union",
        "Fusion vs. union pass, origin shift",
        "answers changed under the first origin shift, fusion vs union, exact McNemar",
        "",
    ),
    (
        "mimo_fusion_gain",
        "MiMo-VL fusion gain",
        None,
        "a replication on another model (MiMo-VL-7B-RL); this run's own fusion gain over its phase-0 view "
        "is the 'its own single views' row",
    ),
    (
        "margin_vs_vote",
        "One-pass margin vs. ten-pass vote",
        "the single pass's answer margin vs the vote share of its K orderings (the paper's ten) as predictors of the "
        "identity pass's correctness, the target every signal shares (Table S11), DeLong's test, two-sided",
        "",
    ),
    ("phase_lever", "Phase lever, order-averaged", None, "a gap between two models: needs two runs"),
)
# Table S2's rows the paper words with its own phase count (S = 3), worded with a run's S instead
_RUN_ROWS = {"fusion_vs_own_view": "S = {phases} vs. its own single views"}
# Table S10's rows, in its order
LTT_SIGNALS = SIGNALS


def run_row(key: str, phases: int | None) -> str:
    """Table S2's row ``key`` as one run tests it: a row the paper words with its S = 3 (fusion
    against its own single views) named with the run's ``phases``; the paper's wording otherwise
    (``phases`` None: not known)."""
    row = next(row for k, row, _, _ in TABLE_S2 if k == key)
    return _RUN_ROWS[key].format(phases=phases) if key in _RUN_ROWS and phases else row


def _ids_by_cell(col: Mapping[str, Any], order: Sequence[str]) -> dict[str, list[str]]:
    """``{"all": every question, <benchmark>: its questions}``; one benchmark: ``all`` alone."""
    by_bench: dict[str, list[str]] = {}
    for q in order:
        by_bench.setdefault(str(col["questions"][q].get("benchmark")), []).append(q)
    return {"all": list(order), **(by_bench if len(by_bench) > 1 else {})}


def _cell_tests(
    ids: Sequence[str],
    pq: Mapping[str, Mapping[str, Any]],
    view0: Mapping[str, Any],
    shifted: tuple[Mapping[str, Any], Mapping[str, Any]] | None,
    reference: str,
) -> list[dict]:
    """The computable members on ``ids``; a member whose arms the run lacks is left out, with why."""
    out = [_margin_vs("margin_vs_msp", ids, pq.get("single"), "top-1 prob.")]
    vote = _margin_vs("margin_vs_vote", ids, pq.get("single"), VOTE_SHARE)
    fusion = pq.get("fusion")

    def correct(arm: Mapping[str, Any], qs: Sequence[str]) -> list[bool]:
        return [bool(arm[q]["correct"]) for q in qs]

    if fusion is None:
        return (
            out
            + [
                {"key": k, "pvalue": None, "note": "no fusion arm in this run"}
                for k, _, how, _ in TABLE_S2
                if how and k not in ("margin_vs_msp", "margin_vs_vote")
            ]
            + [vote]
        )
    if reference in pq:
        qs = [q for q in ids if q in fusion and q in pq[reference]]
        res = stats.or_none(
            stats.tost_paired, [float(x) for x in correct(fusion, qs)], [float(x) for x in correct(pq[reference], qs)]
        )
        ok = res is not None and math.isfinite(res["pvalue"]) and res["se"] > 0
        out.append(
            {
                "key": "tost_vs_reference",
                "against": reference,
                "n": len(qs),
                "pvalue": res["pvalue"] if ok else None,
                "difference": res["difference"] if ok else None,
                **({} if ok else {"note": "undefined (no variation in the paired differences)"}),
            }
        )
    else:
        out.append(
            {
                "key": "tost_vs_reference",
                "pvalue": None,
                "note": f"not computed: the run has no {reference} arm (the pre-registered 32f reference at 4·b "
                f"frames); add {reference} to --arms",
            }
        )
    qs = [q for q in ids if q in fusion and q in view0]
    mc = stats.or_none(stats.mcnemar_exact, correct(fusion, qs), correct(view0, qs)) if qs else None
    out.append(
        {
            "key": "fusion_vs_own_view",
            "against": "phase 0",
            "n": len(qs),
            "pvalue": mc["pvalue"] if mc else None,
            "difference": mc["difference"] if mc else None,
        }
    )
    if shifted is None:
        out.append({"key": "origin_shift_vs_union", "pvalue": None, "note": "needs the union arm and a second origin"})
    else:
        first, second = shifted
        qs = [q for q in ids if all(q in first[a] and q in second[a] for a in ("fusion", "union"))]
        changed = {a: [first[a][q]["identity"] != second[a][q]["identity"] for q in qs] for a in ("fusion", "union")}
        mc = stats.or_none(stats.mcnemar_exact, changed["fusion"], changed["union"]) if qs else None
        out.append(
            {
                "key": "origin_shift_vs_union",
                "against": "union",
                "n": len(qs),
                "pvalue": mc["pvalue"] if mc else None,
                "difference": mc["difference"] if mc else None,
            }
        )
    return out + [vote]


def _margin_vs(key: str, ids: Sequence[str], single: Mapping[str, Any] | None, other: str) -> dict[str, Any]:
    """Table S2's row ``key`` on ``ids``: the single pass's margin against signal ``other`` by
    DeLong's test; flip prediction against the top-1 probability (low predicts a flip),
    the identity pass's correctness against the K-ordering vote share."""
    if single is None:
        return {"key": key, "pvalue": None, "note": "no single arm in this run"}
    qs = [q for q in ids if q in single]
    if other == VOTE_SHARE and qs and len(single[qs[0]]["answers"]) < 2:
        return {"key": key, "n": len(qs), "pvalue": None, "note": "one ordering: no vote share (run with --orderings K > 1)"}
    target, sign = ("flip", -1.0) if other == "top-1 prob." else ("correct", 1.0)
    labels = [bool(single[q][target]) for q in qs]
    res = (
        stats.or_none(
            stats.delong_auroc_difference,
            [sign * signal_value("margin", single[q], q) for q in qs],
            [sign * signal_value(other, single[q], q) for q in qs],
            labels,
        )
        if qs
        else None
    )
    if res is None:
        words = ("flipped", "stable") if target == "flip" else ("right", "wrong")
        return {
            "key": key,
            "n": len(qs),
            "pvalue": None,
            "note": f"undefined ({sum(labels)} {words[0]}, {len(qs) - sum(labels)} {words[1]}: DeLong needs two of "
            "each and rankings that differ)",
        }
    return {
        "key": key,
        "against": other,
        "n": len(qs),
        "pvalue": res["pvalue"],
        "difference": res["difference"],
        "auroc_margin": res["auroc_a"],
        "auroc_other": res["auroc_b"],
    }


def tost_reference(budget: int) -> str:
    """The arm Table S2's "Fusion vs. 32f" row tests against: the dense pass of 4·b frames
    (``dense32`` at the paper's b = 8), whichever arms a run scored."""
    return f"dense{4 * budget}"


def confirmatory_family(
    col: Mapping[str, Any],
    arms: Sequence[Mapping[str, Any]],
    pq: Mapping[str, Mapping],
    origins: Sequence[str],
    order: Sequence[str],
    reference: str,
) -> dict[str, Any]:
    """Table S2's family per cell: each member's p and its Benjamini–Hochberg q, and the
    members one run cannot compute, with why. The step-up at ``BH_ALPHA`` runs over every
    member one run can compute (``m``, the same whichever arms ran), a member not computed in
    this run counted at p = 1 (a conservative bound), so no q-value moves with ``--arms``.
    ``reference``: :func:`tost_reference`'s arm; a row whose arm did not run is not computed,
    never tested against another arm. ``pq``: per arm, :func:`per_question_answers` at ``origins[0]``."""
    names = {a["name"] for a in arms}
    view0 = per_question_answers(col, {"grid": "phase", "pool": "single"}, origins[0]) if "fusion" in names else {}
    shifted: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None
    if {"fusion", "union"} <= names and len(origins) > 1:
        by = {a["name"]: a for a in arms}
        at_first, at_second = (
            {a: per_question_answers(col, by[a], o) for a in ("fusion", "union")} for o in (origins[0], origins[1])
        )
        shifted = (at_first, at_second)
    rows = {k: row for k, row, how, _ in TABLE_S2}
    cells = {}
    for cell, ids in _ids_by_cell(col, order).items():
        tests = sorted(_cell_tests(ids, pq, view0, shifted, reference), key=lambda t: list(rows).index(t["key"]))
        done = [t for t in tests if t.get("pvalue") is not None]
        if done:  # the uncomputed members at p = 1: they take their ranks but reject nothing
            reject, q = stats.benjamini_hochberg([1.0 if t.get("pvalue") is None else t["pvalue"] for t in tests], BH_ALPHA)
            for t, qv, rj in zip(tests, q, reject, strict=True):
                if t.get("pvalue") is not None:
                    t.update(qvalue=qv, reject=rj)
        for t in tests:
            t["row"] = rows[t["key"]]
        cells[cell] = {"n": len(ids), "m": len(tests), "m_computed": len(done), "tests": tests}
    return {
        "alpha": BH_ALPHA,
        "scoring": SCORING,
        "members": [
            {"key": k, "row": row, "test": how, **({} if how else {"not_computed": why})} for k, row, how, why in TABLE_S2
        ],
        "origins": list(origins[:2]),
        "cells": cells,
    }


# --------------------------------------------------------------------------- Learn-then-Test (App. H)


def certified_selection(
    col: Mapping[str, Any], pq: Mapping[str, Mapping[str, Any]], order: Sequence[str], n_splits: int = stats.LTT_SPLITS
) -> dict[str, Any]:
    """Table S10 per (benchmark) cell and pooled: for the single pass under every signal of
    :data:`LTT_SIGNALS` and for each pooled arm under its fused margin, certified coverage and
    test-half violation rate over ``n_splits`` seeded halves at each α of :data:`LTT_ALPHAS`."""
    k = len(next(iter(pq["single"].values()))["answers"]) if pq.get("single") else 0
    plan = [(a, s) for a in ("single",) if a in pq for s in LTT_SIGNALS if s != VOTE_SHARE or k > 1]
    plan += [(a, "margin") for a in pq if a != "single" and a.startswith("fusion")]
    cells = _ids_by_cell(col, order)
    cells = {c: ids for c, ids in cells.items() if c != "all"} or cells  # in-cell: per benchmark
    rows = []
    for arm, signal in plan:
        for alpha in LTT_ALPHAS:
            per_cell = {}
            for cell, ids in cells.items():
                qs = [q for q in ids if q in pq[arm]]
                if len(qs) < 2:
                    continue
                scores = [signal_value(signal, pq[arm][q], q) for q in qs]
                errors = [deployed_error(signal, pq[arm][q]) for q in qs]  # each protocol's own answers
                res = stats.ltt_splits(scores, errors, alpha, n_splits=n_splits, key=(arm, signal, cell, alpha))
                per_cell[cell] = {
                    k: res[k]
                    for k in ("n", "n_calibration", "coverage", "violation_rate", "certified_splits", "median_threshold")
                }
            if per_cell:
                rows.append(
                    {
                        "arm": arm,
                        "signal": signal,
                        "alpha": alpha,
                        "cells": per_cell,
                        "coverage": float(np.mean([c["coverage"] for c in per_cell.values()])),
                        "violation_rate": float(np.mean([c["violation_rate"] for c in per_cell.values()])),
                    }
                )
    return {
        "delta": stats.LTT_DELTA,
        "n_splits": n_splits,
        "min_answered": stats.LTT_MIN_ANSWERED,
        "alphas": list(LTT_ALPHAS),
        "cells": list(cells),
        "rows": rows,
    }
