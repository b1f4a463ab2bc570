"""Every training setting judgetrain derives from a recipe, in one place, once.

A parsed recipe (:func:`judgetrain.train.parser.parse`) is what the user asked for, and nothing
assigns to it afterwards. Some settings follow from it and from facts known only once the run
has started; :func:`derive` computes all of them together, once the model and the data are
loaded and before the Trainer is built, and returns new configuration objects
(``dataclasses.replace``, which runs ``TrainingArguments.__post_init__`` again, so what is
computed from these fields there, DeepSpeed's batch sizes among them, follows them):

- ``gradient_accumulation_steps`` from ``effective_batch_size``, by :func:`gradient_accumulation`,
  the one rule every part uses (the run, packing, the resume check): the nearest whole number,
  halves up, at least 1; packed, over the records a row holds on average, known once the
  records are packed;
- ``resume_from_checkpoint``: ``auto`` when the output folder holds this same run, as
  :func:`judgetrain.train.run_folder.prepare_output_dir` finds;
- ``ddp_find_unused_parameters`` (when the recipe leaves it unset): whether training reaches
  the vision side, where some trainable parameters may get no gradient in a step;
- ``remove_unused_columns`` off and ``dataset_kwargs.skip_prepare_dataset`` on for packed rows
  and for the items of ``padding_free`` (one per record), whose columns the collator reads and
  which TRL must not tokenize, and ``remove_unused_columns`` off for a length column the sampler
  reads;
- under ``method: grpo``, ``reward_weights`` from the ``<reward>_weight`` fields, ``steps_per_generation`` following a derived accumulation (one
  generation batch a step) and ``shuffle_dataset`` off where judgetrain orders the records by
  question (:mod:`judgetrain.grpo.data`);
- under ``method: reward``, ``remove_unused_columns`` off: a pair row names its two records in columns the
  collator reads (:mod:`judgetrain.reward.data`);
- the copy the Trainer gets (:attr:`Settings.trainer_args`) says ``packing: false`` when
  judgetrain packed the rows itself: TRL refuses packing for image records; and ``padding_free:
  false`` when judgetrain lays out each micro-batch in one row itself (or packed: packed rows are
  padding-free already), which TRL refuses for image records and with a collator of its own. The
  gradient accumulation of ``padding_free`` is the unpacked one: a micro-batch holds
  ``per_device_train_batch_size`` records either way. A reward model's copy says
  ``max_length: null``: judgetrain refused longer records already, where TRL would drop their pairs.

:attr:`Settings.derived` says what was derived (value, the recipe's value, why): ``run.json``
records it and the model card shows it.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from judgetrain.config import jsonable

from .packing import lays_out_padding_free

__all__ = [
    "AS_PARSED",
    "TRAINER_MAX_LENGTH",
    "TRAINER_PACKING",
    "TRAINER_PADDING_FREE",
    "Facts",
    "Settings",
    "derive",
    "gradient_accumulation",
]

# the derived entry for what TRL's SFTTrainer is told about packing (the recipe keeps its own value)
TRAINER_PACKING = "SFTTrainer.args.packing"
TRAINER_PADDING_FREE = "SFTTrainer.args.padding_free"
TRAINER_MAX_LENGTH = "RewardTrainer.args.max_length"
# Facts.resume_from_checkpoint when no run folder gave a verdict: the recipe's value stands
AS_PARSED = "as parsed"


def gradient_accumulation(effective_batch_size: int, per_device: int, world_size: int, records_per_row: float = 1.0) -> int:
    """Micro-batches a step accumulates so that it takes ``effective_batch_size`` records:
    ``effective_batch_size / (records_per_row × per_device × world_size)`` to the nearest whole
    number, halves up, and at least 1 (rows that hold many records can overshoot a small batch).
    Unpacked, ``records_per_row`` is 1 and the checks make the division exact."""
    exact = effective_batch_size / (records_per_row * per_device * world_size)
    return max(1, math.floor(exact + 0.5))


@dataclass(frozen=True)
class Facts:
    """What the run knows beside its recipe when it derives its settings.

    ``resume_from_checkpoint``: the run folder's verdict (``run.json``'s, see
    :func:`~judgetrain.train.run_folder.prepare_output_dir`; :data:`AS_PARSED`: the recipe's
    value stands); ``vision_trains``: training reaches the vision tower or projector;
    ``records_per_row``: packed, the records a row holds on average (None unpacked);
    ``length_column``: unpacked records carry their lengths for ``group_by_length``;
    ``configured_state``: the Trainer reuses the process group
    :func:`judgetrain.train.run.setup_cpu_distributed` made; ``media_tokens``: GRPO, the ids of
    the tokenizer's image and video tokens (:func:`judgetrain.grpo.data.media_token_ids`)."""

    world_size: int
    resume_from_checkpoint: str | None = AS_PARSED
    vision_trains: bool = False
    records_per_row: float | None = None
    length_column: bool = False
    configured_state: bool = False
    media_tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Settings:
    """The final training arguments (what the run used and records), the copy the Trainer gets,
    and ``derived``: ``{field: {"value", "recipe", "why"}}`` for every setting derived."""

    training_args: Any
    trainer_args: Any
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)


