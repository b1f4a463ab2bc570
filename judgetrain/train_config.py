"""The training configuration: judgetrain's three argument dataclasses plus TRL's
``SFTConfig``, parsed from a recipe YAML and command-line overrides the way TRL's
``TrlParser`` does, and the cross-field checks that report every problem at once.

Used by ``judgetrain.train`` (and, through it, by ``judgetrain train``'s launcher
and ``judgetrain sweep``). README: "`judgetrain train`".
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from judgetrain import config

__all__ = [
    "ConfigError",
    "DataArguments",
    "LoraArguments",
    "ModelArguments",
    "bf16_capable",
    "check_config",
    "env_world_size",
    "make_parser",
    "parse",
]


class ConfigError(config.ConfigError):
    """Every problem with a training configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems, "training configuration")


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default=None, metadata={"help": "Base model: a local folder or a hub id."})
    family: str | None = field(default=None, metadata={"help": "Model family (qwen3-vl, qwen2.5-vl, llava-onevision); default: from the config."})
    dtype: str = field(default="auto", metadata={"help": "Weights dtype: auto, float32, bfloat16, float16."})
    attn_implementation: str | None = field(default=None, metadata={"help": "eager, sdpa, flash_attention_2, …"})
    min_pixels: int | None = field(default=None, metadata={"help": "Qwen: smallest per-image pixel budget."})
    max_pixels: int | None = field(default=None, metadata={"help": "Qwen: largest per-image pixel budget (bounds image tokens per frame)."})
    freeze_vision_tower: bool = field(default=True, metadata={"help": "Keep the vision encoder frozen (default)."})
    freeze_projector: bool = field(default=True, metadata={"help": "Keep the vision-to-language projector frozen (default)."})


@dataclass
class DataArguments:
    datasets: list[str] = field(default=None, metadata={"help": "Built judgetrain datasets (folders with build.json)."})
    train_split: str = field(default="train")
    eval_split: str | None = field(default="validation", metadata={"help": "Split for evaluation loss; null for none."})
    tasks: list[str] | None = field(default=None, metadata={"help": "Keep only these tasks (default: all)."})
    layouts: list[str] | None = field(default=None, metadata={"help": "Keep only these prompt layouts (default: all)."})
    mixture_weights: list[float] | None = field(default=None, metadata={"help": "Sampling probability per dataset (default: concatenate)."})
    max_frames: int | None = field(default=None, metadata={"help": "Leave out records showing more images than this (counted and logged)."})
    max_train_samples: int | None = field(default=None)
    max_eval_samples: int | None = field(default=None)
    effective_batch_size: int | None = field(
        default=None,
        metadata={"help": "Global batch in records, held fixed across GPU counts: gradient_accumulation_steps = this / (per-device batch × "
                          "world size); with packing, / (records per packed row × per-device rows × world size), rounded."},
    )
    check_lengths: bool = field(default=True, metadata={"help": "Refuse records longer than max_length (image tokens would be cut)."})


@dataclass
class LoraArguments:
    use_lora: bool = field(default=True, metadata={"help": "LoRA through PEFT; false trains the language model fully."})
    lora_r: int = field(default=16)
    lora_alpha: int = field(default=32)
    lora_dropout: float = field(default=0.05)
    lora_target_modules: str | None = field(default=None, metadata={"help": "Regex of module names; default: the family's language-model projections."})
    lora_modules_to_save: list[str] | None = field(default=None, metadata={"help": "Extra modules trained fully and saved with the adapter."})


def make_parser():
    """TRL's parser over the four dataclasses: ModelArguments, DataArguments, LoraArguments, SFTConfig."""
    from trl import TrlParser

    from judgetrain.consistency import ConsistencyConfig  # SFTConfig + the consistency fields (paper 001 App. C)

    return TrlParser((ModelArguments, DataArguments, LoraArguments, ConsistencyConfig))


# --------------------------------------------------------------------------- parsing and checks


