"""A training run's ``--output_dir``: what identifies the run, and what a rerun into a folder
holding another run's checkpoints may do.

``run.json`` in the output folder records the run's *identity* (every recipe field that
changes the trained weights, the base model by content or, for a hub id, by the commit its
revision resolves to (:mod:`judgetrain.train.base_model`), the datasets by the content hashes
of their ``build.json``, the global batch), the command, the checkout's git commit and
whether it had uncommitted changes (``git_dirty``), and, once the run has derived them, the
settings :mod:`judgetrain.train.settings` derived (``settings``: value, the recipe's value,
why). A rerun into a folder with checkpoints (or a finished run's outputs):

- same identity: resumes from the newest complete checkpoint, as ``--resume_from_checkpoint
  auto`` does (and says so; the run's settings then say ``auto``); when that run finished (``run.json`` says so and its weights
  are there) there is nothing to do: :class:`AlreadyTrained`, and nothing is rewritten;
- another identity, or checkpoints without a recorded identity: refused before any model
  loads, naming each difference old → new and the ways out (another ``--output_dir``,
  ``--resume_from_checkpoint auto``/PATH to continue, ``--overwrite`` to replace);
- ``--overwrite``: the old run's checkpoints and outputs are removed first.

An explicit ``--resume_from_checkpoint`` is the user's decision to continue; what its
checkpoint fixes is then checked by :mod:`judgetrain.train.resume`.

Whatever the folder holds, an ``--output_dir`` that is, holds or lies inside a dataset or a
local base model is refused (:func:`judgetrain.overlap.overlap`), and the main process holds
the folder's writer lock (:mod:`judgetrain.writer`) from before it looks at the folder until
it ends, so a second training run into it stops at once naming the first (``--wait``: it
waits; ``judgetrain train`` checks and waits before it launches any process,
:func:`probe_output_dir`).
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from judgetrain import config, writer
from judgetrain.identity import adapter_identity, differences, git_state
from judgetrain.io import write_json
from judgetrain.overlap import labelled, overlap

from .resume import FIXED_BY_CHECKPOINT

__all__ = [
    "RUN_FILE",
    "TRAINING_IDENTITY",
    "AlreadyTrained",
    "clear_outputs",
    "input_clash",
    "output_dir_problems",
    "prepare_output_dir",
    "previous_outputs",
    "probe_output_dir",
    "record_finish",
    "record_settings",
    "run_identity",
]

logger = logging.getLogger("judgetrain.train")
RUN_FILE = "run.json"
# SFTConfig fields (transformers' TrainingArguments and TRL's) that change the trained weights; judgetrain's own
# dataclasses mark theirs with `identity=True`. The world size and accumulation enter as the global batch.
TRAINING_IDENTITY = tuple(
    dict.fromkeys(
        (
            *(name for name in FIXED_BY_CHECKPOINT if name not in ("model_name_or_path", "datasets")),
            "max_grad_norm",
            "label_smoothing_factor",
            "bf16",
            "fp16",
            "neftune_noise_alpha",
            "train_sampling_strategy",
            "truncation_mode",
            "completion_only_loss",
            "assistant_only_loss",
            "loss_type",
            "padding_free",
            "packing_strategy",
            "dataloader_drop_last",
            "chat_template_path",
            "eos_token",
            "pad_token",
            # GRPOConfig's (method: grpo; judgetrain.grpo): generation, the objective, the rewards' weights
            "num_generations",
            "max_completion_length",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "repetition_penalty",
            "generation_kwargs",
            "beta",
            "epsilon",
            "epsilon_high",
            "delta",
            "num_iterations",
            "steps_per_generation",
            "scale_rewards",
            "reward_weights",
            "multi_objective_aggregation",
            "importance_sampling_level",
            "mask_truncated_completions",
            "disable_dropout",
            "top_entropy_quantile",
            "shuffle_dataset",
            # RewardConfig's (method: reward; judgetrain.reward)
            "center_rewards_coefficient",
        )
    )
)
# what a training run writes into its output folder (removed by --overwrite); anything else there is left alone
OUTPUTS = (
    "checkpoint-*",
    RUN_FILE,
    "judgetrain_recipe.yaml",
    "README.md",
    "adapter_model.*",
    "adapter_config.json",
    "model*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model*.bin",
    "training_args.bin",
    "trainer_state.json",
    "*_results.json",
    "sweep_result.json",
    "runs",
    "wandb",
)
# what shows that a folder holds a run's work: checkpoints, or a finished run's weights and state
_WORK = ("checkpoint-*", "trainer_state.json", "adapter_model.*", "model*.safetensors")


class AlreadyTrained(Exception):
    """The output folder holds this very run, finished: nothing to train or rewrite."""


def _value(v: Any) -> Any:
    return config.jsonable(v.value if hasattr(v, "value") else v)


def run_identity(model_args, data_args, training_args, world_size: int) -> dict[str, Any]:
    """What makes two training runs the same work: ``training`` (every identity field of the
    recipe), ``base_model`` (:func:`~judgetrain.train.base_model.base_model_identity`: a local
    folder by its files, a hub id by its resolved commit), ``datasets`` (per dataset, in order,
    each split's content hash from its ``build.json``) and ``global_batch`` (records per
    optimizer step: ``effective_batch_size``, else processes × per-device batch × accumulation)."""
    from judgetrain import records

    from .base_model import base_model_identity
    from .model_args import IDENTITY_FIELDS

    training = {}
    for cfg in (model_args, data_args, training_args):
        training.update(config.identity(cfg))  # judgetrain's own fields marked identity=True (and the consistency ones)
    training.update({name: _value(getattr(model_args, name)) for name in IDENTITY_FIELDS})  # TRL's ModelConfig's
    training.update({name: _value(getattr(training_args, name)) for name in TRAINING_IDENTITY if hasattr(training_args, name)})
    datasets = []
    for path in data_args.datasets or []:
        try:
            splits = records.read_build_info(path).get("splits", {})
        except records.IncompleteDatasetError:
            splits = {}  # check_config / the launcher report the missing build
        datasets.append({s: v.get("content_hash") for s, v in sorted(splits.items())})
    batch = data_args.effective_batch_size or (
        training_args.per_device_train_batch_size * world_size * training_args.gradient_accumulation_steps
    )
    return {
        "training": dict(sorted(training.items())),
        "base_model": base_model_identity(model_args.model_name_or_path, model_args.model_revision),
        **({"init_adapter": adapter_identity(model_args.init_adapter)} if getattr(model_args, "init_adapter", None) else {}),
        "datasets": datasets,
        "global_batch": batch,
    }


def previous_outputs(output_dir: str | os.PathLike) -> list[Path]:
    """The checkpoints and final weights of a run already in ``output_dir``, newest checkpoint last."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    return sorted({p for pattern in _WORK for p in out.glob(pattern)}, key=lambda p: (p.name.startswith("checkpoint-"), _step(p)))


