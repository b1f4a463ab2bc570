"""The cross-field checks of a training configuration: every problem at once, each naming
the field and the fix, before anything loads (the pattern of torchtune's
``config/_validate.py``).

The numbers TRL's ``SFTConfig`` takes (:data:`TRAINING_RANGES`: a positive finite learning
rate, batch sizes of at least 1, betas in [0, 1), …) are refused as the recipe is parsed
(:mod:`judgetrain.train.parser` hands them to :func:`judgetrain.config.make_parser`), before
``TrainingArguments`` or the launcher divides by one; :func:`check_config` checks them again
for arguments built in code. :func:`check_config` owns the rules that span parts: the
recipe's own fields, the datasets (each once), LoRA targets
against the model built from its config on the meta device (:mod:`judgetrain.train.model`),
packing and ``padding_free`` (:mod:`judgetrain.train.packing`), a resume against the recipe its checkpoint
recorded (:mod:`judgetrain.train.resume`), the consistency objective against the rest
of the recipe (:mod:`judgetrain.consistency.args`) and a GRPO recipe's rewards and generation
batches (:mod:`judgetrain.grpo.args`), a reward-model recipe's records (:mod:`judgetrain.reward.args`); the model fields' own checks are
:func:`judgetrain.train.model_args.model_problems`. Docs: "reference/recipes.md".
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

from judgetrain.config import Range, range_problems
from judgetrain.consistency.args import objective_problems
from judgetrain.grpo.args import GRPO_RANGES, grpo_problems
from judgetrain.reward.args import REWARD_RANGES, reward_problems

from .args import DataArguments
from .model import lora_target_problems
from .model_args import STRING_LISTS, ModelArguments, model_problems
from .packing import packing_problems, padding_free_problems
from .resume import resume_problems

__all__ = ["TRAINING_RANGES", "check_config", "consistency_problems", "dataset_repeats"]

_STEPS = "a number of steps, or a fraction of the training steps below 1 (as TRL reads it)"
_SEED = Range(minimum=0, maximum=2**32 - 1, fix="an integer in [0, 4294967295] (numpy's seed range)")
# the numbers of TRL's SFTConfig (TrainingArguments) judgetrain trains with, and what to give instead;
# the LoRA fields are model_problems', the consistency fields objective_problems'
TRAINING_RANGES = {
    "learning_rate": Range(above=0, fix="a positive rate (the LoRA recipes use 1e-4; recipes/spaces/ search 1e-5 to 5e-4)"),
    "weight_decay": Range(minimum=0, fix="0 (none) or a positive value such as 0.1"),
    "num_train_epochs": Range(above=0, fix="a positive number of epochs (max_steps, when positive, wins)"),
    "max_steps": Range(minimum=-1, fix="a positive number of steps, or -1 to train num_train_epochs"),
    "warmup_steps": Range(minimum=0, fix=f"0 (no warmup), or {_STEPS}"),
    "warmup_ratio": Range(minimum=0, maximum=1, fix="a fraction of the training steps in [0, 1]"),
    "per_device_train_batch_size": Range(
        minimum=1, fix="at least 1 record per device (effective_batch_size sets the global batch)"
    ),
    "per_device_eval_batch_size": Range(minimum=1, fix="at least 1 record per device"),
    "gradient_accumulation_steps": Range(minimum=1, fix="at least 1 (or leave it out and set effective_batch_size)"),
    "eval_accumulation_steps": Range(minimum=1, fix="at least 1, or leave it out"),
    "max_grad_norm": Range(minimum=0, fix="the norm to clip gradients at (TRL's default 1.0), or 0 for no clipping"),
    "adam_beta1": Range(minimum=0, below=1, fix="a number in [0, 1) (AdamW's default 0.9)"),
    "adam_beta2": Range(minimum=0, below=1, fix="a number in [0, 1) (AdamW's default 0.999)"),
    "adam_epsilon": Range(above=0, fix="a small positive number (AdamW's default 1e-8)"),
    "label_smoothing_factor": Range(minimum=0, below=1, fix="a number in [0, 1) (0: none)"),
    "logging_steps": Range(above=0, fix=_STEPS),
    "save_steps": Range(above=0, fix=_STEPS),
    "eval_steps": Range(above=0, fix=f"{_STEPS}, or leave it out (logging_steps)"),
    "eval_delay": Range(minimum=0, fix="0 or more epochs or steps before the first evaluation"),
    "save_total_limit": Range(minimum=1, fix="at least 1 checkpoint to keep, or leave it out to keep every one"),
    "seed": _SEED,
    "data_seed": _SEED,
    "dataloader_num_workers": Range(minimum=0, fix="0 (load in the training process) or more worker processes"),
    "dataloader_prefetch_factor": Range(minimum=1, fix="at least 1 batch per worker, or leave it out"),
    "dataset_num_proc": Range(minimum=1, fix="at least 1 process, or leave it out"),
    "max_length": Range(minimum=1, fix="a positive number of tokens (records longer than it are refused)"),
    "torch_empty_cache_steps": Range(minimum=1, fix="at least 1 step, or leave it out"),
    "neftune_noise_alpha": Range(minimum=0, fix="0 or more, or leave it out (no NEFTune noise)"),
    "router_aux_loss_coef": Range(minimum=0, fix="0 or more"),
    "ddp_timeout": Range(minimum=1, fix="a positive number of seconds (TRL's default 1800)"),
    "ddp_bucket_cap_mb": Range(minimum=1, fix="a positive number of megabytes, or leave it out (PyTorch's 25)"),
    "pad_to_multiple_of": Range(minimum=1, fix="a positive number of tokens, auto, or leave it out"),
}


def check_config(model_args: ModelArguments, data_args: DataArguments, training_args, world_size: int) -> list[str]:
    """Cross-field rules; every problem names the field and the fix. Nothing is
    loaded: ``lora_target_modules`` is matched against the model built from its
    config on the meta device, and a resume is compared with the recipe its
    checkpoint recorded (:mod:`judgetrain.train.resume`)."""
    problems = _list_fields_given_as_strings(model_args, data_args) + model_problems(model_args)
    method = getattr(training_args, "method", "sft")
    grpo = method == "grpo"
    ranges = {**TRAINING_RANGES, **{"grpo": GRPO_RANGES, "reward": REWARD_RANGES}.get(method, {})}
    problems += range_problems(data_args) + range_problems(model_args) + range_problems(training_args, ranges)
    if not model_args.model_name_or_path:
        problems.append("model_name_or_path: missing; give a local model folder or a hub id")
    if not data_args.datasets:
        problems.append("datasets: missing; give one or more folders built with `judgetrain build …`")
    elif isinstance(data_args.datasets, list):
        problems += dataset_repeats(data_args.datasets)
    if data_args.mixture_weights is not None and not isinstance(data_args.mixture_weights, str):
        if len(data_args.mixture_weights) != len(data_args.datasets or []):
            problems.append(
                f"mixture_weights: {len(data_args.mixture_weights)} weight(s) for {len(data_args.datasets or [])} dataset(s); give one per dataset"
            )
        elif any(w < 0 for w in data_args.mixture_weights) or sum(data_args.mixture_weights) <= 0:
            problems.append("mixture_weights: must be non-negative with a positive sum")
    problems += packing_problems(model_args, data_args, training_args) + padding_free_problems(model_args, training_args)
    problems += kernel_problems(model_args, training_args)
    if training_args.bf16 and training_args.fp16:
        problems.append("bf16 and fp16 are both on; choose one")
    if data_args.effective_batch_size is not None and not getattr(training_args, "packing", False):
        # (packed: the accumulation follows from the records per row, judgetrain.train.settings)
        per_step = training_args.per_device_train_batch_size * world_size
        if per_step > 0 and data_args.effective_batch_size % per_step:  # (a batch size below 1 is a range problem)
            problems.append(
                f"effective_batch_size: {data_args.effective_batch_size} is not a multiple of per_device_train_batch_size "
                f"({training_args.per_device_train_batch_size}) × world size ({world_size}) = {per_step}; change one of them"
            )
    if training_args.eval_strategy != "no" and not data_args.eval_split:
        strategy = getattr(training_args.eval_strategy, "value", training_args.eval_strategy)
        problems.append(f"eval_strategy: {strategy} needs eval_split; set `eval_split: validation` or `eval_strategy: no`")
    if training_args.resume_from_checkpoint not in (None, "auto") and not Path(training_args.resume_from_checkpoint).is_dir():
        problems.append(
            f"resume_from_checkpoint: {training_args.resume_from_checkpoint} is not a folder; give a checkpoint folder or `auto`"
        )
    problems += consistency_problems(data_args, training_args)
    accumulation = _accumulation(data_args, training_args, world_size)
    problems += grpo_problems(data_args, training_args, accumulation, world_size) if grpo else []
    problems += reward_problems(model_args, data_args, training_args) if method == "reward" else []
    problems += lora_target_problems(model_args, training_args.trust_remote_code)
    problems += resume_problems(model_args, data_args, training_args, world_size)
    return problems


# fused kernels a recipe may ask for -> (the module that provides it, how to install it)
KERNEL_PACKAGES = {
    "flash_attention_2": ("flash_attn", "pip install flash-attn --no-build-isolation"),
    "flash_attention_3": ("flash_attn_interface", "install FlashAttention 3 from its hopper/ folder"),
}


def kernel_problems(model_args, training_args) -> list[str]:
    """Fused kernels the recipe asks for whose package this machine lacks, each with the way to
    install it and the setting that needs none: found before the model loads, not after."""
    import importlib.util

    problems = []
    if getattr(training_args, "use_liger_kernel", False) and importlib.util.find_spec("liger_kernel") is None:
        problems.append(
            "use_liger_kernel: liger-kernel is not installed; `pip install liger-kernel` (CUDA GPUs; it fuses the LM "
            "head with the cross-entropy for Qwen-VL), or set `use_liger_kernel: false`"
        )
    attn = model_args.attn_implementation
    if attn in KERNEL_PACKAGES and importlib.util.find_spec(KERNEL_PACKAGES[attn][0]) is None:
        module, install = KERNEL_PACKAGES[attn]
        problems.append(
            f"attn_implementation: {attn} needs the {module} package, which is not installed; {install} (CUDA GPUs), "
            "or set `attn_implementation: sdpa` (packed and padding-free rows stay apart under sdpa too)"
        )
    return problems


def _accumulation(data_args, training_args, world_size: int) -> int:
    """The micro-batches an optimizer step will take: derived from ``effective_batch_size`` as the run derives
    it (:func:`~judgetrain.train.settings.gradient_accumulation`), else the recipe's."""
    from .settings import gradient_accumulation

    per_device = training_args.per_device_train_batch_size
    if data_args.effective_batch_size and per_device >= 1 and world_size >= 1:
        return gradient_accumulation(data_args.effective_batch_size, per_device, world_size)
    return training_args.gradient_accumulation_steps


