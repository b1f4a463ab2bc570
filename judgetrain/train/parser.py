"""A training recipe parsed into its dataclasses, as TRL's scripts parse theirs: TRL's
``ModelConfig`` with judgetrain's model fields (:mod:`judgetrain.train.model_args`),
judgetrain's :class:`~judgetrain.train.args.DataArguments` and TRL's ``SFTConfig`` with the
consistency fields (or, for a recipe that says ``method: grpo``, TRL's ``GRPOConfig`` with
judgetrain's reward fields: :func:`recipe_method` reads the method first), through the one parser every command uses (:func:`judgetrain.config.parse`).
A key judgetrain once spelled otherwise (:data:`~judgetrain.train.args.RENAMED`) fails naming
TRL's spelling.

What training adds to it is a ``prepare`` step: bf16 left at TRL's default is turned
off where no GPU supports it (asked for there, it fails), and a launch whose process
group :func:`judgetrain.train.run.setup_cpu_distributed` made is handed to the Trainer.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import os
import sys
from typing import Any

from judgetrain import config

from .args import METHODS, RENAMED, ConfigError, DataArguments

__all__ = ["bf16_capable", "env_world_size", "make_parser", "parse", "recipe_method"]


def _prog() -> str:
    """``python -m PACKAGE`` of the entry this process runs (``judgetrain.train``, or a sweep
    trial's ``judgetrain.sweep``), for the usage line."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None else ""
    return f"python -m {name if name.startswith('judgetrain.') else 'judgetrain.train'}"


def make_parser(method: str = "sft"):
    """The parser over the three dataclasses: ModelArguments (TRL's ModelConfig with judgetrain's
    model fields), DataArguments and the training arguments of ``method``: TRL's SFTConfig with
    the consistency fields (:class:`~judgetrain.consistency.config.ConsistencyConfig`), or under
    ``grpo`` TRL's GRPOConfig with judgetrain's reward fields
    (:class:`~judgetrain.grpo.config.JudgeGRPOConfig`), or under ``reward`` TRL's RewardConfig with
    judgetrain's reward-model fields (:class:`~judgetrain.reward.config.JudgeRewardConfig`); TRL's numbers are checked against
    :data:`~judgetrain.train.checks.TRAINING_RANGES` (and ``GRPO_RANGES``) as they are parsed."""
    from .checks import TRAINING_RANGES
    from .model_args import ModelArguments

    if method == "grpo":
        from judgetrain.grpo.args import GRPO_RANGES
        from judgetrain.grpo.config import JudgeGRPOConfig

        ranges = {**TRAINING_RANGES, **GRPO_RANGES}
        return config.make_parser((ModelArguments, DataArguments, JudgeGRPOConfig), prog=_prog(), ranges=ranges)
    if method == "reward":
        from judgetrain.reward.args import REWARD_RANGES
        from judgetrain.reward.config import JudgeRewardConfig

        ranges = {**TRAINING_RANGES, **REWARD_RANGES}
        return config.make_parser((ModelArguments, DataArguments, JudgeRewardConfig), prog=_prog(), ranges=ranges)
    from judgetrain.consistency.config import ConsistencyConfig  # SFTConfig + the consistency fields (paper 001 App. C)

    return config.make_parser((ModelArguments, DataArguments, ConsistencyConfig), prog=_prog(), ranges=TRAINING_RANGES)


DEFAULT_DDP_TIMEOUT = 1800  # TrainingArguments.ddp_timeout's default (seconds)


def recipe_method(argv: list[str]) -> str:
    """The ``method`` a recipe and its overrides ask for (the flag wins; ``sft`` when neither
    says): which training arguments the rest is read into. ``ConfigError`` for a method judgetrain
    does not have."""
    rest, path = config.split_config_flag(argv)
    recipe = config.read_config_file(path) if path is not None else {}
    method = _explicit("method", rest, recipe)
    method = "sft" if method is None else str(method)
    if method not in METHODS:
        where = "--method" if _explicit("method", rest, {}) is not None else f"{path}: method"
        raise ConfigError([f"{where}: {method!r} is not a training method; use {config.one_of(METHODS)}"])
    return method


def recipe_ddp_timeout(argv: list[str]) -> int:
    """The collective timeout in seconds a recipe and its overrides ask for (``ddp_timeout``, the
    flag wins; TrainingArguments' default when neither says), read before the recipe is parsed:
    the process group judgetrain sets up on CPUs exists before the training arguments do. A
    value that is not a number is left to the full parse to refuse."""
    rest, path = config.split_config_flag(argv)
    recipe = config.read_config_file(path) if path is not None else {}
    value = _explicit("ddp_timeout", rest, recipe)
    value = _explicit("ddp-timeout", rest, {}) if value is None else value
    try:
        return int(value) if value is not None else DEFAULT_DDP_TIMEOUT
    except (TypeError, ValueError):
        return DEFAULT_DDP_TIMEOUT


def bf16_capable() -> bool:
    """True when a CUDA GPU that supports bfloat16 is present."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def env_world_size() -> int:
    """Processes in this launch (``WORLD_SIZE``, set by accelerate / torchrun; 1 when unset)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def parse(argv: list[str] | None = None, *, configured_state: bool = False):
    """Parse recipe + overrides into ``(model_args, data_args, training_args)`` with
    :func:`judgetrain.config.parse` (recipe values become defaults, flags win, an ``env:``
    mapping sets environment variables, unknown keys and flags fail naming each, a renamed one
    naming its new name). bf16 left at TRL's default is
    switched off where no GPU supports it; bf16 asked for there fails. ``configured_state``
    makes the Trainer reuse the process group set up by
    ``judgetrain.train.run.setup_cpu_distributed`` (it must be known when SFTConfig is built,
    which is when the DeepSpeed batch sizes are computed from the world size)."""
    argv = list(sys.argv[1:] if argv is None else argv)

    def prepare(argv: list[str], recipe: dict[str, Any]) -> None:
        renamed = _renamed_keys(argv, recipe)
        if renamed:
            raise ConfigError(renamed)
        if configured_state:
            recipe["accelerator_config"] = {**(recipe.get("accelerator_config") or {}), "use_configured_state": True}
        if not bf16_capable():
            _bf16_off_without_a_gpu(argv, recipe)

    try:
        return config.parse(make_parser(recipe_method(argv)), argv, help_hint="`judgetrain train --help`", prepare=prepare)
    except config.ConfigError as e:
        raise ConfigError(e.problems) from None
    except ValueError as e:  # what TRL's or transformers' __post_init__ refuses (GRPOConfig: batch vs num_generations, …)
        raise ConfigError([f"{e} (refused by TRL's training arguments; change the fields it names)"]) from None


def _renamed_keys(argv: list[str], recipe: dict) -> list[str]:
    """One problem per key or flag spelled as judgetrain once spelled it (:data:`RENAMED`)."""
    problems = [
        f"unknown key {old!r}; did you mean {new!r}? ({old} is now TRL's ModelConfig field {new})"
        for old, new in RENAMED.items()
        if old in recipe
    ]
    flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    problems += [
        f"unknown argument '--{old}'; did you mean '--{new}'? ({old} is now TRL's ModelConfig field {new})"
        for old, new in RENAMED.items()
        if f"--{old}" in flags or f"--{old.replace('_', '-')}" in flags
    ]
    return problems


def _explicit(name: str, argv: list[str], recipe: dict) -> Any:
    """The value the user gave for ``name`` (command line over recipe), or None."""
    flag = f"--{name}"
    for i, a in enumerate(argv):
        if a == flag:
            return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return recipe.get(name)


def _truthy(v: Any) -> bool:
    return v is True or str(v).lower() in {"1", "true", "yes", "on"}


def _bf16_off_without_a_gpu(argv: list[str], recipe: dict) -> None:
    """On a machine without a bf16 GPU: bf16 left at TRL's default goes off (in ``recipe``); bf16 asked for fails."""
    bf16 = _explicit("bf16", argv, recipe)
    if bf16 is None and not _truthy(_explicit("fp16", argv, recipe)):
        # TRL turns bf16 on by default; without a bf16 GPU that fails (or emulates it 20x slower on CPU)
        recipe["bf16"] = False
    elif bf16 is not None and _truthy(bf16):
        raise ConfigError(
            [
                "bf16: true, but this machine has no GPU that supports bfloat16: set `bf16: false` "
                "(or pass --bf16 false) to train in float32 here, or run on a bf16-capable GPU (A100, H100, …)"
            ]
        )
