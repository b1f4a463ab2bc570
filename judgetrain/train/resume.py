"""Resuming a run: the fields a checkpoint fixes, and the refusal of a resume that changes one.

A checkpoint restores the optimizer (learning rate, weight decay, betas), the
learning-rate scheduler, and the position in the data (steps already trained are
skipped by position, so the data, its order and the global batch must match); and
it holds an adapter of one shape on one base model. A resume that changes one of
these would silently keep the checkpoint's value (``--learning_rate``: the
optimizer's restored one wins) or mix two runs, while the saved recipe recorded the
new one. Each checkpoint carries the recipe it was trained with
(``judgetrain_recipe.yaml``, written by ``judgetrain.train.outputs``); a resume is
compared with it. Used by :func:`judgetrain.train.checks.check_config`.

How often the run logs, evaluates and saves (``logging_steps``, ``eval_steps``,
``save_steps``) fixes nothing that trained, so a resume may change it; but
transformers restores the checkpoint's values from its ``trainer_state.json`` (with a
warning) over the ones given. :func:`steps_from_arguments` puts the given ones back
when training starts, so the resumed run does what the saved recipe records.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import json
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from .settings import gradient_accumulation

__all__ = ["FIXED_BY_CHECKPOINT", "STEP_FIELDS", "checkpoint_to_resume", "resume_problems", "steps_from_arguments"]

# field -> what in the checkpoint fixes it (said in the message)
FIXED_BY_CHECKPOINT = {
    **dict.fromkeys(
        ("learning_rate", "weight_decay", "optim", "optim_args", "adam_beta1", "adam_beta2", "adam_epsilon"),
        "its optimizer state restores it",
    ),
    **dict.fromkeys(
        ("lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio", "max_steps", "num_train_epochs"),
        "its learning-rate scheduler state restores the schedule",
    ),
    **dict.fromkeys(
        (
            "seed",
            "data_seed",
            "datasets",
            "train_split",
            "tasks",
            "layouts",
            "mixture_weights",
            "max_frames",
            "max_train_samples",
            "packing",
            "max_length",
        ),
        "the steps it trained are skipped in the data by position",
    ),
    **dict.fromkeys(
        (
            "model_name_or_path",
            "model_revision",
            "use_peft",
            "lora_r",
            "lora_alpha",
            "lora_target_modules",
            "lora_target_parameters",
            "lora_modules_to_save",
            "use_dora",
            "use_rslora",
            "freeze_vision_tower",
            "freeze_projector",
        ),
        "its adapter and optimizer hold exactly these parameters",
    ),
    **dict.fromkeys(
        ("consistency_objective", "consistency_lambda", "consistency_tau"),
        "the steps it trained had this loss (judgetrain.consistency)",
    ),
}
# how often the run logs, evaluates and saves: the Trainer's state holds them (TrainerState.compute_steps)
STEP_FIELDS = ("logging_steps", "eval_steps", "save_steps")
# a schedule that does not depend on the run's length may be lengthened on resume
_LENGTH_FREE_SCHEDULES = ("constant", "constant_with_warmup")


def checkpoint_to_resume(training_args) -> str | None:
    """The checkpoint folder ``resume_from_checkpoint`` names (``auto``: the newest complete one in ``output_dir``), or None."""
    from .outputs import find_resume_checkpoint

    resume = training_args.resume_from_checkpoint
    if resume == "auto":
        return find_resume_checkpoint(training_args.output_dir)
    return resume if resume and Path(resume).is_dir() else None


def steps_from_arguments():
    """A ``TrainerCallback`` that, as training begins, sets the state's logging, evaluation and
    save steps from this run's arguments (``TrainerState.compute_steps``: a fraction is of
    ``max_steps``), over the values a resumed checkpoint's ``trainer_state.json`` restored."""
    import logging

    from transformers import TrainerCallback

    class StepsFromArguments(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            restored = {name: getattr(state, name, None) for name in STEP_FIELDS}
            state.compute_steps(args, state.max_steps)
            changed = [
                f"{n} {restored[n]} → {getattr(state, n)}"
                for n in STEP_FIELDS
                if restored[n] is not None and restored[n] != getattr(state, n)
            ]
            if changed and state.is_world_process_zero:
                logging.getLogger("judgetrain.train").info(
                    "resumed with the arguments' steps, not the checkpoint's: %s", ", ".join(changed)
                )
            return control

    return StepsFromArguments()


def resume_problems(model_args, data_args, training_args, world_size: int) -> list[str]:
    """One problem per field this resume would change although the checkpoint fixes it
    (old → new, and the fix), and one for a changed global batch; [] when not resuming
    or when the checkpoint predates the recipe it records."""
    from judgetrain.yamlfile import read_yaml

    from .outputs import COMPLETE_MARKER, RECIPE_FILE, resolved_recipe

    checkpoint = checkpoint_to_resume(training_args)
    if checkpoint is None or not (Path(checkpoint) / RECIPE_FILE).is_file():
        return []
    old = read_yaml(Path(checkpoint) / RECIPE_FILE) or {}
    new = resolved_recipe(model_args, data_args, training_args, [])
    problems = []
    for name, why in FIXED_BY_CHECKPOINT.items():
        before, after = old.get(name, _default(name)), new.get(name, _default(name))
        if before == after:
            continue
        if (
            name in ("max_steps", "num_train_epochs")
            and new.get("lr_scheduler_type", _default("lr_scheduler_type")) in _LENGTH_FREE_SCHEDULES
        ):
            continue  # honoured: a constant rate does not depend on where the run ends
        problems.append(
            f"{name}: {checkpoint} was trained with {before!r}, this resume asks for {after!r} ({before!r} → {after!r}); "
            f"{why}, so the new value would not be what trains. Resume with `--{name} {_flag(before)}` (or without "
            "the override), or train anew into another output_dir"
        )
    marker = (
        json.loads((Path(checkpoint) / COMPLETE_MARKER).read_text()) if (Path(checkpoint) / COMPLETE_MARKER).is_file() else {}
    )
    if "global_batch" in marker:
        per_step = training_args.per_device_train_batch_size * world_size
        # as the run derives it (packed, over the records a row held, which the fixed data and max_length keep)
        accumulation = (
            gradient_accumulation(
                data_args.effective_batch_size,
                training_args.per_device_train_batch_size,
                world_size,
                marker.get("records_per_row") or 1.0,
            )
            if data_args.effective_batch_size
            else training_args.gradient_accumulation_steps
        )
        if per_step * accumulation != marker["global_batch"]:
            problems.append(
                f"effective_batch_size: {checkpoint} was trained with a global batch of {marker['global_batch']} records per "
                f"step ({marker['world_size']} process(es)), this resume gives {per_step * accumulation} "
                f"({world_size} process(es) × per_device_train_batch_size {training_args.per_device_train_batch_size} × "
                f"gradient accumulation {accumulation}); the steps it trained are skipped in the data by position. "
                f"Resume with `--effective_batch_size {marker['global_batch']}`, or train anew into another output_dir"
            )
    return problems


def _default(name: str) -> Any:
    """A field's default as the saved recipe leaves it out (SFTConfig's, or judgetrain's dataclasses')."""
    from trl import SFTConfig

    from .args import DataArguments
    from .model_args import ModelArguments

    for cls in (SFTConfig, ModelArguments, DataArguments):
        for f in fields(cls):
            if f.name == name:
                value = f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default
                if value is MISSING or value is None:
                    return None
                return value.value if hasattr(value, "value") else value  # an enum (IntervalStrategy, …): its value
    return None


def _flag(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value))
    return "true" if value is True else "false" if value is False else str(value)
