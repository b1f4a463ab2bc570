"""What the records of one question, or of one gold sequence, have to do with each other: the
structure GRPO's consistency reward and the reward models both read.

- **Presentations of one question** (:func:`question_group`): a pairwise item and its twin (the
  same two sequences the other way round, ``judgetrain build prism --twins``, ``meta.twin``), the
  views of a video-MCQ question (``meta.group``, ``meta.views``).
- **A gold sequence and its perturbations** (:func:`sequence_pairs`): PRISM's pointwise records
  show one sequence each, the gold one (``meta.variant == "gold"``) and each of its negatives
  (a swap, a non-consecutive swap, a shuffle, 1–3 out-of-context images) under the same layout;
  a reward model learns to score the gold above each (chosen = gold, rejected = the perturbed),
  and is evaluated on the same pairs. :func:`pair_key` names a pair as the pairwise record that
  shows the same two sequences names it, so a reward model and a generative judge are compared
  on the same items.

A leaf: records only. Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GOLD_VARIANT", "SequencePair", "pair_key", "question_group", "sequence_pairs"]

# meta.variant of the gold sequence's own pointwise record (PRISM)
GOLD_VARIANT = "gold"


def _meta(meta: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if isinstance(meta, str):
        return json.loads(meta) if meta else {}
    return meta or {}


def question_group(task: str, meta: Mapping[str, Any] | str | None) -> tuple[str, int] | None:
    """``(key, records in the group)`` of the question a record presents, or None: a pairwise
    twin (``meta.twin``, 2 records) or a video-MCQ view (``meta.group``, ``meta.views``)."""
    meta = _meta(meta)
    if task == "pairwise" and meta.get("twin"):
        return f"twin:{meta['twin']}", 2
    if task == "video_mcq" and meta.get("group") is not None and meta.get("views"):
        return f"views:{meta['group']}", int(meta["views"])
    return None


def pair_key(source: str, layout: str, meta: Mapping[str, Any] | str | None) -> tuple[str, str, str, str]:
    """``(source, gold_id, variant, layout)``: the gold sequence, the negative it is compared with,
    and the layout both are shown in. Equal for a PRISM pairwise record (and its twin) and for the
    pointwise pair of the same two sequences."""
    meta = _meta(meta)
    return (str(source), str(meta.get("gold_id")), str(meta.get("variant")), str(layout))


@dataclass(frozen=True)
class SequencePair:
    """One gold sequence against one of its negatives: the indices of their pointwise records
    (``chosen`` the gold, ``rejected`` the negative), the pair's :func:`pair_key`, the negative's
    ``perturbation`` and the two records' pointwise scores (PRISM's 1–5; 5 for the gold)."""

    chosen: int
    rejected: int
    key: tuple[str, str, str, str]
    perturbation: str
    chosen_score: int | None
    rejected_score: int | None


class PairError(ValueError):
    """Records that do not make gold-versus-negative pairs, each named with the fix."""


def sequence_pairs(
    tasks: Sequence[str],
    sources: Sequence[str],
    layouts: Sequence[str],
    perturbations: Sequence[str],
    metas: Sequence[Mapping[str, Any] | str | None],
    ids: Sequence[str],
    *,
    where: str = "records",
) -> list[SequencePair]:
    """Every (gold, negative) pair of pointwise records that show one gold sequence
    (``meta.gold_id``) under one layout, in record order of the negatives. Every record must be
    pointwise and find its gold (nothing is left out silently): ``PairError`` names the first
    records that do not, and how to build records that do."""
    groups: dict[tuple[str, str, str], dict[str, list[int]]] = defaultdict(lambda: {"gold": [], "negatives": []})
    problems: list[str] = []
    for i, (task, source, layout, meta) in enumerate(zip(tasks, sources, layouts, metas, strict=True)):
        meta = _meta(meta)
        if task != "pointwise" or meta.get("gold_id") is None:
            problems.append(f"{where}: record {ids[i]!r} is {task!r}, not a PRISM pointwise record of a gold sequence")
            continue
        group = groups[(str(source), str(meta["gold_id"]), str(layout))]
        group["gold" if meta.get("variant") == GOLD_VARIANT else "negatives"].append(i)
    for (source, gold_id, layout), group in groups.items():
        if len(group["gold"]) != 1:
            found = "no" if not group["gold"] else f"{len(group['gold'])}"
            problems.append(
                f"{where}: gold sequence {gold_id!r} ({source}, layout {layout}) has {found} gold pointwise record(s) "
                "where one is needed"
            )
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise PairError(
            "; ".join(problems[:5]) + more + ". A reward model trains and is evaluated on a gold sequence against its "
            "perturbations: build PRISM with pointwise records (`judgetrain build prism --modes pointwise` or both) and "
            "keep only them (`tasks: [pointwise]` in a recipe, `--tasks pointwise` for eval)"
        )
    pairs = []
    for (source, _gold_id, layout), group in groups.items():
        gold = group["gold"][0]
        for neg in group["negatives"]:
            meta, gmeta = _meta(metas[neg]), _meta(metas[gold])
            pairs.append(
                SequencePair(
                    chosen=gold,
                    rejected=neg,
                    key=pair_key(source, layout, meta),
                    perturbation=str(perturbations[neg]),
                    chosen_score=gmeta.get("score"),
                    rejected_score=meta.get("score"),
                )
            )
    pairs.sort(key=lambda p: p.rejected)
    return pairs
