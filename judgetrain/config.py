"""One typed config per command, and the one parser every command uses (the recipes of
``judgetrain train`` included).

Every command declares its settings once, as a dataclass (shared parents:
:class:`~judgetrain.data_builders.core.args.BuildArgs` for ``build *``,
:class:`~judgetrain.eval.core.args.EvalArgs` for ``eval *``), and exposes ``make_parser()``
(a TRL :class:`~trl.TrlParser` over its dataclasses, from :func:`make_parser`) and
``main(cfg)``. :func:`parse` then does what every command needs: ``--config FILE.yaml`` sets defaults, flags win, unknown keys and flags fail
with a "did you mean", and ``--help`` lists every field with its help text (fields
spelled ``--field_name`` or ``--field-name``; booleans that default to true also get
``--no-field-name``).

Values are checked as they arrive, before any dataclass is built: a value from the YAML
goes through the same conversion as the flag would (an integer field takes ``3``, not ``2.7``
nor a list; an error names the file, line, key, value and the type wanted); every number
must be finite (unless its field says ``allow_inf=True``) and inside the range its field
declares (:class:`Range`: ``arg(8, "…", minimum=1)``, or ``ranges=`` for another library's
dataclass, as ``judgetrain train`` does for TRL's fields); every problem is listed at once.
The YAML itself is read by :mod:`judgetrain.yamlfile` (no key twice, no alias bomb).

A field whose value changes results is marked with ``identity=True`` in its
metadata (:func:`arg`); :func:`identity` restricts ``asdict(cfg)`` to those fields,
which is what a run folder must agree on before it resumes.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from judgetrain.compat.transformers import parser_actions
from judgetrain.errors import UserError, did_you_mean, shown

__all__ = [
    "ConfigError",
    "Range",
    "arg",
    "comma_list",
    "identity",
    "jsonable",
    "make_parser",
    "one_of",
    "parse",
    "range_problems",
    "read_config_file",
    "split_config_flag",
]


class ConfigError(UserError, ValueError):
    """Every problem with a command's configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str], what: str = "configuration"):
        self.problems = problems
        super().__init__(f"invalid {what}:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclasses.dataclass(frozen=True)
class Range:
    """The numbers a field takes: ``minimum`` / ``maximum`` inclusive, ``above`` / ``below``
    exclusive, finite unless ``allow_inf``; ``fix`` is what a message tells the user to give
    (default: the range in words). A list field's range holds for each item."""

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    below: float | None = None
    allow_inf: bool = False
    fix: str = ""

    def fault(self, value: float) -> str | None:
        """What is wrong with ``value`` (``"is negative"``, ``"is above 1"``, …), or None."""
        if isinstance(value, float) and (math.isnan(value) or (math.isinf(value) and not self.allow_inf)):
            return "is not a finite number"
        lower = self.minimum if self.minimum is not None else self.above
        if lower is not None and (value < lower or (self.above is not None and value == lower)):
            if value == lower:
                return "is zero" if lower == 0 else f"must be above {_number(lower)}"
            return "is negative" if lower == 0 else f"is below {_number(lower)}"
        upper = self.maximum if self.maximum is not None else self.below
        if upper is not None and (value > upper or (self.below is not None and value == upper)):
            return f"is above {_number(upper)}" if value > upper else f"must be below {_number(upper)}"
        return None

    def wanted(self, integer: bool) -> str:
        """The range in words: ``"a number in [0, 1)"``, ``"an integer of at least 1"``, …"""
        kind = "an integer" if integer else "a number"
        low = (
            f"[{_number(self.minimum)}"
            if self.minimum is not None
            else f"({_number(self.above)}"
            if self.above is not None
            else None
        )
        high = (
            f"{_number(self.maximum)}]"
            if self.maximum is not None
            else f"{_number(self.below)})"
            if self.below is not None
            else None
        )
        if low and high:
            return f"{kind} in {low}, {high}"
        if low:
            return f"{kind} of at least {low[1:]}" if low[0] == "[" else f"{kind} above {low[1:]}"
        if high:
            return f"{kind} of at most {high[:-1]}" if high[-1] == "]" else f"{kind} below {high[:-1]}"
        return f"a finite {kind[2:] if integer else 'number'}"


def _number(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


# arg()'s keywords that make a field's Range
_RANGE_KEYS = ("minimum", "maximum", "above", "below", "allow_inf")


def arg(default: Any = dataclasses.MISSING, help: str = "", *, identity: bool = False, **metadata: Any):
    """A dataclass field with its ``--help`` text; ``identity=True`` marks a field whose
    value changes a run's results. ``minimum``, ``maximum`` (inclusive), ``above``, ``below``
    (exclusive) and ``allow_inf`` declare the numbers it takes (:class:`Range`), checked as
    the command line and ``--config`` are parsed. A list default is copied per instance."""
    bounds = {k: metadata.pop(k) for k in _RANGE_KEYS if k in metadata}
    if bounds:
        metadata["range"] = Range(**bounds)
    metadata = {"help": help, "identity": identity, **metadata}
    if isinstance(default, (list, dict)):
        value = default
        return dataclasses.field(default_factory=lambda: type(value)(value), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def comma_list(values: Any) -> list[str]:
    """A list field as given on the command line (``--tasks a b``), as one comma-separated
    word (``--tasks a,b``), or in YAML (``tasks: [a, b]`` or ``tasks: a,b``)."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [part.strip() for v in values for part in str(v).split(",") if part.strip()]


def one_of(choices: Sequence[Any]) -> str:
    """``"a, b or c"``: the choices of a registry as a help text names them, so the text
    cannot drift from the registry it lists."""
    names = [str(c) for c in choices]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples in the epilog kept as written, defaults shown after each help text."""


# field metadata that judgetrain reads and argparse must not see
_OWN_METADATA = ("identity", "positional", "passthrough", "range")


def make_parser(
    types,
    prog: str,
    description: str = "",
    epilog: str = "",
    usage: str | None = None,
    *,
    formatter_class: type[argparse.HelpFormatter] = _HelpFormatter,
    ranges: dict[str, Range] | None = None,
    **kwargs: Any,
):
    """A :class:`trl.TrlParser` over ``types`` (a dataclass or a tuple of them), with
    judgetrain's field metadata (:func:`arg`) kept from argparse and no abbreviations: a
    prefix of a flag is refused, not taken for it. Every number parsed is checked against
    its field's :class:`Range` (``ranges`` gives those of fields judgetrain does not
    declare, by name) before any dataclass is built; :class:`ConfigError` lists every
    number out of range. ``kwargs`` go to the parser (``add_help=False`` for a listing
    inside another command's help)."""
    from trl import TrlParser

    def argparse_keys(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if k not in _OWN_METADATA}

    class Parser(TrlParser):
        ranges: dict[str, Range]  # by field name, for fields whose metadata declares none
        config_file: Path | None  # what parse() read, to say where a value came from
        config_keys: set[Any]
        config_lines: dict[Any, int]

        # HfArgumentParser hands every metadata key of a field to add_argument (a dataclass with a
        # heading: its group's add_argument), and argparse refuses the keys judgetrain reads itself
        def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
            return super().add_argument(*args, **argparse_keys(kwargs))

        def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
            group = super().add_argument_group(*args, **kwargs)
            add = group.add_argument
            group.add_argument = lambda *a, **k: add(*a, **argparse_keys(k))  # type: ignore[method-assign]
            return group

        # HfArgumentParser builds the dataclasses from this namespace: a number out of range is
        # refused here, before a __post_init__ (TrainingArguments') or the training meets it
        def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
            parsed, rest = super().parse_known_args(args, namespace)
            problems = _namespace_problems(self, parsed, [a for a in args or [] if isinstance(a, str)])
            if problems:
                raise ConfigError(problems)
            return parsed, rest

    parser = Parser(
        types if isinstance(types, tuple) else (types,),
        prog=prog,
        description=description,
        epilog=epilog,
        usage=usage,
        formatter_class=formatter_class,
        allow_abbrev=False,
        **kwargs,
    )
    parser.ranges = dict(ranges or {})
    parser.config_file, parser.config_keys, parser.config_lines = None, set(), {}  # set by parse()
    return parser


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """A ``--config`` YAML mapping (:func:`judgetrain.yamlfile.read_yaml`: no key twice, no
    alias bomb); its ``env:`` mapping is applied to ``os.environ`` and removed, as TRL does."""
    return _read_config(Path(path))[0]


def _read_config(path: Path) -> tuple[dict[str, Any], dict[Any, int]]:
    """:func:`read_config_file`, and the line of each key."""
    from judgetrain.yamlfile import YamlError, top_level_lines

    if not path.is_file():
        raise ConfigError([f"--config {path}: no such file"])
    try:
        config, lines = top_level_lines(path)
    except YamlError as e:
        raise ConfigError([str(e)]) from None
    config = {} if config is None else config
    if not isinstance(config, dict):
        raise ConfigError([f"{path}: a config file is a YAML mapping of field: value"])
    env = config.pop("env", None) or {}
    if not isinstance(env, dict) or any(isinstance(v, (dict, list)) for v in env.values()):
        raise ConfigError([f"{path}: env: give a mapping of variable: value"])
    for key, value in env.items():
        os.environ[str(key)] = str(value)
    return config, lines


def split_config_flag(argv: list[str]) -> tuple[list[str], Path | None]:
    """``argv`` without ``--config FILE`` / ``--config=FILE``, and that file."""
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--config":
            if i + 1 >= len(argv):
                raise ConfigError(["--config: give a YAML file"])
            path = argv[i + 1]
            del argv[i : i + 2]
            return argv, Path(path)
        if a.startswith("--config="):
            del argv[i]
            return argv, Path(a.split("=", 1)[1])
    return argv, None


def _positional_to_flags(parser, argv: list[str]) -> list[str]:
    """Leading bare words given to fields marked ``positional=True`` (``eval report RUN``),
    in order, as their flags; a list field takes every remaining bare word."""
    pos = [f for dt in parser.dataclass_types for f in fields(dt) if f.metadata.get("positional")]
    argv = list(argv)
    bare = []
    while argv and not argv[0].startswith("-"):
        bare.append(argv.pop(0))
    flags: list[str] = []
    for f in pos:
        if not bare:
            break
        many = getattr(f.type, "__origin__", None) is list or str(f.type).startswith("list")
        take, bare = (bare, []) if many else (bare[:1], bare[1:])
        flags += [f"--{f.name}", *take]
    return flags + bare + argv


def parse(
    parser,
    argv: list[str],
    *,
    defaults: dict[str, Any] | None = None,
    help_hint: str = "--help",
    prepare: Callable[[list[str], dict[str, Any]], None] | None = None,
) -> tuple:
    """The dataclasses of ``parser`` from ``argv``: ``--config FILE.yaml`` values become
    defaults, flags win, ``defaults`` (set by code, e.g. a launcher) sit under both.
    Leading bare words fill the fields marked ``positional=True``. Unknown config keys and
    unknown flags raise :class:`ConfigError` naming each one, unless a list field is
    marked ``passthrough=True``: then unknown arguments are appended to it. A parser with an
    option of its own spelled ``--config`` reads no config file. ``prepare(argv,
    values)``, when given, may change the file's values before they become defaults (what
    ``judgetrain train`` needs: bf16 off where no GPU supports it, the process group of
    the launch)."""
    own = {o for a in parser_actions(parser) for o in a.option_strings}
    # a command whose own field is spelled --config (`judgetrain train --config RECIPE`) reads no config file
    argv, path = (list(argv), None) if "--config" in own else split_config_flag(argv)
    argv = _positional_to_flags(parser, argv)
    from_file, lines = _read_config(path) if path else ({}, {})
    config = {**(defaults or {}), **from_file}
    if prepare is not None:
        prepare(argv, config)
    dests = [a.dest for a in parser_actions(parser) if a.dest != "help"]
    problems = [
        f"{path}: unknown key {shown(k)}{did_you_mean(str(k), dests)} (fields: {help_hint})" for k in config if k not in dests
    ]
    problems += _config_value_problems(parser, config, [k for k in from_file if k in config and k in dests], path, lines)
    if problems:
        raise ConfigError(problems)
    parser.config_file, parser.config_keys, parser.config_lines = path, set(from_file), lines
    parser.set_defaults_with_config(**config)
    cfgs = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    *cfgs, rest = cfgs
    sink = [(c, f.name) for c in cfgs for f in fields(c) if f.metadata.get("passthrough")]
    if rest and sink:  # a command that hands unknown arguments on (recipe overrides for every trial)
        cfg, name = sink[0]
        setattr(cfg, name, [*getattr(cfg, name), *rest])
        rest = []
    if rest:
        raise ConfigError(_leftover_problems(rest, parser, help_hint))
    return tuple(cfgs)


def _leftover_problems(rest: list[str], parser, help_hint: str) -> list[str]:
    """One problem per command-line flag the parser did not take, and one for the bare words
    that follow no flag (a word after an unknown flag is taken for its value)."""
    flags = [o for a in parser_actions(parser) for o in a.option_strings]
    problems = [
        f"unknown argument {w!r}{did_you_mean(w.split('=', 1)[0], flags)} ({help_hint} lists every field)"
        for w in rest
        if w.startswith("-")
    ]
    stray = [w for i, w in enumerate(rest) if not w.startswith("-") and (i == 0 or not rest[i - 1].startswith("-"))]
    if stray:
        problems.append(
            f"unknown argument {' '.join(stray)!r}: not used. A flag takes `--field value`; only a list field "
            f"takes several values (`--field a b`), and only where {help_hint} shows `[FIELD ...]`"
        )
    return problems


# --------------------------------------------------------------------------- values: types and ranges


class _WrongType(Exception):
    """A ``--config`` value that the field's flag would not take."""


def _type_hints(parser) -> dict[str, Any]:
    hints: dict[str, Any] = {}
    for dtype in parser.dataclass_types:
        try:
            hints.update(typing.get_type_hints(dtype))
        except Exception:  # a hint that does not resolve: such a field's YAML values pass as they are
            continue
    return hints


def _admits(hint: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field of type ``hint`` (None: unknown) holds a value of one of ``kinds``."""
    if hint is None or hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        return any(_admits(a, kinds) for a in args)
    if origin is typing.Literal:
        return any(isinstance(a, kinds) for a in args)
    base = origin or hint
    return isinstance(base, type) and (issubclass(base, kinds) or (dict in kinds and dataclasses.is_dataclass(base)))


def _scalar(value: Any, action: argparse.Action, hint: Any) -> Any:
    """``value`` converted as argparse converts the flag's word, or :class:`_WrongType`."""
    if value is None or isinstance(value, (dict, list)):
        raise _WrongType
    if isinstance(value, bool) and not _admits(hint, (bool,)):
        raise _WrongType
    convert: Any = action.type or str
    try:
        result = convert(value if isinstance(value, str) else str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        raise _WrongType from None
    if action.choices is not None and result not in action.choices:
        raise _WrongType
    return result


def _converted(value: Any, action: argparse.Action, hint: Any) -> Any:
    """A YAML value as the field's flag would give it: scalars through the flag's type
    (``2.7`` is no integer, ``.nan`` no seed), a list for a list field (one value becomes a
    list of one; a string stays, for the fields that split ``a,b``), null, a list or a
    mapping only where the field's type holds one."""
    many = action.nargs in ("+", "*")
    if value is None:
        if _admits(hint, (type(None),)):
            return None
        raise _WrongType
    if isinstance(value, dict):
        if _admits(hint, (dict,)):
            return value
        raise _WrongType
    if isinstance(value, list):
        if many:
            return [_scalar(v, action, hint) for v in value]
        if _admits(hint, (list, tuple)):  # a pair type (``size: [128, 96]``) converts it itself
            return value
        raise _WrongType
    if many and isinstance(value, str) and getattr(action.type, "__name__", "str") in ("str", "Path"):
        return value
    return [_scalar(value, action, hint)] if many else _scalar(value, action, hint)


def _expected(action: argparse.Action, hint: Any) -> str:
    """What a field's flag takes, in words."""
    # by name: TRL wraps the converter of a `T | None` field, keeping T's name
    names = {"int": "an integer", "float": "a number", "str": "a string", "Path": "a path", "string_to_bool": "true or false"}
    if action.choices is not None:
        one = f"one of {shown(', '.join(str(c) for c in action.choices), 200, quote=False)}"
    else:
        one = names.get(getattr(action.type, "__name__", "str"), f"a value for {action.option_strings[0]}")
    return f"{one}, or a list of them" if action.nargs in ("+", "*") else one


def _config_value_problems(parser, config: dict[str, Any], keys: list[str], path: Path | None, lines: dict) -> list[str]:
    """Convert the file's values of ``keys`` in ``config`` as their flags would be; one
    problem per value no flag would give (file, line, key, value, what the flag takes). A
    ``passthrough`` field also takes a mapping (``field: value`` arguments to hand on), as is."""
    hints = _type_hints(parser)
    actions = {a.dest: a for a in reversed(parser_actions(parser)) if a.option_strings and a.nargs != 0}
    passthrough = {f.name for dtype in parser.dataclass_types for f in fields(dtype) if f.metadata.get("passthrough")}
    problems = []
    for key in keys:
        action, value = actions.get(key), config[key]
        if action is None or (key in passthrough and isinstance(value, dict)):
            continue
        try:
            config[key] = _converted(value, action, hints.get(key))
        except _WrongType:
            where = f"{path}, line {lines[key]}" if key in lines else str(path)
            quoting = (
                f'; YAML reads an unquoted yes, no, on, off, true or false as a boolean: quote the word ({key}: "'
                f'{"yes" if value else "no"}")'
                if isinstance(value, bool) and not _admits(hints.get(key), (bool,))
                else ""
            )
            problems.append(
                f"{where}: {key}: {shown(value)} is not {_expected(action, hints.get(key))}, as --{key} takes{quoting}"
            )
    return problems


def _number_problems(name: str, value: Any, bounds: Range, where: str = "") -> list[str]:
    """The first number in ``value`` (a number, a list of them, a mapping's values: finite
    only) outside ``bounds``, as a problem naming the field and what to give."""
    if isinstance(value, dict):
        value, bounds = list(value.values()), Range(allow_inf=bounds.allow_inf)
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        fault = bounds.fault(v)
        if fault:
            return [f"{name}: {shown(v)} {fault}; give {bounds.fix or bounds.wanted(isinstance(v, int))}{where}"]
    return []


def _namespace_problems(parser, namespace: argparse.Namespace, argv: list[str]) -> list[str]:
    """Every field of ``namespace`` with a number outside its range, naming where it was set."""
    flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    problems = []
    for dtype in parser.dataclass_types:
        for f in fields(dtype):
            if not f.init or not hasattr(namespace, f.name):
                continue
            bounds = f.metadata.get("range") or parser.ranges.get(f.name) or Range()
            spelled = sorted({f"--{f.name}", f"--{f.name.replace('_', '-')}"} & flags)
            if spelled:
                where = f" (given as {spelled[0]})"
            elif f.name in parser.config_keys:
                line = parser.config_lines.get(f.name)
                where = f" ({parser.config_file}{f', line {line}' if line else ''})"
            else:
                where = ""
            problems += _number_problems(f.name, getattr(namespace, f.name), bounds, where)
    return problems


def range_problems(cfg: Any, ranges: dict[str, Range] | None = None) -> list[str]:
    """The fields of the dataclass ``cfg`` whose numbers are outside their :class:`Range`
    (declared with :func:`arg`, or given by name in ``ranges``): what the parser refuses,
    for a config built in code."""
    out = []
    for f in fields(cfg):
        bounds = f.metadata.get("range") or (ranges or {}).get(f.name) or Range()
        out += _number_problems(f.name, getattr(cfg, f.name), bounds)
    return out


def jsonable(value: Any) -> Any:
    """``asdict``-able values as JSON: paths as strings, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def identity(cfg: Any) -> dict[str, Any]:
    """The fields of ``cfg`` marked ``identity=True``, as JSON values."""
    return {f.name: jsonable(getattr(cfg, f.name)) for f in fields(cfg) if f.metadata.get("identity")}
