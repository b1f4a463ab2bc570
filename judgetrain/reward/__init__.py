"""Reward models: a judge's decoder with a scalar head (:mod:`judgetrain.models.reward`) trained by
TRL's ``RewardTrainer`` with PEFT LoRA (the head trained in full, saved with the LoRA) on a gold
sequence against each of its perturbations (PRISM's pointwise records, :mod:`judgetrain.pairs`).

A recipe says ``method: reward`` and runs through everything an SFT recipe does: ``judgetrain
train RECIPE`` / ``accelerate launch -m judgetrain.train --config RECIPE``, DeepSpeed, multi-node,
``--slurm``, resume, wandb, sweeps, the run folder, its identity and the model card
(:mod:`judgetrain.train`). Its training arguments are TRL's ``RewardConfig``
(``center_rewards_coefficient``, …) with judgetrain's ``margin_per_score_point``.

The package: the recipe fields and their checks (``args``), ``RewardConfig`` with them
(``config``), the pairs and their collator (``data``), and the trainer (``trainer``). The trained
model loads with one call, :func:`judgetrain.models.reward.load_reward_model`, and scores with
:func:`judgetrain.scoring.reward_scores`.
Docs: "how-to/reward-models.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["REWARD_RANGES", "RewardArguments", "reward_problems"],
        "config": ["JudgeRewardConfig"],
        "data": ["PairCollator", "pair_rows", "record_token_ids"],
        "trainer": ["JudgeRewardTrainer", "prepare_pairs"],
    },
)
