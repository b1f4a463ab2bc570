"""Judge metrics from prediction rows alone (paper 002 F.1): pairwise accuracy and macro P/R/F1
with invalid answers counted, pointwise agreement (Pearson r, MAE, RMSE against gold, teacher and
human scores), the ordering probe, explanation metrics, and one number by name for sweeps
(:func:`metric_value`). Every rate (an accuracy, a share of items) is a fraction in 0..1 beside its
count and a Wilson 95% interval ``[lo, hi]`` (:func:`judgetrain.eval.core.metrics.ci95`), so that
reports print n and interval with it. The run that writes the rows is :mod:`judgetrain.eval.judge`; the report
that shows them is :mod:`judgetrain.eval.judge.report`. Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.metrics import accuracy, ci95

__all__ = [
    "MIRAGE_DOMAINS",
    "ORDERING_METRICS",
    "PAIRWISE_METRICS",
    "POINTWISE_METRICS",
    "REFERENCES",
    "SCORES",
    "SUBSETS",
    "benchmark_of",
    "classification_cell",
    "compute_judge_metrics",
    "metric_value",
    "ordering_cell",
    "pointwise_cell",
    "score_distribution",
]

SUBSETS = ("PRISM-Semantic", "PRISM-Temporal", "PRISM-Coherent", "MIRAGE-Recipes", "MIRAGE-Vist", "Ordering-probe")
MIRAGE_DOMAINS = {"recipes": "MIRAGE-Recipes", "vist": "MIRAGE-Vist"}
SCORES = (1, 2, 3, 4, 5)


def benchmark_of(subset: str) -> str:
    """``PRISM-Semantic`` → ``PRISM``; a subset without a dash is its own benchmark."""
    return subset.split("-", 1)[0]


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def classification_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n", "n_valid", "n_invalid", "correct", "accuracy", "accuracy_ci95", "accuracy_all",
    "accuracy_all_ci95", "precision", "recall", "f1"}``: ``accuracy`` (``correct`` of ``n_valid``)
    and the macro P/R/F1 over valid predictions (``None`` when there are none), ``accuracy_all``
    (the valid rows marked ``correct``, of ``n``) over all rows with invalid answers counted wrong; ``*_ci95`` their
    Wilson 95% intervals."""
    valid = [r for r in rows if r.get("valid", True) and r.get("prediction") is not None]
    acc = _none_if_nan(accuracy(valid))
    correct = round(acc * len(valid)) if acc is not None else 0
    right = sum(bool(r.get("correct")) for r in valid)  # the rows' own verdicts, as before
    cell: dict[str, Any] = {
        "n": len(rows),
        "n_valid": len(valid),
        "n_invalid": len(rows) - len(valid),
        "correct": correct,
        "accuracy": acc,
        "accuracy_ci95": ci95(correct, len(valid)),
        "accuracy_all": right / len(rows) if rows else None,
        "accuracy_all_ci95": ci95(right, len(rows)),
        "precision": None,
        "recall": None,
        "f1": None,
    }
    if valid:
        from sklearn.metrics import precision_recall_fscore_support

        p, r, f, _ = precision_recall_fscore_support(
            [str(x["label"]) for x in valid], [str(x["prediction"]) for x in valid], average="macro", zero_division=0
        )
        cell.update(precision=float(p), recall=float(r), f1=float(f))
    return cell


def _number(value: Any) -> float | None:
    """A reference score as a float: a number, a numeric string, or a list of them (their mean)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)):
        vals = [_number(v) for v in value]
        nums = [v for v in vals if v is not None]
        return None if not vals or len(nums) < len(vals) else math.fsum(nums) / len(nums)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


REFERENCES = {"gold": "label", "teacher": "teacher_answer", "human": "human_score"}


def _agreement(pred: Sequence[float], ref: Sequence[float]) -> dict[str, Any]:
    """Pearson r, MAE, RMSE of predictions against one reference; absent (None) when undefined."""
    out: dict[str, Any] = {"n": len(pred), "r": None, "mae": None, "rmse": None}
    if not pred:
        return out
    from sklearn.metrics import mean_absolute_error, root_mean_squared_error

    out["mae"] = float(mean_absolute_error(ref, pred))
    out["rmse"] = float(root_mean_squared_error(ref, pred))
    if len(pred) >= 2 and len(set(pred)) > 1 and len(set(ref)) > 1:
        from scipy.stats import pearsonr

        out["r"] = float(pearsonr(pred, ref).statistic)
    return out


def pointwise_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """:func:`classification_cell` plus, per reference (``gold``, ``teacher``, ``human``),
    ``{"n", "r", "mae", "rmse"}`` over valid predictions whose record carries that
    reference, and ``unreadable``: references present but not a number (left out)."""
    cell = classification_cell(rows)
    valid = [r for r in rows if r.get("valid", True) and _number(r.get("prediction")) is not None]
    for name, key in REFERENCES.items():
        pairs = [(_number(r["prediction"]), _number(r.get(key))) for r in valid]
        kept = [(p, q) for p, q in pairs if p is not None and q is not None]  # p: valid rows have one
        agreement = _agreement([p for p, _ in kept], [q for _, q in kept])
        agreement["unreadable"] = sum(1 for r in valid if r.get(key) is not None and _number(r.get(key)) is None)
        cell[name] = agreement
    return cell


def score_distribution(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of 1…5 for the model's valid predictions and each reference present
    (a mean human score is rounded half up), and each one's share in {1, 2} with its
    Wilson 95% interval (``share_1_2_ci95``)."""
    series = {"model": [_number(r["prediction"]) for r in rows if r.get("valid", True)]}
    for name, key in REFERENCES.items():
        series[name] = [_number(r.get(key)) for r in rows]
    out: dict[str, Any] = {}
    for name, values in series.items():
        vals = [int(math.floor(v + 0.5)) for v in values if v is not None]
        if not vals:
            continue
        counts = Counter(vals)
        low = counts.get(1, 0) + counts.get(2, 0)
        out[name] = {
            "counts": {str(s): counts.get(s, 0) for s in SCORES},
            "n": len(vals),
            "share_1_2": low / len(vals),
            "share_1_2_ci95": ci95(low, len(vals)),
        }
    return out