def _accumulation(data_args, training_args, facts: Facts) -> tuple[int, str] | None:
    effective = data_args.effective_batch_size
    if not effective:
        return None
    per_device, world = training_args.per_device_train_batch_size, facts.world_size
    steps = gradient_accumulation(effective, per_device, world, facts.records_per_row or 1.0)
    if facts.records_per_row is None:
        return steps, f"effective_batch_size {effective} / (per_device_train_batch_size {per_device} × {world} process(es))"
    return steps, (
        f"effective_batch_size {effective} / ({facts.records_per_row:.3g} records a packed row × "
        f"per_device_train_batch_size {per_device} × {world} process(es)), to the nearest whole number (at least 1)"
    )


def _changes(data_args, training_args, facts: Facts) -> dict[str, tuple[Any, str]]:
    """``{field: (value, why)}`` for each setting a rule derives (also where the value is the
    recipe's own: the accumulation an ``effective_batch_size`` implies is always said)."""
    found: dict[str, tuple[Any, str]] = {}
    accumulation = _accumulation(data_args, training_args, facts)
    if accumulation is not None:
        found["gradient_accumulation_steps"] = accumulation
    if facts.resume_from_checkpoint != AS_PARSED and facts.resume_from_checkpoint != training_args.resume_from_checkpoint:
        found["resume_from_checkpoint"] = (
            facts.resume_from_checkpoint,
            "output_dir holds this same run (run.json's identity "
            "is equal): it continues from its newest complete checkpoint, as "
            "--resume_from_checkpoint auto does",
        )
    if training_args.ddp_find_unused_parameters is None:
        # Saying so when it is not needed costs a graph walk per step and breaks reentrant activation checkpointing
        found["ddp_find_unused_parameters"] = (
            facts.vision_trains,
            "training reaches the vision side, where a trainable parameter may get no gradient in a step"
            if facts.vision_trains
            else "only the language model trains: every trainable parameter gets a gradient",
        )
    if getattr(training_args, "method", "sft") == "grpo":
        found.update(_generation(training_args, found, facts))
    found.update(_columns(training_args, facts))
    return found


def _columns(training_args, facts: Facts) -> dict[str, tuple[Any, str]]:
    """What the Trainer and TRL must leave of the training set's columns: packed rows and
    padding-free items name their records in columns judgetrain's collator reads, unprepared."""
    packed, flat = facts.records_per_row is not None, lays_out_padding_free(training_args)
    found: dict[str, tuple[Any, str]] = {}
    if getattr(training_args, "method", "sft") == "reward" and training_args.remove_unused_columns:
        found["remove_unused_columns"] = (False, "a pair row names its two records in columns the collator reads")
    elif (packed or flat or facts.length_column) and training_args.remove_unused_columns:
        found["remove_unused_columns"] = (
            False,
            "packed rows name their records in columns the collator reads"
            if packed
            else "padding-free items name their records in columns the collator reads"
            if flat
            else "the length column must reach the Trainer's length-grouped sampler",
        )
    if packed or flat:
        found["dataset_kwargs"] = (
            {**(training_args.dataset_kwargs or {}), "skip_prepare_dataset": True},
            f"{'packed rows' if packed else 'padding-free micro-batches'} are collated by judgetrain.train.packing, "
            "not tokenized by TRL",
        )
    return found


