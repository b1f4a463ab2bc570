"""The single pass's reliability signals (paper 001 App. H–I, Tables S10–S11, Fig. S2):
what ranks a question as likely to flip under another option ordering, or to be answered
wrongly, and how they compare.

Signals of one question's single pass (:data:`SIGNALS`): the answer margin (top-1 minus
top-2 posterior at the identity ordering), the top-1 probability (MSP), the negated answer
entropy, the **K-ordering vote share** (the share of the K orderings whose answer is their
plurality answer; the paper's "ten-pass self-consistency vote-share", K = 10, takes K
values), and a random score (seeded by sha256 of the question id).

- **Targets.** Flip prediction: did the answer change across orderings. Correctness: was
  the identity pass right, the target every signal shares (Table S11), so two signals are
  compared on the same labels by DeLong's test of correlated AUROCs. The vote share has
  no flip AUROC: the flip is read off the same K orderings it counts.
- **Deployed answers.** Selective prediction (Table S10's Learn-then-Test, Fig. S2's
  risk–coverage) scores each protocol on the answer it would deploy: the identity pass's
  for the one-pass signals, the plurality over the K orderings for the vote share.

Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core import stats

__all__ = ["SIGNALS", "VOTE_SHARE", "deployed_error", "reliability_signals", "signal_value", "vote_share"]

VOTE_SHARE = "vote share"
SIGNALS = ("margin", "top-1 prob.", "neg. entropy", VOTE_SHARE, "random")


def vote_share(item: Mapping[str, Any]) -> float:
    """The share of the question's orderings whose answer is their plurality answer."""
    answers = list(item["answers"])
    return answers.count(item["consensus"]) / len(answers)


def signal_value(name: str, item: Mapping[str, Any], qid: str) -> float:
    """Signal ``name`` of one question's per-question answers (higher: more reliable)."""
    if name == "margin":
        return float(item["margin"])
    if name == "top-1 prob.":
        return float(np.max(item["posterior"]))
    if name == "neg. entropy":
        from scipy.stats import entropy

        return -float(entropy(np.asarray(item["posterior"], dtype=float)))
    if name == VOTE_SHARE:
        return vote_share(item)
    if name == "random":
        from judgetrain.seeding import rng_for

        return float(rng_for("ltt-random-signal", qid).random())  # the Random row: a score unrelated to the item
    raise ValueError(f"unknown signal {name!r}: use one of {', '.join(SIGNALS)}")


def deployed_error(name: str, item: Mapping[str, Any]) -> bool:
    """Is the answer the protocol of signal ``name`` deploys wrong (module docstring)?"""
    return not (item["consensus_correct"] if name == VOTE_SHARE else item["correct"])


def _auroc_row(qs: Sequence[str], single: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Any]:
    """One signal's AUROCs, with DeLong's p against the margin on each target (descriptive)."""
    score = [signal_value(name, single[q], q) for q in qs]
    margin = [signal_value("margin", single[q], q) for q in qs]
    targets = {"correct": [bool(single[q]["correct"]) for q in qs]}
    if name != VOTE_SHARE:
        targets["flip"] = [bool(single[q]["flip"]) for q in qs]
    row: dict[str, Any] = {"signal": name, "n": len(qs), "passes": 1 if name != VOTE_SHARE else len(single[qs[0]]["answers"])}
    for target, labels in (("flip", targets.get("flip")), ("correct", targets["correct"])):
        if labels is None:
            row[f"auroc_{target}"] = row[f"p_vs_margin_{target}"] = None
            continue
        sign = -1.0 if target == "flip" else 1.0  # low reliability predicts a flip
        row[f"auroc_{target}"] = stats.or_none(stats.auroc, [sign * s for s in score], labels)
        test = (
            None
            if name == "margin"
            else stats.or_none(stats.delong_auroc_difference, [sign * s for s in margin], [sign * s for s in score], labels)
        )
        row[f"p_vs_margin_{target}"] = test["pvalue"] if test else None
    return row


def reliability_signals(pq: Mapping[str, Mapping[str, Mapping[str, Any]]], order: Sequence[str]) -> dict[str, Any] | None:
    """Table S11: AUROC of each signal of the single pass for flips and for its correctness, with
    DeLong's p against the margin (uncorrected: two of these comparisons are Table S2's). The
    fused-margin rows are the margin table's (``metrics["margin"]``), on each arm's own answers.
    ``None`` without a single arm of K ≥ 2 orderings."""
    single = pq.get("single")
    if not single:
        return None
    qs = [q for q in order if q in single]
    if not qs or len(single[qs[0]]["answers"]) < 2:
        return None
    return {
        "n": len(qs),
        "orderings": len(single[qs[0]]["answers"]),
        "rows": [_auroc_row(qs, single, name) for name in SIGNALS],
        "test": "DeLong, two-sided, against the margin on the same items and target",
    }
