"""The trainer a reward-model recipe runs: TRL's ``RewardTrainer`` (the Bradley–Terry loss
``-log σ(r_chosen − r_rejected − margin)``, TRL's ``center_rewards_coefficient``, its accuracy and
margin metrics) with judgetrain's model card (:class:`~judgetrain.train.trainer.JudgeCard`), on the
pairs of :mod:`judgetrain.reward.data` collated with their images.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

from trl import RewardTrainer

from judgetrain.train.trainer import JudgeCard

from .data import PairCollator, pair_rows

__all__ = ["JudgeRewardTrainer", "prepare_pairs"]


class JudgeRewardTrainer(JudgeCard, RewardTrainer):  # type: ignore[misc]  # TRL's create_model_card signature, not the Trainer's
    """``RewardTrainer`` (same arguments) with judgetrain's model card."""


def prepare_pairs(train, evaluation, processor, training_args, max_length: int | None):
    """``(train pairs, evaluation pairs or None, collator)``: the pair rows of both splits, indexing one
    concatenation of their records, which the collator reads."""
    import datasets

    margin = training_args.margin_per_score_point
    with training_args.main_process_first(desc="reward pairs"):
        train_pairs = pair_rows(train, processor, name="train", max_length=max_length, margin_per_score_point=margin)
        eval_pairs = None
        records = train
        if evaluation is not None:
            eval_pairs = pair_rows(
                evaluation, processor, name="eval", offset=len(train), max_length=max_length, margin_per_score_point=margin
            )
            records = datasets.concatenate_datasets([train, evaluation])
    return train_pairs, eval_pairs, PairCollator(records, processor)
