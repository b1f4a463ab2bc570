"""The recipe fields ``judgetrain train --help`` lists, without importing torch or TRL's trainer.

Every recipe field comes from a dataclass of the recipe parser
(:func:`judgetrain.train.parser.make_parser`): judgetrain's ``ModelArguments`` (TRL's
``ModelConfig`` with judgetrain's model fields), ``DataArguments``, and TRL's ``SFTConfig``
(transformers' ``TrainingArguments`` under it) with judgetrain's consistency fields; then what
a ``method: grpo`` recipe adds: judgetrain's reward fields and TRL's ``GRPOConfig``. Importing
``SFTConfig`` loads torch (seconds; tens of seconds on a busy machine), so its fields are read
from the installed release's source instead
(:func:`judgetrain.compat.trl.sft_config_from_source`): the listing is always the installed
release's, and nothing is stored that a release could make stale. A test checks that the
listing's fields are the recipe parser's.
README: "`judgetrain train`".
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


def recipe_parser(training: type | None = None, method: str = "sft", *, only_grpo: bool = False) -> argparse.ArgumentParser:
    """A parser that lists every recipe field of ``method`` under the dataclass that declares it,
    at :data:`WIDTH` columns (for ``--help``, not for parsing: see
    :func:`judgetrain.train.parser.parse`). ``training``: the class of TRL's training fields (SFTConfig,
    or GRPOConfig under ``grpo``); by default read from TRL's source (nothing imported), tests pass
    TRL's class. ``only_grpo``: only what a GRPO recipe adds to an SFT one (``--help``'s second part)."""
    from judgetrain.compat.transformers import argument_group
    from judgetrain.compat.trl import grpo_config_fields_from_source, sft_config_from_source
    from judgetrain.consistency.args import ConsistencyArguments
    from judgetrain.grpo.args import GRPOArguments

    from .args import DataArguments, MethodArguments
    from .model_args import ModelArguments

    common = [
        (ModelArguments, "recipe fields: TRL's ModelConfig with judgetrain's model fields (ModelArguments)"),
        (DataArguments, "recipe fields: judgetrain's DataArguments"),
    ]
    if method == "grpo":
        sft_fields = frozenset(f.name for f in fields(sft_config_from_source())) if only_grpo else frozenset()
        groups = [] if only_grpo else common
        groups += [
            (GRPOArguments, "recipe fields of `method: grpo`: judgetrain's GRPOArguments (the rewards)"),
            (
                training or grpo_config_fields_from_source(sft_fields),
                "recipe fields of `method: grpo`: TRL's GRPOConfig"
                + (" (beyond SFTConfig's, which it shares)" if only_grpo else " (with transformers' TrainingArguments)"),
            ),
        ]
    else:
        groups = common + [
            (MethodArguments, "recipe fields: judgetrain's MethodArguments (how the recipe trains)"),
            (ConsistencyArguments, "recipe fields: judgetrain's ConsistencyArguments (consistency tuning)"),
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
            ". A recipe with `method: grpo` takes these too, and the fields above but SFTConfig's own (max_length, "
            "packing, …) and the consistency ones:"
            if only_grpo
            else ":"
        ),
    )


def recipe_help() -> str:
    """The listing: every recipe field with its help text and default, TRL's read from its source;
    then what a GRPO recipe adds."""
    return recipe_parser().format_help() + "\n" + recipe_parser(method="grpo", only_grpo=True).format_help()
