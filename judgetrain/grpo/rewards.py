"""The rewards a GRPO-trained judge earns: plain functions over a generation batch's completions
and the columns of their records, called by TRL's ``GRPOTrainer`` as ``fn(prompts=…,
completions=…, completion_ids=…, **columns)`` and logged under their names
(``rewards/<name>/mean``). Each value lies in [0, 1]; ``None`` says the reward does not apply
to that record (TRL leaves it out of the reward's mean).

- ``correct``: the completion's answer, read by the engine's own parser for the record
  (:func:`judgetrain.scoring.parsers.parser_for_record`; after a ``<think>`` block), against
  the label: 1 or 0 for yes/no, a frame, a frame pair, A/B and a video-MCQ letter; 1 − |answer −
  label| / (highest − lowest score) for a 1–5 rating; (1 + τ) / 2 for an ordering, τ Kendall's
  between the answered and the gold permutation. Unparseable: 0, never guessed.
- ``format``: on a rationale record (its ``reference``, the gold completion, is a rationale
  then ``Answer: X``), 1 when the completion after any ``<think>`` block is a non-empty rationale
  then a last line ``Answer: X`` that the record's parser reads (the checks of
  ``judgetrain build rationales``), else 0 (an answer alone scores 0); ``None`` on a record
  whose reference is the answer alone.
- ``consistency``: the records presenting one question otherwise form a group: a pairwise item
  and its twin, the two sequences shown the other way round (``meta.twin``; ``meta.gold_letter``
  is the gold sequence's letter), or a video-MCQ question's views (``meta.group`` of
  ``meta.views``; slot j shows option ``meta.perm[j]``). A completion's preference is its
  answer mapped back to content (the gold sequence or the other; the option shown). Its reward
  is the share of the completions of the group's *other* records (all their generations, on
  every process) whose preference is its own; an unparseable one disagrees with everything
  and scores 0. ``None`` on a record in no group.

Docs: "how-to/grpo.md".
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from judgetrain.config import one_of
from judgetrain.data_builders.rationales.prompts import ANSWER_PREFIX, split_answer
from judgetrain.errors import did_you_mean
from judgetrain.eval.judge.ordering import kendall_tau
from judgetrain.mcq.views import LETTERS
from judgetrain.pairs import question_group
from judgetrain.scoring.parsers import Parser, parser_for_record

from .data import completion_text

__all__ = ["NAMES", "REWARDS", "Reward", "consistency", "correct", "format", "reward_functions"]

Reward = Callable[..., list[float | None]]
# the record columns every reward reads (``n_frames`` too where the dataset has it: frame answers are bounded by it)
_COLUMNS = ("id", "task", "choices", "label")


def correct(completions: Sequence[Any], **columns: Any) -> list[float | None]:
    """1.0 when the answer the record's parser reads from the completion is the label, else 0.0;
    a 1–5 rating earns 1 − |answer − label| / 4 (its choices' span), an ordering (1 + τ) / 2
    with τ Kendall's between the answered and the gold order. Unparseable: 0.0."""
    rows = _rows(completions, columns, _COLUMNS, "correct")
    return [_credit(completion_text(c), row) for c, row in zip(completions, rows, strict=True)]


def format(completions: Sequence[Any], **columns: Any) -> list[float | None]:  # the name TRL logs it by: shadows the builtin here
    """On a rationale record (``reference`` = a rationale, then ``Answer: X``): 1.0 when the
    completion, after any ``<think>`` block, is a non-empty rationale followed by a last line
    starting ``Answer:`` from which the record's parser reads an answer; else 0.0. ``None`` on a
    record whose reference is the answer alone."""
    rows = _rows(completions, columns, (*_COLUMNS, "reference"), "format")
    return [_formatted(completion_text(c), row) for c, row in zip(completions, rows, strict=True)]


def consistency(completions: Sequence[Any], **columns: Any) -> list[float | None]:
    """The share of the completions of the other records of the completion's group (pairwise
    twin, video-MCQ views; gathered over every process) whose preference (gold or other
    sequence; the option shown) is the completion's own; an unparseable one counts as
    disagreeing, an unparseable completion scores 0.0. ``None`` on a record in no group.
    ``RuntimeError`` when a group's records are not all in the generation batch."""
    rows = _rows(completions, columns, (*_COLUMNS, "meta"), "consistency")
    local = []
    for completion, row in zip(completions, rows, strict=True):
        meta = _meta(row)
        group = question_group(row["task"], meta)
        local.append((row["id"], group, _preference(completion_text(completion), row, meta) if group else None))
    # every process calls the rewards in lockstep (TRL), so the collective is safe; one process: the list as is
    from accelerate.utils import gather_object

    gathered = gather_object([(rid, group, pref) for rid, group, pref in local if group is not None])
    by_group: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    sizes: dict[str, int] = {}
    for rid, (key, size), pref in gathered:
        by_group[key].append((rid, pref))
        sizes[key] = size
    _check_complete(by_group, sizes)
    rewards: list[float | None] = []
    for rid, group, pref in local:
        if group is None:
            rewards.append(None)
            continue
        others = [p for r, p in by_group[group[0]] if r != rid]
        if not others:  # a question shown once (meta.views 1): nothing to agree with
            rewards.append(None)
        else:
            rewards.append(0.0 if pref is None else sum(p == pref for p in others) / len(others))
    return rewards


REWARDS: dict[str, Reward] = {"correct": correct, "format": format, "consistency": consistency}
NAMES = tuple(REWARDS)


def reward_functions(names: Sequence[str]) -> list[Reward]:
    """The reward functions named, in order (:data:`REWARDS`); ``ValueError`` naming the known ones for another name."""
    for name in names:
        if name not in REWARDS:
            raise ValueError(f"unknown reward {name!r}; the rewards are {one_of(NAMES)}{did_you_mean(name, NAMES)}")
    return [REWARDS[name] for name in names]


# --------------------------------------------------------------------------- the records' columns


def _rows(completions: Sequence[Any], columns: Mapping[str, Any], names: Sequence[str], reward: str) -> list[dict[str, Any]]:
    """One dict per completion of the columns ``names`` (and ``n_frames`` where given)."""
    missing = [name for name in names if name not in columns]
    if missing:
        raise ValueError(
            f"the {reward} reward reads the column(s) {missing} of the training records, which this dataset lacks; "
            "train on judgetrain task records (`judgetrain build …`), which judgetrain's GRPO training prepares"
        )
    names = [*names, *(["n_frames"] if "n_frames" in columns else [])]
    wrong = [f"{name} ({len(columns[name])})" for name in names if len(columns[name]) != len(completions)]
    if wrong:
        raise ValueError(f"the {reward} reward got {len(completions)} completions but columns of other lengths: {wrong}")
    return [{name: columns[name][i] for name in names} for i in range(len(completions))]


def _parser(row: Mapping[str, Any]) -> Parser:
    return parser_for_record({k: row.get(k) for k in ("task", "choices", "label", "n_frames")})


def _meta(row: Mapping[str, Any]) -> dict[str, Any]:
    meta = row.get("meta")
    return json.loads(meta) if isinstance(meta, str) and meta else dict(meta or {})


def _gold(parser: Parser, row: Mapping[str, Any]) -> str:
    """The label in the parser's canonical form."""
    gold = parser(str(row["label"]))
    if gold is None:
        raise ValueError(
            f"record {row['id']!r}: its label {row['label']!r} is not an answer its parser ({parser.name}) reads; "
            "rebuild the dataset with the current `judgetrain build`"
        )
    return gold


# --------------------------------------------------------------------------- correct


def _credit(text: str, row: Mapping[str, Any]) -> float:
    parser = _parser(row)
    answer = parser(text)
    if answer is None:
        return 0.0
    gold = _gold(parser, row)
    if row["task"] == "ordering":
        pred, true = _order(answer), _order(gold)
        return float(pred == true) if len(true) < 2 else (1.0 + kendall_tau(pred, true)) / 2.0
    choices = list(row["choices"] or [])
    if row["task"] == "pointwise" and len(choices) > 1 and all(c.isdigit() for c in choices):
        values = [int(c) for c in choices]
        return 1.0 - abs(int(answer) - int(gold)) / (max(values) - min(values))
    return float(answer == gold)


def _order(answer: str) -> list[int]:
    """An ordering parser's answer (``"2, 4, 1, 3"`` or ``"B-D-A-C"``) as 1-based image numbers."""
    return [int(t) if t.isdigit() else ord(t) - ord("A") + 1 for t in re.findall(r"\d+|[A-Z]", answer)]


# --------------------------------------------------------------------------- format


def _visible(text: str) -> str | None:
    """The text after a thinking block; None inside one that never closed (as the parsers read it)."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    return None if "<think>" in text else text


def _formatted(text: str, row: Mapping[str, Any]) -> float | None:
    parser = _parser(row)
    if not isinstance(split_answer(str(row["reference"] or ""), parser), tuple):
        return None  # the gold completion is the answer alone: no rationale asked for
    visible = _visible(text)
    if visible is None or not isinstance(split_answer(visible, parser), tuple):
        return 0.0
    return float(visible.strip().splitlines()[-1].strip().startswith(ANSWER_PREFIX.strip()))


# --------------------------------------------------------------------------- consistency


def _preference(text: str, row: Mapping[str, Any], meta: Mapping[str, Any]) -> str | int | None:
    """What a grouped record's answer prefers, whatever the presentation: ``"gold"`` / ``"other"``
    for a pairwise twin, the option's index in the manifest order for a video-MCQ view."""
    letter = _parser(row)(text)
    key = "gold_letter" if row["task"] == "pairwise" else "perm"
    if key not in meta:
        raise ValueError(
            f"record {row['id']!r} ({row['task']}): meta has no {key!r}, which the consistency reward maps its answer "
            "back with; rebuild the dataset with the current `judgetrain build`"
        )
    if letter is None:
        return None
    if row["task"] == "pairwise":
        return "gold" if letter == meta["gold_letter"] else "other"
    return int(meta["perm"][LETTERS.index(letter)])


def _check_complete(by_group: Mapping[str, list[tuple[str, Any]]], sizes: Mapping[str, int]) -> None:
    """``RuntimeError`` when a group of the generation batch has fewer records than it presents."""
    for key, members in by_group.items():
        ids = sorted({rid for rid, _ in members})
        if len(ids) < sizes[key]:
            raise RuntimeError(
                f"the consistency reward found {len(ids)} of the {sizes[key]} records of question {key} ({ids}) in "
                "this generation batch: a question's presentations (pairwise twins, video-MCQ views) must meet in one "
                "generation batch. judgetrain's GRPO data order guarantees it (judgetrain.grpo.question_order: each "
                "question's records consecutive, a generation batch a whole number of questions); these records "
                "reached the trainer in another order, a bug to report"
            )
