"""The analyses of ``judgetrain eval bias``: per-position accuracy, first-option and letter bias, the ordering
probe's signature (paper 002 F.3, C.3, G), each a function of the ``predictions.jsonl`` rows of
one judge run (:mod:`judgetrain.eval.judge`) or TimeCatch run (:mod:`judgetrain.eval.timecatch`),
gathered by :func:`analyze`; and the accessors of their position tables that the figures and
the report share. Everything comes from the prediction rows:

- **Per position, PRISM Type-1** (Tables S4, S17, S19, S20; Figure S5): pairwise
  rows of the positional subset (``positional_subset``: ``semantic-1`` and
  ``swap`` negatives of gold sequences of at most 6 frames; rows without that
  field qualify by perturbation and ``n_frames``) grouped by the semantic
  outlier's position 0…5 or the swapped pair 0-1 … 4-5. Per position: accuracy
  over valid answers and macro-F1 (:func:`judgetrain.eval.judge.classification_cell`);
  ``W_avg``: their mean over positions weighted by each position's valid
  answers (the paper's sample-weighted mean; for accuracy that is the pooled
  accuracy, correct of valid over all positions, so it has a Wilson interval too).
  For every run and, per run, every layout. Heatmaps (run × position,
  run·layout × position: each cell's n shown, cells of fewer than 10 valid answers
  lighter and hatched, still in their colour, rows without data left out) and W_avg bars.
- **Per true position, TimeCatch**: accuracy of each task on the anomalous
  records by 1-based frame of the anomaly (the noise frame, the earlier swapped
  frame) and its n-weighted mean; a heatmap.
- **Presentation flips**: over the twin pairs of a ``--twins`` PRISM / MIRAGE build (each
  pairwise item shown both ways round, ``twin`` in the prediction rows), the share of pairs
  whose preference (gold or perturbed sequence) differs between the two presentations, with
  its Wilson interval (:func:`presentation_flips`); what GRPO's consistency reward lowers.
- **First-option bias and letter bias** (F.3: "models disproportionately select the first
  sequence"; C.3): over valid pairwise answers whose record says which sequence was
  shown first (``presentation`` ``gold_first`` / ``gold_second``, ``first_option`` the letter
  shown first; under P4 that is B): the rate of choosing the first-shown sequence
  (``first_rate``) and the rate of answering the letter A (``letter_rate``), each with its
  count, an exact two-sided binomial test (``scipy.stats.binomtest``) of H0: rate = 1/2 and its
  Clopper–Pearson 95% interval (the exact interval of that test; ``wilson95`` holds every rate's
  Wilson interval, which the report prints with each rate and the figure draws as error bars).
  H0 is what an order-blind, letter-blind judge gives when gold-first and gold-second items are
  equally many, which the PRISM and MIRAGE builders guarantee (the counts are reported beside it).
  The two rates are the same answers counted two ways: where A is shown first, choosing the first
  is answering A. They come apart only across layouts that show different letters first (P4 shows
  B first), so both are also split by the letter shown first (``*_a_first``, ``*_b_first``): a pure
  letter preference answers A equally often whichever letter is first (its first-shown rate moves
  with the layout: 100% where A is first, 0% where B is); a pure first-position preference chooses
  the first-shown equally often whichever letter that is (its A rate moves with the layout). Two
  Fisher exact tests over the letter shown first say which: ``position_given_letter_p`` (is the A
  rate the same whichever letter is first? if so the first-option rate is explained by the letter
  preference) and ``letter_given_position_p`` (is the first-shown rate the same whichever letter is
  first? if so the letter rate is explained by the first-position preference); equivalently, they
  test the ``*_balanced`` rates (the mean of the two letters' rates, what a design showing each
  letter first equally often would give) against 1/2. :func:`presentation_verdict` names the
  effect at level :data:`ALPHA`. Also the first-shown and letter-A rates when gold is first vs
  second, accuracy per presentation order and their gap, with Fisher's exact
  test (``scipy.stats.fisher_exact``) of presentation × correct, which holds
  without that balance. The paper names no test; these are ours.
- **Ordering probe** (App. G, Table S21): exact match, invalid rate and the
  "answers by position" signature, the share of items answered in the label
  order 1, 2, …, n or its reverse (:func:`judgetrain.eval.judge.ordering_cell`).
Docs: "concepts/positional-bias.md".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.metrics import accuracy_cell, ci95
from ..judge.metrics import classification_cell, ordering_cell
from ..timecatch.metrics import TIMECATCH_TASKS

__all__ = [
    "ALPHA",
    "KINDS",
    "TITLES",
    "analyze",
    "first_option_bias",
    "has_data",
    "letter_and_position",
    "position_cell",
    "position_columns",
    "position_table",
    "presentation_flips",
    "presentation_verdict",
    "prism_positions",
    "timecatch_positions",
    "type1_rows",
]

KINDS = {"semantic": "semantic-1", "temporal": "swap"}
TITLES = {"semantic": "PRISM-Semantic (outlier at position)", "temporal": "PRISM-Temporal (swapped pair)"}
ALPHA = 0.05  # the level at which presentation_verdict calls a rate significant


def type1_rows(rows: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    """Pairwise rows of the PRISM Type-1 positional subset of ``kind`` (``semantic`` / ``temporal``)."""
    from judgetrain.records import POSITIONAL_SUBSET_MAX_FRAMES

    perturbation = KINDS[kind]
    out = []
    for r in rows:
        if r.get("task") != "pairwise" or r.get("perturbation") != perturbation or int(r.get("position", -1)) < 0:
            continue
        flag = r.get("positional_subset")
        if flag if flag is not None else int(r.get("n_frames", 0)) <= POSITIONAL_SUBSET_MAX_FRAMES:
            out.append(r)
    return out


def _label(kind: str, position: int) -> str:
    return f"{position}-{position + 1}" if kind == "temporal" else str(position)


def _weighted(cells: Mapping[str, Mapping[str, Any]], key: str, weight: str) -> float | None:
    pairs = [(c[key], c[weight]) for c in cells.values() if c.get(key) is not None and c[weight]]
    total = sum(w for _, w in pairs)
    return math.fsum(v * w for v, w in pairs) / total if total else None


def position_table(rows: Sequence[Mapping[str, Any]], kind: str) -> dict[str, Any]:
    """``{"positions": [label…], "cells": {label: classification cell}, "w_avg": {"accuracy", "f1", "n", "n_valid",
    "correct", "accuracy_ci95"}}`` for Type-1 rows of one kind; ``w_avg`` weights each position by its valid
    answers, which for accuracy is ``correct`` of ``n_valid`` over all positions (its Wilson interval beside it)."""
    by_pos: dict[int, list] = {}
    for r in rows:
        by_pos.setdefault(int(r["position"]), []).append(r)
    cells = {_label(kind, p): classification_cell(by_pos[p]) for p in sorted(by_pos)}
    correct, n_valid = sum(c["correct"] for c in cells.values()), sum(c["n_valid"] for c in cells.values())
    return {
        "positions": list(cells),
        "cells": cells,
        "w_avg": {
            "accuracy": _weighted(cells, "accuracy", "n_valid"),
            "f1": _weighted(cells, "f1", "n_valid"),
            "n": sum(c["n"] for c in cells.values()),
            "n_valid": n_valid,
            "correct": correct,
            "accuracy_ci95": ci95(correct, n_valid),
        },
    }


def prism_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per kind (``semantic``, ``temporal``) present: ``{"all": table, "by_layout": {layout: table}}``."""
    out = {}
    for kind in KINDS:
        sel = type1_rows(rows, kind)
        if sel:
            layouts = sorted({str(r["layout"]) for r in sel})
            out[kind] = {
                "all": position_table(sel, kind),
                "by_layout": {lay: position_table([r for r in sel if str(r["layout"]) == lay], kind) for lay in layouts},
            }
    return out


