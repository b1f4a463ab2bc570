"""The trainer ``judgetrain train`` runs: TRL's ``SFTTrainer`` with these changes and
nothing else.

- **The model card.** ``create_model_card`` writes judgetrain's card (set
  :attr:`JudgeCard.card_writer`; :class:`JudgeCard`, which judgetrain's GRPO trainer shares) instead of TRL's. TRL calls it at every
  checkpoint and ``Trainer.push_to_hub`` calls it right before uploading the output
  folder, after PEFT's save has rewritten README.md, so the card on the hub, like
  the one on disk, is judgetrain's. The Trainer's own saves (each checkpoint folder,
  which ``hub_strategy: checkpoint`` uploads too; :class:`judgetrain.compat.transformers.InternalSaves`
  tells them apart) write it over PEFT's card in the folder they save to.
- **A global batch's loss, however it is split.** TRL's ``compute_loss`` sums the
  completion tokens' losses and divides by ``num_items_in_batch``: the completion
  tokens of the whole global batch (every accumulation step and every process), which
  makes the step's loss and gradient the token-weighted mean over the global batch,
  independent of how it is split over devices and accumulation. The Trainer counts
  ``num_items_in_batch`` (and leaves the accumulation scaling to the loss) only when the
  model accepts loss keyword arguments, which it reads from the model class; Qwen2.5-VL and
  Qwen3-VL deny it (``accepts_loss_kwargs = False``, a statement about their own
  ``forward``, whose loss TRL does not use). Without the count TRL falls back to each
  micro-batch's own mean and the Trainer averages those: the same recipe would train
  differently on 1, 2 or 8 GPUs. This trainer's loss accepts the count, so it says so
  (:func:`judgetrain.compat.transformers.count_items_in_batch`).
- **Token counts of packed rows.** A packed batch has no attention mask, so TRL counts
  its tokens from ``position_ids.size(1)``: the row width for 1-D positions (one row
  of several), and the number of rows for Qwen-VL's ``(4, rows, length)`` M-RoPE
  positions. :class:`~judgetrain.train.packing.PackingCollator` therefore sends the
  number of real (non-padding) tokens as ``num_real_tokens``; this trainer takes it
  out of the model inputs and logs it as TRL's ``num_tokens``, gathered over
  processes like TRL's own count (:func:`judgetrain.compat.trl.set_train_tokens`).
- **Each distinct image through the frozen vision tower once** (``vision_feature_cache``):
  the collator keys every image by content in the data loader and the loss gives the model
  kept features instead of pixels (:mod:`judgetrain.train.vision_features`; training batches
  only). The counts go into the logs (``vision_cache_encoded``, ``vision_cache_hits``: this
  process's, so far) and one line into the log at the end of training.

Docs: "reference/recipes.md".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trl import SFTTrainer

from judgetrain.compat.transformers import InternalSaves, count_items_in_batch
from judgetrain.compat.trl import set_train_tokens, train_tokens

from .args import ConfigError, VisionFeatureArguments
from .packing import REAL_TOKENS_KEY
from .vision_features import IMAGE_KEYS, KeyedCollator, VisionFeatureCache, cache_problems, unwrapped

__all__ = ["JudgeCard", "JudgeSFTTrainer"]

logger = logging.getLogger("judgetrain.train")


class JudgeCard(InternalSaves):
    """A TRL trainer mixin (put it before the trainer class): judgetrain's model card through
    :attr:`card_writer` wherever TRL or the Trainer would write TRL's (module docstring); the
    SFT and GRPO trainers share it."""

    card_writer: Callable[..., None] | None = None  # write(tags, folder=None): the card into folder (default: the run's)

    def create_model_card(
        self, model_name: str | None = None, dataset_name: str | None = None, tags: str | list[str] | None = None, **kwargs: Any
    ) -> None:
        """judgetrain's card through :attr:`card_writer` (``write(tags)``) on the main
        process; TRL's card when no writer is set."""
        if self.card_writer is None:
            super().create_model_card(model_name=model_name, dataset_name=dataset_name, tags=tags, **kwargs)  # type: ignore[misc]
        elif self.is_world_process_zero():  # type: ignore[attr-defined]
            self.card_writer([tags] if isinstance(tags, str) else list(tags or []))

    def after_internal_save(self, folder: Path) -> None:
        """Where the Trainer saved a checkpoint or its output folder itself, judgetrain's card
        replaces the one PEFT's save wrote there."""
        if self.card_writer is not None and self.is_world_process_zero():  # type: ignore[attr-defined]
            self.card_writer(list(getattr(self.model, "model_tags", None) or []), folder)  # type: ignore[attr-defined]


class JudgeSFTTrainer(JudgeCard, SFTTrainer):  # type: ignore[misc]  # TRL's create_model_card signature, not the Trainer's
    """``SFTTrainer`` (same arguments) with judgetrain's model card, the real token count of
    packed rows, and the vision-feature cache when ``args.vision_feature_cache`` is on
    (:attr:`vision_features`; module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # TRL's loss is normalised by num_items_in_batch for every family (module docstring): have the Trainer count it
        count_items_in_batch(self)
        self.vision_features: VisionFeatureCache | None = None
        if getattr(self.args, "vision_feature_cache", False):
            problems = cache_problems(self.model)
            if problems:
                raise ConfigError(problems)
            mb = getattr(self.args, "vision_cache_mb", VisionFeatureArguments.vision_cache_mb)  # TRL's SFTConfig lacks it
            self.vision_features = VisionFeatureCache(int(mb) * 2**20)
            self.data_collator = KeyedCollator(self.data_collator)  # digests on the CPU, in the data loader

    def train(self, *args: Any, **kwargs: Any) -> Any:
        """The Trainer's training; with the vision-feature cache, its counts into the log at the end."""
        try:
            return super().train(*args, **kwargs)
        finally:
            if self.vision_features is not None and self.is_world_process_zero():
                logger.info(self.vision_features.summary())

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """TRL's logging; a training log also gets this process's vision-feature cache counts."""
        if self.vision_features is not None and not any(k.startswith("eval_") for k in logs):
            logs = {**logs, "vision_cache_encoded": self.vision_features.encoded, "vision_cache_hits": self.vision_features.hits}
        super().log(logs, start_time)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """TRL's loss; for a packed batch, ``num_tokens`` counts its real tokens; a training batch
        takes its images' features from the vision-feature cache when it is on."""
        keys = inputs.pop(IMAGE_KEYS, None)
        if keys is not None and self.vision_features is not None and self.model.training:
            inputs = self.vision_features.inputs(unwrapped(model, self.accelerator), inputs, keys)
        real = inputs.pop(REAL_TOKENS_KEY, None)
        before = train_tokens(self) if real is not None else 0
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        if real is not None and model.training:
            gathered = self.accelerator.gather_for_metrics(real.reshape(1).to(self.accelerator.device)).sum().item()
            set_train_tokens(self, before + int(gathered))
        return out
