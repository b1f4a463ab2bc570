"""The training arguments of every recipe: TRL's ``SFTConfig`` with the consistency fields.
Docs: "how-to/consistency-tuning.md".
"""

from __future__ import annotations

from dataclasses import dataclass

from trl import SFTConfig

from judgetrain.train.args import MethodArguments, VisionFeatureArguments

from .args import ConsistencyArguments

__all__ = ["ConsistencyConfig"]


@dataclass
class ConsistencyConfig(SFTConfig, ConsistencyArguments, VisionFeatureArguments, MethodArguments):
    """TRL's ``SFTConfig`` plus :class:`ConsistencyArguments`, the vision-feature cache's fields
    (:class:`~judgetrain.train.args.VisionFeatureArguments`) and the recipe's ``method`` (``sft``;
    :class:`~judgetrain.train.args.MethodArguments`): the training arguments of an SFT recipe."""
