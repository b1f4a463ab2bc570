"""Model plumbing: what scoring needs to know about a loaded model, worked out once
(:class:`ScoringModel`: processor and tokenizer, the forward pass's cache and
logits-to-keep argument names, the M-RoPE index of Qwen-VL models, device, dtype,
pad id), a prompt cache's rows copied for continuations (:func:`select_cache_rows`),
and eval mode for the length of a call (:func:`eval_mode`). Adapters are checked against
their base where they are loaded (:func:`judgetrain.models.adapters.load_adapter`).
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..compat.transformers import cache_rows
from ..models.registry import ModelFamily, detect_family, get_family

if TYPE_CHECKING:
    import torch

__all__ = ["ScoringModel", "eval_mode", "has_sliding_window", "rope_index_of", "select_cache_rows"]


class ScoringModel:
    """What scoring needs to know about a loaded model, worked out once."""

    def __init__(self, model: Any, processor: Any, family: ModelFamily | str | None):
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.config = base.config
        if family is None:
            self.family: ModelFamily | None = detect_family(self.config)
        else:
            self.family = family if isinstance(family, ModelFamily) else get_family(family)
        params = inspect.signature(base.forward).parameters
        # transformers 5 renamed past_key_values to `cache` (the old name is deprecated).
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        # pads inside a sliding window would hide real tokens: shared-prefix scoring avoids them
        self.sliding_window = has_sliding_window(model)
        self.keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in params), None)
        # Gemma-4 takes the token types too: its larger models let image tokens attend to each other
        # bidirectionally (use_bidirectional_attention: vision), which it reads from them
        self.takes_token_types = "mm_token_type_ids" in params
        self.rope_index = rope_index_of(base)
        self._rope_params = set(inspect.signature(self.rope_index).parameters) if self.rope_index is not None else set()
        self.device = _model_device(base)
        self.dtype = getattr(base, "dtype", None)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.tokenizer.eos_token_id

    # -- inputs
    def encode(self, texts: list[str], images: list[list]) -> dict[str, torch.Tensor]:
        """Tokenise a batch, left-padded, on the model's device (floats in the model's dtype)."""
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True, "padding_side": "left"}
        if any(images):
            kwargs["images"] = images
        batch = self.processor(**kwargs)
        out = {}
        for k, v in batch.items():
            if hasattr(v, "to"):
                v = v.to(self.device)
                if v.is_floating_point() and self.dtype is not None:
                    v = v.to(self.dtype)
            out[k] = v
        return out

    def positions(self, inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(prompt position ids, next position per row).

        1-D RoPE: position = number of real tokens before, so left padding changes
        nothing. M-RoPE: the model's own ``get_rope_index`` (3, batch, len), which
        skips padding via the attention mask; the next text token of row b sits at
        ``max(position ids of b) + 1`` in all three components.
        """
        import torch

        mask = inputs["attention_mask"]
        text_pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        if self.rope_index is None:
            return text_pos, mask.long().sum(-1)
        if "image_grid_thw" in inputs or "video_grid_thw" in inputs:
            kwargs = {
                k: inputs[k]
                for k in ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")
                if k in inputs and k in self._rope_params
            }
            mm = inputs.get("mm_token_type_ids")
            if mm is None:  # older processors: rebuild it (text 0, image 1, video 2)
                ids = inputs["input_ids"]
                mm = torch.zeros_like(ids)
                mm[ids == getattr(self.config, "image_token_id", -1)] = 1
                mm[ids == getattr(self.config, "video_token_id", -1)] = 2
            pos, _ = self.rope_index(input_ids=inputs["input_ids"], mm_token_type_ids=mm, attention_mask=mask, **kwargs)
        else:
            pos = text_pos.unsqueeze(0).expand(3, -1, -1)
        return pos, pos.amax(dim=(0, 2)) + 1

    def keeps_token_types(self, cache=None) -> bool:
        """Whether the model gets the processor's ``mm_token_type_ids``: M-RoPE models always
        (their positions), a model that reads them for its image attention on a pass without a
        cache (a continuation of a cached prefix is text, which attends causally)."""
        return self.rope_index is not None or (self.takes_token_types and cache is None)

    def forward(
        self, inputs: Mapping[str, Any], *, position_ids, cache=None, use_cache: bool, last_only: bool, keep: int | None = None
    ):
        """Logits (of the last position with ``last_only``, of the last ``keep`` positions
        with ``keep``, else of all) and the cache."""
        if last_only:
            keep = 1
        kwargs = {k: v for k, v in inputs.items() if k != "mm_token_type_ids" or self.keeps_token_types(cache)}
        kwargs["position_ids"] = position_ids
        kwargs["use_cache"] = use_cache
        if cache is not None:
            kwargs[self.cache_arg] = cache
        if keep and self.keep_arg:
            kwargs[self.keep_arg] = keep
        out = self.model(**kwargs)
        logits = out.logits[:, -keep:] if keep else out.logits
        # Reading the old name on a transformers 5 output logs a deprecation warning.
        return logits, getattr(out, self.cache_arg, None)


def rope_index_of(model: Any) -> Callable | None:
    """The model's own ``get_rope_index`` (multimodal RoPE: Qwen2-VL, Qwen2.5-VL, Qwen3-VL expose
    it on their inner model), or None for 1-D RoPE. Scoring and packed training both take
    positions from it."""
    for module in model.modules():
        fn = getattr(module, "get_rope_index", None)
        if callable(fn):
            return fn
    return None


def has_sliding_window(model: Any) -> bool:
    """Whether some decoder layer attends through a sliding window (Gemma-3/4's ``layer_types``;
    Qwen2's ``sliding_window`` counts only with ``use_sliding_window``)."""
    config = getattr(model, "config", None)
    config = getattr(config, "get_text_config", lambda: config)()
    return "sliding_attention" in (getattr(config, "layer_types", None) or ())


def _model_device(model: Any) -> torch.device:
    import torch

    try:
        return model.get_input_embeddings().weight.device
    except (AttributeError, NotImplementedError):
        return next(iter(model.parameters()), torch.empty(0)).device


def select_cache_rows(cache: Any, rows: torch.Tensor) -> Any:
    """A new cache holding ``rows`` of ``cache`` (repeats allowed) and leaving ``cache``
    untouched, so the prompt cache can serve any number of continuations
    (:func:`judgetrain.compat.transformers.cache_rows`)."""
    return cache_rows(cache, rows)


@contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)
