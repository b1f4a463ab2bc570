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

The loading is scientific Python's ``lazy_loader`` (``lazy_loader.attach``); this module adds
the two checks it leaves out (a name listed under two modules, where it keeps the last; a
name that is also a module of the package, where it lets the name hide the module) and keeps
the package's modules reachable as attributes without listing them in ``__all__``, so
``import *`` imports no module that the names do not need. As with every ``lazy_loader`` package, ``EAGER_IMPORT=1`` in
the environment imports every listed name at once (a check that each resolves), and then
no command is fast.
Docs: "reference/development.md".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import lazy_loader

__all__ = ["attach"]


def attach(package: str, names: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``'s ``__init__``: ``names`` maps each
    module of the package (its name relative to the package, ``"trainer"``) to the public
    names it defines. A name is imported from its module when first read and then kept in
    the package, so later reads cost nothing; the package's modules themselves stay
    importable as attributes (``judgetrain.train.trainer``). ``__all__`` and ``dir()`` are the
    names, not the modules."""
    where = {name: module for module, defined in names.items() for name in defined}
    if len(where) != sum(len(defined) for defined in names.values()):
        repeated = sorted({n for defined in names.values() for n in defined if sum(n in d for d in names.values()) > 1})
        raise ValueError(f"{package}: names listed under two modules: {', '.join(repeated)}")
    if shadowing := sorted(set(where) & set(names)):
        # `from package import report` must give one thing: the module, not a function of that name
        raise ValueError(f"{package}: names that are also modules of the package: {', '.join(shadowing)}")
    __getattr__, _, _ = lazy_loader.attach(package, submodules=list(names), submod_attrs=names)
    public = sorted(where)

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__, list(public)
