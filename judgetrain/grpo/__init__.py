"""Judges trained by reinforcement: TRL's ``GRPOTrainer`` with PEFT LoRA on judgetrain records,
rewarded for verifiable answers and for agreeing with themselves across presentations.

A recipe says ``method: grpo`` (as LLaMA-Factory's ``stage`` or ms-swift's ``rlhf_type`` say
how a recipe trains) and runs through everything an SFT recipe does: ``judgetrain train
RECIPE`` / ``accelerate launch -m judgetrain.train --config RECIPE``, DeepSpeed, multi-node,
``--slurm``, resume, wandb, sweeps, the run folder, its identity and the model card
(:mod:`judgetrain.train`). Its training arguments are TRL's ``GRPOConfig`` (``num_generations``,
``beta``, ``temperature``, ``max_completion_length``, ``reward_weights``, ``use_vllm``, …) with
judgetrain's ``rewards``. For each prompt the policy samples ``num_generations`` completions;
each earns the weighted sum of its rewards; GRPO's advantage is that sum against the prompt's
other completions.

The package: the recipe fields and their checks (``args``), ``GRPOConfig`` with them
(``config``), the rewards as plain functions over completions and record columns
(``rewards``), the records and their order, a question's presentations in one generation
batch (``data``), and the trainer (``trainer``).
Docs: "how-to/grpo.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["GRPO_RANGES", "GROUPED_REWARDS", "REWARD_NAMES", "GRPOArguments", "grpo_problems", "weights_given"],
        "config": ["JudgeGRPOConfig"],
        "data": ["completion_text", "grpo_records", "media_token_ids", "question_order"],
        "rewards": ["NAMES", "REWARDS", "Reward", "consistency", "correct", "format", "reward_functions"],
        "trainer": ["JudgeGRPOTrainer", "prepare_records"],
    },
)
