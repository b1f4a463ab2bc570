"""The pairs of a reward-model run (``judgetrain eval judge --mode reward``): each gold sequence's
reward against each of its negatives', from ``predictions.jsonl`` rows alone.

A reward run writes one row per PRISM pointwise record (one sequence each) with its ``reward``,
``gold_id``, ``variant`` and ``score``; :func:`reward_pairs` pairs them as training does
(:func:`judgetrain.pairs.sequence_pairs`: chosen = the gold sequence's record, rejected = a
negative's, same gold and layout), so the report (:mod:`judgetrain.eval.judge.reward_metrics`) and
the run browser (:mod:`judgetrain.eval.view`) read the same pairs. The gold wins a pair when its
reward is strictly higher; an equal reward is a tie, counted as neither.
Docs: "concepts/prism-mirage.md", "how-to/reward-models.md".
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["REWARD_MODE", "bt_probability", "reward_pairs"]

# run.json's `mode` of a reward-model run
REWARD_MODE = "reward"


def bt_probability(gold: float, negative: float) -> float:
    """P(gold ≻ negative) under the Bradley–Terry model the rewards are trained with: σ(r_gold − r_negative)."""
    return 1.0 / (1.0 + math.exp(-(gold - negative)))


def _group(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(row.get("source")), str(row.get("gold_id")), str(row.get("layout")))


def reward_pairs(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """``(pairs, unpaired)``: every (gold, negative) pair of the rows of a reward run, in row order
    of the negatives, and how many rows could not be paired (a gold sequence whose own record has
    no row yet: a run stopped before its end, to be resumed). Each pair: ``id`` (the negative's
    record), ``gold`` (the gold's record), ``key`` (:func:`judgetrain.pairs.pair_key`, as a list),
    ``perturbation``, ``layout``, ``source``, ``reward_gold``, ``reward_negative`` and ``winner``
    (``"gold"``, ``"negative"`` or ``"tie"``)."""
    from judgetrain.pairs import GOLD_VARIANT, sequence_pairs

    golds = Counter(_group(r) for r in rows if r.get("variant") == GOLD_VARIANT)
    kept = [r for r in rows if golds[_group(r)] == 1]
    found = sequence_pairs(
        [str(r["task"]) for r in kept],
        [str(r["source"]) for r in kept],
        [str(r["layout"]) for r in kept],
        [str(r["perturbation"]) for r in kept],
        [{"gold_id": r.get("gold_id"), "variant": r.get("variant"), "score": r.get("score")} for r in kept],
        [str(r["id"]) for r in kept],
        where="predictions",
    )
    pairs = []
    for p in found:
        gold, neg = kept[p.chosen], kept[p.rejected]
        rg, rn = float(gold["reward"]), float(neg["reward"])
        pairs.append(
            {
                "id": neg["id"],
                "gold": gold["id"],
                "key": list(p.key),
                "perturbation": p.perturbation,
                "layout": neg["layout"],
                "source": neg["source"],
                "reward_gold": rg,
                "reward_negative": rn,
                "winner": "gold" if rg > rn else ("negative" if rn > rg else "tie"),
            }
        )
    return pairs, len(rows) - len(kept)
