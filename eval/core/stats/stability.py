"""Answer stability (paper 001 §2.1, §2.2, §4.3): accuracy per arm, the disagreement between
arms (phases, samplers, origins), the any-of-``k`` change rate, the consensus answer over
orderings and the ordering flip, and the answer margin.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .checks import StatsError, as_array, as_bools

__all__ = [
    "accuracy_by_arm",
    "answer_margin",
    "any_change_rate",
    "consensus_answer",
    "disagreement",
    "flipped",
    "pairwise_disagreement",
]


def _answers(answers: Mapping[str, Sequence[Any]], least: int) -> list[tuple[str, list[Any]]]:
    """The arms as (name, answers) lists, checked: at least ``least`` arms, none empty, all of one length."""
    arms = [(str(arm), list(values)) for arm, values in answers.items()]
    if len(arms) < least:
        raise StatsError(f"answers: need at least {least} arms, got {len(arms)} ({[a for a, _ in arms]})")
    for arm, values in arms:
        if not values:
            raise StatsError(f"answers[{arm!r}]: no items")
    lengths = {arm: len(values) for arm, values in arms}
    if len(set(lengths.values())) > 1:
        raise StatsError(f"answers: every arm must answer the same items in the same order, got lengths {lengths}")
    return arms


def accuracy_by_arm(correct: Mapping[str, Sequence[bool]]) -> dict[str, dict[str, Any]]:
    """Accuracy of every arm: ``{arm: {"accuracy", "correct", "n"}}``.

    ``correct[arm]`` holds one bool per question (True = the arm's answer equals gold).
    Arms may cover different questions; compare arms on shared items with :func:`mcnemar_exact`.
    """
    if not correct:
        raise StatsError("correct: no arms")
    out = {}
    for arm, values in correct.items():
        arr = as_bools(values, f"correct[{arm!r}]")
        out[str(arm)] = {"accuracy": float(arr.mean()), "correct": int(arr.sum()), "n": int(arr.size)}
    return out


def disagreement(a_answers: Sequence[Any], b_answers: Sequence[Any]) -> float:
    """Fraction of items whose answers differ between two arms (paper 001 §2.2's
    pairwise phase disagreement). Answers are content indices (or any values
    compared with ``==``; an invalid answer stored as None differs from every index)."""
    return _pair("a", list(a_answers), "b", list(b_answers))[2]


def _pair(a: str, xa: list[Any], b: str, xb: list[Any]) -> tuple[str, str, float, int]:
    arms = _answers({a: xa, b: xb}, 2)
    changed = sum(x != y for x, y in zip(arms[0][1], arms[1][1], strict=True))
    return a, b, changed / len(xa), changed


def pairwise_disagreement(answers: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Disagreement for every unordered pair of arms, in the mapping's order:
    ``[{"a", "b", "rate", "changed", "n"}, …]``."""
    arms = _answers(answers, 2)
    out = []
    for i, (a, xa) in enumerate(arms):
        for b, xb in arms[i + 1 :]:
            _, _, rate, changed = _pair(a, xa, b, xb)
            out.append({"a": a, "b": b, "rate": rate, "changed": changed, "n": len(xa)})
    return out


def any_change_rate(answers: Mapping[str, Sequence[Any]]) -> float:
    """Fraction of items whose answer is not the same under every arm (§2.2: "the
    answer changes at least once" over the three phases). Needs at least two arms."""
    arms = _answers(answers, 2)
    per_item = zip(*(values for _, values in arms), strict=True)
    return sum(any(x != row[0] for x in row[1:]) for row in per_item) / len(arms[0][1])


def consensus_answer(content_idxs: Sequence[int]) -> int:
    """Plurality content index over orderings, ties broken by the lowest index (§2.1;
    scipy.stats.mode returns the smallest of tied modes)."""
    from scipy.stats import mode

    arr = as_array(content_idxs, "content_idxs", dtype=int)
    return int(mode(arr).mode)


def flipped(content_idxs: Sequence[int]) -> bool:
    """True when the chosen content index is not constant across orderings (App. C)."""
    arr = as_array(content_idxs, "content_idxs", dtype=int)
    return bool((arr != arr[0]).any())


def answer_margin(probs: Sequence[float]) -> float:
    """Top-1 minus top-2 probability of one (renormalised or fused) option posterior (§4.3).
    A single option has margin 1."""
    arr = as_array(probs, "probs")
    if len(arr) == 1:
        return 1.0
    top = np.sort(arr)[::-1]
    return float(top[0] - top[1])