def _list_fields_given_as_strings(*cfgs) -> list[str]:
    """A list field written as a plain string in the recipe (``datasets: data/prism``)
    reaches the dataclass as that string, which code iterating it reads as a list of
    characters: refuse it, showing the list spelling. (A list field TRL keeps as a string
    when given one value, :data:`~judgetrain.train.model_args.STRING_LISTS`, takes one.)"""
    import typing

    problems = []
    for cfg in cfgs:
        hints = typing.get_type_hints(type(cfg))
        for f in fields(cfg):
            value = getattr(cfg, f.name)
            if f.name in STRING_LISTS:
                continue
            is_list = any(typing.get_origin(t) is list for t in (hints[f.name], *typing.get_args(hints[f.name])))
            if is_list and isinstance(value, str):
                problems.append(
                    f"{f.name}: given as the string {value!r}, but it is a list; write `{f.name}: [{value}]` in the "
                    f"recipe (or `--{f.name} {value}` on the command line)"
                )
    return problems


def _folder_key(path: str) -> tuple:
    """What identifies a dataset folder however it is spelled (relative or absolute, a
    trailing slash, through a symlink): the file it is, else its resolved path."""
    try:
        st = os.stat(path)
        return ("file", st.st_dev, st.st_ino)
    except OSError:  # not there: its own problem elsewhere; compare the spelling made absolute
        return ("path", os.path.normpath(os.path.abspath(path)))


