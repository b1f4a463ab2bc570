"""Training a judge: TRL's ``SFTTrainer`` with PEFT LoRA on judgetrain records, as
``accelerate launch -m judgetrain.train --config RECIPE`` runs it in every process.

:func:`main` is parse → model → data → trainer → train (with resume) → save
(:mod:`~judgetrain.train.run`), wiring the package's parts, one job each:

- :mod:`~judgetrain.train.model_args`: the model and LoRA fields, TRL's ``ModelConfig`` with
  judgetrain's model fields (:class:`ModelArguments`); :mod:`~judgetrain.train.args`: the data
  fields (:class:`DataArguments`);
- :mod:`~judgetrain.train.parser`: a recipe and its overrides parsed into those and TRL's
  ``SFTConfig`` (:func:`parse`); :mod:`~judgetrain.train.checks`: every cross-field problem
  at once (:func:`check_config`); :mod:`~judgetrain.train.settings`: what follows from the
  recipe (the gradient accumulation, …), derived once (:func:`derive`);
  :mod:`~judgetrain.train.base_model`: the base model's identity (a hub id's commit);
- :mod:`~judgetrain.train.data`: the records, checked against ``max_length``;
  :mod:`~judgetrain.train.packing`: padding-free packing of image records;
  :mod:`~judgetrain.train.model`: what trains (LoRA targets, frozen towers);
- :mod:`~judgetrain.train.trainer`: :class:`JudgeSFTTrainer`; :mod:`~judgetrain.train.outputs`:
  checkpoints, reporting, the model card; :mod:`~judgetrain.train.resume`: what a
  checkpoint fixes on resume; :mod:`~judgetrain.train.curves`: the loss curve
  (``training_loss.png``);
- the commands: :mod:`~judgetrain.train.launch` (``judgetrain train``, with the accelerate
  side in :mod:`~judgetrain.train.accelerate_configs` and the recipe fields its ``--help``
  lists in :mod:`~judgetrain.train.recipe_fields`) and :mod:`~judgetrain.train.merge`
  (``judgetrain merge``).

Names are imported from their modules on first use (:func:`judgetrain.lazy.attach`), so a
part that needs none of TRL (the launcher's options, which ``judgetrain sweep`` shares) does
not load it.
Docs: "reference/recipes.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["METHODS", "RENAMED", "ConfigError", "DataArguments", "MethodArguments"],
        "model_args": ["IDENTITY_FIELDS", "QUANTIZATION_FIELDS", "STRING_LISTS", "ModelArguments", "model_problems"],
        "settings": [
            "AS_PARSED",
            "TRAINER_MAX_LENGTH",
            "TRAINER_PACKING",
            "Facts",
            "Settings",
            "derive",
            "gradient_accumulation",
        ],
        "base_model": ["base_model_identity", "hub_commit"],
        "parser": ["bf16_capable", "env_world_size", "make_parser", "parse", "recipe_method"],
        "checks": ["check_config", "consistency_problems"],
        "data": ["check_records", "image_expansion", "load_training_data", "record_length", "with_length_column"],
        "model": [
            "lora_config",
            "lora_target_problems",
            "prepare_trainable",
            "set_full_finetune_trainable",
            "vision_is_trainable",
            "vllm_serving_problem",
        ],
        "packing": [
            "IGNORE_INDEX",
            "PACKABLE_ATTENTION",
            "PACKABLE_FAMILIES",
            "PackedData",
            "PackingCollator",
            "REAL_TOKENS_KEY",
            "family_packing_problem",
            "pack_bins",
            "packed_batch",
            "packed_rows",
            "packing_problems",
            "prepare_packing",
        ],
        "resume": ["FIXED_BY_CHECKPOINT", "STEP_FIELDS", "checkpoint_to_resume", "resume_problems", "steps_from_arguments"],
        "outputs": [
            "COMPLETE_MARKER",
            "DEFAULT_WANDB_PROJECT",
            "PIPELINE_TAG",
            "RECIPE_FILE",
            "base_license",
            "checkpoint_complete_callback",
            "configure_reporting",
            "find_resume_checkpoint",
            "global_batch",
            "model_card",
            "recorded_wandb_run",
            "replay_history",
            "resolved_recipe",
            "start_wandb_run",
            "wandb_run_config",
            "write_model_card",
        ],
        "trainer": ["JudgeCard", "JudgeSFTTrainer"],
        "curves": [
            "LOSS_PLOT",
            "STATE_FILE",
            "loss_figure",
            "loss_series",
            "pair_accuracy_series",
            "plot_log_history",
            "plot_trainer_state",
            "reward_series",
        ],
        "run": ["CallbackFactory", "Run", "main", "script", "setup", "setup_cpu_distributed", "train_and_save"],
        "accelerate_configs": [
            "LaunchArgs",
            "NAMES",
            "accelerate_args",
            "config_dir",
            "find_accelerate_config",
            "resolve_accelerate_config",
            "world_size",
        ],
        "launch": ["TrainCommand", "check", "command", "launch_config", "parse_command"],
        "recipe_fields": ["WIDTH", "ListingFormatter", "recipe_help", "recipe_parser"],
        "merge": ["MergeConfig", "merge_adapter"],
    },
)
