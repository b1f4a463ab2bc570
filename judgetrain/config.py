"""One typed config per command, parsed the way ``judgetrain train`` parses a recipe.

Every command declares its settings once, as a dataclass (shared parents:
:class:`BuildArgs` for ``build *``, :class:`EvalArgs` for ``eval *``), and exposes
``make_parser()`` (a TRL :class:`~trl.TrlParser` over its dataclasses, from
:func:`make_parser`) and ``main(cfg)``. :func:`parse` then does what every command
needs: ``--config FILE.yaml`` sets defaults, flags win, unknown keys and flags fail
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
import difflib
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError

__all__ = ["BuildArgs", "ConfigError", "EvalArgs", "OutputArgs", "WorkBuildArgs", "arg", "comma_list", "identity", "jsonable", "make_parser", "parse", "parse_batch_size",
           "read_config_file"]


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Examples in the epilog kept as written, defaults shown after each help text."""


# field metadata that judgetrain reads and argparse must not see
_OWN_METADATA = ("identity", "positional", "passthrough")


def make_parser(types, prog: str, description: str, epilog: str = "", usage: str | None = None):
    """A :class:`trl.TrlParser` over ``types`` (a dataclass or a tuple of them)."""
    import copy
    from types import MappingProxyType

    from trl import TrlParser

    class Parser(TrlParser):
        @staticmethod
        def _parse_dataclass_field(parser, field):
            # HfArgumentParser passes every metadata key to add_argument
            field = copy.copy(field)
            field.metadata = MappingProxyType({k: v for k, v in field.metadata.items() if k not in _OWN_METADATA})
            TrlParser._parse_dataclass_field(parser, field)

    return Parser(types if isinstance(types, tuple) else (types,), prog=prog, description=description, epilog=epilog,
                  usage=usage, formatter_class=_HelpFormatter, allow_abbrev=False)  # a prefix must not pass for a field


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


def _closest(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def split_config_flag(argv: list[str]) -> tuple[list[str], Path | None]:
    """``argv`` without ``--config FILE`` / ``--config=FILE``, and that file."""
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--config":
            if i + 1 >= len(argv):
                raise ConfigError(["--config: give a YAML file"])
            path = argv[i + 1]
            del argv[i:i + 2]
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


def parse(parser, argv: list[str], *, defaults: dict[str, Any] | None = None, help_hint: str = "--help") -> tuple:
    """The dataclasses of ``parser`` from ``argv``: ``--config FILE.yaml`` values become
    defaults, flags win, ``defaults`` (set by code, e.g. a launcher) sit under both.
    Leading bare words fill the fields marked ``positional=True``. Unknown config keys and
    unknown flags raise :class:`ConfigError` naming each one, unless a list field is
    marked ``passthrough=True``: then unknown arguments are appended to it."""
    argv, path = split_config_flag(argv)
    argv = _positional_to_flags(parser, argv)
    config = {**(defaults or {}), **(read_config_file(path) if path else {})}
    dests = [a.dest for a in parser._actions if a.dest != "help"]
    unknown = [k for k in config if k not in dests]
    if unknown:
        raise ConfigError([f"{path}: unknown key {k!r}{_closest(k, dests)} (fields: {help_hint})" for k in unknown])
    parser.set_defaults_with_config(**config)
    flags = [o for a in parser._actions for o in a.option_strings]
    cfgs = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    *cfgs, rest = cfgs
    sink = [(c, f.name) for c in cfgs for f in fields(c) if f.metadata.get("passthrough")]
    if rest and sink:  # a command that hands unknown arguments on (recipe overrides for every trial)
        cfg, name = sink[0]
        setattr(cfg, name, [*getattr(cfg, name), *rest])
        rest = []
    if rest:
        words = [r for r in rest if r.startswith("-")] or rest
        raise ConfigError([f"unknown argument {w!r}{_closest(w.split('=', 1)[0], flags)} ({help_hint} lists every field)"
                           for w in words])
    return tuple(cfgs)


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


@dataclass(kw_only=True)
class OutputArgs:
    """What every command that writes a folder takes."""

    out: Path = arg(help="output folder (written atomically; rerunning the same command resumes)")
    progress: bool = arg(True, "progress bars (--no-progress to silence them)")


@dataclass(kw_only=True)
class BuildArgs(OutputArgs):
    """What every ``judgetrain build *`` command takes."""

    seed: int = arg(42, "seed of every random choice the builder makes (hash-based: same seed, same bytes)")
    strict: bool = arg(False, "fail on the first bad input instead of skipping and counting it in build.json")


@dataclass(kw_only=True)
class WorkBuildArgs(BuildArgs):
    """Builders that keep intermediate work in ``OUT.work/`` until the build succeeds."""

    keep_work: bool = arg(False, "keep OUT.work/ (synthetic sources, decoded frames, arrow cache) after a successful build")


@dataclass(kw_only=True)
class EvalArgs:
    """What every model evaluation (``judgetrain eval timecatch|judge|phasefusion``) takes."""

    model: str = arg(help="model folder or hub id (base or merged)", identity=True)
    out: Path = arg(help="run folder; rerunning the same command resumes it")
    adapter: str | None = arg(None, "PEFT adapter folder to load onto --model", identity=True)
    dtype: str | None = arg(None, "float32, bfloat16, float16 or auto (default: float32 on CPU, the checkpoint's on GPU)",
                            identity=True)
    batch_size: str = arg("auto", "items per forward pass, or 'auto'")
    limit: int | None = arg(None, "evaluate only the first N selected items (a larger N later extends the run)")
    overwrite: bool = arg(False, "start the run folder afresh when it holds a run of another configuration")
    progress: bool = arg(True, "progress bars (--no-progress to silence them)")

    def common_problems(self) -> list[str]:
        """Normalise the shared fields and return their problems (each evaluation's
        ``__post_init__`` adds its own and raises them together)."""
        self.model, self.out = str(self.model), Path(self.out)
        self.adapter = str(self.adapter) if self.adapter else None
        self.batch_size = str(self.batch_size)
        problems = []
        if self.limit is not None and self.limit < 1:
            problems.append(f"limit: {self.limit}; must be at least 1 (leave it out to evaluate every selected item)")
        try:
            parse_batch_size(self.batch_size)
        except ValueError as e:
            problems.append(f"batch_size: {e}")
        return problems


def parse_batch_size(text: str) -> int | str:
    """``--batch-size``: a positive integer or ``"auto"``."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"--batch-size must be a positive integer or 'auto', got {text!r}")
    return value