def ordering_cell(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ordering probe: :func:`judgetrain.eval.core.metrics.ordering_metrics`
    (exact match with invalid = wrong, Kendall tau, position accuracy, chance) plus
    ``invalid_rate`` and the "answers by position" signature: how many items were
    answered with the label order (1, 2, …, n: the order shown) or its reverse, and
    their shares of all items. Each rate's count and Wilson 95% interval stand beside it:
    ``exact`` (of ``n``; of ``n_valid`` for ``exact_match_valid``), ``exact_match_ci95``,
    ``exact_match_valid_ci95``, ``invalid_rate_ci95``, ``by_position_share_ci95``."""
    from .ordering import ordering_metrics

    def ints(text: Any) -> list[int]:  # "2, 4, 1, 3" or the lettered "B-D-A-C" (A = 1)
        letters = re.findall(r"[A-Za-z]", str(text))
        return [ord(c.upper()) - ord("A") + 1 for c in letters] if letters else [int(x) for x in re.findall(r"\d+", str(text))]

    preds = [ints(r["prediction"]) if r.get("valid", True) and r["prediction"] is not None else None for r in rows]
    golds = [ints(r["label"]) for r in rows]
    cell = ordering_metrics(preds, golds)
    n = len(rows)
    label_order = sum(p is not None and p == sorted(p) for p in preds)
    reverse = sum(p is not None and len(p) > 1 and p == sorted(p, reverse=True) for p in preds)
    exact = sum(p is not None and p == g for p, g in zip(preds, golds, strict=False))
    cell.update(
        invalid_rate=cell["n_invalid"] / n if n else None,
        label_order=label_order,
        reverse_label_order=reverse,
        label_order_share=label_order / n if n else None,
        reverse_label_order_share=reverse / n if n else None,
        by_position_share=(label_order + reverse) / n if n else None,
        exact=exact,
        exact_match_ci95=ci95(exact, n),
        exact_match_valid_ci95=ci95(exact, cell["n_valid"]),
        invalid_rate_ci95=ci95(cell["n_invalid"], n),
        by_position_share_ci95=ci95(label_order + reverse, n),
    )
    return cell


def _breakdown(rows: Sequence[Mapping[str, Any]], cell: Callable[[Sequence[Mapping[str, Any]]], dict]) -> dict[str, Any]:
    layouts = sorted({str(r["layout"]) for r in rows})
    return {"all": cell(rows), "by_layout": {lay: cell([r for r in rows if str(r["layout"]) == lay]) for lay in layouts}}


def _ordered_subsets(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    present = {str(r["subset"]) for r in rows}
    return [s for s in SUBSETS if s in present] + sorted(present - set(SUBSETS))


def _explanations(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Explanation metrics per task (all / by layout) over valid, non-empty rationales with a
    non-empty reference; ``skipped`` counts the generated rows left out, by reason."""
    from .explain import explanation_scores, mean_scores, words

    generated = [r for r in rows if r.get("method") == "generate" and r["task"] in ("pairwise", "pointwise")]
    if not generated:
        return None
    skipped: Counter = Counter()
    kept = []
    for r in generated:
        if not r.get("reference_rationale") or not words(str(r["reference_rationale"])):
            skipped["no reference rationale"] += 1
        elif not r.get("valid"):
            skipped["invalid answer"] += 1
        elif not r.get("rationale") or not words(str(r["rationale"])):
            skipped["empty explanation"] += 1
        else:
            kept.append(r)
    out: dict[str, Any] = {"n_generated": len(generated), "skipped": dict(sorted(skipped.items()))}
    if not kept:
        out["by_task"] = {}
        return out
    scores = explanation_scores([r["rationale"] for r in kept], [r["reference_rationale"] for r in kept])
    by_id = {r["id"]: s for r, s in zip(kept, scores, strict=False)}
    out["by_task"] = {}
    for task in ("pairwise", "pointwise"):
        task_rows = [r for r in kept if r["task"] == task]
        if task_rows:
            out["by_task"][task] = _breakdown(task_rows, lambda rs: mean_scores([by_id[r["id"]] for r in rs]))
    return out


def compute_judge_metrics(rows: Sequence[Mapping[str, Any]], *, explanations: bool = True) -> dict[str, Any]:
    """Everything a judge report shows, from prediction rows alone (module docstring).
    ``explanations=False`` skips the text metrics (they load MiniLM and WordNet)."""
    out: dict[str, Any] = {"n": len(rows), "tasks": dict(sorted(Counter(r["task"] for r in rows).items()))}
    pair = [r for r in rows if r["task"] == "pairwise"]
    if pair:
        out["pairwise"] = _breakdown(pair, classification_cell)
        out["pairwise"]["by_benchmark"] = {
            b: _breakdown([r for r in pair if benchmark_of(str(r["subset"])) == b], classification_cell)
            for b in dict.fromkeys(benchmark_of(s) for s in _ordered_subsets(pair))
        }
        out["pairwise"]["by_subset"] = {
            s: _breakdown([r for r in pair if r["subset"] == s], classification_cell) for s in _ordered_subsets(pair)
        }
    point = [r for r in rows if r["task"] == "pointwise"]
    if point:
        out["pointwise"] = _breakdown(point, pointwise_cell)
        out["pointwise"]["by_subset"] = {
            s: pointwise_cell([r for r in point if r["subset"] == s]) for s in _ordered_subsets(point)
        }
        out["pointwise"]["distribution"] = score_distribution(point)
    order = [r for r in rows if r["task"] == "ordering"]
    if order:
        out["ordering"] = ordering_cell(order)
    if explanations:
        expl = _explanations(rows)
        if expl is not None:
            out["explanations"] = expl
    return out


_ALIASES = {"macro_f1": "f1", "acc": "accuracy"}
PAIRWISE_METRICS = ("accuracy", "accuracy_all", "precision", "recall", "f1", "n", "n_valid", "n_invalid")
POINTWISE_METRICS = ("pointwise_accuracy", "pointwise_f1", *(f"{s}_{ref}" for ref in REFERENCES for s in ("r", "mae", "rmse")))
ORDERING_METRICS = ("exact_match", "exact_match_valid", "kendall_tau", "invalid_rate", "by_position_share")


def _cell_of(block: Mapping[str, Any] | None, subset: str) -> Mapping[str, Any] | None:
    """``block``'s cell for ``subset``: ``all``, a subset, a benchmark (pairwise) or a layout."""
    if not block:
        return None
    if subset == "all":
        return block["all"]
    for key in ("by_subset", "by_benchmark", "by_layout"):
        hit = block.get(key, {}).get(subset)
        if hit is not None:
            return hit.get("all", hit) if key != "by_layout" else hit
    return None


def metric_value(metrics: Mapping[str, Any], subset: str, metric: str) -> float | None:
    """One number of :func:`compute_judge_metrics` output, for objectives such as
    ``judge:PRISM-Temporal/macro_f1``.

    ``subset``: ``all``, a subset (``PRISM-Temporal``, ``MIRAGE-Vist``, …), a
    benchmark (``PRISM``, ``MIRAGE``) or a layout (``P6``). ``metric``: a pairwise
    one (:data:`PAIRWISE_METRICS`; ``macro_f1`` = ``f1``), a pointwise one
    (:data:`POINTWISE_METRICS`, e.g. ``r_teacher``, ``mae_gold``) or an ordering-probe
    one (:data:`ORDERING_METRICS`, ``subset`` ignored). ``None`` when the records hold
    no such cell or the value is undefined; an unknown metric name is an error.
    """
    name = _ALIASES.get(metric, metric)
    if name in PAIRWISE_METRICS:
        cell = _cell_of(metrics.get("pairwise"), subset)
        return None if cell is None else cell.get(name)
    if name in POINTWISE_METRICS:
        cell = _cell_of(metrics.get("pointwise"), subset)
        if cell is None:
            return None
        if name.startswith("pointwise_"):
            return cell.get(name.removeprefix("pointwise_"))
        stat, ref = name.split("_", 1)
        return cell[ref][stat]
    if name in ORDERING_METRICS:
        return (metrics.get("ordering") or {}).get(name)
    raise ValueError(
        f"unknown judge metric {metric!r}; pairwise: {', '.join(PAIRWISE_METRICS)} (macro_f1 = f1); "
        f"pointwise: {', '.join(POINTWISE_METRICS)}; ordering: {', '.join(ORDERING_METRICS)}"
    )
