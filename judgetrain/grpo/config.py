"""The training arguments of a GRPO recipe: TRL's ``GRPOConfig`` with judgetrain's reward fields.
Docs: "how-to/grpo.md".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig

from .args import GRPOArguments

__all__ = ["JudgeGRPOConfig"]


@dataclass
class JudgeGRPOConfig(GRPOConfig, GRPOArguments):
    """TRL's ``GRPOConfig`` plus :class:`~judgetrain.grpo.args.GRPOArguments` (``method``, ``rewards``).

    ``generation_as_given`` keeps ``(steps_per_generation, generation_batch_size)`` as the recipe
    gave them (None: left out) before ``GRPOConfig`` fills them in from the accumulation: the
    settings derived later (:mod:`judgetrain.train.settings`) follow a changed accumulation only
    where the recipe left them out. Not a recipe field."""

    generation_as_given: tuple[int | None, int | None] = field(default=(None, None), init=False, repr=False)

    def __post_init__(self) -> None:
        self.generation_as_given = (self.steps_per_generation, self.generation_batch_size)
        super().__post_init__()