def bf16_capable() -> bool:
    """True when a CUDA GPU that supports bfloat16 is present."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


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


def env_world_size() -> int:
    """Processes in this launch (``WORLD_SIZE``, set by accelerate / torchrun; 1 when unset)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def parse(argv: list[str] | None = None, *, configured_state: bool = False):
    """Parse recipe + overrides into the four dataclasses, as TRL's
    ``TrlParser.parse_args_and_config`` does (recipe values become defaults,
    flags win, an ``env:`` mapping sets environment variables), with an
    error naming every unknown key. bf16 left at TRL's default is switched off
    where no GPU supports it; bf16 asked for there fails. ``configured_state``
    makes the Trainer reuse the process group set up by
    ``judgetrain.train.setup_cpu_distributed`` (it must be known when SFTConfig is built,
    which is when the DeepSpeed batch sizes are computed from the world size)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recipe, recipe_path = _read_recipe(argv)
    for key, value in (recipe.pop("env", None) or {}).items():
        os.environ[str(key)] = str(value)
    if configured_state:
        recipe["accelerator_config"] = {**(recipe.get("accelerator_config") or {}), "use_configured_state": True}
    if not bf16_capable():
        _bf16_off_without_a_gpu(argv, recipe)
    parser = make_parser()
    _refuse_unknown_keys(recipe, recipe_path, parser)
    parser.set_defaults_with_config(**recipe)
    *cfgs, rest = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    if rest:
        raise ConfigError(_leftover_problems(rest, parser))
    return tuple(cfgs)


def _read_recipe(argv: list[str]) -> tuple[dict, Path | None]:
    """Take ``--config RECIPE`` out of ``argv`` (in place) and return the recipe mapping and its path."""
    import yaml

    if "--config" not in argv:
        return {}, None
    i = argv.index("--config")
    recipe_path = Path(argv[i + 1])
    del argv[i : i + 2]
    if not recipe_path.is_file():
        raise ConfigError([f"--config {recipe_path}: no such recipe file"])
    recipe = yaml.safe_load(recipe_path.read_text()) or {}
    if not isinstance(recipe, dict):
        raise ConfigError([f"{recipe_path}: a recipe is a YAML mapping of field: value"])
    return recipe, recipe_path


def _bf16_off_without_a_gpu(argv: list[str], recipe: dict) -> None:
    """On a machine without a bf16 GPU: bf16 left at TRL's default goes off (in ``recipe``); bf16 asked for fails."""
    bf16 = _explicit("bf16", argv, recipe)
    if bf16 is None and not _truthy(_explicit("fp16", argv, recipe)):
        # TRL turns bf16 on by default; without a bf16 GPU that fails (or emulates it 20x slower on CPU)
        recipe["bf16"] = False
    elif bf16 is not None and _truthy(bf16):
        raise ConfigError(["bf16: true, but this machine has no GPU that supports bfloat16: set `bf16: false` "
                           "(or pass --bf16 false) to train in float32 here, or run on a bf16-capable GPU (A100, H100, …)"])


def _refuse_unknown_keys(recipe: dict, recipe_path: Path | None, parser) -> None:
    import difflib

    unknown = [k for k in recipe if k not in {a.dest for a in parser._actions}]
    if unknown:
        known = [a.dest for a in parser._actions]
        raise ConfigError([
            f"{recipe_path}: unknown key {k!r}" + (f"; did you mean {close[0]!r}?" if (close := difflib.get_close_matches(k, known, n=1)) else "")
            + " (fields: judgetrain's ModelArguments/DataArguments/LoraArguments and TRL's SFTConfig; `judgetrain train --help`)"
            for k in unknown
        ])


def _leftover_problems(rest: list[str], parser) -> list[str]:
    """One problem per command-line word the parser did not use."""
    import difflib

    flags = [o for a in parser._actions for o in a.option_strings]
    problems = [f"command line: unknown argument {w!r}"
                + (f"; did you mean {close[0]!r}?" if (close := difflib.get_close_matches(w.split("=", 1)[0], flags, n=1)) else "")
                + " (`judgetrain train --help` lists every field)"
                for w in rest if w.startswith("-")]
    stray = [w for i, w in enumerate(rest) if not w.startswith("-") and (i == 0 or not rest[i - 1].startswith("-"))]
    if stray:
        problems.append(f"command line: {' '.join(stray)!r} not used. Flags take `--field value`; a list field given on the "
                        "command line takes space-separated values only where the field is a list (`--datasets a b`); "
                        "`report_to` takes one value there, so put several in the recipe (`report_to: [wandb, tensorboard]`)")
    return problems


