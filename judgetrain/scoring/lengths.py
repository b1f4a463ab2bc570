"""Length-sorted batches: the order in which the engine runs items so that a batch holds
items of similar length, longest first (the idea of lm-eval's ``Collator``, which sorts
requests by descending context length, with images counted).

An item's length is estimated before it is encoded (:func:`estimated_tokens`): the token
count of its rendered text plus each image's visual tokens, which the processor works out
from the image's size alone (``_get_num_multimodal_tokens``, the method transformers'
processors expose for serving engines to plan with). Sorting changes only which items share
a forward pass; every item's scores are those of a plain forward pass on it (up to float
rounding, as for any batching), and results come back in input order. Longest first also
means that the ``"auto"`` batch size's probe (one item) measures the most memory-hungry
item, and that an out-of-memory error shows in the first batches, not after hours.
README: "Scoring (Python)".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["estimated_tokens", "item_order", "longest_first", "prompts_order", "visual_tokens"]

# Pixels a visual token covers when a processor cannot say (Qwen-VL's 28 x 28 merged patch).
_FALLBACK_PIXELS_PER_TOKEN = 28 * 28


def _image_size(image: Any) -> tuple[int, int] | None:
    """(height, width) of a PIL image or an (H, W, C) array, else None."""
    size = getattr(image, "size", None)
    if isinstance(size, tuple) and len(size) == 2:  # PIL: (width, height)
        return int(size[1]), int(size[0])
    shape = getattr(image, "shape", None)
    if shape is not None and len(shape) >= 2:
        return int(shape[0]), int(shape[1])
    return None


def visual_tokens(processor: Any, sizes: Sequence[tuple[int, int]]) -> list[int]:
    """The visual tokens the processor expands each (height, width) image into, from its
    own planning method when it has one, else one token per 28 x 28 pixels."""
    plan = getattr(processor, "_get_num_multimodal_tokens", None)
    if sizes and callable(plan):
        try:
            counts = plan(image_sizes=[list(s) for s in sizes])["num_image_tokens"]
            if len(counts) == len(sizes):
                return [int(c) for c in counts]
        except (TypeError, KeyError, ValueError, AttributeError, NotImplementedError):
            pass  # a processor whose planner needs more than sizes: estimate from pixels
    return [max(1, h * w // _FALLBACK_PIXELS_PER_TOKEN) for h, w in sizes]


def estimated_tokens(processor: Any, texts: Sequence[str], images: Sequence[Sequence[Any]]) -> list[int]:
    """Each item's length in tokens, estimated without encoding it: its rendered text's
    tokens (special tokens as the processor adds them), each image's placeholder replaced by
    its visual tokens (an image of unknown size keeps its placeholder's one). Exact for
    Qwen-VL and InternVL; within a few tokens for Gemma (its image's begin/end markers);
    LLaVA-OneVision's planner counts each image of a multi-image prompt at its single-image
    (any-resolution) size, an overestimate that still grows with the images."""
    tokenizer = getattr(processor, "tokenizer", processor)
    text_tokens = [len(ids) for ids in tokenizer(list(texts))["input_ids"]] if texts else []
    out = []
    cache: dict[tuple[int, int], int] = {}
    for n_text, imgs in zip(text_tokens, images, strict=True):
        sizes = [s for s in (_image_size(im) for im in imgs) if s is not None]
        new = sorted({s for s in sizes if s not in cache})
        cache.update(zip(new, visual_tokens(processor, new), strict=True))
        out.append(n_text - len(sizes) + sum(cache[s] for s in sizes))
    return out


def longest_first(lengths: Sequence[int]) -> list[int]:
    """Indices in descending length, ties in input order (a stable sort)."""
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


def prompts_order(processor: Any, prompts: Sequence[Any], images: Sequence[Sequence[Any]], prefill: str | None) -> list[int]:
    """The order the engine runs prompts (chat messages) with their images in: longest first."""
    from .prompts import render_prompt

    texts = [render_prompt(processor, p, prefill) for p in prompts]
    return longest_first(estimated_tokens(processor, texts, images))


def item_order(processor: Any, items: Sequence[Any], prefill: str | None) -> list[int]:
    """The order the engine runs ``items`` (task records or tuples) in: longest first."""
    from .prompts import to_item

    its = [to_item(items[i], i) for i in range(len(items))]
    return prompts_order(processor, [it.prompt for it in its], [it.images for it in its], prefill)
