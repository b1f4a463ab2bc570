"""What judgetrain relies on in TRL beyond its documented API, each reliance with a contract
test in ``tests/compat/test_trl.py`` that fails naming it when a release changes it. Where a
release no longer offers it, these raise :class:`~judgetrain.compat.versions.UpstreamChanged`.
Docs: "get-started/install.md".
"""

from __future__ import annotations

from typing import Any

from .versions import UpstreamChanged

__all__ = ["SFT_CONFIG_SOURCE", "set_train_tokens", "sft_config_from_source", "train_tokens", "vision_collator"]

LIBRARY = "trl"


def vision_collator(processor: Any, *, completion_only_loss: bool = True, max_length: int | None = None) -> Any:
    """TRL's own collator of image prompt–completion records, the one ``SFTTrainer`` builds for
    them (``trl.trainer.sft_trainer.DataCollatorForVisionLanguageModeling``, which ``trl`` does
    not export): text, images, labels and completion masks exactly as ``SFTTrainer`` trains."""
    try:
        from trl.trainer.sft_trainer import DataCollatorForVisionLanguageModeling
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY,
            "trl.trainer.sft_trainer.DataCollatorForVisionLanguageModeling",
            "collate image records as SFTTrainer does (packing, consistency tuning)",
            str(e),
        ) from None
    return DataCollatorForVisionLanguageModeling(
        processor=processor, max_length=max_length, completion_only_loss=completion_only_loss
    )


def _require_token_count(trainer: Any) -> None:
    if not hasattr(trainer, "_total_train_tokens") or not hasattr(trainer, "_metrics"):
        raise UpstreamChanged(
            LIBRARY,
            "SFTTrainer._total_train_tokens / SFTTrainer._metrics['train']['num_tokens']",
            "log the real tokens of packed rows as num_tokens",
        )


def train_tokens(trainer: Any) -> int:
    """The training tokens an ``SFTTrainer`` has counted so far (what it logs as ``num_tokens``)."""
    _require_token_count(trainer)
    return int(trainer._total_train_tokens)


def set_train_tokens(trainer: Any, total: int) -> None:
    """Make ``total`` the training tokens ``trainer`` has counted and logs next as ``num_tokens``."""
    _require_token_count(trainer)
    trainer._total_train_tokens = int(total)
    trainer._metrics["train"]["num_tokens"] = [trainer._total_train_tokens]


# where SFTConfig is declared, and where transformers declares the TrainingArguments its base
# imports from the package face (`from transformers import TrainingArguments`)
SFT_CONFIG_SOURCE = ("trl.trainer.sft_config", "SFTConfig", {"transformers.TrainingArguments": "transformers.training_args"})
# where GRPOConfig is declared (the training arguments of `method: grpo`)
GRPO_CONFIG_SOURCE = ("trl.trainer.grpo_config", "GRPOConfig", SFT_CONFIG_SOURCE[2])
# where RewardConfig is declared (the training arguments of `method: reward`)
REWARD_CONFIG_SOURCE = ("trl.trainer.reward_config", "RewardConfig", SFT_CONFIG_SOURCE[2])


def sft_config_from_source() -> type:
    """A stand-in for TRL's ``SFTConfig`` read from the installed source, nothing imported
    (importing it loads torch): the same fields in the same order, with their defaults, help
    and choices, for ``HfArgumentParser`` to list in ``--help``
    (:mod:`~judgetrain.compat.dataclass_source`: TRL's base config in
    ``trl/trainer/base_config.py`` and transformers' ``TrainingArguments`` in
    ``transformers/training_args.py`` followed from ``trl/trainer/sft_config.py``). A value
    the source computes (the default ``optim``) shows as its expression."""
    from .dataclass_source import dataclass_fields, standin

    module, name, exported = SFT_CONFIG_SOURCE
    return standin(name, dataclass_fields(module, name, exported))


def grpo_config_fields_from_source(leave_out: frozenset[str] = frozenset()) -> type:
    """A stand-in for TRL's ``GRPOConfig`` read from the installed source as
    :func:`sft_config_from_source` reads ``SFTConfig``, without the fields named in ``leave_out``
    (those the listing shows under another heading)."""
    return _config_fields_from_source(GRPO_CONFIG_SOURCE, leave_out)


def reward_config_fields_from_source(leave_out: frozenset[str] = frozenset()) -> type:
    """TRL's ``RewardConfig`` read from the installed source, as :func:`grpo_config_fields_from_source` reads ``GRPOConfig``."""
    return _config_fields_from_source(REWARD_CONFIG_SOURCE, leave_out)


def _config_fields_from_source(source: tuple, leave_out: frozenset[str]) -> type:
    from .dataclass_source import dataclass_fields, standin

    module, name, exported = source
    return standin(name, [f for f in dataclass_fields(module, name, exported) if f.name not in leave_out])
