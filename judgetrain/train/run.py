"""Fine-tune a VLM judge on judgetrain records: TRL's SFTTrainer with PEFT LoRA.

    accelerate launch --config_file deepspeed_configs/zero3.yaml \\
        -m judgetrain.train --config recipes/qwen3vl-2b/timecatch-lora.yaml [--learning_rate 5e-5 …]

parse → model → data → settings → trainer → train (with resume) → save. A recipe
YAML sets the fields of ``ModelArguments`` (TRL's ``ModelConfig`` with judgetrain's
model fields), :class:`DataArguments` and TRL's ``SFTConfig``; command-line flags
override it; unknown keys fail. What follows from the recipe (the gradient
accumulation, …) is derived once, in :mod:`judgetrain.train.settings`. Records go to ``SFTTrainer`` as they are (conversational
prompt–completion), so the loss covers only the completion.

The parts it wires live beside it in :mod:`judgetrain.train`: the recipe's fields in
``args`` and ``model_args``, their parsing in ``parser`` and checks in ``checks``, the
settings derived from them in ``settings``, the data in ``data``,
what trains in ``model``, checkpoints, reporting and the model card in ``outputs``.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain import config
from judgetrain.io import write_text

from .args import ConfigError, DataArguments
from .checks import check_config
from .curves import plot_log_history
from .data import check_records, load_training_data, prefill_records, training_prefill, with_length_column
from .model import prepare_trainable, vision_is_trainable
from .outputs import (
    RECIPE_FILE,
    checkpoint_complete_callback,
    configure_reporting,
    find_resume_checkpoint,
    resolved_recipe,
    write_model_card,
)
from .packing import PackedData, family_packing_problem, lays_out_padding_free, prepare_packing, prepare_padding_free
from .parser import env_world_size, parse, recipe_ddp_timeout
from .resume import steps_from_arguments
from .run_folder import AlreadyTrained, prepare_output_dir, record_finish, record_settings
from .settings import Facts, Settings, derive

if TYPE_CHECKING:
    from .stop_signal import SaveOnSignal, StopRequests

__all__ = ["CallbackFactory", "Run", "main", "script", "setup", "setup_cpu_distributed", "train_and_save"]

logger = logging.getLogger("judgetrain.train")
# (evaluation records or None, processor, training arguments) -> a TrainerCallback or None; see setup()
CallbackFactory = Callable[[Any, Any, Any], Any]


# --------------------------------------------------------------------------- distributed set-up on CPU


def setup_cpu_distributed(timeout_seconds: int | None = None) -> bool:
    """On a machine without CUDA, launched with several processes: initialise
    torch.distributed with gloo before anything else touches it (DeepSpeed
    would otherwise pick a backend CPUs lack, and each rank would think it is
    rank 0 of 1). A GPU launch is left entirely to accelerate. Returns True
    when it initialised the group.

    Without DeepSpeed the state must be accelerate's CPU one (``cpu=True``,
    distributed type ``MULTI_CPU``): a gloo group under any other state is
    distributed type ``NO``, so the Trainer never wraps the model in DDP while
    the data loader still gives each rank its own share of every batch, and
    the ranks train apart on half the data each. ``timeout_seconds`` (the recipe's
    ``ddp_timeout``) bounds every collective: a rank that hangs (a stopped or wedged machine)
    ends the others' wait with an error after that long, as the Trainer's own group does."""
    from datetime import timedelta

    import torch

    if torch.cuda.is_available() or env_world_size() <= 1:
        return False
    from accelerate import PartialState

    # DeepSpeed's own init (what accelerate does when ACCELERATE_USE_DEEPSPEED is set) needs cpu=False
    deepspeed = os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() in ("1", "y", "yes", "t", "true", "on")
    timeout = timedelta(seconds=timeout_seconds) if timeout_seconds else None
    PartialState(cpu=not deepspeed, backend="gloo", **({"timeout": timeout} if timeout else {}))
    return True


# --------------------------------------------------------------------------- main


@dataclass
class Run:
    """Everything :func:`setup` wired together, ready to train: ``training_args`` are the final
    ones (:attr:`~judgetrain.train.settings.Settings.training_args`), ``settings`` what was
    derived for them, ``run_info`` what ``run.json`` records."""

    trainer: Any
    processor: Any
    family: Any
    model_args: Any  # judgetrain.train.model_args.ModelArguments (TRL's ModelConfig with judgetrain's model fields)
    data_args: DataArguments
    training_args: Any
    data_info: dict
    longest: int
    argv: list[str]
    run_info: dict = field(default_factory=dict)  # what run.json records (judgetrain.train.run_folder)
    settings: Settings | None = None


@dataclass
class _Records:
    """The training data as :func:`setup` hands it on: the records (train, the conversational
    evaluation records callbacks get, the ones the eval loss uses), their lengths, what the model
    card says of them, and the packed rows when packing."""

    train: Any
    evaluation: Any
    evaluation_used: Any
    lengths: list[int]
    eval_lengths: list[int] | None
    data_info: dict
    packed: PackedData | None = None
    length_column: bool = False
    pairs: Any = None  # method: reward, (train pairs, evaluation pairs or None, collator): judgetrain.reward.trainer


def setup(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> Run:
    """parse → model → data → settings → trainer; nothing trained yet. Each of ``callbacks`` is
    called with the evaluation records (or None), the processor and the final training
    arguments once the trainer exists; what it returns (a ``TrainerCallback``, or
    None for none) joins the trainer. ``judgetrain sweep``'s trials add theirs so."""
    argv = list(sys.argv[1:] if argv is None else argv)
    model_args, data_args, parsed_args, run_info, configured_state = _configure(argv)

    from transformers import set_seed

    from judgetrain.grpo.data import media_token_ids

    set_seed(parsed_args.seed)
    method = getattr(parsed_args, "method", "sft")
    grpo = method == "grpo"
    model, processor, family = _load_model(model_args, parsed_args)  # 1. model
    loader = {"grpo": _load_grpo_records, "reward": _load_reward_records}.get(method, _load_records)
    data = loader(data_args, parsed_args, processor, model, family)  # 2. data
    model, peft_config = _trainable(model, family, model_args, "SEQ_CLS" if method == "reward" else None)
    settings = derive(
        data_args,
        parsed_args,
        Facts(  # 3. settings, once
            world_size=env_world_size(),
            resume_from_checkpoint=run_info["resume_from_checkpoint"],
            vision_trains=vision_is_trainable(model, family, peft_config, model_args),
            records_per_row=data.packed.records_per_row if data.packed else None,
            length_column=data.length_column,
            configured_state=configured_state,
            media_tokens=tuple(media_token_ids(processor)) if grpo else (),
        ),
    )
    training_args = settings.training_args
    run_info = record_settings(training_args.output_dir, run_info, settings.derived)
    if data.packed:  # rows and records a step, for the model card
        data.data_info["packing"] = data.packed.describe(training_args, env_world_size(), data_args.effective_batch_size)
    recipe = resolved_recipe(model_args, data_args, training_args, argv)  # each checkpoint records it for resume
    make_trainer = {"grpo": _grpo_trainer, "reward": _reward_trainer}.get(method, _sft_trainer)
    trainer = make_trainer(model, processor, peft_config, settings, data, recipe)  # 4.
    for factory in callbacks:
        callback = factory(data.evaluation, processor, training_args)
        if callback is not None:
            trainer.add_callback(callback)
    _log_trainable(trainer)
    longest = max(data.lengths + (data.eval_lengths or []), default=0)
    return Run(
        trainer, processor, family, model_args, data_args, training_args, data.data_info, longest, argv, run_info, settings
    )


