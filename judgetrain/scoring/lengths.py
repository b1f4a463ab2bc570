"""Length-sorted batches: the order in which the engine runs items so that a batch holds
items of similar length, longest first (the idea of lm-eval's ``Collator``, which sorts
requests by descending context length, with images counted).

An item's length is estimated before it is encoded (:func:`estimated_tokens`): the token
count of its rendered text plus the tokens each image adds to it, measured once per image
size by the processor itself (:func:`visual_tokens`: its public call on a one-line prompt
with a blank image of that size), not encoded item by item. The estimate serves the order
only: sorting changes only which items share a forward pass; every item's scores are those
of a plain forward pass on it (up to float rounding, as for any batching), and results come
back in input order. Longest first also means that the ``"auto"`` batch size's probe (one
item) measures the most memory-hungry item, and that an out-of-memory error shows in the
first batches, not after hours.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["estimated_tokens", "item_order", "longest_first", "prompts_order", "visual_tokens"]


def _image_size(image: Any) -> tuple[int, int] | None:
    """(height, width) of a PIL image or an (H, W, C) array, else None."""
    size = getattr(image, "size", None)
    if isinstance(size, tuple) and len(size) == 2:  # PIL: (width, height)
        return int(size[1]), int(size[0])
    shape = getattr(image, "shape", None)
    if shape is not None and len(shape) >= 2:
        return int(shape[0]), int(shape[1])
    return None


def visual_tokens(processor: Any, size: tuple[int, int], *, among_several: bool) -> int:
    """The tokens one image of ``size`` (height, width) adds to a prompt beyond its placeholder:
    the processor's encoding of a one-line prompt with blank images of that size, less the
    prompt's text alone. ``among_several``: the image shares its prompt with others (measured
    on two), which some families encode smaller (LLaVA-OneVision: its base patch only)."""
    from PIL import Image

    from .prompts import render_prompt

    n = 2 if among_several else 1
    text = render_prompt(processor, [{"role": "user", "content": [{"type": "image"}] * n + [{"type": "text", "text": "?"}]}])
    tokenizer = getattr(processor, "tokenizer", processor)
    blank = Image.new("RGB", (size[1], size[0]))
    encoded = len(processor(text=[text], images=[[blank] * n])["input_ids"][0])
    return round((encoded - len(tokenizer([text])["input_ids"][0])) / n)


def estimated_tokens(processor: Any, texts: Sequence[str], images: Sequence[Sequence[Any]]) -> list[int]:
    """Each item's length in tokens, estimated without encoding it: its rendered text's
    tokens (special tokens as the processor adds them) plus what each image adds
    (:func:`visual_tokens`, measured once per size and per one-or-several images a prompt;
    an image of unknown size counts as its placeholder). Exact when an image's tokens depend on
    its size and on whether it is alone in its prompt only, as for every family judgetrain
    supports today; an estimate by design, for the order alone."""
    tokenizer = getattr(processor, "tokenizer", processor)
    text_tokens = [len(ids) for ids in tokenizer(list(texts))["input_ids"]] if texts else []
    out = []
    measured: dict[tuple[tuple[int, int], bool], int] = {}
    for n_text, imgs in zip(text_tokens, images, strict=True):
        sizes = [s for s in (_image_size(im) for im in imgs) if s is not None]
        keys = [(s, len(imgs) > 1) for s in sizes]
        for key in keys:
            if key not in measured:
                measured[key] = visual_tokens(processor, key[0], among_several=key[1])
        out.append(n_text + sum(measured[k] for k in keys))
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
