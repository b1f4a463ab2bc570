"""The cross-field checks of a training configuration: every problem at once, each naming
the field and the fix, before anything loads (the pattern of torchtune's
``config/_validate.py``).

:func:`check_config` owns the rules that span parts: the recipe's own fields, LoRA targets
against the model built from its config on the meta device (:mod:`judgetrain.train.model`),
packing (:mod:`judgetrain.train.packing`), a resume against the recipe its checkpoint
recorded (:mod:`judgetrain.train.resume`) and the consistency objective against the rest
of the recipe (:mod:`judgetrain.consistency.args`); the model fields' own checks are
:func:`judgetrain.train.model_args.model_problems`. README: "`judgetrain train`".
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from judgetrain.consistency.args import objective_problems

from .args import DataArguments
from .model import lora_target_problems
from .model_args import STRING_LISTS, ModelArguments, model_problems
from .packing import packing_problems
from .resume import resume_problems

__all__ = ["check_config", "consistency_problems"]


def check_config(model_args: ModelArguments, data_args: DataArguments, training_args, world_size: int) -> list[str]:
    """Cross-field rules; every problem names the field and the fix. Nothing is
    loaded: ``lora_target_modules`` is matched against the model built from its
    config on the meta device, and a resume is compared with the recipe its
    checkpoint recorded (:mod:`judgetrain.train.resume`)."""
    problems = _list_fields_given_as_strings(model_args, data_args) + model_problems(model_args)
    if not model_args.model_name_or_path:
        problems.append("model_name_or_path: missing; give a local model folder or a hub id")
    if not data_args.datasets:
        problems.append("datasets: missing; give one or more folders built with `judgetrain build …`")
    if data_args.mixture_weights is not None and not isinstance(data_args.mixture_weights, str):
        if len(data_args.mixture_weights) != len(data_args.datasets or []):
            problems.append(
                f"mixture_weights: {len(data_args.mixture_weights)} weight(s) for {len(data_args.datasets or [])} dataset(s); give one per dataset"
            )
        elif any(w < 0 for w in data_args.mixture_weights) or sum(data_args.mixture_weights) <= 0:
            problems.append("mixture_weights: must be non-negative with a positive sum")
    problems += _optimizer_problems(training_args)
    problems += packing_problems(model_args, data_args, training_args)
    if training_args.bf16 and training_args.fp16:
        problems.append("bf16 and fp16 are both on; choose one")
    if data_args.effective_batch_size is not None and not getattr(training_args, "packing", False):
        # (packed: the accumulation follows from the records per row, judgetrain.train.settings)
        per_step = training_args.per_device_train_batch_size * world_size
        if data_args.effective_batch_size % per_step:
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
    problems += lora_target_problems(model_args, training_args.trust_remote_code)
    problems += resume_problems(model_args, data_args, training_args, world_size)
    return problems


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


def _optimizer_problems(training_args) -> list[str]:
    """Values torch's optimizer refuses only once training starts, after the model and data have loaded."""
    problems = []
    if training_args.learning_rate < 0:
        problems.append(
            f"learning_rate: {training_args.learning_rate} is negative; give a positive rate "
            "(the LoRA recipes use 1e-4; recipes/spaces/ search 1e-5 to 5e-4)"
        )
    if training_args.weight_decay < 0:
        problems.append(f"weight_decay: {training_args.weight_decay} is negative; give 0 (none) or a positive value such as 0.1")
    return problems


def consistency_problems(data_args, training_args) -> list[str]:
    """:func:`~judgetrain.consistency.args.objective_problems` and, under a consistency objective,
    what would split a question's views (packing, ``mixture_weights``, a record-level sampler)."""
    problems = objective_problems(training_args)
    if getattr(training_args, "consistency_objective", "none") in ("none", None) or problems:
        return problems
    if getattr(training_args, "packing", False):
        problems.append("packing: a question's views must be rows of their own for consistency tuning; set `packing: false`")
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