def _sft_trainer(model, processor, peft_config, settings: Settings, data: _Records, recipe: dict):
    """JudgeSFTTrainer, or ConsistencyTrainer under ``consistency_objective``, on the records: packed, laid out
    padding-free (one row a micro-batch, :func:`~judgetrain.train.packing.prepare_padding_free`) or as they are."""
    from judgetrain.consistency.trainer import trainer_class

    packed = data.packed
    flat = (
        prepare_padding_free(data.train, data.evaluation_used, processor, model, settings.training_args)
        if packed is None and lays_out_padding_free(settings.training_args)
        else None
    )
    rows = packed or flat
    return trainer_class(settings.training_args)(
        model=model,
        args=settings.trainer_args,
        train_dataset=rows.train if rows else data.train,
        eval_dataset=rows.evaluation if rows else data.evaluation_used,
        data_collator=rows.collator if rows else None,
        processing_class=processor,
        peft_config=peft_config,
        callbacks=[checkpoint_complete_callback(recipe, packed.records_per_row if packed else None), steps_from_arguments()],
    )


def _grpo_trainer(model, processor, peft_config, settings: Settings, data: _Records, recipe: dict):
    """JudgeGRPOTrainer (``method: grpo``) with the recipe's rewards, on the records ordered as
    its generation batches need them (:mod:`judgetrain.grpo`)."""
    from judgetrain.grpo.rewards import reward_functions
    from judgetrain.grpo.trainer import JudgeGRPOTrainer, prepare_records

    train, evaluation = prepare_records(data.train, data.evaluation_used, settings.training_args)
    # left padding, as TRL's GRPOTrainer loads its own processor: prompts are generated from left-padded, and the
    # processor's per-token fields (Qwen-VL's mm_token_type_ids) must line up with TRL's left-padded prompt ids
    processor.tokenizer.padding_side = "left"
    return JudgeGRPOTrainer(
        model=model,
        reward_funcs=reward_functions(settings.training_args.rewards),
        args=settings.trainer_args,
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=processor,
        peft_config=peft_config,
        callbacks=[checkpoint_complete_callback(recipe), steps_from_arguments()],
    )