def timecatch_positions(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per TimeCatch task: accuracy by 1-based frame of the anomaly (``position`` + 1) on the
    anomalous records, ``{"positions", "cells": {frame: accuracy cell}, "w_avg": {"accuracy", "n", "correct", "ci95"}}``
    (the n-weighted mean accuracy is ``correct`` of ``n``, with its Wilson interval)."""
    out = {}
    for task in TIMECATCH_TASKS:
        sel = [r for r in rows if r.get("task") == task and int(r.get("position", -1)) >= 0]
        if not sel:
            continue
        by_frame: dict[int, list] = {}
        for r in sel:
            by_frame.setdefault(int(r["position"]) + 1, []).append(r)
        cells = {str(k): accuracy_cell(by_frame[k]) for k in sorted(by_frame)}
        correct = sum(c["correct"] for c in cells.values())
        out[task] = {
            "positions": list(cells),
            "cells": cells,
            "w_avg": {
                "accuracy": _weighted(cells, "accuracy", "n"),
                "n": len(sel),
                "correct": correct,
                "ci95": ci95(correct, len(sel)),
            },
        }
    return out


def _first_shown(r: Mapping[str, Any]) -> str | None:
    if r.get("first_option"):
        return r["first_option"]
    if r.get("presentation") == "gold_first":
        return r["label"]
    others = [c for c in r.get("choices") or [] if c != r["label"]]
    return others[0] if r.get("presentation") == "gold_second" and len(others) == 1 else None


def _rate(rows: Sequence[Mapping[str, Any]], hit) -> float | None:
    return sum(bool(hit(r)) for r in rows) / len(rows) if rows else None


def _wilson(rows: Sequence[Mapping[str, Any]], hit) -> list[float] | None:
    return ci95(sum(bool(hit(r)) for r in rows), len(rows))


# the rates of first_option_bias, each with the rows it counts ("valid", "gf": gold first, "gs": gold second,
# "af": the sequence labelled A shown first, "bf": the one labelled B shown first (P4))
_FIRST_RATES = (
    ("first_rate", "valid", "first"),
    ("first_rate_gold_first", "gf", "first"),
    ("first_rate_gold_second", "gs", "first"),
    ("a_rate_gold_first", "gf", "A"),
    ("a_rate_gold_second", "gs", "A"),
    ("accuracy_gold_first", "gf", "correct"),
    ("accuracy_gold_second", "gs", "correct"),
    ("letter_rate", "valid", "A"),
    ("first_rate_a_first", "af", "first"),
    ("first_rate_b_first", "bf", "first"),
    ("letter_rate_a_first", "af", "A"),
    ("letter_rate_b_first", "bf", "A"),
)
_HITS = {
    "first": lambda r: r["prediction"] == _first_shown(r),
    "A": lambda r: r["prediction"] == "A",
    "correct": lambda r: r["prediction"] == r["label"],
}


def _exact(k: int, n: int) -> tuple[float, list[float]]:
    """Exact two-sided binomial p of ``k`` of ``n`` against 1/2 and its Clopper–Pearson 95% interval."""
    from scipy.stats import binomtest

    test = binomtest(k, n, 0.5, alternative="two-sided")
    ci = test.proportion_ci(confidence_level=0.95, method="exact")
    return float(test.pvalue), [float(ci.low), float(ci.high)]


def _mean(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else (a + b) / 2


def letter_and_position(valid: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The letter rate and the two-factor view of :func:`first_option_bias` (module docstring) over
    valid answers whose first-shown letter is known: ``letter_rate`` (P(answer A)) with ``chose_a``,
    its exact binomial p and Clopper–Pearson interval; per first-shown letter (``a_first``: P0–P3, P5,
    P6; ``b_first``: P4) the first-shown and A rates, their means over the two letters
    (``*_balanced``), and two Fisher tests over the letter shown first: ``position_given_letter_p``
    (A rate the same whichever letter is first: no first-position preference beyond the letter one) and
    ``letter_given_position_p`` (first-shown rate the same whichever letter is first: no letter
    preference beyond the first-position one); ``None`` without both letters shown first."""
    from scipy.stats import fisher_exact

    chose_a = sum(r["prediction"] == "A" for r in valid)
    p, ci = _exact(chose_a, len(valid))
    af = [r for r in valid if _first_shown(r) == "A"]
    bf = [r for r in valid if _first_shown(r) != "A"]
    first_af = sum(r["prediction"] == "A" for r in af)  # chose the first-shown = answered A
    first_bf = sum(r["prediction"] == _first_shown(r) for r in bf)
    out: dict[str, Any] = {
        "letter_rate": chose_a / len(valid),
        "chose_a": chose_a,
        "letter_rate_ci95": ci,
        "letter_binomial_p": p,
        "n_a_first": len(af),
        "n_b_first": len(bf),
        "first_rate_a_first": first_af / len(af) if af else None,
        "first_rate_b_first": first_bf / len(bf) if bf else None,
        "letter_rate_a_first": first_af / len(af) if af else None,
        "letter_rate_b_first": (len(bf) - first_bf) / len(bf) if bf else None,
    }
    out["first_rate_balanced"] = _mean(out["first_rate_a_first"], out["first_rate_b_first"])
    out["letter_rate_balanced"] = _mean(out["letter_rate_a_first"], out["letter_rate_b_first"])
    out["position_given_letter_p"] = out["letter_given_position_p"] = None
    if af and bf:
        a_row = [first_af, len(af) - first_af]
        out["position_given_letter_p"] = float(fisher_exact([a_row, [len(bf) - first_bf, first_bf]]).pvalue)
        out["letter_given_position_p"] = float(fisher_exact([a_row, [first_bf, len(bf) - first_bf]]).pvalue)
    return out


def presentation_verdict(f: Mapping[str, Any], alpha: float = ALPHA) -> dict[str, Any]:
    """Which presentation effect a :func:`first_option_bias` result shows, at level ``alpha``: a rate
    is *significant* when its binomial p < ``alpha``; the first-option rate is *explained by the letter
    preference* when the letter rate is significant too and the A rate does not depend on which letter
    is shown first (``position_given_letter_p`` ≥ ``alpha``), and the other way round. ``verdict``:
    ``none``, ``letter``, ``first_option``, ``both`` (each significant on its own), ``unresolved``
    (both significant, each explained by the other: the design cannot tell them apart) or
    ``confounded`` (significant, but one letter is always shown first: letter and position coincide)."""
    first_sig, letter_sig = f["binomial_p"] < alpha, f["letter_binomial_p"] < alpha
    both_shown = f["position_given_letter_p"] is not None
    first_expl = both_shown and first_sig and letter_sig and f["position_given_letter_p"] >= alpha
    letter_expl = both_shown and first_sig and letter_sig and f["letter_given_position_p"] >= alpha
    if not (first_sig or letter_sig):
        verdict = "none"
    elif not both_shown:
        verdict = "confounded"
    elif first_expl and letter_expl:
        verdict = "unresolved"
    elif first_sig and letter_sig and not (first_expl or letter_expl):
        verdict = "both"
    else:
        verdict = "letter" if letter_sig and not letter_expl else "first_option"
    return {
        "alpha": alpha,
        "verdict": verdict,
        "first_significant": first_sig,
        "letter_significant": letter_sig,
        "first_explained_by_letter": first_expl and not letter_expl,
        "letter_explained_by_first": letter_expl and not first_expl,
    }


def first_option_bias(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """First-option and letter statistics (module docstring) over valid pairwise answers with a known
    presentation order; ``None`` when there are none. ``wilson95``: the Wilson 95% interval of every
    rate (``first_rate`` and ``letter_rate`` of ``n_valid``, the ``*_gold_first`` rates of
    ``n_gold_first``, the ``*_gold_second`` ones of ``n_gold_second``, the ``*_a_first`` and
    ``*_b_first`` ones of ``n_a_first`` and ``n_b_first``); then :func:`letter_and_position` and
    :func:`presentation_verdict`."""
    from scipy.stats import fisher_exact

    sel = [r for r in rows if r.get("task") == "pairwise" and r.get("presentation") in ("gold_first", "gold_second")]
    valid = [r for r in sel if r.get("valid", True) and r.get("prediction") is not None and _first_shown(r)]
    if not valid:
        return None
    first = [r for r in valid if r["prediction"] == _first_shown(r)]
    gf = [r for r in valid if r["presentation"] == "gold_first"]
    gs = [r for r in valid if r["presentation"] == "gold_second"]
    p, ci = _exact(len(first), len(valid))
    correct_gf = sum(r["prediction"] == r["label"] for r in gf)
    correct_gs = sum(r["prediction"] == r["label"] for r in gs)
    out: dict[str, Any] = {
        "n": len(sel),
        "n_valid": len(valid),
        "n_gold_first": len(gf),
        "n_gold_second": len(gs),
        "chose_first": len(first),
        "first_rate": len(first) / len(valid),
        "first_rate_ci95": ci,
        "binomial_p": p,
        "excess_first": len(first) / len(valid) - 0.5,
        "first_rate_gold_first": _rate(gf, _HITS["first"]),
        "first_rate_gold_second": _rate(gs, _HITS["first"]),
        "a_rate_gold_first": _rate(gf, _HITS["A"]),
        "a_rate_gold_second": _rate(gs, _HITS["A"]),
        "accuracy_gold_first": correct_gf / len(gf) if gf else None,
        "accuracy_gold_second": correct_gs / len(gs) if gs else None,
        "accuracy_gap": None,
        "fisher_p": None,
    }
    out.update(letter_and_position(valid))
    af = [r for r in valid if _first_shown(r) == "A"]
    groups = {"valid": valid, "gf": gf, "gs": gs, "af": af, "bf": [r for r in valid if _first_shown(r) != "A"]}
    out["wilson95"] = {key: _wilson(groups[g], _HITS[h]) for key, g, h in _FIRST_RATES}
    if gf and gs:
        out["accuracy_gap"] = out["accuracy_gold_first"] - out["accuracy_gold_second"]
        out["fisher_p"] = float(fisher_exact([[correct_gf, len(gf) - correct_gf], [correct_gs, len(gs) - correct_gs]]).pvalue)
    out.update(presentation_verdict(out))
    return out


def presentation_flips(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The presentation-flip rate over twin pairs (``twin``: a ``--twins`` build shows each pairwise item
    both ways round): a row's preference is the gold sequence when it answered the gold letter, else the
    other; a pair *flips* when its two preferences differ, i.e. the judge changed its mind only because the
    two sequences swapped places. ``{"rate", "n" (pairs with both answers valid), "flips", "ci95" (Wilson),
    "skipped": {"twin_missing", "invalid"}}``; ``None`` when no row has a twin."""
    pairs: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        if r.get("task") == "pairwise" and r.get("twin"):
            pairs.setdefault(str(r["twin"]), []).append(r)
    if not pairs:
        return None
    whole = [p for p in pairs.values() if len(p) == 2]
    valid = [p for p in whole if all(r.get("valid", True) and r.get("prediction") is not None for r in p)]
    flips = sum((a["prediction"] == a["label"]) != (b["prediction"] == b["label"]) for a, b in valid)
    return {
        "rate": flips / len(valid) if valid else None,
        "n": len(valid),
        "flips": flips,
        "ci95": ci95(flips, len(valid)),
        "skipped": {"twin_missing": len(pairs) - len(whole), "invalid": len(whole) - len(valid)},
    }


def analyze(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every analysis of one run's prediction rows (the parts with no rows are left out)."""
    out: dict[str, Any] = {"n": len(rows)}
    if positions := prism_positions(rows):
        out["prism_positions"] = positions
    if tc := timecatch_positions(rows):
        out["timecatch_positions"] = tc
    if fo := first_option_bias(rows):
        layouts = sorted({str(r["layout"]) for r in rows if r.get("task") == "pairwise"})
        fo["by_layout"] = {lay: first_option_bias([r for r in rows if str(r.get("layout")) == lay]) for lay in layouts}
        out["first_option"] = fo
    if flips := presentation_flips(rows):
        out["presentation_flips"] = flips
    order = [r for r in rows if r.get("task") == "ordering"]
    if order:
        out["ordering"] = ordering_cell(order)
    return out


def position_columns(tables: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """The position columns of position tables, in position order, then W_avg."""
    cols: list[str] = []
    for t in tables:
        for p in (t or {}).get("positions", []):
            if p not in cols:
                cols.append(p)
    return sorted(cols, key=lambda c: [int(x) for x in c.split("-")]) + ["W_avg"]


def position_cell(table: Mapping[str, Any] | None, column: str) -> Mapping[str, Any] | None:
    """The cell of ``column`` (a position label of :func:`position_columns`, or ``"W_avg"``) in a
    position table; None for a missing table or a position it does not have."""
    return None if table is None else (table["w_avg"] if column == "W_avg" else table["cells"].get(column))


def has_data(table: Mapping[str, Any] | None) -> bool:
    """Whether a position table has a position with a defined accuracy (at least one valid answer)."""
    if not table:
        return False
    return any(c.get("accuracy") is not None for c in table["cells"].values())
