"""The recipe fields ``judgetrain train --help`` lists, without importing torch or TRL's trainer.

Every recipe field comes from a dataclass of the recipe parser
(:func:`judgetrain.train.parser.make_parser`): judgetrain's ``ModelArguments`` (TRL's
``ModelConfig`` with judgetrain's model fields), ``DataArguments``, and TRL's ``SFTConfig``
(transformers' ``TrainingArguments`` under it) with judgetrain's consistency fields; then what
a ``method: grpo`` recipe adds (judgetrain's reward fields and TRL's ``GRPOConfig``) and what a
``method: reward`` recipe adds (judgetrain's reward-model fields and TRL's ``RewardConfig``). Importing
``SFTConfig`` loads torch (seconds; tens of seconds on a busy machine), so its fields are read
from the installed release's source instead
(:func:`judgetrain.compat.trl.sft_config_from_source`): the listing is always the installed
release's, and nothing is stored that a release could make stale. A test checks that the
listing's fields are the recipe parser's.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from judgetrain import config

__all__ = ["WIDTH", "ListingFormatter", "recipe_help", "recipe_parser"]

WIDTH = 100  # columns of the listing: fixed, so it does not depend on the terminal it is printed in


class ListingFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """The listing's layout: :data:`WIDTH` columns, help texts from column 40."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=WIDTH, max_help_position=40)


def recipe_parser(training: type | None = None, method: str = "sft", *, only_added: bool = False) -> argparse.ArgumentParser:
    """A parser that lists every recipe field of ``method`` under the dataclass that declares it,
    at :data:`WIDTH` columns (for ``--help``, not for parsing: see
    :func:`judgetrain.train.parser.parse`). ``training``: the class of TRL's training fields (SFTConfig,
    GRPOConfig under ``grpo``, RewardConfig under ``reward``); by default read from TRL's source
    (nothing imported), tests pass TRL's class. ``only_added``: only what a ``method`` recipe adds to
    an SFT one (``--help``'s later parts)."""
    from judgetrain.compat.transformers import argument_group
    from judgetrain.compat.trl import grpo_config_fields_from_source, reward_config_fields_from_source, sft_config_from_source
    from judgetrain.consistency.args import ConsistencyArguments
    from judgetrain.grpo.args import GRPOArguments
    from judgetrain.reward.args import RewardArguments

    from .args import DataArguments, MethodArguments, VisionFeatureArguments
    from .model_args import ModelArguments

    common = [
        (ModelArguments, "recipe fields: TRL's ModelConfig with judgetrain's model fields (ModelArguments)"),
        (DataArguments, "recipe fields: judgetrain's DataArguments"),
    ]
    methods = {
        "grpo": (GRPOArguments, "GRPOArguments (the rewards)", grpo_config_fields_from_source, "GRPOConfig"),
        "reward": (RewardArguments, "RewardArguments (the reward model)", reward_config_fields_from_source, "RewardConfig"),
    }
    if method in methods:
        own, own_title, from_source, trl_name = methods[method]
        sft_fields = frozenset(f.name for f in fields(sft_config_from_source())) if only_added else frozenset()
        groups = [] if only_added else common
        groups += [
            (own, f"recipe fields of `method: {method}`: judgetrain's {own_title}"),
            (
                training or from_source(sft_fields),
                f"recipe fields of `method: {method}`: TRL's {trl_name}"
                + (" (beyond SFTConfig's, which it shares)" if only_added else " (with transformers' TrainingArguments)"),
            ),
        ]
    else:
        groups = common + [
            (MethodArguments, "recipe fields: judgetrain's MethodArguments (how the recipe trains)"),
            (ConsistencyArguments, "recipe fields: judgetrain's ConsistencyArguments (consistency tuning)"),
            (VisionFeatureArguments, "recipe fields: judgetrain's VisionFeatureArguments (the vision-feature cache)"),
            (training or sft_config_from_source(), "recipe fields: TRL's SFTConfig (with transformers' TrainingArguments)"),
        ]
    return config.make_parser(
        tuple(argument_group(cls, title) for cls, title in groups),
        prog="judgetrain train",
        usage=argparse.SUPPRESS,
        add_help=False,
        formatter_class=ListingFormatter,
        description="Every field below is a recipe key (YAML) and, on the command line, an "
        "override (--field value) that wins over the recipe"
        + (
            f". A recipe with `method: {method}` takes these too, and the fields above but SFTConfig's own (packing, "
            "completion_only_loss, …) and the consistency ones:"
            if only_added
            else ":"
        ),
    )


def recipe_help() -> str:
    """The listing: every recipe field with its help text and default, TRL's read from its source;
    then what a GRPO recipe and a reward-model recipe add."""
    return "\n".join(
        [
            recipe_parser().format_help(),
            recipe_parser(method="grpo", only_added=True).format_help(),
            recipe_parser(method="reward", only_added=True).format_help(),
        ]
    )