def _generation(training_args, found: dict[str, tuple[Any, str]], facts: Facts) -> dict[str, tuple[Any, str]]:
    """GRPO (:mod:`judgetrain.grpo`): one generation batch per optimizer step where the recipe
    leaves ``steps_per_generation`` and ``generation_batch_size`` out (TRL's default, kept when
    the accumulation is derived), and TRL's shuffle off where judgetrain orders the records by
    question (the consistency reward: :mod:`judgetrain.grpo.data`)."""
    from judgetrain.grpo.args import GROUPED_REWARDS, weights_given

    out: dict[str, tuple[Any, str]] = {}
    named = weights_given(training_args)
    if named:
        out["reward_weights"] = (
            [float(named.get(name, 1.0)) for name in training_args.rewards],
            f"the weights {', '.join(f'{n}_weight {w:g}' for n, w in named.items())} in the order of rewards (1 where unset)",
        )
    if "gradient_accumulation_steps" in found and training_args.generation_as_given == (None, None):
        out["steps_per_generation"] = (
            found["gradient_accumulation_steps"][0],
            "one generation batch an optimizer step (TRL's default), with the accumulation effective_batch_size sets",
        )
    given = dict(training_args.generation_kwargs or {})
    suppressed = sorted({*given.get("suppress_tokens", []), *facts.media_tokens})
    if facts.media_tokens and not training_args.use_vllm and suppressed != list(given.get("suppress_tokens", [])):
        out["generation_kwargs"] = (
            {**given, "suppress_tokens": suppressed},
            "a completion must not sample an image or video token (the model's next forward would count an image the "
            "prompt does not hold): transformers' suppress_tokens with the tokenizer's media tokens",
        )
    if GROUPED_REWARDS & set(training_args.rewards or []) and training_args.shuffle_dataset:
        out["shuffle_dataset"] = (
            False,
            "the consistency reward needs a question's presentations in one generation batch: judgetrain orders the "
            "records by question, the questions shuffled with the seed (judgetrain.grpo.data)",
        )
    return out


def _replace(training_args, facts: Facts, **changes: Any):
    """``training_args`` with ``changes``, built anew, reusing the launch's process group as the
    parsed ones do (:func:`judgetrain.compat.transformers.restated_accelerator_config`)."""
    from judgetrain.compat.transformers import restated_accelerator_config

    accelerator = restated_accelerator_config(training_args, facts.configured_state)
    if hasattr(training_args, "generation_as_given"):  # GRPOConfig takes one of the two, and has filled both in
        changes = {"steps_per_generation": training_args.steps_per_generation, **changes, "generation_batch_size": None}
    return dataclasses.replace(training_args, accelerator_config=accelerator, **changes)


def _trainer_told(final, facts: Facts) -> dict[str, dict[str, Any]]:
    """``{SFTConfig field: derived entry}`` for what TRL's ``SFTTrainer`` is told otherwise than the
    recipe (:data:`TRAINER_PACKING`, :data:`TRAINER_PADDING_FREE`): judgetrain lays the rows out."""
    packed = facts.records_per_row is not None and final.packing
    told: dict[str, dict[str, Any]] = {}
    if packed:
        told["packing"] = {
            "value": False,
            "recipe": True,
            "why": "judgetrain packed the image records into rows "
            "itself (judgetrain.train.packing); TRL refuses packing for image data",
        }
    if packed and getattr(final, "padding_free", False):
        told["padding_free"] = {
            "value": False,
            "recipe": True,
            "why": "judgetrain's packed rows are padding-free already (judgetrain.train.packing); TRL refuses "
            "padding_free for image data and with judgetrain's collator",
        }
    elif lays_out_padding_free(final):
        told["padding_free"] = {
            "value": False,
            "recipe": True,
            "why": "judgetrain lays each micro-batch's image records end to end in one row itself, no padding "
            "(judgetrain.train.packing); TRL refuses padding_free for image data",
        }
    return told


def derive(data_args, training_args, facts: Facts) -> Settings:
    """The run's settings derived from its parsed ``data_args`` and ``training_args`` (neither
    is changed) and ``facts`` (module docstring). Returns the final arguments, the Trainer's
    copy and what was derived."""
    changes = _changes(data_args, training_args, facts)
    final = _replace(training_args, facts, **{k: v for k, (v, _) in changes.items()}) if changes else training_args
    derived = {
        name: {"value": jsonable(value), "recipe": jsonable(getattr(training_args, name)), "why": why}
        for name, (value, why) in changes.items()
    }
    told = _trainer_told(final, facts)
    trainer_args = _replace(final, facts, **{k: v["value"] for k, v in told.items()}) if told else final
    derived.update({{"packing": TRAINER_PACKING, "padding_free": TRAINER_PADDING_FREE}[k]: v for k, v in told.items()})
    if getattr(final, "method", "sft") == "reward" and final.max_length is not None:
        trainer_args = _replace(trainer_args, facts, max_length=None)
        derived[TRAINER_MAX_LENGTH] = {
            "value": None,
            "recipe": final.max_length,
            "why": "judgetrain refused records longer than max_length (judgetrain.reward.data); TRL's reward "
            "trainer would drop their pairs silently",
        }
    return Settings(final, trainer_args, derived)