def _reward_trainer(model, processor, peft_config, settings: Settings, data: _Records, recipe: dict):
    """JudgeRewardTrainer (``method: reward``) on the gold-versus-perturbed pairs (:mod:`judgetrain.reward`)."""
    from judgetrain.reward.trainer import JudgeRewardTrainer

    train_pairs, eval_pairs, collator = data.pairs
    return JudgeRewardTrainer(
        model=model,
        args=settings.trainer_args,
        data_collator=collator,
        train_dataset=train_pairs,
        eval_dataset=eval_pairs,
        # the tokenizer: TRL's reward trainer reads its pad token (a processor has none of its own); judgetrain's
        # collator holds the processor, and the run folder gets the processor (train_and_save)
        processing_class=processor.tokenizer,
        peft_config=peft_config,
        callbacks=[checkpoint_complete_callback(recipe), steps_from_arguments()],
    )


def _trainable(model, family, model_args, task_type: str | None = None):
    """The model and the LoRA config its trainer applies (:func:`~judgetrain.train.model.prepare_trainable`; PEFT's
    ``task_type`` where the method decides it: a reward model's ``SEQ_CLS``, which trains and saves its head); with
    ``init_adapter``, the model with that adapter loaded trainable (checked against the model first), and no config."""
    if not model_args.init_adapter:
        return model, prepare_trainable(model, family, model_args, task_type)
    from judgetrain.models.adapters import load_adapter

    logger.info("init_adapter: training on from %s", model_args.init_adapter)
    return load_adapter(model, model_args.init_adapter, model_args.model_name_or_path, is_trainable=True), None


def _load_model(model_args, training_args):
    """The base model (in training mode), its processor and its family, at the recipe's revision."""
    from judgetrain.models import get_family, load_model_and_processor

    if training_args.process_index == 0:
        print(f"judgetrain train: loading {model_args.model_name_or_path}", flush=True)
    model, processor = load_model_and_processor(
        model_args.model_name_or_path,
        family=model_args.family,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
        trust_remote_code=training_args.trust_remote_code,  # SFTConfig's field: off unless the recipe asks
        min_pixels=model_args.min_pixels,
        max_pixels=model_args.max_pixels,
        revision=model_args.model_revision,
        head="reward" if getattr(training_args, "method", "sft") == "reward" else "generate",
    )
    model.train()
    return model, processor, get_family(model_args.family) if model_args.family else _family_of(model)


def _load_records(data_args: DataArguments, training_args, processor, model, family) -> _Records:
    """The training and evaluation records, checked and measured, prefilled for a reasoning
    checkpoint, and packed (or given a length column) as the recipe asks; under ``padding_free``,
    the family checked (its micro-batches are laid out as the trainer is built: :func:`_sft_trainer`)."""
    train, evaluation, data_info = load_training_data(data_args, training_args.seed)
    # a reasoning checkpoint: the answer after the prefill every evaluation scores after (judgetrain.train.data);
    # the consistency collator renders its records' messages itself
    prefill = training_prefill(processor, family) if getattr(training_args, "consistency_objective", "none") == "none" else None
    train, data_info["prefill"] = prefill_records(train, processor, prefill), prefill
    with training_args.main_process_first(desc="checking records"):
        lengths = check_records(train, processor, training_args.max_length, "train", data_args.check_lengths)
        eval_lengths = (
            None
            if evaluation is None
            else check_records(evaluation, processor, training_args.max_length, "eval", data_args.check_lengths)
        )
    # the eval loss's records; callbacks get the conversational `evaluation` (the judge metric adds the prefill itself)
    evaluation_used = None if training_args.eval_strategy == "no" else prefill_records(evaluation, processor, prefill)
    data = _Records(train, evaluation, evaluation_used, lengths, eval_lengths, data_info)
    if training_args.packing:
        data.packed = prepare_packing(
            train, evaluation_used, (lengths, eval_lengths), processor, model, family.name, training_args
        )
        return data
    problem = family_packing_problem(family.name, "padding_free") if lays_out_padding_free(training_args) else None
    if problem:
        raise ConfigError([problem])
    if training_args.train_sampling_strategy == "group_by_length":
        data.train, data.length_column = with_length_column(train, lengths, training_args), True
    return data