def check_config(model_args: ModelArguments, data_args: DataArguments, lora_args: LoraArguments, training_args, world_size: int) -> list[str]:
    """Cross-field rules; every problem names the field and the fix. Nothing is
    loaded: ``lora_target_modules`` is matched against the model built from its
    config on the meta device, and a resume is compared with the recipe its
    checkpoint recorded (``judgetrain.train_resume``)."""
    from judgetrain.consistency import consistency_problems
    from judgetrain.train_model import lora_target_problems
    from judgetrain.train_packing import packing_problems
    from judgetrain.train_resume import resume_problems

    problems = _list_fields_given_as_strings(model_args, data_args, lora_args)
    if not model_args.model_name_or_path:
        problems.append("model_name_or_path: missing; give a local model folder or a hub id")
    if not data_args.datasets:
        problems.append("datasets: missing; give one or more folders built with `judgetrain build …`")
    if data_args.mixture_weights is not None and not isinstance(data_args.mixture_weights, str):
        if len(data_args.mixture_weights) != len(data_args.datasets or []):
            problems.append(f"mixture_weights: {len(data_args.mixture_weights)} weight(s) for {len(data_args.datasets or [])} dataset(s); give one per dataset")
        elif any(w < 0 for w in data_args.mixture_weights) or sum(data_args.mixture_weights) <= 0:
            problems.append("mixture_weights: must be non-negative with a positive sum")
    problems += _optimizer_problems(training_args)
    problems += packing_problems(model_args, data_args, training_args)
    if training_args.bf16 and training_args.fp16:
        problems.append("bf16 and fp16 are both on; choose one")
    if data_args.effective_batch_size is not None and not getattr(training_args, "packing", False):
        # (packed: the accumulation follows from the records per row, train_packing.gradient_accumulation_for)
        per_step = training_args.per_device_train_batch_size * world_size
        if data_args.effective_batch_size % per_step:
            problems.append(f"effective_batch_size: {data_args.effective_batch_size} is not a multiple of per_device_train_batch_size "
                            f"({training_args.per_device_train_batch_size}) × world size ({world_size}) = {per_step}; change one of them")
    if training_args.eval_strategy != "no" and not data_args.eval_split:
        strategy = getattr(training_args.eval_strategy, "value", training_args.eval_strategy)
        problems.append(f"eval_strategy: {strategy} needs eval_split; set `eval_split: validation` or `eval_strategy: no`")
    if lora_args.use_lora and (lora_args.lora_r <= 0 or lora_args.lora_alpha <= 0):
        problems.append("lora_r / lora_alpha: must be positive")
    if not 0 <= lora_args.lora_dropout < 1:
        problems.append(f"lora_dropout: {lora_args.lora_dropout} must be in [0, 1)")
    if training_args.resume_from_checkpoint not in (None, "auto") and not Path(training_args.resume_from_checkpoint).is_dir():
        problems.append(f"resume_from_checkpoint: {training_args.resume_from_checkpoint} is not a folder; give a checkpoint folder or `auto`")
    problems += consistency_problems(data_args, training_args)
    problems += lora_target_problems(model_args, lora_args, training_args.trust_remote_code)
    problems += resume_problems(model_args, data_args, lora_args, training_args, world_size)
    return problems


def _list_fields_given_as_strings(*cfgs) -> list[str]:
    """A list field written as a plain string in the recipe (``datasets: data/prism``)
    reaches the dataclass as that string, which code iterating it reads as a list of
    characters: refuse it, showing the list spelling."""
    import typing

    problems = []
    for cfg in cfgs:
        hints = typing.get_type_hints(type(cfg))
        for f in fields(cfg):
            value = getattr(cfg, f.name)
            is_list = any(typing.get_origin(t) is list for t in (hints[f.name], *typing.get_args(hints[f.name])))
            if is_list and isinstance(value, str):
                problems.append(f"{f.name}: given as the string {value!r}, but it is a list; write `{f.name}: [{value}]` in the "
                                f"recipe (or `--{f.name} {value}` on the command line)")
    return problems


def _optimizer_problems(training_args) -> list[str]:
    """Values torch's optimizer refuses only once training starts, after the model and data have loaded."""
    problems = []
    if training_args.learning_rate < 0:
        problems.append(f"learning_rate: {training_args.learning_rate} is negative; give a positive rate "
                        "(the LoRA recipes use 1e-4; recipes/spaces/ search 1e-5 to 5e-4)")
    if training_args.weight_decay < 0:
        problems.append(f"weight_decay: {training_args.weight_decay} is negative; give 0 (none) or a positive value such as 0.1")
    return problems
