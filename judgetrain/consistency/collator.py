"""A question's views in one micro-batch: the training set and the collator of consistency tuning.

The records are ordinary view records (``judgetrain build consistency-views``: one per
view, ``meta.group`` = the question, ``meta.view`` = 0..V−1). :class:`ViewGroups` is the
set the Trainer samples from: item ``i`` is a :class:`ViewGroup`, every view of question
``i``, so the Trainer's own shuffling, sharding across processes, gradient accumulation
and resume move whole questions and ``per_device_train_batch_size`` counts questions. A
:class:`ViewGroup` is not a dict, so the Trainer's column filter hands it on untouched.

:class:`ViewGroupCollator` lays a micro-batch's questions out as rows, V per question,
through TRL's own vision collator (so text, images, labels and the completion mask are
exactly what ``SFTTrainer`` trains on), and adds what the loss needs to pair the rows
(:data:`BATCH_KEYS`): each row's question within the micro-batch, its view index, its
gold option, the slot showing each option, and the token id of each live letter, found
as the scoring engine finds it (``judgetrain.scoring.constrained.choice_token_ids_many``
on the rendered prompt) so training and evaluation read the same token.
Docs: "how-to/consistency-tuning.md".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from judgetrain.errors import UserError

__all__ = ["BATCH_KEYS", "ViewDataError", "ViewGroup", "ViewGroupCollator", "ViewGroups"]

# collator outputs the loss reads and removes before the model's forward
BATCH_KEYS = (
    "consistency_group",
    "consistency_view",
    "consistency_answer",
    "consistency_slot_of_content",
    "consistency_letter_ids",
)


class ViewDataError(UserError, ValueError):
    """Training records that are not complete view groups; the message names the question and the fix."""


@dataclass(frozen=True)
class ViewGroup:
    """Every view of one question, in view order (``records[v]`` is view ``v``)."""

    group: str
    records: tuple[dict[str, Any], ...]


class ViewGroups:
    """A map-style dataset over view ``records`` (a ``datasets.Dataset``): item ``i`` is the
    :class:`ViewGroup` of the ``i``-th question in order of first appearance.

    Refuses, listing every problem: a record without ``meta.group``/``meta.view``, a question
    whose views are not exactly 0..V−1 once each (a filter such as ``max_train_samples`` cut
    it), and views of one question that disagree on the gold option or the options."""

    def __init__(self, records, name: str = "train"):
        self.records = records
        metas = [json.loads(m) for m in records.select_columns(["meta"])["meta"]]
        rows: dict[str, dict[int, int]] = {}
        problems = []
        for i, meta in enumerate(metas):
            if "group" not in meta or "view" not in meta:
                problems.append(
                    f"{name} row {i}: meta has no 'group'/'view'; consistency tuning trains on view records "
                    "(`judgetrain build consistency-views`)"
                )
                continue
            views = rows.setdefault(str(meta["group"]), {})
            if meta["view"] in views:
                problems.append(
                    f"{name}: question {meta['group']!r} has view {meta['view']} twice (rows {views[meta['view']]} "
                    f"and {i}); mixture_weights or a repeated dataset duplicates views"
                )
            views.setdefault(int(meta["view"]), i)
        for group, views in rows.items():
            want = int(metas[next(iter(views.values()))].get("views", len(views)))
            if sorted(views) != list(range(want)):
                problems.append(
                    f"{name}: question {group!r} has views {sorted(views)} of 0..{want - 1}; a filter cut its views "
                    f"(max_train_samples / max_eval_samples: use a multiple of {want}, or none)"
                )
            facts = {(metas[i]["answer"], tuple(metas[i]["options"])) for i in views.values()}
            if len(facts) > 1:
                problems.append(f"{name}: the views of question {group!r} disagree on the options or the gold option")
        if problems:
            shown = problems[:20] + ([f"… and {len(problems) - 20} more"] if len(problems) > 20 else [])
            raise ViewDataError(f"{len(problems)} problem(s) with the view records:\n" + "\n".join(f"  - {p}" for p in shown))
        self.groups = list(rows)
        self.rows = [[views[v] for v in sorted(views)] for views in rows.values()]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> ViewGroup:
        if i >= len(self.rows):
            raise IndexError(i)  # ends iteration by the sequence protocol
        return ViewGroup(self.groups[i], tuple(self.records[j] for j in self.rows[i]))


class ViewGroupCollator:
    """``inner`` (TRL's ``DataCollatorForVisionLanguageModeling``) over every view of a
    micro-batch of :class:`ViewGroup` items, plus :data:`BATCH_KEYS`, each with one entry
    per row (``N`` = the most options in the micro-batch, padded with −1):

    - ``consistency_group`` (R,): the question's index in the micro-batch;
    - ``consistency_view`` (R,): ``meta.view``;
    - ``consistency_answer`` (R,): the gold option (0-based, manifest order);
    - ``consistency_slot_of_content`` (R, N): the slot (0-based letter) showing option ``c``;
    - ``consistency_letter_ids`` (R, N): the token id of the letter of slot ``j``.
    """

    def __init__(self, inner, processor):
        self.inner = inner
        self.processor = processor

    def __call__(self, items: list[ViewGroup]) -> dict[str, Any]:
        import torch

        rows = [(q, dict(r)) for q, item in enumerate(items) for r in item.records]
        metas = [json.loads(r["meta"]) for _, r in rows]
        letters = self.letter_ids([r for _, r in rows])
        batch = self.inner([dict(r) for _, r in rows])  # the inner collator rewrites its examples
        width = max(len(m["options"]) for m in metas)
        slot_of = torch.full((len(rows), width), -1, dtype=torch.long)
        letter_ids = torch.full((len(rows), width), -1, dtype=torch.long)
        for r, (meta, ids) in enumerate(zip(metas, letters, strict=True)):
            for slot, content in enumerate(meta["perm"]):
                slot_of[r, content] = slot
            letter_ids[r, : len(ids)] = torch.tensor(ids)
        batch["consistency_group"] = torch.tensor([q for q, _ in rows], dtype=torch.long)
        batch["consistency_view"] = torch.tensor([m["view"] for m in metas], dtype=torch.long)
        batch["consistency_answer"] = torch.tensor([m["answer"] for m in metas], dtype=torch.long)
        batch["consistency_slot_of_content"] = slot_of
        batch["consistency_letter_ids"] = letter_ids
        return batch

    def letter_ids(self, records: list[dict[str, Any]]) -> list[list[int]]:
        """Each record's letters (``choices``) as single tokens after its rendered prompt, as the
        scoring engine splits them; ViewDataError for a letter that is not one token."""
        from judgetrain.scoring import render_prompt
        from judgetrain.scoring.constrained import choice_token_ids_many

        texts = [render_prompt(self.processor, r["prompt"]) for r in records]
        ids = choice_token_ids_many(
            self.processor.tokenizer, texts, [list(r["choices"]) for r in records], [f"record {r['id']!r}" for r in records]
        )
        out = []
        for r, per_record in zip(records, ids, strict=True):
            long = [c for c, t in zip(r["choices"], per_record, strict=True) if len(t) != 1]
            if long:
                raise ViewDataError(
                    f"record {r['id']!r}: the letter(s) {long} are more than one token after the prompt; the "
                    "option posterior is read at one answer position, so each letter must be one token"
                )
            out.append([t[0] for t in per_record])
        return out
