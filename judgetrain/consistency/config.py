"""The training arguments of every recipe: TRL's ``SFTConfig`` with the consistency fields.
README: "Consistency tuning (paper 001, App. C)".
"""

from __future__ import annotations

from dataclasses import dataclass

from trl import SFTConfig

from .args import ConsistencyArguments

__all__ = ["ConsistencyConfig"]


@dataclass
class ConsistencyConfig(SFTConfig, ConsistencyArguments):
    """TRL's ``SFTConfig`` plus :class:`ConsistencyArguments` (the recipe's training arguments)."""
