"""Package faces that import their modules on first use (PEP 562; the ``attach`` of
scientific Python's SPEC 1 lazy loading).

A package's ``__init__`` is its public API. Several of judgetrain's packages hold one
module that needs TRL, transformers, Optuna or ``datasets`` (seconds to import) beside
modules that need nothing: a face that imported them all would make ``judgetrain sweep
--help`` or a builder's first line wait for every one. So a face names its public
names per module with :func:`attach`, and each is imported when first read::

    __getattr__, __dir__, __all__ = attach(__name__, {"trainer": ["JudgeSFTTrainer"], "args": ["ModelArguments"]})

``from judgetrain.train import ModelArguments``, ``judgetrain.train.ModelArguments`` and
``from judgetrain.train import *`` then work as with a face that imports eagerly.
README: "Layout".
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["attach"]


def attach(package: str, names: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``'s ``__init__``: ``names`` maps each
    module of the package (its name relative to the package, ``"trainer"``) to the public
    names it defines. A name is imported from its module when first read and then kept in
    the package, so later reads cost nothing; the package's modules themselves stay
    importable as attributes (``judgetrain.train.trainer``)."""
    where = {name: module for module, defined in names.items() for name in defined}
    if len(where) != sum(len(defined) for defined in names.values()):
        repeated = sorted({n for defined in names.values() for n in defined if sum(n in d for d in names.values()) > 1})
        raise ValueError(f"{package}: names listed under two modules: {', '.join(repeated)}")
    if shadowing := sorted(set(where) & set(names)):
        # `from package import report` must give one thing: the module, not a function of that name
        raise ValueError(f"{package}: names that are also modules of the package: {', '.join(shadowing)}")

    def __getattr__(name: str) -> Any:
        if name in where:
            value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        elif name in names:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__, sorted(where)
