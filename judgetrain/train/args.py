"""The fields of a training recipe that are judgetrain's own: three argument dataclasses
beside TRL's ``SFTConfig`` (and :class:`~judgetrain.consistency.args.ConsistencyArguments`),
and the error that lists every problem with them.

A leaf: the parser (:mod:`judgetrain.train.parser`) and the cross-field checks
(:mod:`judgetrain.train.checks`) read these, and nothing here reads them back.
README: "`judgetrain train`".
"""

from __future__ import annotations

from dataclasses import dataclass

from judgetrain import config
from judgetrain.config import arg
from judgetrain.models.registry import DTYPES, FAMILIES

__all__ = ["ConfigError", "DataArguments", "LoraArguments", "ModelArguments"]


class ConfigError(config.ConfigError):
    """Every problem with a training configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems, "training configuration")


@dataclass
class ModelArguments:
    model_name_or_path: str = arg(None, "Base model: a local folder or a hub id.")
    family: str | None = arg(None, f"Model family ({', '.join(FAMILIES)}); default: from the config.", identity=True)
    dtype: str = arg("auto", f"Weights dtype: {', '.join(DTYPES)}.", identity=True)
    attn_implementation: str | None = arg(None, "eager, sdpa, flash_attention_2, …")
    min_pixels: int | None = arg(None, "Qwen: smallest per-image pixel budget.", identity=True)
    max_pixels: int | None = arg(None, "Qwen: largest per-image pixel budget (bounds image tokens per frame).", identity=True)
    freeze_vision_tower: bool = arg(True, "Keep the vision encoder frozen (default).", identity=True)
    freeze_projector: bool = arg(True, "Keep the vision-to-language projector frozen (default).", identity=True)


@dataclass
class DataArguments:
    datasets: list[str] = arg(None, "Built judgetrain datasets (folders with build.json).")
    train_split: str = arg("train", identity=True)
    eval_split: str | None = arg("validation", "Split for evaluation loss; null for none.")
    tasks: list[str] | None = arg(None, "Keep only these tasks (default: all).", identity=True)
    layouts: list[str] | None = arg(None, "Keep only these prompt layouts (default: all).", identity=True)
    mixture_weights: list[float] | None = arg(None, "Sampling probability per dataset (default: concatenate).", identity=True)
    max_frames: int | None = arg(None, "Leave out records showing more images than this (counted and logged).", identity=True)
    max_train_samples: int | None = arg(None, identity=True)
    max_eval_samples: int | None = arg(None)
    effective_batch_size: int | None = arg(
        None, "Global batch in records, held fixed across GPU counts: gradient_accumulation_steps = this / (per-device batch × "
              "world size); with packing, / (records per packed row × per-device rows × world size), rounded.")
    check_lengths: bool = arg(True, "Refuse records longer than max_length (image tokens would be cut).")
    overwrite: bool = arg(False, "output_dir holds another run's checkpoints: remove them and its outputs first, and train "
                                 "anew (without it such a run is refused; the same run resumes).")


@dataclass
class LoraArguments:
    use_lora: bool = arg(True, "LoRA through PEFT; false trains the language model fully.", identity=True)
    lora_r: int = arg(16, identity=True)
    lora_alpha: int = arg(32, identity=True)
    lora_dropout: float = arg(0.05, identity=True)
    lora_target_modules: str | None = arg(None, "Regex of module names; default: the family's language-model projections.", identity=True)
    lora_modules_to_save: list[str] | None = arg(None, "Extra modules trained fully and saved with the adapter.", identity=True)
