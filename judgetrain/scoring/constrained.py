"""Constrained scoring, :func:`score`: for each item the log-probability of every
member of ``choices`` given the prompt, renormalised over the choices. A choice's
sequence log-probability is the SUM of its tokens' log-probabilities (or their
mean with ``reduction="mean"``); the prompt is encoded once per item, and a
choice of more than one token continues from a copy of the prompt's KV cache.

How the multi-token path works (and why it matches a full forward pass): the
prompts of a batch are encoded once, left-padded, with ``use_cache=True`` and
explicit position ids. Each (item, choice) that needs more than one token then
gets its own row of a copy of the cache (``batch_select_indices`` on a shallow
copy, so the prompt cache itself is never modified), and all those rows are fed
their choice tokens in one forward pass, right-padded. Qwen-VL models use
M-RoPE, whose positions after an image are not the token index: the suffix
positions continue from the prompt's largest position id (all three M-RoPE
components equal for text), which is what the model computes itself for
prompt + choice in one pass.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..models.registry import ModelFamily
from .batching import Batcher, BatchSize, continuation_pass, run_batched
from .lengths import item_order
from .model import ScoringModel, eval_mode, select_cache_rows
from .prompts import (
    FAMILY_PREFILL,
    FamilyPrefill,
    Item,
    NormalizedItem,
    as_sequence,
    describe_item,
    render_prompt,
    resolve_prefill,
    to_item,
)
from .results import ChoiceScores
from .vision import SharedImages

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, ProcessorMixin

__all__ = ["choice_token_ids_many", "finish_scores", "score"]


def _choice_token_ids(tokenizer: Any, text: str, choices: list[str], where: str) -> list[list[int]]:
    """Token ids of each choice as it continues ``text``: tokenise text + choice and
    drop the tokens of text alone (checked to be a prefix, so the split is the one
    the tokenizer itself makes)."""
    return choice_token_ids_many(tokenizer, [text], [choices], [where])[0]


def choice_token_ids_many(
    tokenizer: Any, texts: list[str], choices: list[list[str]], wheres: list[str], bases: list[list[int]] | None = None
) -> list[list[list[int]]]:
    """:func:`_choice_token_ids` for many texts in two tokenizer calls (``bases``: the
    texts' own token ids, when already known)."""
    if bases is None:
        bases = tokenizer(texts, add_special_tokens=False)["input_ids"]
    flat = [t + c for t, cs in zip(texts, choices, strict=True) for c in cs]
    fulls = iter(tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else [])
    out = []
    for base, cs, where in zip(bases, choices, wheres, strict=True):
        per_text = []
        for c in cs:
            ids = next(fulls)
            if not c:
                raise ValueError(f"{where}: an empty choice cannot be scored.")
            if ids[: len(base)] != base or len(ids) == len(base):
                raise ValueError(
                    f"{where}: the choice {c!r} merges with the end of the prompt when tokenised, so its "
                    "log-probability is not defined by the prompt's tokens. End the prompt (or the prefill) "
                    "at a token boundary, e.g. with a newline or a space, or drop the leading space from the choice."
                )
            per_text.append(ids[len(base) :])
        out.append(per_text)
    return out


def finish_scores(choices: list[str], raw: list[float], ntok: list[int], reduction: str) -> ChoiceScores:
    scores = raw if reduction == "sum" else [r / n for r, n in zip(raw, ntok, strict=True)]
    top = max(scores)
    lse = top + math.log(sum(math.exp(s - top) for s in scores))
    best = scores.index(top)  # first maximum: ties go to the lowest index
    return ChoiceScores(
        logprobs=[s - lse for s in scores],
        raw_logprobs=list(raw),
        prediction=choices[best],
        prediction_index=best,
        choices=list(choices),
        num_tokens=list(ntok),
    )


def _score_batch(
    m: ScoringModel,
    items: list[NormalizedItem],
    prefill: str | None,
    reduction: str,
    labels: list[str],
    batcher: Batcher,
    shared: SharedImages,
) -> list[ChoiceScores]:
    import torch

    texts = [render_prompt(m.processor, it.prompt, prefill) for it in items]
    choice_ids = [_choice_token_ids(m.tokenizer, t, it.choices, lab) for t, it, lab in zip(texts, items, labels, strict=True)]
    inputs = m.encode(texts, [it.images for it in items])
    pos, nxt = m.positions(inputs)
    multi = any(len(ids) > 1 for per_item in choice_ids for ids in per_item)

    # One pass over the prompts; the last position's logits give every choice's first token.
    logits, cache = m.forward(
        shared.inputs(inputs, [it.images for it in items]), position_ids=pos, use_cache=multi, last_only=True
    )
    last = logits[:, -1].float()
    owner = torch.tensor([b for b, per_item in enumerate(choice_ids) for _ in per_item], device=last.device)
    token = torch.tensor([ids[0] for per_item in choice_ids for ids in per_item], device=last.device)
    # Gather, then one transfer: no host sync per choice, no (batch, vocab) log-softmax copy.
    flat = (last[owner, token] - torch.logsumexp(last, dim=-1)[owner]).tolist()
    raw, k = [], 0
    for per_item in choice_ids:
        raw.append(flat[k : k + len(per_item)])
        k += len(per_item)

    if multi:
        # Every (item, choice) with more tokens continues from its own copy of the item's cache.
        rows = [(b, c) for b, per_item in enumerate(choice_ids) for c, ids in enumerate(per_item) if len(ids) > 1]
        cap = batcher.rows or len(rows)
        mask = inputs["attention_mask"]
        for start in range(0, len(rows), cap):
            chunk = rows[start : start + cap]
            with continuation_pass(len(chunk)):
                _score_continuations(m, chunk, choice_ids, cache, mask, nxt, raw)
    return [
        finish_scores(it.choices, r, [len(x) for x in ids], reduction) for it, r, ids in zip(items, raw, choice_ids, strict=True)
    ]


def _score_continuations(
    m: ScoringModel,
    chunk: list[tuple[int, int]],
    choice_ids: list[list[list[int]]],
    cache: Any,
    prompt_mask: torch.Tensor,
    nxt: torch.Tensor,
    raw: list[list[float]],
) -> None:
    """Add tokens 2..k of each (item, choice) in ``chunk`` to ``raw``, in one forward pass."""
    import torch

    dev = prompt_mask.device
    seqs = [choice_ids[b][c] for b, c in chunk]
    width = max(len(s) for s in seqs) - 1  # the last token is only ever a target
    inp = torch.full((len(chunk), width), m.pad_id, dtype=torch.long, device=dev)
    valid = torch.zeros((len(chunk), width), dtype=prompt_mask.dtype, device=dev)
    for r, s in enumerate(seqs):  # right-padded: real tokens never attend to the pads after them
        inp[r, : len(s) - 1] = torch.tensor(s[:-1], device=dev)
        valid[r, : len(s) - 1] = 1
    owner = torch.tensor([b for b, _ in chunk], device=dev)
    rows_cache = select_cache_rows(cache, owner)
    attn = torch.cat([prompt_mask[owner], valid], dim=1)
    pos = nxt[owner].unsqueeze(1) + torch.arange(width, device=dev)
    if m.rope_index is not None:  # M-RoPE: text positions are equal in all three components
        pos = pos.unsqueeze(0).expand(3, -1, -1)
    logits, _ = m.forward(
        {"input_ids": inp, "attention_mask": attn}, position_ids=pos, cache=rows_cache, use_cache=True, last_only=False
    )
    del rows_cache  # the copied keys/values are the big allocation here
    logits = logits.float()
    # Input position k predicts choice token k + 1; pad targets are 0 and masked out.
    targets = torch.zeros_like(inp)
    for r, s in enumerate(seqs):
        targets[r, : len(s) - 1] = torch.tensor(s[1:], device=dev)
    token_lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    sums = (token_lp * valid.to(token_lp.dtype)).sum(-1).tolist()
    for (b, c), add in zip(chunk, sums, strict=True):
        raw[b][c] += add


def score(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    items: Sequence[Item] | Iterable[Item],
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    reduction: Literal["sum", "mean"] = "sum",
    progress: bool = True,
    sort_by_length: bool = True,
    share_images: bool = True,
) -> list[ChoiceScores]:
    """Score every member of each item's ``choices`` given its prompt; one :class:`ChoiceScores` per item, in input order.

    A choice's sequence log-probability is the SUM of the log-probabilities of its
    tokens (as the tokenizer splits prompt + choice) given the rendered prompt and
    the choice's earlier tokens; ``logprobs`` are these renormalised over the
    choices (a log-softmax). With ``reduction="mean"`` the renormalisation uses the
    per-token mean instead (length normalisation); ``raw_logprobs`` stay sums.

    Cost: when every choice of every item in a batch is one token, one forward
    pass over the batch's prompts (last-position logits only). Otherwise the
    prompts are encoded once with a KV cache and one more pass scores all the
    multi-token continuations of the batch against copies of it.

    Args:
        model, processor: as ``judgetrain.models.load_model_and_processor`` returns
            them (a ``peft.PeftModel`` works too). Switched to eval mode for the call
            and restored after.
        items: task records, or ``(prompt messages, images, choices)`` tuples.
        family: registry family; ``None`` detects it from the model's config.
        prefill: text appended after the generation prompt; ``FAMILY_PREFILL`` uses
            the family's ``think_prefill``; ``None`` appends nothing.
        batch_size: items per forward pass, or ``"auto"`` (see :class:`Scorer`).
        reduction: ``"sum"`` (default) or ``"mean"``, see above.
        progress: show a tqdm bar over items.
        sort_by_length: batch items of similar length together, longest first
            (:mod:`~judgetrain.scoring.lengths`: less padding; reads every item once
            more up front, which decodes a lazy dataset's images twice). ``False``:
            batches in input order. Results are in input order either way.
        share_images: send each distinct image of the call through the vision tower
            once (:mod:`~judgetrain.scoring.vision`; Qwen-VL models), the same scores
            up to float rounding. ``False``: every item encodes its own images.

    Raises:
        ValueError: an item without choices (use :func:`generate`), an empty choice,
            or a choice whose tokens merge with the end of the prompt.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    m = ScoringModel(model, processor, family)
    seq = as_sequence(items)
    n = len(seq)
    pre = resolve_prefill(prefill, m.family, m.processor)

    def run(idx: list[int], batcher: Batcher) -> list[ChoiceScores]:
        raw = [seq[i] for i in idx]
        batch = [to_item(x, i) for x, i in zip(raw, idx, strict=True)]
        labels = [describe_item(x, i) for x, i in zip(raw, idx, strict=True)]
        for it, lab in zip(batch, labels, strict=True):
            if not it.choices:
                raise ValueError(
                    f"{lab} has no choices; constrained scoring needs a closed answer set. Use generate() for free-form tasks."
                )
        return _score_batch(m, batch, pre, reduction, labels, batcher, shared)

    shared = SharedImages(model, share_images)
    order = item_order(m.processor, seq, pre) if sort_by_length else None
    with eval_mode(model):
        return run_batched(n, run, Batcher(batch_size, m.device, max(n, 1)), progress, "scoring", order)