def _load_grpo_records(data_args: DataArguments, training_args, processor, model, family) -> _Records:
    """The training and evaluation records of a GRPO run, checked for images (their order and
    columns follow once the generation batch is known: :func:`judgetrain.grpo.trainer.prepare_records`)."""
    train, evaluation, data_info = load_training_data(data_args, training_args.seed)
    with training_args.main_process_first(desc="checking records"):
        check_records(train, processor, None, "train", False)
        if evaluation is not None:
            check_records(evaluation, processor, None, "eval", False)
    evaluation_used = None if training_args.eval_strategy == "no" else evaluation
    return _Records(train, evaluation, evaluation_used, [], None, data_info)


def _load_reward_records(data_args: DataArguments, training_args, processor, model, family) -> _Records:
    """The records of a reward model's run, checked for images, and their gold-versus-perturbed pairs
    (:func:`judgetrain.reward.trainer.prepare_pairs`; a record longer than ``max_length`` refused)."""
    from judgetrain.reward.trainer import prepare_pairs

    data = _load_grpo_records(data_args, training_args, processor, model, family)
    max_length = training_args.max_length if data_args.check_lengths else None
    data.pairs = prepare_pairs(data.train, data.evaluation_used, processor, training_args, max_length)
    return data


def _configure(argv: list[str]) -> tuple[Any, DataArguments, Any, dict, bool]:
    """The parsed configurations (model, data, training), checked (``ConfigError`` listing every
    problem), the output folder's rule applied (:func:`~judgetrain.train.run_folder.prepare_output_dir`:
    refuse, overwrite or resume the same run) and reporting set up; what ``run.json`` records
    (with the folder's verdict on resuming); and whether the Trainer reuses a process group
    set up here."""
    cpu_distributed = setup_cpu_distributed(recipe_ddp_timeout(argv))
    model_args, data_args, training_args = parse(argv, configured_state=cpu_distributed)
    problems = check_config(model_args, data_args, training_args, env_world_size())
    if problems:
        raise ConfigError(problems)
    run_info = prepare_output_dir(model_args, data_args, training_args, env_world_size(), argv)
    configure_reporting(training_args)
    return model_args, data_args, training_args, run_info, cpu_distributed


def _log_trainable(trainer) -> None:
    if trainer.accelerator.is_main_process:
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in trainer.model.parameters())
        logger.info("trainable parameters: %d of %d (%.2f%%)", trainable, total, 100 * trainable / max(total, 1))


def train_and_save(run: Run, requests: StopRequests | None = None) -> Path | None:
    """train (resuming when asked) → save adapter, processor, recipe, state, loss curve, model card.
    The adapter records its base as ``adapters.stored_base`` says (a relative folder as the
    recipe gives it); a resume continues the checkpoint's wandb run; the model card is
    judgetrain's, also where TRL's checkpoints and the Trainer's ``push_to_hub`` write one.
    A stop signal (``requests``, :mod:`judgetrain.train.stop_signal`; installed here when
    None) saves a checkpoint at the next step and returns None, writing nothing else."""
    import yaml

    from judgetrain.models.adapters import stored_base

    from .outputs import start_wandb_run, wandb_run_config

    trainer, training_args = run.trainer, run.training_args
    resume = training_args.resume_from_checkpoint
    if resume == "auto":
        resume = find_resume_checkpoint(training_args.output_dir)
        logger.info("resume_from_checkpoint auto: %s", resume or "no complete checkpoint, starting fresh")
    out = Path(training_args.output_dir)
    for peft_config in (getattr(trainer.model, "peft_config", None) or {}).values():
        peft_config.base_model_name_or_path = stored_base(run.model_args.model_name_or_path)  # into adapter_config.json

    def write_card(tags: list[str], folder: Path | None = None) -> None:
        write_model_card(
            out, run.model_args, run.family, run.data_info, run.argv, trainer, run.longest, tags, folder, run_info=run.run_info
        )

    trainer.card_writer = write_card  # checkpoints (their folders too) and push_to_hub write this card
    wandb_run = start_wandb_run(
        trainer,
        wandb_run_config(run.model_args, run.data_args, run.family, run.data_info, training_args),
        resume if isinstance(resume, str) else None,
    )
    from .stop_signal import SaveOnSignal, StopRequests

    stop = SaveOnSignal(requests or StopRequests().install(), trainer.accelerator)
    trainer.add_callback(stop)
    try:
        trainer.train(resume_from_checkpoint=resume)
    finally:
        if requests is None:
            stop.requests.restore()
    if stop.stopped_at is not None:
        _stopped(trainer, stop, wandb_run is not None)
        return None
    trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        run.processor.save_pretrained(str(out))
        trainer.save_state()
        plot_log_history(trainer.state.log_history, out)  # training_loss.png (none, and a warning, before any loss)
        recipe = resolved_recipe(run.model_args, run.data_args, training_args, run.argv)
        header = f"# accelerate launch -m judgetrain.train --config {out / RECIPE_FILE}\n"
        write_text(out / RECIPE_FILE, header + yaml.safe_dump(recipe, sort_keys=True))
        write_card(list(getattr(trainer.model, "model_tags", None) or []))  # after PEFT's save rewrote README.md
        if run.run_info:
            record_finish(out, run.run_info, trainer.state.global_step)
        print(
            f"Training finished at step {trainer.state.global_step}; adapter, processor, recipe and model card in {out}",
            flush=True,
        )
    if wandb_run is not None:  # opened here, so closed here: a later run in this process opens its own
        import wandb

        wandb.finish()
    return out


