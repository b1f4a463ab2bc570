"""What judgetrain relies on in PEFT beyond its documented API, each reliance with a contract
test in ``tests/compat/test_peft.py`` that fails naming it when a release changes it. Where a
release no longer offers it, these raise :class:`~judgetrain.compat.versions.UpstreamChanged`.
Docs: "get-started/install.md".
"""

from __future__ import annotations

from typing import Any

from .versions import UpstreamChanged

__all__ = ["targets_module"]

LIBRARY = "peft"


def targets_module(config: Any, name: str) -> bool:
    """Whether a LoRA ``config`` wraps the module with dotted ``name``, as PEFT decides when it
    injects the adapter (``peft.tuners.tuners_utils.check_target_module_exists``: a string
    ``target_modules`` is a regex full-matched against the name, a list names modules by their
    last parts; a module to save is excluded)."""
    try:
        from peft.tuners.tuners_utils import check_target_module_exists
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY,
            "peft.tuners.tuners_utils.check_target_module_exists",
            "check lora_target_modules against the model before any weight loads",
            str(e),
        ) from None
    return bool(check_target_module_exists(config, name))  # a match object, True, or a falsy value