def _step(path: Path) -> int:
    tail = path.name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def _recorded(output_dir: Path) -> dict | None:
    path = output_dir / RUN_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get("identity")
    except (ValueError, AttributeError):
        return None


def output_dir_problems(model_args, data_args, training_args, world_size: int) -> list[str]:
    """[] when this run may use its ``output_dir`` (empty, its own run's, ``--overwrite`` or an
    explicit ``--resume_from_checkpoint``); else one problem naming what the folder holds, each
    difference old → new and the ways out; an ``output_dir`` that overlaps an input
    (:func:`input_clash`) first of all. Reads no model weights it has not hashed before."""
    out = Path(training_args.output_dir)
    clash = input_clash(model_args, data_args, training_args)
    if clash:
        return [clash]
    found = previous_outputs(out)
    if not found or data_args.overwrite or training_args.resume_from_checkpoint:
        return []
    old = _recorded(out)
    if old is not None:
        changed = differences(old, run_identity(model_args, data_args, training_args, world_size))
        if not changed:
            return []
        what = "another run's checkpoints; what differs (that run → this one):\n      " + "\n      ".join(changed)
    else:
        what = f"checkpoints or weights with no {RUN_FILE} saying what trained them"
    names = ", ".join(p.name for p in found[-3:])
    return [
        f"output_dir: {out} holds {what}\n    ({names}). Nothing was loaded or changed. Give another --output_dir; "
        "or --resume_from_checkpoint auto (or a checkpoint folder) to continue that run with this recipe; "
        "or --overwrite to remove that run's checkpoints and outputs and train anew"
    ]


def input_clash(model_args, data_args, training_args) -> str | None:
    """Why ``output_dir`` may not be written: it is, holds or lies inside a dataset or the (local)
    base model or the ``init_adapter`` (:func:`judgetrain.overlap.overlap`); None when it lies apart from them."""
    inputs = {**labelled("datasets", data_args.datasets), "model_name_or_path": model_args.model_name_or_path}
    if getattr(model_args, "init_adapter", None):  # the warm-up's adapter a GRPO run starts from
        inputs["init_adapter"] = model_args.init_adapter
    return overlap(training_args.output_dir, inputs, flag="--output_dir", whole=False)


