"""Every use judgetrain makes of an upstream library's internals, in one place.

transformers, TRL, PEFT, accelerate, ``datasets`` and Optuna release every few weeks. Where
judgetrain needs something they do not offer publicly (a private name, an internal module,
an undocumented attribute), it reaches for it here and nowhere else, one module per library:
:mod:`~judgetrain.compat.transformers`, :mod:`~judgetrain.compat.trl`,
:mod:`~judgetrain.compat.peft`, :mod:`~judgetrain.compat.accelerate`,
:mod:`~judgetrain.compat.datasets`, :mod:`~judgetrain.compat.optuna` (and
:mod:`~judgetrain.compat.dataclass_source`, which reads an upstream dataclass from its
installed source without importing it). Each function states
what it relies on; ``tests/compat/`` holds a contract test per reliance that fails naming
it when an upstream release changes it. Nothing here falls back silently: where upstream no
longer offers what judgetrain needs, :class:`UpstreamChanged` says which library, which
version and what is missing (:mod:`~judgetrain.compat.versions`, which also compares the
installed versions with the lock). ``tests/compat/test_private_uses.py`` reads the code and
fails on any such use outside this package.
Docs: "get-started/install.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "versions": ["UpstreamChanged", "installed_version", "lock_differences"],
        "transformers": [
            "InternalSaves",
            "argument_group",
            "attention_implementation",
            "cache_rows",
            "count_items_in_batch",
            "current_accumulation",
            "hub_key_layout",
            "parser_actions",
            "restated_accelerator_config",
            "wandb_names",
            "zero3_lifted",
        ],
        "trl": ["SFT_CONFIG_SOURCE", "set_train_tokens", "sft_config_from_source", "train_tokens", "vision_collator"],
        "peft": ["targets_module"],
        "accelerate": ["default_config_file", "launch", "launch_command"],
        "datasets": ["dataset_dict_file", "reads_through_indices"],
        "optuna": ["reopen_trial", "trial_id"],
        "dataclass_source": ["SourceField", "Unread", "dataclass_fields", "source_file", "standin"],
    },
)
