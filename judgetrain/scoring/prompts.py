"""Items and prompts: what the scoring engine accepts and the text it scores.

An item is a task record (a dict with ``prompt``, ``images``, ``choices``; see
``judgetrain.records``) or a ``(prompt messages, images, choices)`` tuple; either
becomes a :class:`NormalizedItem`. The prompt is rendered with the processor's chat
template and ``add_generation_prompt=True``, followed by the prefill text (by default
the model's own (:data:`FAMILY_PREFILL`): what closes the thinking block that a reasoning
checkpoint's chat template opens in its generation prompt, :func:`template_prefill`). A BOS
token the template writes is left to the tokenizer when the tokenizer prepends one itself
(Gemma), so it is never doubled.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..models.registry import FAMILIES, ModelFamily

__all__ = [
    "FAMILY_PREFILL",
    "FamilyPrefill",
    "Item",
    "NormalizedItem",
    "as_sequence",
    "describe_item",
    "render_prompt",
    "resolve_prefill",
    "strip_template_bos",
    "template_prefill",
    "to_item",
]


class FamilyPrefill:
    """Sentinel: use the model's own prefill (:func:`resolve_prefill`; ``None`` means no prefill)."""

    _instance: FamilyPrefill | None = None

    def __new__(cls) -> FamilyPrefill:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FAMILY_PREFILL"


FAMILY_PREFILL = FamilyPrefill()

Item = Mapping[str, Any] | tuple


@dataclass(frozen=True)
class NormalizedItem:
    prompt: list
    images: list
    choices: list[str]
    record: Mapping[str, Any] | None


def describe_item(x: Any, i: int) -> str:
    rid = x.get("id") if isinstance(x, Mapping) else None
    return f"item {i}" + (f" (id {rid!r})" if rid else "")


def to_item(x: Any, i: int) -> NormalizedItem:
    if isinstance(x, Mapping):
        missing = [k for k in ("prompt",) if k not in x]
        if missing:
            raise ValueError(
                f"{describe_item(x, i)} has no {missing[0]!r}: an item is a task record "
                "(keys 'prompt', 'images', 'choices') or a (prompt, images, choices) tuple."
            )
        return NormalizedItem(list(x["prompt"]), list(x.get("images") or []), list(x.get("choices") or []), x)
    if isinstance(x, tuple) and len(x) in (2, 3):
        prompt, images = x[0], x[1]
        choices = list(x[2]) if len(x) == 3 and x[2] is not None else []
        return NormalizedItem(list(prompt), list(images or []), choices, None)
    raise TypeError(
        f"item {i} is a {type(x).__name__}; expected a task record (dict) or a (prompt messages, images, choices) tuple."
    )


def as_sequence(items: Any) -> Any:
    """Index items lazily when we can (a ``datasets.Dataset`` decodes images per row)."""
    if isinstance(items, Mapping):
        raise TypeError("score()/generate() take a sequence of items; wrap a single record in a list.")
    if hasattr(items, "__len__") and hasattr(items, "__getitem__"):
        return items
    return list(items)


def resolve_prefill(prefill: str | None | FamilyPrefill, family: ModelFamily | None, processor: Any = None) -> str | None:
    """The prefill text to score or generate after (``None``: none).

    ``FAMILY_PREFILL``: the family's ``think_prefill`` when it sets one, else, given the
    ``processor``, what its chat template calls for (:func:`template_prefill`; without a
    processor there is no template to read, so no prefill). A string is used as it is, the
    empty string meaning none. ``TypeError`` for anything else."""
    if isinstance(prefill, FamilyPrefill):
        if family is not None and family.think_prefill is not None:
            return family.think_prefill
        return template_prefill(processor, family) if processor is not None else None
    if prefill is not None and not isinstance(prefill, str):
        raise TypeError(f"prefill must be a string, None or FAMILY_PREFILL, not {type(prefill).__name__}")
    return prefill or None


# A one-message conversation whose generation prompt shows what the template opens the answer with.
_PROBE = [{"role": "user", "content": [{"type": "text", "text": "?"}]}]


def template_prefill(processor: Any, family: ModelFamily | None = None) -> str | None:
    """What closes the thinking block that ``processor``'s chat template leaves open in its
    generation prompt, else ``None``.

    A reasoning checkpoint (Qwen3-VL-*-Thinking) shares its family's architecture; its chat
    template opens the block (``...<|im_start|>assistant\\n<think>\\n``), so the model's next
    tokens would be reasoning. The block is open when the rendered generation prompt holds
    the family's :class:`~judgetrain.models.registry.ThinkingBlock` ``open`` tag with no
    ``close`` tag after it; the prefill is then its ``prefill`` (``"\\n</think>\\n\\n"``).
    ``family`` ``None`` tries every registered family's block."""
    text = processor.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True)
    blocks = [family.thinking] if family is not None else [f.thinking for f in FAMILIES.values()]
    for block in blocks:
        if block is None:
            continue
        at = text.rfind(block.open)
        if at >= 0 and block.close not in text[at:]:
            return block.prefill
    return None


def render_prompt(processor: Any, prompt: Sequence[Mapping[str, Any]], prefill: str | None = None) -> str:
    """The text the model is scored on or generates after: ``prompt`` through the
    processor's chat template with ``add_generation_prompt=True``, then ``prefill``
    verbatim (``None``: nothing). Images stay placeholders; the processor expands them.

    Quirk: a template that writes the BOS token itself (Gemma's ``<bos>``) for a tokenizer
    that also prepends it (Gemma's does) would give two; the template's is dropped here, so
    the processor's own encoding of the text starts with exactly one, as
    ``apply_chat_template(..., tokenize=True)`` does it."""
    text = processor.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
    text = text + prefill if prefill else text
    return strip_template_bos(getattr(processor, "tokenizer", processor), text)


def strip_template_bos(tokenizer: Any, text: str) -> str:
    """``text`` without its leading BOS token when ``tokenizer`` prepends one itself; else ``text``."""
    bos = getattr(tokenizer, "bos_token", None)
    if not bos or not text.startswith(bos):
        return text
    adds_bos = tokenizer("")["input_ids"][:1] == [tokenizer.bos_token_id]
    return text[len(bos) :] if adds_bos else text