def probe_output_dir(output_dir: str | os.PathLike, wait: bool) -> None:
    """What ``judgetrain train`` does before it launches: ``output_dir``'s writer lock can be taken
    now (else :class:`judgetrain.writer.FolderBusyError` naming its holder; ``wait``: wait until it
    can), and its parent can be written (else :class:`judgetrain.writer.FolderNotWritableError`).
    The lock is given back at once: the training process's main rank takes it."""
    writer.probe(output_dir, flag="--output_dir", wait=wait)


def clear_outputs(output_dir: str | os.PathLike) -> list[str]:
    """Remove what a training run wrote into ``output_dir`` (:data:`OUTPUTS`); the names removed."""
    out = Path(output_dir)
    removed = sorted({p for pattern in OUTPUTS for p in out.glob(pattern)}) if out.is_dir() else []
    for path in removed:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    return [p.name for p in removed]


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def prepare_output_dir(model_args, data_args, training_args, world_size: int, argv: list[str]) -> dict[str, Any]:
    """Apply the output-folder rule before any model loads: refuse (``ConfigError``; an
    ``output_dir`` overlapping an input first), take the folder's writer lock (main process,
    held until the process ends; :class:`judgetrain.writer.FolderBusyError` when another
    process holds it, unless ``--wait``), clear the old run (``--overwrite``, main process
    only), or resume the same run from its newest checkpoint. The main process then writes ``run.json``. Returns what it wrote, whose
    ``resume_from_checkpoint`` is the verdict (``auto`` to resume this same run; the recipe's
    value otherwise) that :func:`judgetrain.train.settings.derive` applies."""
    from .args import ConfigError
    from .outputs import find_resume_checkpoint

    clash = input_clash(model_args, data_args, training_args)
    if clash:
        raise ConfigError([clash])
    if _is_main_process():  # the folder is this run's alone from before it is looked at until the process ends
        writer.hold(training_args.output_dir, flag="--output_dir", wait=data_args.wait)
    problems = output_dir_problems(model_args, data_args, training_args, world_size)
    if problems:
        raise ConfigError(problems)
    out = Path(training_args.output_dir)
    if not data_args.overwrite and not training_args.resume_from_checkpoint:
        _refuse_to_redo(out)
    resume = training_args.resume_from_checkpoint
    if data_args.overwrite and _is_main_process():
        removed = clear_outputs(out)
        if removed:
            logger.warning("--overwrite: removed the earlier run's %s from %s", ", ".join(removed), out)
    elif not resume and previous_outputs(out):
        checkpoint = find_resume_checkpoint(out)
        logger.warning(
            "output_dir %s holds this same run (identity equal): %s",
            out,
            f"resuming from {checkpoint}, as --resume_from_checkpoint auto does"
            if checkpoint
            else "no complete checkpoint to resume from, training from the start",
        )
        resume = "auto" if checkpoint else None
    git = git_state()
    info = {
        "identity": run_identity(model_args, data_args, training_args, world_size),
        "command": [sys.executable, "-m", "judgetrain.train", *argv],
        "world_size": world_size,
        "resume_from_checkpoint": resume,
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "started": dt.datetime.now(dt.timezone.utc).isoformat(),
    }
    if _is_main_process():
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / RUN_FILE, info)
    return info


def _refuse_to_redo(out: Path) -> None:
    """:class:`AlreadyTrained` when ``out`` holds a finished run (the identity was found
    equal already) and its final weights: resuming it would retrain the last step under
    some launchers and rewrite its outputs."""
    path = out / RUN_FILE
    try:
        old = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        return
    weights = [p for pattern in ("adapter_model.*", "model*.safetensors") for p in out.glob(pattern)]
    if isinstance(old, dict) and old.get("finished") and weights:
        raise AlreadyTrained(
            f"{out}: already trained with this recipe (run.json's identity is equal; finished "
            f"{old['finished']} at step {old.get('global_step')}); nothing rewritten. Pass --overwrite "
            'to train it again, or --resume_from_checkpoint auto to continue it (docs: reference/recipes.md, "Resume": '
            "what may change)."
        )


def record_settings(output_dir: str | os.PathLike, info: dict[str, Any], derived: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``info`` with ``settings``, what the run derived (:attr:`judgetrain.train.settings.Settings.derived`),
    written to ``run.json`` by the main process; returns it."""
    info = {**info, "settings": derived}
    if _is_main_process():
        write_json(Path(output_dir) / RUN_FILE, info)
    return info


def record_finish(output_dir: str | os.PathLike, info: dict[str, Any], global_step: int) -> None:
    """``run.json`` with the step training ended at and when (main process)."""
    write_json(
        Path(output_dir) / RUN_FILE,
        {**info, "global_step": global_step, "finished": dt.datetime.now(dt.timezone.utc).isoformat()},
    )
