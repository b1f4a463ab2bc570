"""Every use judgetrain makes of an upstream library's internals, in one place.

transformers, TRL, PEFT, accelerate, ``datasets`` and Optuna release every few weeks. Where
judgetrain needs something they do not offer publicly (a private name, an internal module,
an undocumented attribute), it reaches for it here and nowhere else, one module per library:
:mod:`~judgetrain.compat.transformers`, :mod:`~judgetrain.compat.trl`,
:mod:`~judgetrain.compat.peft`, :mod:`~judgetrain.compat.accelerate`,
:mod:`~judgetrain.compat.datasets`, :mod:`~judgetrain.compat.optuna`. Each function states
what it relies on; ``tests/compat/`` holds a contract test per reliance that fails naming
it when an upstream release changes it. Nothing here falls back silently: where upstream no
longer offers what judgetrain needs, :class:`UpstreamChanged` says which library, which
version and what is missing (:mod:`~judgetrain.compat.versions`, which also compares the
installed versions with the lock). ``tests/compat/test_private_uses.py`` reads the code and
fails on any such use outside this package.
README: "Upstream versions".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(__name__, {
    "versions": ["UpstreamChanged", "installed_version", "lock_differences"],
    "transformers": ["InternalSaves", "count_items_in_batch", "current_accumulation", "hub_key_layout",
                     "restated_accelerator_config", "wandb_names", "zero3_lifted"],
    "trl": ["set_train_tokens", "train_tokens", "vision_collator"],
    "peft": ["targets_module"],
    "accelerate": ["default_config_file", "launch"],
})
