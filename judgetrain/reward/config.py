"""The training arguments of a reward-model recipe: TRL's ``RewardConfig`` with judgetrain's fields.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

from dataclasses import dataclass

from trl import RewardConfig

from .args import RewardArguments

__all__ = ["JudgeRewardConfig"]


@dataclass
class JudgeRewardConfig(RewardConfig, RewardArguments):
    """TRL's ``RewardConfig`` (``center_rewards_coefficient``, ``max_length``, ``disable_dropout``, …) plus
    :class:`~judgetrain.reward.args.RewardArguments` (``method``, ``margin_per_score_point``)."""
