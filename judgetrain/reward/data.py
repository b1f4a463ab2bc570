"""The pairs a reward model trains on, as TRL's ``RewardTrainer`` takes them, and their collator.

A pair is a gold sequence against one of its perturbations, both PRISM pointwise records of one
dataset split (:func:`judgetrain.pairs.sequence_pairs`): chosen = the gold, rejected = the
perturbed. A pair is one row (``chosen_ids``, ``rejected_ids``: each record's prompt as the
processor tokenizes it, images expanded; ``chosen``, ``rejected``: the records' indices; ``margin``
when the recipe asks for one), so its two sequences are always in the same batch and step.
:class:`PairCollator` renders each record's prompt as the scoring engine does
(:func:`judgetrain.scoring.prompts.render_prompt`, chat template with the generation prompt) and
puts the chosen sequences first, then the rejected ones, as TRL's ``DataCollatorForPreference``
does with token ids; TRL's loss splits the batch's rewards in two halves the same way.

A record longer than ``max_length`` is refused (TRL's reward dataset preparation would drop it
silently: ``max_length`` goes to TRL as None, :mod:`judgetrain.train.settings`).
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from judgetrain.pairs import PairError, sequence_pairs
from judgetrain.scoring.prompts import render_prompt
from judgetrain.train.args import ConfigError

__all__ = ["PairCollator", "pair_rows", "record_token_ids"]


def record_token_ids(processor, row: dict) -> list[int]:
    """The token ids of a record's prompt as the reward model reads it (images expanded)."""
    images = list(row["images"] or [])
    batch = processor(text=[render_prompt(processor, row["prompt"])], images=[images] if images else None)
    return list(batch["input_ids"][0])


def pair_rows(records, processor, *, name: str, offset: int = 0, max_length: int | None, margin_per_score_point=None):
    """A ``datasets.Dataset`` of the pairs of ``records`` (rows as the module docstring says; record indices
    shifted by ``offset``, where these records sit in the collator's records). ``ConfigError`` for records that
    do not pair or are longer than ``max_length``."""
    import datasets
    from tqdm.auto import tqdm

    try:
        pairs = sequence_pairs(
            records["task"],
            records["source"],
            records["layout"],
            records["perturbation"],
            records["meta"],
            records["id"],
            where=name,
        )
    except PairError as e:
        raise ConfigError([str(e)]) from None
    if not pairs:
        raise ConfigError([f"{name}: no gold-versus-perturbed pairs in these records; build PRISM with pointwise records"])
    quiet = os.environ.get("LOCAL_RANK", "0") != "0"
    ids = [record_token_ids(processor, row) for row in tqdm(records, desc=f"tokenizing {name} records", disable=quiet)]
    too_long = [(records[i]["id"], len(t)) for i, t in enumerate(ids) if max_length is not None and len(t) > max_length]
    if too_long:
        longest = max(n for _, n in too_long)
        raise ConfigError(
            [
                f"max_length: {len(too_long)} {name} record(s) are longer than max_length={max_length} tokens (e.g. "
                f"{too_long[:3]}); a reward model reads whole sequences. Set `max_length: {longest}` (or more), lower "
                "max_pixels, or cap frames with `max_frames:`"
            ]
        )
    columns: dict[str, list[Any]] = {
        "chosen_ids": [ids[p.chosen] for p in pairs],
        "rejected_ids": [ids[p.rejected] for p in pairs],
        "chosen": [p.chosen + offset for p in pairs],
        "rejected": [p.rejected + offset for p in pairs],
    }
    if margin_per_score_point is not None:
        columns["margin"] = [margin_per_score_point * _score_gap(p, name) for p in pairs]
    return datasets.Dataset.from_dict(columns)


def _score_gap(pair, name: str) -> float:
    if pair.chosen_score is None or pair.rejected_score is None:
        raise ConfigError([f"margin_per_score_point: {name} pair {pair.key} has no PRISM scores (meta.score); drop the margin"])
    return float(pair.chosen_score) - float(pair.rejected_score)


@dataclass
class PairCollator:
    """Pairs → one batch: the chosen sequences' prompts, then the rejected ones', through the processor
    (padded as it pads; the head reads each row's last non-pad token), and ``margin`` when the pairs have one."""

    records: Any  # the records every pair row indexes (training and evaluation records, concatenated)
    processor: Any

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        index = [int(e["chosen"]) for e in examples] + [int(e["rejected"]) for e in examples]
        rows = [self.records[i] for i in index]
        images = [list(r["images"] or []) for r in rows]
        texts = [render_prompt(self.processor, r["prompt"]) for r in rows]
        batch = dict(self.processor(text=texts, images=images if any(images) else None, return_tensors="pt", padding=True))
        if "margin" in examples[0]:
            batch["margin"] = torch.tensor([float(e["margin"]) for e in examples], dtype=torch.float)
        return batch
