"""The data fields of a training recipe (:class:`DataArguments`, judgetrain's own), the recipe
keys renamed to TRL's names (:data:`RENAMED`), and the error that lists every problem with a
recipe. The model and LoRA fields are TRL's ``ModelConfig`` with judgetrain's model fields
(:mod:`judgetrain.train.model_args`), the training ones TRL's ``SFTConfig`` with the consistency
fields (:mod:`judgetrain.consistency.config`), or TRL's ``GRPOConfig`` with judgetrain's
reward fields under ``method: grpo`` (:mod:`judgetrain.grpo.config`); :class:`MethodArguments`
holds the ``method`` both share; :class:`VisionFeatureArguments` the SFT step's vision-feature cache
(the frozen vision tower's features kept between steps, :mod:`judgetrain.train.vision_features`).

A leaf without TRL (the launcher reads :class:`ConfigError` before anything loads): the parser
(:mod:`judgetrain.train.parser`) and the cross-field checks (:mod:`judgetrain.train.checks`)
read these, and nothing here reads them back.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

from dataclasses import dataclass

from judgetrain import config
from judgetrain.config import arg

__all__ = ["METHODS", "RENAMED", "ConfigError", "DataArguments", "MethodArguments", "VisionFeatureArguments"]

# how a recipe trains (its `method:`): TRL's SFTTrainer, TRL's GRPOTrainer with judgetrain's rewards, or a reward
# model (a scalar head) by TRL's RewardTrainer
METHODS = ("sft", "grpo", "reward")
# recipe keys judgetrain once spelled otherwise -> TRL's name for the same field (trl.ModelConfig)
RENAMED = {"use_lora": "use_peft"}


class ConfigError(config.ConfigError):
    """Every problem with a training configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems, "training configuration")


@dataclass
class DataArguments:
    datasets: list[str] = arg(None, "Built judgetrain datasets (folders with build.json).")
    train_split: str = arg("train", identity=True)
    eval_split: str | None = arg("validation", "Split for evaluation loss; null for none.")
    tasks: list[str] | None = arg(None, "Keep only these tasks (default: all).", identity=True)
    layouts: list[str] | None = arg(None, "Keep only these prompt layouts (default: all).", identity=True)
    mixture_weights: list[float] | None = arg(
        None, "Sampling probability per dataset (default: concatenate).", identity=True, minimum=0
    )
    max_frames: int | None = arg(
        None, "Leave out records showing more images than this (counted and logged).", identity=True, minimum=1
    )
    max_train_samples: int | None = arg(None, identity=True, minimum=1)
    max_eval_samples: int | None = arg(None, minimum=1)
    effective_batch_size: int | None = arg(
        None,
        "Global batch in records, held fixed across GPU counts: gradient_accumulation_steps = this / (per-device batch × "
        "world size); with packing, / (records per packed row × per-device rows × world size); to the nearest whole "
        "number, halves up, at least 1 (judgetrain.train.settings; run.json records it).",
        minimum=1,
    )
    check_lengths: bool = arg(True, "Refuse records longer than max_length (image tokens would be cut).")
    overwrite: bool = arg(
        False,
        "output_dir holds another run's checkpoints: remove them and its outputs first, and train "
        "anew (without it such a run is refused; the same run resumes).",
    )
    wait: bool = arg(
        False,
        "Another process is training into output_dir: wait until it has finished instead of stopping at once "
        "(without it this run is refused, naming that process).",
    )


@dataclass
class VisionFeatureArguments:
    """How an SFT step gets its images' features (:mod:`judgetrain.train.vision_features`). Not
    identity fields: they change how fast a run trains, not what it trains."""

    vision_feature_cache: bool = arg(
        False,
        "Reuse the frozen vision tower's features of an image seen before, across records and epochs, "
        "instead of encoding it again (Qwen-VL; needs freeze_vision_tower and freeze_projector): equal loss "
        "and gradients up to float rounding.",
    )
    vision_cache_mb: int = arg(
        1024,
        "Accelerator memory (MiB) the kept features may take, per process; the least recently used are dropped "
        "first (0: only images repeated within a batch are shared).",
        minimum=0,
    )


@dataclass
class MethodArguments:
    """The training method of a recipe, a field of its training arguments (as LLaMA-Factory's
    ``stage``): it decides which TRL configuration the rest of the recipe is read into."""

    method: str = arg(
        "sft",
        "sft: supervised fine-tuning (TRL's SFTTrainer; with consistency_objective, consistency tuning); grpo: "
        "reinforcement with judgetrain's verifiable rewards (TRL's GRPOTrainer and GRPOConfig, judgetrain.grpo); reward: a "
        "reward model, a scalar head trained Bradley–Terry on gold-versus-perturbed sequences (TRL's RewardTrainer and "
        "RewardConfig, judgetrain.reward).",
    )  # not an identity field: a GRPO run's identity says grpo (judgetrain.grpo.args), an SFT run's is as it was
