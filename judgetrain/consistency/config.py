"""The training arguments of every recipe: TRL's ``SFTConfig`` with the consistency fields.
README: "Consistency tuning (paper 001, App. C)".
"""

from __future__ import annotations

from dataclasses import dataclass

from trl import SFTConfig

from judgetrain.train.args import MethodArguments

from .args import ConsistencyArguments

__all__ = ["ConsistencyConfig"]


@dataclass
class ConsistencyConfig(SFTConfig, ConsistencyArguments, MethodArguments):
    """TRL's ``SFTConfig`` plus :class:`ConsistencyArguments` and the recipe's ``method``
    (``sft``; :class:`~judgetrain.train.args.MethodArguments`): the training arguments of an SFT recipe."""
