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

A field whose value changes results is marked with ``identity=True`` in its
metadata (:func:`arg`); :func:`identity` restricts ``asdict(cfg)`` to those fields,
which is what a run folder must agree on before it resumes. See the README's
"Configuration files" section.
README: "Configuration files".
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError, did_you_mean

__all__ = [
    "ConfigError",
    "arg",
    "comma_list",
    "identity",
    "jsonable",
    "make_parser",
    "one_of",
    "parse",
    "read_config_file",
    "split_config_flag",
]


class ConfigError(UserError, ValueError):
    """Every problem with a command's configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str], what: str = "configuration"):
        self.problems = problems
        super().__init__(f"invalid {what}:\n" + "\n".join(f"  - {p}" for p in problems))


def arg(default: Any = dataclasses.MISSING, help: str = "", *, identity: bool = False, **metadata: Any):
    """A dataclass field with its ``--help`` text; ``identity=True`` marks a field whose
    value changes a run's results. A list default is copied per instance."""
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
_OWN_METADATA = ("identity", "positional", "passthrough")


def make_parser(
    types,
    prog: str,
    description: str = "",
    epilog: str = "",
    usage: str | None = None,
    *,
    formatter_class: type[argparse.HelpFormatter] = _HelpFormatter,
    **kwargs: Any,
):
    """A :class:`trl.TrlParser` over ``types`` (a dataclass or a tuple of them), with
    judgetrain's field metadata (:func:`arg`) kept from argparse and no abbreviations: a
    prefix of a flag is refused, not taken for it. ``kwargs`` go to the parser
    (``add_help=False`` for a listing inside another command's help)."""
    from trl import TrlParser

    def argparse_keys(kwargs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in kwargs.items() if k not in _OWN_METADATA}

    class Parser(TrlParser):
        # HfArgumentParser hands every metadata key of a field to add_argument (a dataclass with a
        # heading: its group's add_argument), and argparse refuses the keys judgetrain reads itself
        def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
            return super().add_argument(*args, **argparse_keys(kwargs))

        def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
            group = super().add_argument_group(*args, **kwargs)
            add = group.add_argument
            group.add_argument = lambda *a, **k: add(*a, **argparse_keys(k))  # type: ignore[method-assign]
            return group

    return Parser(
        types if isinstance(types, tuple) else (types,),
        prog=prog,
        description=description,
        epilog=epilog,
        usage=usage,
        formatter_class=formatter_class,
        allow_abbrev=False,
        **kwargs,
    )


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """A ``--config`` YAML mapping (``yaml.safe_load``); its ``env:`` mapping is applied to
    ``os.environ`` and removed, as TRL does."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError([f"--config {path}: no such file"])
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError([f"{path}: not valid YAML ({e})"]) from None
    if not isinstance(config, dict):
        raise ConfigError([f"{path}: a config file is a YAML mapping of field: value"])
    env = config.pop("env", None) or {}
    if not isinstance(env, dict):
        raise ConfigError([f"{path}: env: give a mapping of variable: value"])
    for key, value in env.items():
        os.environ[str(key)] = str(value)
    return config


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
    own = {o for a in parser._actions for o in a.option_strings}
    # a command whose own field is spelled --config (`judgetrain train --config RECIPE`) reads no config file
    argv, path = (list(argv), None) if "--config" in own else split_config_flag(argv)
    argv = _positional_to_flags(parser, argv)
    config = {**(defaults or {}), **(read_config_file(path) if path else {})}
    if prepare is not None:
        prepare(argv, config)
    dests = [a.dest for a in parser._actions if a.dest != "help"]
    unknown = [k for k in config if k not in dests]
    if unknown:
        raise ConfigError([f"{path}: unknown key {k!r}{did_you_mean(k, dests)} (fields: {help_hint})" for k in unknown])
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
    flags = [o for a in parser._actions for o in a.option_strings]
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
