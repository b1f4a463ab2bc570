"""Shared-prefix scoring, :func:`score_shared_prefix`: the same scores as
:func:`~judgetrain.scoring.score` for many prompts that show the same images and
differ only after them (one video question under several option orderings): the
images and the shared text are encoded once per :class:`PrefixGroup`, and every
prompt's rest is scored against a copy of that cache.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..models.registry import ModelFamily
from .batching import Batcher, BatchSize, continuation_pass, run_batched
from .constrained import choice_token_ids_many, finish_scores
from .lengths import prompts_order
from .model import ScoringModel, eval_mode, select_cache_rows
from .prompts import FAMILY_PREFILL, FamilyPrefill, as_sequence, render_prompt, resolve_prefill
from .results import ChoiceScores
from .vision import SharedImages

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, ProcessorMixin

__all__ = ["PrefixGroup", "score_shared_prefix", "shared_split"]


@dataclass(frozen=True)
class PrefixGroup:
    """Prompts that show the same images and differ only in the text after the last image,
    each with its own closed answer set: one video question under several option orderings.

    Attributes:
        images: the images every prompt shows, in order.
        prompts: one chat (list of messages) per variant, each showing ``images`` at the
            same places; they may differ only after the last image.
        choices: per variant, the closed answer set; a single list of strings applies to
            every variant.
    """

    images: list
    prompts: list
    choices: list

    def variant_choices(self) -> list[list[str]]:
        """The answer set of every variant, in ``prompts`` order."""
        if self.choices and all(isinstance(c, str) for c in self.choices):
            return [list(self.choices) for _ in self.prompts]
        return [list(c) for c in self.choices]


def shared_split(m: ScoringModel, texts: list[str], n_images: int, where: str) -> tuple[str, list[list[int]]]:
    """The longest text every rendering shares, cut at a token boundary after the last
    image, and each rendering's remaining token ids.

    The cut is the last newline of the shared text (so a shared question goes into the
    prefix), else just after the last image placeholder (a special token, hence a
    token boundary); it is kept only when the tokenizer splits prefix + rest exactly
    as it splits the whole text, so scoring the rest against the prefix's cache is the
    same computation as scoring the whole prompt.
    """
    tok = m.tokenizer
    image_token = getattr(m.processor, "image_token", None)
    shared = os.path.commonprefix(texts)[: min(len(t) for t in texts) - 1]  # every variant keeps >= 1 token
    image_end = 0
    if n_images:
        if not image_token or shared.count(image_token) != n_images:
            raise ValueError(
                f"{where}: the prompts must show all {n_images} images identically before they first "
                "differ; put the images first and the text that varies after them."
            )
        image_end = shared.rindex(image_token) + len(image_token)
    candidates = [shared.rfind("\n") + 1, image_end]
    fulls = tok(texts, add_special_tokens=False)["input_ids"]
    for cut in dict.fromkeys(c for c in candidates if c >= max(image_end, 1)):
        prefix = shared[:cut]
        head, *rests = tok([prefix] + [t[cut:] for t in texts], add_special_tokens=False)["input_ids"]
        if all(head + rest == full and rest for rest, full in zip(rests, fulls, strict=True)):
            return prefix, rests
    raise ValueError(
        f"{where}: no token boundary after the last image is shared by every prompt; the prompts must "
        "render identically up to (at least) the end of the last image."
    )


def _score_prefix_batch(
    m: ScoringModel,
    groups: list[PrefixGroup],
    labels: list[str],
    prefill: str | None,
    reduction: str,
    batcher: Batcher,
    shared: SharedImages,
) -> list[list[ChoiceScores]]:
    prefixes, rests, choices, choice_ids = [], [], [], []
    # Groups of one batch often carry the same prompts (PhaseFusion's S phase grids of one
    # question): their text is rendered, split and tokenised once.
    done: dict[str, tuple[str, list[list[int]], list[list[str]], list[list[list[int]]]]] = {}
    for g, lab in zip(groups, labels, strict=True):
        per_variant = g.variant_choices()
        key = json.dumps([g.prompts, per_variant, len(g.images)], default=str)
        if key not in done:
            texts = [render_prompt(m.processor, p, prefill) for p in g.prompts]
            if not texts or len(per_variant) != len(texts) or not all(per_variant):
                raise ValueError(
                    f"{lab}: needs at least one prompt and a non-empty answer set for every prompt "
                    f"(got {len(texts)} prompt(s), {len(per_variant)} answer set(s))."
                )
            prefix, rest = shared_split(m, texts, len(g.images), lab)
            # The cut is a pre-tokenizer boundary of every prompt (checked above), so a choice
            # continues the prompt's rest exactly as it continues the whole prompt.
            ids = choice_token_ids_many(
                m.tokenizer,
                [t[len(prefix) :] for t in texts],
                per_variant,
                [f"{lab}, prompt {v}" for v in range(len(texts))],
                rest,
            )
            done[key] = (prefix, rest, per_variant, ids)
        prefix, rest, per_variant, ids = done[key]
        prefixes.append(prefix)
        rests.append(rest)
        choices.append(per_variant)
        choice_ids.append(ids)
    images = [list(g.images) for g in groups]
    inputs = m.encode(prefixes, images)
    pos, nxt = m.positions(inputs)
    _, cache = m.forward(shared.inputs(inputs, images), position_ids=pos, use_cache=True, last_only=True)

    # A row continues one group's cache with one variant's rest; a variant whose choices
    # are all one token is one row (its last position scores every choice), otherwise
    # each choice gets a row that also holds the choice's tokens but the last.
    rows: list[tuple[int, int, int | None, list[int], int]] = []
    for b, variant_ids in enumerate(choice_ids):
        for v, tokens in enumerate(variant_ids):
            if all(len(c) == 1 for c in tokens):
                rows.append((b, v, None, rests[b][v], 1))
            else:
                rows.extend((b, v, c, rests[b][v] + cid[:-1], len(cid)) for c, cid in enumerate(tokens))
    raw = [[[0.0] * len(c) for c in per_variant] for per_variant in choices]
    for chunk in _row_chunks(m, rows, batcher.rows or len(rows)):
        with continuation_pass(len(chunk)):
            _score_rest_rows(m, chunk, choice_ids, cache, inputs["attention_mask"], nxt, raw)
    return [
        [finish_scores(c, r, [len(x) for x in ids], reduction) for c, r, ids in zip(cs, rs, idss, strict=True)]
        for cs, rs, idss in zip(choices, raw, choice_ids, strict=True)
    ]


def _row_chunks(m: ScoringModel, rows: list, cap: int) -> list[list]:
    """The rows in forward-pass chunks of at most ``cap``. A row's pads sit between the cached
    prefix and its rest; a sliding window counts those slots and would see fewer real tokens,
    so with one, rows of equal length share a chunk and there are no pads at all."""
    if not m.sliding_window:
        return [rows[i : i + cap] for i in range(0, len(rows), cap)]
    by_length: dict[int, list] = {}
    for row in rows:
        by_length.setdefault(len(row[3]), []).append(row)
    return [same[i : i + cap] for same in by_length.values() for i in range(0, len(same), cap)]


def _score_rest_rows(
    m: ScoringModel,
    chunk: list[tuple[int, int, int | None, list[int], int]],
    choice_ids: list[list[list[list[int]]]],
    cache: Any,
    prompt_mask: torch.Tensor,
    nxt: torch.Tensor,
    raw: list[list[list[float]]],
) -> None:
    """Score the rows of ``chunk`` against copies of their group's cache in one forward pass
    and add each choice's log-probability to ``raw[group][variant][choice]``."""
    import torch

    dev = prompt_mask.device
    width = max(len(r[3]) for r in chunk)
    keep = max(r[4] for r in chunk)
    inp = torch.full((len(chunk), width), m.pad_id, dtype=torch.long, device=dev)
    valid = torch.zeros((len(chunk), width), dtype=prompt_mask.dtype, device=dev)
    for r, (_, _, _, tokens, _) in enumerate(chunk):
        # Right-aligned (pads between the cached prefix and the rest, masked out), so the
        # positions to score are the last `keep` of every row and logits stay (rows, keep, vocab).
        inp[r, width - len(tokens) :] = torch.tensor(tokens, device=dev)
        valid[r, width - len(tokens) :] = 1
    owner = torch.tensor([r[0] for r in chunk], device=dev)
    rows_cache = select_cache_rows(cache, owner)
    attn = torch.cat([prompt_mask[owner], valid], dim=1)
    pos = nxt[owner].unsqueeze(1) + (valid.long().cumsum(-1) - 1).clamp(min=0)
    if m.rope_index is not None:  # M-RoPE: text positions are equal in all three components
        pos = pos.unsqueeze(0).expand(3, -1, -1)
    logits, _ = m.forward(
        {"input_ids": inp, "attention_mask": attn}, position_ids=pos, cache=rows_cache, use_cache=True, last_only=False, keep=keep
    )
    del rows_cache  # the copied keys/values are the big allocation here
    logits = logits[:, -keep:].float()
    # (row, position, token) of every scored choice token; one gather, one transfer.
    at_row, at_pos, at_tok, slot = [], [], [], []
    for r, (b, v, c, _, n) in enumerate(chunk):
        targets = [(cid[0], k) for k, cid in enumerate(choice_ids[b][v])] if c is None else [(t, c) for t in choice_ids[b][v][c]]
        for j, (t, k) in enumerate(targets):
            at_row.append(r)
            at_pos.append(keep - 1 if c is None else keep - n + j)
            at_tok.append(t)
            slot.append((b, v, k))
    rr, pp = torch.tensor(at_row, device=dev), torch.tensor(at_pos, device=dev)
    vals = (logits[rr, pp, torch.tensor(at_tok, device=dev)] - torch.logsumexp(logits, dim=-1)[rr, pp]).tolist()
    for (b, v, k), x in zip(slot, vals, strict=True):
        raw[b][v][k] += x


