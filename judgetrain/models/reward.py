"""Reward models: a judge's decoder with a scalar head on the last token's hidden state, one number
per image sequence (higher: more temporally coherent), as TRL's ``RewardTrainer`` trains it.

transformers has no sequence-classification class for Qwen3-VL, Qwen2.5-VL or LLaVA-OneVision
(TRL closed the request unbuilt, trl#4021). :func:`reward_model_class` makes one per family the
way transformers makes its own (``GenericForSequenceClassification`` over the family's
``PreTrainedModel``, the decoder under ``model``, the head ``score``) and registers it with
``AutoModelForSequenceClassification``, so ``from_pretrained`` loads a generative checkpoint
into it (the language-model head left out, the scalar head new) and PEFT saves the head with
the LoRA as a ``modules_to_save`` (``task_type: SEQ_CLS``). Where transformers has a class of
its own for a config, that one is used.

:func:`load_reward_model` is the one call that loads a trained reward model (an adapter folder:
LoRA + head, its base recorded in ``adapter_config.json``) or a base checkpoint with a new head.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["REWARD_TASK", "is_reward_adapter", "load_reward_model"]

# PEFT's task type of a reward adapter (its adapter_config.json says so)
REWARD_TASK = "SEQ_CLS"


def is_reward_adapter(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder holding a reward model's adapter (``task_type: SEQ_CLS``)."""
    config = Path(os.fspath(path)).expanduser() / "adapter_config.json"
    if not config.is_file():
        return False
    return json.loads(config.read_text(encoding="utf-8")).get("task_type") == REWARD_TASK


def load_reward_model(
    name_or_path: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
    dtype: str = "auto",
    attn_implementation: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    trust_remote_code: bool = False,
    local_files_only: bool | None = None,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    revision: str | None = None,
) -> tuple[Any, Any]:
    """``(model, processor)`` of a reward model, in eval mode: ``model(**processor(...)).logits[:, 0]``
    is each sequence's reward.

    ``name_or_path`` is a trained reward model (a ``judgetrain train`` run folder, or any folder with
    its ``adapter_config.json`` and ``adapter_model.safetensors``: the LoRA and the scalar head),
    loaded onto its recorded base (``base`` overrides where the base has moved; the adapter is
    checked against it first), or a base checkpoint, given a new, untrained head. The tokenizer's
    pad token becomes the config's (the head reads the last non-pad token), as TRL does."""
    from .registry import load_model_and_processor

    adapter = Path(os.fspath(name_or_path)).expanduser()
    reward = is_reward_adapter(adapter)
    if reward:
        from .adapters import adapter_base

        checkpoint: str | os.PathLike[str] = adapter_base(adapter, base)
    else:
        checkpoint = name_or_path
    model, processor = load_model_and_processor(
        checkpoint,
        dtype=dtype,
        attn_implementation=attn_implementation,
        device_map=device_map,
        trust_remote_code=trust_remote_code,
        local_files_only=local_files_only,
        min_pixels=min_pixels,
        max_pixels=max_pixels,
        revision=revision,
        head="reward",
    )
    tokenizer: Any = getattr(processor, "tokenizer", processor)
    text_config = model.config.get_text_config()
    if text_config.pad_token_id is None:
        text_config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if reward:
        from .adapters import load_adapter

        model = load_adapter(model, adapter, checkpoint)
    model.eval()
    return model, processor
