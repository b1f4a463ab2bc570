"""Rewards: one scalar per item from a reward model (a judge's decoder with a scalar head,
:mod:`judgetrain.models.reward`), batched as the rest of the engine batches.

Each item (a task record, or a ``(prompt messages, images)`` tuple: one image sequence and its
text) is rendered with the chat template and ``add_generation_prompt=True``, as training renders
it (:mod:`judgetrain.reward.data`), encoded left-padded, and scored alone: the head reads the
last token's hidden state, so an item's reward does not depend on the others in its batch, nor
on the order of the batch. Higher is more temporally coherent.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .batching import Batcher, BatchSize, run_batched
from .lengths import item_order
from .model import ScoringModel, eval_mode
from .prompts import Item, as_sequence, render_prompt, to_item

__all__ = ["reward_scores"]


def reward_scores(
    model: Any,
    processor: Any,
    items: Sequence[Item] | Iterable[Item],
    *,
    batch_size: BatchSize = "auto",
    progress: bool = True,
    sort_by_length: bool = True,
) -> list[float]:
    """The reward of each item, in input order.

    Args:
        model, processor: as :func:`judgetrain.models.reward.load_reward_model` returns them.
        items: task records or ``(prompt messages, images)`` tuples (choices, if any, are not read).
        batch_size: items per forward pass, or ``"auto"`` (see :class:`~judgetrain.scoring.Scorer`).
        progress: a tqdm bar over items.
        sort_by_length: batches of similar length, longest first (less padding); results are
            in input order either way.
    """
    m = ScoringModel(model, processor, None)
    seq = as_sequence(items)
    n = len(seq)

    def run(idx: list[int], batcher: Batcher) -> list[float]:
        batch = [to_item(seq[i], i) for i in idx]
        texts = [render_prompt(m.processor, it.prompt, None) for it in batch]
        inputs = m.encode(texts, [it.images for it in batch])
        return model(**inputs).logits[:, 0].float().tolist()

    order = item_order(m.processor, seq, None) if sort_by_length else None
    with eval_mode(model):
        return run_batched(n, run, Batcher(batch_size, m.device, max(n, 1)), progress, "rewards", order)
