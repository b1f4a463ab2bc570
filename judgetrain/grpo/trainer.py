"""The trainer a GRPO recipe runs: TRL's ``GRPOTrainer`` with judgetrain's model card
(:class:`~judgetrain.train.trainer.JudgeCard`, shared with SFT) and the recipe's rewards,
each logged by TRL under its name (``rewards/<name>/mean``), weighted by ``reward_weights``.

Generation goes through transformers (``model.generate``) by default, on CPUs as on GPUs;
``use_vllm: true`` hands it to vLLM the way TRL does (``vllm_mode: colocate`` in the training
processes, or ``server`` against ``trl vllm-serve``), refused before anything loads where vLLM
is not installed (:func:`judgetrain.grpo.args.grpo_problems`).
Docs: "how-to/grpo.md".
"""

from __future__ import annotations

from trl import GRPOTrainer

from judgetrain.train.trainer import JudgeCard

from .args import GROUPED_REWARDS
from .data import grpo_records

__all__ = ["JudgeGRPOTrainer", "prepare_records"]


class JudgeGRPOTrainer(JudgeCard, GRPOTrainer):  # type: ignore[misc]  # TRL's create_model_card signature, not the Trainer's
    """``GRPOTrainer`` (same arguments) with judgetrain's model card."""


def prepare_records(train, evaluation, training_args):
    """The training and evaluation records as ``GRPOTrainer`` takes them (:func:`~judgetrain.grpo.data.grpo_records`),
    ordered by question when a reward compares a question's presentations."""
    grouped = bool(GROUPED_REWARDS & set(training_args.rewards or []))
    prompts = training_args.generation_batch_size // training_args.num_generations
    seed = training_args.seed
    with training_args.main_process_first(desc="GRPO records"):
        return (
            grpo_records(train, grouped=grouped, prompts_per_batch=prompts, seed=seed),
            grpo_records(evaluation, grouped=False, prompts_per_batch=prompts, seed=seed),
        )
