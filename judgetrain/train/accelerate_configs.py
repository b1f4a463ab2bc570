"""The accelerate side of a launch: the shipped configs and the `accelerate launch` options.

:class:`LaunchArgs` are the options `judgetrain train` (and every sweep trial) hands to
`accelerate launch`; a shipped config is named by its file in `deepspeed_configs/`
(`zero3`, `ddp`, …) or given as a path. Several machines are accelerate's own
multi-node launch (`--num_machines`, `--machine_rank`, `--main_process_ip`,
`--main_process_port`); the process count is all machines' together. Used by
:mod:`judgetrain.train.launch` and :mod:`judgetrain.sweep`, so it sits below both.
Docs: "reference/recipes.md", "how-to/cluster.md".
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from judgetrain.config import ConfigError, arg
from judgetrain.errors import did_you_mean

__all__ = [
    "CPU_PROCESSES",
    "NAMES",
    "LaunchArgs",
    "accelerate_args",
    "config_dir",
    "find_accelerate_config",
    "launch_problems",
    "machine_processes",
    "machines",
    "resolve_accelerate_config",
    "world_size",
]

NAMES = ("single_gpu", "ddp", "zero2", "zero3", "zero3_offload", "zero3_multinode")
# processes a shipped multi-process config starts on a machine without CUDA (a CPU run of the distributed path)
CPU_PROCESSES = 2


@dataclass
class LaunchArgs:
    """`judgetrain train`'s own options; every other argument is a recipe override."""

    recipe: Path | None = arg(
        None, "recipe YAML (recipes/…); also given as the first word: `judgetrain train RECIPE`", aliases=["--config"]
    )
    accelerate_config: str | None = arg(None, f"a shipped config ({', '.join(NAMES)}) or an accelerate YAML file")
    num_processes: int | None = arg(
        None,
        "processes (GPUs) to launch, on all machines together (None: a shipped "
        "config's, one per GPU of each machine; else the accelerate config's)",
        minimum=1,
    )
    num_machines: int | None = arg(None, "machines taking part, multi-node (None: the accelerate config's)", minimum=1)
    machine_rank: int | None = arg(None, "rank of this machine, 0 for the main one (None: the accelerate config's)", minimum=0)
    main_process_ip: str | None = arg(None, "address of the machine of rank 0 (multi-node)")
    main_process_port: int | None = arg(None, "port on the machine of rank 0 (multi-node)", minimum=1, maximum=65535)


# LaunchArgs fields that are not `accelerate launch` options of the same name
_NOT_ACCELERATE = ("recipe", "accelerate_config")


# --------------------------------------------------------------------------- accelerate configs


def config_dir() -> Path:
    """deepspeed_configs/ of the checkout, or the copy installed with the package."""
    return Path(str(resources.files("judgetrain.deepspeed_configs")))


def find_accelerate_config(name_or_path: str) -> Path:
    """An accelerate config file as given, or one of the shipped ones by name."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    path = config_dir() / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if path.is_file():
        return path
    hint = did_you_mean(name_or_path, NAMES)
    raise ConfigError(
        [
            f"accelerate_config: {name_or_path!r} is neither a file nor a shipped config{hint} "
            f"(shipped: {', '.join(NAMES)}, in {config_dir()})"
        ]
    )


def _kept_resolved(name: str, text: str) -> Path:
    """``text`` (a config with its DeepSpeed path made absolute) as a file named by its content
    in one folder of this user's under the system temp folder: a launch repeated any number of
    times reuses one file instead of leaving a folder behind each time."""
    import hashlib
    import os

    from judgetrain.io import write_text

    folder = Path(tempfile.gettempdir()) / f"judgetrain-accelerate-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise ConfigError([f"accelerate_config: {folder} belongs to another user; remove it, or set TMPDIR to a folder of yours"])
    path = folder / hashlib.sha256(text.encode()).hexdigest()[:16] / name  # the name stays the config's
    path.parent.mkdir(exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        write_text(path, text)
    return path


def resolve_accelerate_config(name_or_path: str) -> Path:
    """A config file as given, or one of the shipped ones by name; its
    ``deepspeed_config_file`` made absolute so the launch works from any folder."""
    import yaml

    from judgetrain.yamlfile import read_yaml

    path = find_accelerate_config(name_or_path)
    config = read_yaml(path) or {}
    ds = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
    if ds and not Path(ds).is_absolute():
        for base in (Path.cwd(), path.parent.parent, path.parent):
            if (base / ds).is_file():
                config["deepspeed_config"]["deepspeed_config_file"] = str((base / ds).resolve())
                break
        else:
            raise ConfigError(
                [f"accelerate_config: {path}: deepspeed_config_file {ds!r} not found next to it or in the current folder"]
            )
        return _kept_resolved(path.name, yaml.safe_dump(config))
    return path


def accelerate_args(launch: Any) -> list[str]:
    """``accelerate launch`` options from anything with :class:`LaunchArgs`' fields (a
    LaunchArgs, a sweep's config): ``accelerate_config`` as ``--config_file``, and each
    other field that is set as the accelerate option of its name."""
    out = []
    if getattr(launch, "accelerate_config", None):
        out += ["--config_file", str(resolve_accelerate_config(launch.accelerate_config))]
    for f in fields(LaunchArgs):
        value = getattr(launch, f.name, None)
        if f.name not in _NOT_ACCELERATE and value is not None:
            out += [f"--{f.name}", str(value)]
    if getattr(launch, "accelerate_config", None) and getattr(launch, "num_processes", None) is None:
        out += ["--num_processes", str(world_size(launch))]  # a shipped config names none: it follows the machines
    if _cpu_data_parallel(launch):
        out.append("--multi_gpu")
    return out


# distributed types under which `accelerate launch` starts num_processes processes itself
_LAUNCHES_PROCESSES = ("MULTI_GPU", "DEEPSPEED", "FSDP", "MULTI_CPU", "XLA", "MEGATRON_LM")


def _cpu_data_parallel(launch: Any) -> bool:
    """True for several processes on a machine without CUDA whose accelerate config (or
    none) names no distributed type: ``accelerate launch --num_processes 2`` would then
    start one process and say nothing (its multi-process launcher is chosen by the config
    or by the GPU count). ``--multi_gpu`` makes it start them through torchrun; each
    process then sets up accelerate's CPU state on gloo (``judgetrain.train.run.setup_cpu_distributed``)."""
    import torch

    if torch.cuda.is_available() or world_size(launch) < 2:
        return False
    return str(_read_config(_config_file(launch)).get("distributed_type", "NO")) not in _LAUNCHES_PROCESSES