def score_shared_prefix(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    groups: Sequence[PrefixGroup] | Iterable[PrefixGroup],
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    reduction: Literal["sum", "mean"] = "sum",
    progress: bool = True,
    sort_by_length: bool = True,
    share_images: bool = True,
) -> list[list[ChoiceScores]]:
    """Score many prompts that share their images: per :class:`PrefixGroup`, one
    :class:`ChoiceScores` per prompt, in input order (a list per group).

    The same numbers as :func:`score` on every prompt as its own item (up to float
    rounding), at a fraction of the cost: each group's images and the text every
    prompt shares (chat template, images, the shared question…) are encoded once, with
    a KV cache, and every prompt's remaining text (options, generation prompt, prefill)
    and its choices are scored against a copy of that cache, all rows of a batch in one
    more forward pass. Right-aligned rows with explicit positions (M-RoPE continues
    from the prefix's largest position) make that pass equal to the full prompt.

    Args:
        groups: :class:`PrefixGroup` s; prompts of one group must render identically up
            to the end of their last image.
        batch_size: groups per prefix pass (their prompts share the second pass), or
            ``"auto"`` (see :class:`Scorer`).
        family, prefill, reduction, progress: as in :func:`score`.
        sort_by_length: batch groups of similar prefix length together, longest first
            (:mod:`~judgetrain.scoring.lengths`); ``False``: input order.
        share_images: each distinct image through the vision tower once, as in :func:`score`.

    Raises:
        ValueError: prompts that differ before their last image, an empty answer set, or a
            choice whose tokens merge with the end of its prompt.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    m = ScoringModel(model, processor, family)
    seq = as_sequence(groups)
    n = len(seq)
    pre = resolve_prefill(prefill, m.family, m.processor)

    def run(idx: list[int], batcher: Batcher) -> list[list[ChoiceScores]]:
        batch = [seq[i] for i in idx]
        for g, i in zip(batch, idx, strict=True):
            if not isinstance(g, PrefixGroup):
                raise TypeError(f"group {i} is a {type(g).__name__}; score_shared_prefix takes PrefixGroup objects.")
        return _score_prefix_batch(m, batch, [f"group {i}" for i in idx], pre, reduction, batcher, shared)

    shared = SharedImages(model, share_images)
    order = _group_order(m, seq, pre) if sort_by_length else None
    with eval_mode(model):
        return run_batched(n, run, Batcher(batch_size, m.device, max(n, 1)), progress, "scoring", order)


def _group_order(m: ScoringModel, seq: Sequence, prefill: str | None) -> list[int] | None:
    """Longest prefix first, the length of a group being its first prompt's; ``None`` (input
    order) when the groups are not all :class:`PrefixGroup` s, which ``run`` then reports."""
    groups = [seq[i] for i in range(len(seq))]
    if not all(isinstance(g, PrefixGroup) and g.prompts for g in groups):
        return None
    return prompts_order(m.processor, [g.prompts[0] for g in groups], [g.images for g in groups], prefill)