def _stopped(trainer, stop: SaveOnSignal, wandb_open: bool) -> None:
    """Say where a run stopped by a signal saved its checkpoint and how it goes on; tell wandb
    the run is preempted (it resumes in the same wandb run)."""
    import signal as signals

    from .stop_signal import stop_exit_code

    if trainer.accelerator.is_main_process:
        name = signals.Signals(stop.signum).name if stop.signum else "a signal"
        folder = Path(trainer.args.output_dir) / f"checkpoint-{stop.stopped_at}"
        print(
            f"Training stopped by {name} at step {stop.stopped_at}; checkpoint saved in {folder}. Run the same command "
            "with --resume_from_checkpoint auto to go on (a SLURM job requeues itself)",
            flush=True,
        )
    if wandb_open:
        import wandb

        if wandb.run is not None:
            wandb.run.mark_preempting()
        wandb.finish(exit_code=stop_exit_code(stop.signum or 15))


def main(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from judgetrain.noise import quiet_libraries

    from .stop_signal import StopRequests

    quiet_libraries()

    requests = StopRequests().install()  # from the start: a signal while the model loads is not lost
    try:
        return _main(argv, callbacks, requests)
    finally:
        requests.restore()


def _main(argv: list[str] | None, callbacks: Sequence[CallbackFactory], requests: StopRequests) -> int:
    if os.environ.get("RANK", "0") == "0":  # before the slow part: importing TRL and torch, loading the model, the data
        print(
            "judgetrain train: reading the recipe, then loading the model and checking the records (about a minute on "
            "a CPU before the first step)",
            flush=True,
        )
    try:
        run = setup(argv, callbacks=callbacks)
    except AlreadyTrained as e:  # every process finds the same, before any model loads
        import torch.distributed as dist

        if not dist.is_initialized() or dist.get_rank() == 0:
            print(e, flush=True)
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
        return 0
    saved = train_and_save(run, requests)
    # Every rank waits until the main one has written its files, then the
    # group is torn down together: a rank that tears down (or exits) while
    # another still holds the gloo group makes the latter abort with SIGABRT.
    run.trainer.accelerator.wait_for_everyone()
    run.trainer.end()  # finish trackers and destroy the process group
    from .stop_signal import stop_exit_code

    return 0 if saved is not None else stop_exit_code(requests.signum or 15)


def _family_of(model):
    from judgetrain.models import detect_family

    return detect_family(model.config)


def script(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> int:
    """``python -m judgetrain.train`` (what ``accelerate launch`` runs in every process):
    :func:`main`, with a user error (configuration, dataset, model) printed as its
    message, which says what to change, and exit code 2 instead of a traceback."""
    from judgetrain.errors import UserError
    from judgetrain.models import ModelNotFoundError
    from judgetrain.records import IncompleteDatasetError, RecordValidationError

    try:
        return main(argv, callbacks=callbacks)
    except (config.ConfigError, IncompleteDatasetError, RecordValidationError, ModelNotFoundError, UserError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
