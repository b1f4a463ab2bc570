"""Train a judge from a recipe: `accelerate launch -m judgetrain.train` with a named config.

`judgetrain train RECIPE [--accelerate-config NAME|FILE] [--num-processes N] [overrides…]`
wraps `accelerate launch --config_file deepspeed_configs/NAME.yaml -m judgetrain.train
--config RECIPE overrides…`, as `trl sft --accelerate_config` wraps TRL's script.
"""

from __future__ import annotations

import argparse
import tempfile
from importlib import resources
from pathlib import Path

NAMES = ("single_gpu", "ddp", "zero2", "zero3", "zero3_offload", "zero3_multinode")


def config_dir() -> Path:
    """deepspeed_configs/ of the checkout, or the copy installed with the package."""
    return Path(str(resources.files("judgetrain.deepspeed_configs")))


def resolve_accelerate_config(name_or_path: str) -> Path:
    """A config file as given, or one of the shipped ones by name; its
    ``deepspeed_config_file`` made absolute so the launch works from any folder."""
    import yaml

    path = Path(name_or_path)
    if not path.is_file():
        path = config_dir() / f"{name_or_path.removesuffix('.yaml')}.yaml"
        if not path.is_file():
            import difflib

            close = difflib.get_close_matches(name_or_path, NAMES, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise SystemExit(f"error: --accelerate-config {name_or_path!r} is neither a file nor a shipped config.{hint} "
                             f"Shipped: {', '.join(NAMES)} (in {config_dir()})")
    config = yaml.safe_load(path.read_text()) or {}
    ds = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
    if ds and not Path(ds).is_absolute():
        for base in (Path.cwd(), path.parent.parent, path.parent):
            if (base / ds).is_file():
                config["deepspeed_config"]["deepspeed_config_file"] = str((base / ds).resolve())
                break
        else:
            raise SystemExit(f"error: {path}: deepspeed_config_file {ds!r} not found next to it or in the current folder")
        tmp = Path(tempfile.mkdtemp(prefix="judgetrain-accelerate-")) / path.name
        tmp.write_text(yaml.safe_dump(config))
        return tmp
    return path


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.strip().splitlines()[0]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "examples:\n"
        "  judgetrain train recipes/tiny/qwen3vl-timecatch-lora.yaml\n"
        "  judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml --accelerate-config zero3 --num-processes 2 --learning_rate 5e-5\n"
        f"\nshipped accelerate configs: {', '.join(NAMES)}; any other argument is a recipe override (--field value).\n"
    )
    p.add_argument("recipe", type=Path, help="recipe YAML (recipes/…)")
    p.add_argument("--accelerate-config", default=None, help="a shipped config name or an accelerate YAML file")
    p.add_argument("--num-processes", type=int, default=None, help="processes (GPUs) to launch; default: the config's")


def accelerate_args(accelerate_config: str | None, num_processes: int | None) -> list[str]:
    """``accelerate launch`` options for a shipped config name or file and a process count."""
    launch_args = []
    if accelerate_config:
        launch_args += ["--config_file", str(resolve_accelerate_config(accelerate_config))]
    if num_processes:
        launch_args += ["--num_processes", str(num_processes)]
    return launch_args


def main(args: argparse.Namespace, overrides: list[str] | None = None) -> int:
    from accelerate.commands.launch import launch_command, launch_command_parser

    if not args.recipe.is_file():
        raise SystemExit(f"error: recipe {args.recipe} not found")
    launch_args = accelerate_args(args.accelerate_config, args.num_processes)
    script = ["--config", str(args.recipe), *(overrides or [])]
    launch = launch_command_parser().parse_args([*launch_args, "-m", "judgetrain.train", *script])
    print("launching: accelerate launch " + " ".join([*launch_args, "-m", "judgetrain.train", *script]), flush=True)
    launch_command(launch)
    return 0
