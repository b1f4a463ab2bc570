"""An upstream dataclass read from its installed source file with ``ast``, nothing imported:
its fields in dataclass order (a base's first, a field a subclass declares again keeping its
place), each with its annotation, default, ``init`` and metadata (``help``, ``choices``).

What ``judgetrain train --help`` lists of TRL's ``SFTConfig`` (and transformers'
``TrainingArguments`` under it) comes from here, so it is read anew from whatever release is
installed (never a stored copy a release makes stale) without importing them (which loads
torch). Reading a library's source is relying on its internals: the caller states which
file declares the class (:func:`judgetrain.compat.trl.sft_config_from_source`), and
``tests/compat`` checks that the fields read equal the imported class's. A value the source
does not state as a literal (``default=default_optim``, ``choices=levels.keys()``) is not
guessed: it is an :class:`Unread` showing its source text, and :attr:`SourceField.unread`
names it.
Docs: "get-started/install.md".
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import functools
import typing
from collections.abc import Mapping
from dataclasses import MISSING
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from .versions import UpstreamChanged

__all__ = ["SourceField", "Unread", "dataclass_fields", "source_file", "standin"]

_TYPING = {n: getattr(typing, n) for n in ("Any", "Callable", "ClassVar", "Literal", "Optional", "Union")}
_BUILTIN_TYPES = {n: getattr(builtins, n) for n in ("bool", "bytes", "dict", "float", "int", "list", "set", "str", "tuple")}
_FACTORIES = {n: getattr(builtins, n) for n in ("dict", "list", "set", "tuple")}
_OTHER = "__other__"  # any class but an enum: HfArgumentParser lists its field as it lists a str one


class Unread(str):
    """A value the source gives as an expression, not a literal: its source text, with where it
    is decided, shown in ``--help`` in place of the value."""

    def __new__(cls, source: str, library: str) -> Unread:
        return super().__new__(cls, f"{source}, as {library} computes it")


@dataclasses.dataclass(frozen=True)
class SourceField:
    """One field as its class's source declares it. ``type`` is the annotation evaluated over
    stand-ins: builtins and ``typing`` as themselves, an enum of the library as an enum of the
    same values, any other class as ``str``. ``unread`` names what was not a literal
    (``"default"``, ``"metadata:choices"``), which ``default`` shows as :class:`Unread` or
    ``metadata`` leaves out."""

    name: str
    type: Any
    default: Any = MISSING
    default_factory: Any = MISSING
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    init: bool = True
    unread: tuple[str, ...] = ()


def source_file(module: str) -> Path:
    """The source file of an installed ``module`` (``"trl.trainer.sft_config"``), found from its
    top-level package's location without importing anything."""
    top, *parts = module.split(".")
    spec = find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise UpstreamChanged(top, f"the package {top}", "read its dataclasses from their source")
    base = Path(next(iter(spec.submodule_search_locations)), *parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise UpstreamChanged(top, f"the module {module} ({base}.py)", "read its dataclasses from their source")


@functools.lru_cache(maxsize=32)
def _tree(module: str) -> ast.Module:
    return ast.parse(source_file(module).read_text(encoding="utf-8"))


def _absolute(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, those inside top-level ``if``/``try`` blocks (guarded imports) included."""
    out: list[ast.stmt] = []
    for node in tree.body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            out += _top_level(ast.Module(body=[*node.body, *getattr(node, "orelse", [])], type_ignores=[]))
    return out


def _class(module: str, name: str, exported: Mapping[str, str]) -> tuple[str, ast.ClassDef] | None:
    """(defining module, class) of ``name`` as ``module`` sees it: defined there, or imported
    (``from X import name``; a name a package face exports from elsewhere: ``exported``)."""
    is_package = source_file(module).name == "__init__.py"
    for node in _top_level(_tree(module)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = _absolute(module, node, is_package)
                    target = exported.get(f"{target}.{alias.name}", target)
                    return _class(target, alias.name, exported) if target != module else None
    return None


def _enum(module: str, node: ast.ClassDef) -> type[enum.Enum] | None:
    """An enum of the values a class of ``Enum`` bases declares (``NO = "no"``), or None."""
    if not any(ast.unparse(b).split(".")[-1].endswith("Enum") for b in node.bases):
        return None
    members = [
        (s.targets[0].id, s.value.value)
        for s in node.body
        if isinstance(s, ast.Assign)
        and len(s.targets) == 1
        and isinstance(s.targets[0], ast.Name)
        and isinstance(s.value, ast.Constant)
    ]
    return enum.Enum(node.name, members, module=module) if members else None  # type: ignore[return-value]


def _annotation(node: ast.expr, module: str, exported: Mapping[str, str]) -> Any:
    """``node`` evaluated over stand-ins (see :class:`SourceField`)."""
    known: dict[str, Any] = {**_TYPING, **_BUILTIN_TYPES, _OTHER: str}
    for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - set(known):
        found = _class(module, name, exported)
        stand = _enum(*found) if found else None
        if stand is not None:
            known[name] = stand

    class Stand(ast.NodeTransformer):
        def visit_Subscript(self, n: ast.Subscript) -> ast.AST:
            if isinstance(n.value, ast.Name) and n.value.id == "Literal":
                return n  # its strings are values, not forward references
            if isinstance(n.value, ast.Name) and n.value.id not in known:
                return ast.Name(_OTHER, ast.Load())
            return self.generic_visit(n)

        def visit_Name(self, n: ast.Name) -> ast.AST:
            return n if n.id in known else ast.Name(_OTHER, ast.Load())

        def visit_Attribute(self, n: ast.Attribute) -> ast.AST:  # torch.dtype, …
            return ast.Name(_OTHER, ast.Load())

        def visit_Constant(self, n: ast.Constant) -> ast.AST:  # "ForwardRef"
            return ast.Name(_OTHER, ast.Load()) if isinstance(n.value, str) else n

    tree = ast.fix_missing_locations(ast.Expression(Stand().visit(node)))
    return eval(compile(tree, f"<annotation in {module}>", "eval"), {"__builtins__": {}}, known)  # noqa: S307 - stand-ins only


def _literal(node: ast.expr | None) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node) if node is not None else MISSING
    except (ValueError, TypeError, SyntaxError):
        return False, None


def _field(stmt: ast.AnnAssign, module: str, exported: Mapping[str, str]) -> SourceField:
    library = module.split(".")[0]
    name, kind = stmt.target.id, _annotation(stmt.annotation, module, exported)  # type: ignore[union-attr]
    call = stmt.value if isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func).split(".")[-1] == "field" else None
    given = {k.arg: k.value for k in call.keywords if k.arg} if call else {"default": stmt.value} if stmt.value else {}
    unread: list[str] = []
    ok, default = _literal(given.get("default"))
    if not ok:
        default = Unread(ast.unparse(given["default"]), library)
        unread.append("default")
    factory: Any = MISSING
    if "default_factory" in given:
        made = given["default_factory"]
        ok, value = _literal(made.body) if isinstance(made, ast.Lambda) else (True, None)
        if isinstance(made, ast.Name) and made.id in _FACTORIES:
            factory = _FACTORIES[made.id]
        elif isinstance(made, ast.Lambda) and ok:
            factory = functools.partial(_copy, value)
        else:
            default = Unread(ast.unparse(made) + "()", library)
            unread.append("default")
    metadata: dict[str, Any] = {}
    if "metadata" in given:
        entries = given["metadata"]
        if not isinstance(entries, ast.Dict):
            unread.append("metadata")
        else:
            for key, value in zip(entries.keys, entries.values, strict=True):
                ok, read = _literal(value)
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and ok:
                    metadata[key.value] = read
                else:
                    unread.append(f"metadata:{ast.unparse(key) if key is not None else '**'}")
    init = _literal(given["init"])[1] if "init" in given else True
    return SourceField(name, kind, default, factory, metadata, bool(init), tuple(unread))


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)


def dataclass_fields(module: str, name: str, exported: Mapping[str, str] | None = None) -> list[SourceField]:
    """The fields of dataclass ``name`` declared in ``module``, in dataclass order, its bases
    followed through their imports (``exported``: ``{"transformers.TrainingArguments":
    "transformers.training_args"}`` for a name a package face exports from another module).
    ``ClassVar`` annotations are not fields. Raises :class:`UpstreamChanged` when the class, a
    base, or its ``@dataclass`` cannot be found."""
    exported = dict(exported or {})
    library = module.split(".")[0]
    found = _class(module, name, exported)
    if found is None:
        raise UpstreamChanged(library, f"{module}.{name}", "read its fields from its source")
    module, node = found
    if not any(ast.unparse(d).split("(")[0].split(".")[-1] == "dataclass" for d in node.decorator_list):
        raise UpstreamChanged(library, f"{module}.{name} as a @dataclass", "read its fields from its source")
    fields: dict[str, SourceField] = {}
    for base in reversed(node.bases):  # dataclass order: the last base's fields first
        if isinstance(base, ast.Name) and base.id != "object":
            fields.update((f.name, f) for f in dataclass_fields(module, base.id, exported))
    for stmt in node.body:
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and "ClassVar" not in ast.unparse(stmt.annotation)
        ):
            fields[stmt.target.id] = _field(stmt, module, exported)
    return list(fields.values())


def standin(name: str, fields: list[SourceField]) -> type:
    """A dataclass named ``name`` of ``fields``, for ``HfArgumentParser`` to list (never to
    parse a run's settings: its types are the stand-ins of :class:`SourceField`)."""
    specs = []
    for f in fields:
        given: dict[str, Any] = {"metadata": dict(f.metadata), "init": f.init}
        if f.default_factory is not MISSING:
            given["default_factory"] = f.default_factory
        elif isinstance(f.default, (list, dict, set)):
            given["default_factory"] = functools.partial(_copy, f.default)
        elif f.default is not MISSING:
            given["default"] = f.default
        specs.append((f.name, f.type, dataclasses.field(**given)))
    return dataclasses.make_dataclass(name, specs, kw_only=True)