def dataset_repeats(datasets: list[str]) -> list[str]:
    """One problem per dataset given again, under the same or another spelling: its
    records would be trained on (and evaluated) twice."""
    first: dict[tuple, str] = {}
    problems = []
    for path in datasets:
        key = _folder_key(str(path))
        if key not in first:
            first[key] = str(path)
            continue
        same = "is given twice" if first[key] == str(path) else f"is {first[key]} again (the same folder)"
        problems.append(
            f"datasets: {path} {same}; give each dataset once (its records would be trained on twice); "
            "to sample one more often, give mixture_weights"
        )
    return problems


def consistency_problems(data_args, training_args) -> list[str]:
    """:func:`~judgetrain.consistency.args.objective_problems` and, under a consistency objective,
    what would split a question's views (packing, ``padding_free``, ``mixture_weights``, a record-level sampler)."""
    problems = objective_problems(training_args)
    if getattr(training_args, "consistency_objective", "none") in ("none", None) or problems:
        return problems
    if getattr(training_args, "packing", False):
        problems.append("packing: a question's views must be rows of their own for consistency tuning; set `packing: false`")
    if getattr(training_args, "padding_free", False):
        problems.append(
            "padding_free: a question's views must be rows of their own for consistency tuning; set `padding_free: false`"
        )
    if data_args.mixture_weights:
        problems.append(
            "mixture_weights: sampling records by weight splits and repeats a question's views; drop it "
            "(concatenate the datasets) for consistency tuning"
        )
    if training_args.train_sampling_strategy not in ("random", "sequential"):
        problems.append(
            f"train_sampling_strategy: {training_args.train_sampling_strategy} samples records, but consistency "
            "tuning samples whole questions; use random or sequential"
        )
    return problems