def machine_processes() -> int:
    """The processes one machine runs by default: its CUDA GPUs, else :data:`CPU_PROCESSES`
    (at most its CPU cores)."""
    import os

    import torch

    if torch.cuda.is_available():
        return torch.cuda.device_count()
    return max(1, min(CPU_PROCESSES, os.cpu_count() or 1))


def _read_config(path: Path | None) -> dict:
    from judgetrain.yamlfile import read_yaml

    return (read_yaml(path) or {}) if path else {}


def _shipped(path: Path) -> bool:
    return path.resolve().parent == config_dir().resolve()


def _config_file(launch: Any) -> Path | None:
    """The accelerate config the launch reads: the named one, else accelerate's default config file, else None."""
    if getattr(launch, "accelerate_config", None):
        return find_accelerate_config(launch.accelerate_config)
    from judgetrain.compat.accelerate import default_config_file

    default = default_config_file()
    return default if default.is_file() else None


def machines(launch: Any) -> int:
    """The machines the launch runs on: ``num_machines``, else the accelerate config's, else 1."""
    if getattr(launch, "num_machines", None):
        return int(launch.num_machines)
    return int(_read_config(_config_file(launch)).get("num_machines") or 1)


def world_size(launch: Any) -> int:
    """The processes the launch starts, on all machines together: ``num_processes``; else,
    for a shipped multi-process config (which names no ``num_processes``: the command
    says it), :func:`machines` × the machine's (:func:`machine_processes`: its GPUs, or 2
    on CPU); else the accelerate config's (the named one, else accelerate's default
    config file); else 1."""
    if getattr(launch, "num_processes", None):
        return int(launch.num_processes)
    path = _config_file(launch)
    config = _read_config(path)
    if path is not None and _shipped(path) and str(config.get("distributed_type", "NO")) != "NO":
        return machines(launch) * machine_processes()
    return int(config.get("num_processes") or 1)


def launch_problems(launch: Any) -> list[str]:
    """What would make the launch fail once its processes start, found before: on several
    machines, a process count that does not split evenly over them (``accelerate launch``
    starts ``num_processes // num_machines`` on each, silently); on a GPU machine, more
    processes on it than it has GPUs."""
    import torch

    n, m = world_size(launch), machines(launch)
    if m > 1 and n % m:
        return [
            f"num_processes: {n} processes do not split evenly over {m} machines; --num_processes counts the "
            f"processes of all machines together (e.g. --num_processes {m * machine_processes()} for "
            f"{machine_processes()} a machine)"
        ]
    if not torch.cuda.is_available():
        return []
    path = find_accelerate_config(launch.accelerate_config) if getattr(launch, "accelerate_config", None) else None
    here, gpus = n // m, torch.cuda.device_count()
    if not _read_config(path).get("use_cpu") and here > gpus:
        where = "one machine" if m == 1 else f"each of {m} machines"
        return [
            f"num_processes: {here} processes on {where}, but this one has {gpus} GPU(s); pass "
            f"`--num_processes {gpus * m}` (or fewer), or launch on more machines (--num_machines, --machine_rank, "
            "--main_process_ip)"
        ]
    return []
