"""Train a judge from a recipe: `accelerate launch -m judgetrain.train` with a named config.

`judgetrain train RECIPE [--accelerate_config NAME|FILE] [--num_processes N] [overrides…]`
(or `--config RECIPE`, as TRL spells it) wraps `accelerate launch --config_file
deepspeed_configs/NAME.yaml -m judgetrain.train --config RECIPE overrides…`, as
`trl sft --accelerate_config` wraps TRL's script. The launcher's own options are
:class:`LaunchArgs`; every other argument is a recipe override. The recipe and the
overrides are parsed and checked here first, so a bad field, a missing dataset or
`bf16: true` without a bf16 GPU fails with one message before anything launches.

The accelerate side (:class:`~judgetrain.train.accelerate_configs.LaunchArgs`, the shipped
configs, the `accelerate launch` options) is :mod:`judgetrain.train.accelerate_configs`, which
`judgetrain sweep` shares.

`judgetrain train RECIPE --slurm --nodes N --gpus_per_node G [--submit]` checks the same way,
then writes the sbatch script of the same launch on N nodes into the run folder
(``OUTPUT_DIR/slurm/job.sbatch``, :mod:`judgetrain.cluster`) and with ``--submit`` submits it;
the job resumes from its newest checkpoint when SLURM requeues it.
Docs: "reference/commands/train.md", "reference/recipes.md", "how-to/cluster.md".
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path

from judgetrain import config
from judgetrain.cluster import SlurmArgs
from judgetrain.config import arg

from .accelerate_configs import NAMES, LaunchArgs, accelerate_args, launch_problems, world_size
from .args import ConfigError
from .recipe_fields import recipe_help

MODULE = "judgetrain.train"
# how long a launcher that got SIGTERM waits for its training processes to save a checkpoint and exit
SHUTDOWN_SECONDS = 300


# --------------------------------------------------------------------------- parsing

USAGE = "judgetrain train (RECIPE | --config RECIPE) [launch options] [--field value …]"
EPILOG = (
    "examples:\n"
    "  judgetrain quickstart        # first: the tiny models and the TimeCatch set the tiny recipes name\n"
    "  judgetrain train --config recipes/tiny/qwen3vl-timecatch-lora.yaml\n"
    "  judgetrain train recipes/tiny/llava-ov-timecatch-lora.yaml --accelerate_config ddp --num_processes 2 --max_steps 2\n"
    "  judgetrain build prism --out data/prism-twins --synthetic 8 --layouts P0 --twins   # then GRPO (method: grpo):\n"
    "  judgetrain train recipes/tiny/qwen3vl-prism-grpo.yaml\n"
    "  judgetrain build prism --out data/prism-pointwise --synthetic 8 --layouts P0 --modes pointwise   # then a reward\n"
    "  judgetrain train recipes/tiny/qwen3vl-prism-reward.yaml   # model (method: reward): a number per sequence\n"
    "\na real model: each recipe's first comment line is its launch command (recipes/qwen3vl-2b/timecatch-lora.yaml, …);\n"
    "many machines: --num_machines N --machine_rank R --main_process_ip IP --main_process_port PORT (docs: how-to/cluster.md).\n"
    "a SLURM job: --slurm --nodes 2 --gpus_per_node 8 [--partition P --time 24:00:00 --account A] --submit\n"
    "  (docs: how-to/cluster.md).\n"
    f"\nshipped accelerate configs: {', '.join(NAMES)}.\n"
    "Any other argument is a recipe override (--field value); every recipe field is listed below.\n"
)


@dataclass
class TrainCommand(LaunchArgs, SlurmArgs):
    """``judgetrain train``: the launch options, the SLURM job's (with ``--slurm``) and, in
    ``overrides``, every other argument (recipe overrides, and the recipe itself when it is the
    first word)."""

    slurm: bool = arg(
        False, "write an sbatch script of this launch on --nodes SLURM nodes into OUTPUT_DIR/slurm/ instead of launching here"
    )
    submit: bool = arg(False, "with --slurm: submit the script (sbatch) too")
    overrides: list[str] = arg([], argparse.SUPPRESS, passthrough=True)


def make_parser():
    """``judgetrain train``'s parser: :class:`TrainCommand`; ``--help`` lists every recipe field too."""
    parser = config.make_parser(
        TrainCommand,
        prog="judgetrain train",
        description=__doc__.strip().splitlines()[0],
        epilog=EPILOG,
        usage=USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    launcher_help = parser.format_help
    parser.format_help = lambda: launcher_help() + "\n" + recipe_help()  # TRL's fields read from source: no torch
    return parser


def launch_config(cfg: TrainCommand) -> tuple[LaunchArgs, list[str]]:
    """The launch options and the recipe overrides; a first word that is not an option is the
    recipe (``judgetrain train RECIPE …``)."""
    overrides = list(cfg.overrides)
    launch = LaunchArgs(**{f.name: getattr(cfg, f.name) for f in fields(LaunchArgs)})
    if launch.recipe is not None:
        launch.recipe = Path(launch.recipe)
    if overrides and not overrides[0].startswith("-"):
        word = Path(overrides.pop(0))
        if launch.recipe is not None and launch.recipe != word:
            raise ConfigError([f"recipe: given twice ({word} and --config {launch.recipe}); give one"])
        launch.recipe = word
    return launch, overrides


def parse_command(argv: list[str]) -> tuple[LaunchArgs, list[str]]:
    """``judgetrain train ARGV`` as the CLI parses it: the launch options and the overrides."""
    (cfg,) = config.parse(make_parser(), list(argv), help_hint="`judgetrain train --help`")
    return launch_config(cfg)


def command(launch: LaunchArgs, overrides: list[str]) -> list[str]:
    """The ``accelerate launch`` arguments: options, then the trainer and its recipe."""
    return [*accelerate_args(launch), "-m", MODULE, "--config", str(launch.recipe), *overrides]


# --------------------------------------------------------------------------- checks before launching


@contextlib.contextmanager
def _environment_kept():
    """Parsing a recipe sets environment variables (its ``env:``, TrainingArguments'
    ACCELERATE_* ones); the launch must start from the caller's environment."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def check(launch: LaunchArgs, overrides: list[str]) -> tuple:
    """Parse the recipe with the overrides as the trainer will, with its cross-field
    checks at the launch's world size (:func:`~judgetrain.train.accelerate_configs.world_size`:
    a shipped config's follows the machine), the launch itself, every dataset folder and the
    output folder looked at (:func:`~judgetrain.train.run_folder.output_dir_problems`); one
    :class:`~judgetrain.config.ConfigError` listing every problem. Returns the parsed recipe
    (model, data and training arguments)."""
    from judgetrain import records

    from .checks import check_config
    from .parser import parse
    from .run_folder import output_dir_problems, probe_output_dir

    if launch.recipe is None:
        raise ConfigError(
            [
                "recipe: give a recipe YAML, `judgetrain train RECIPE` or `judgetrain train --config RECIPE` "
                "(recipes/ has one per model and task)"
            ]
        )
    if not launch.recipe.is_file():
        raise ConfigError([f"recipe: {launch.recipe}: no such file"])
    n = world_size(launch)
    stderr = io.StringIO()
    with _environment_kept():
        try:
            with contextlib.redirect_stderr(stderr):
                margs, dargs, targs = parse(["--config", str(launch.recipe), *overrides])
        except SystemExit:  # argparse: a value of the wrong type; its message is the last line
            lines = [line for line in stderr.getvalue().splitlines() if line.strip()] or ["could not parse the command line"]
            raise ConfigError([f"command line: {lines[-1].split('error: ', 1)[-1]}"]) from None
        except ValueError as e:
            if isinstance(e, ConfigError):
                raise
            raise ConfigError([f"{launch.recipe}: {e}"]) from None
    problems = launch_problems(launch) + check_config(margs, dargs, targs, world_size=n)
    # (a string is one of check_config's problems; a repeated folder too, named once)
    for path in dict.fromkeys(dargs.datasets) if isinstance(dargs.datasets, list) else []:
        try:
            records.load(path)  # memory-mapped: cheap, and a truncated .arrow file is named here, before any launch
        except (records.IncompleteDatasetError, records.DamagedDatasetError) as e:
            problems.append(f"datasets: {e}")
    if not problems:  # another run's checkpoints in output_dir: refused here, not after the processes have started
        problems = output_dir_problems(margs, dargs, targs, world_size=n)
    if problems:
        raise ConfigError(problems)
    probe_output_dir(targs.output_dir, dargs.wait)  # another process writing it: refused (or awaited) here too
    return margs, dargs, targs


# --------------------------------------------------------------------------- launch


def _failed(returncode: int) -> int:
    """A one-line note for a training process that failed (its own error is above), or that
    stopped on a signal after saving a checkpoint (:mod:`judgetrain.train.stop_signal`)."""
    from .stop_signal import STOP_SIGNALS, stop_exit_code

    stopped = {stop_exit_code(s): s.name for s in STOP_SIGNALS}
    if returncode in stopped:
        print(
            f"the training process stopped on {stopped[returncode]} after saving a checkpoint (above); the same command "
            "with --resume_from_checkpoint auto goes on from it",
            file=sys.stderr,
        )
        return returncode
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        print(
            f"error: the training process was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else ""),
            file=sys.stderr,
        )
        return 128 - returncode
    print(f"error: the training process exited with code {returncode}; its output above says why", file=sys.stderr)
    return returncode or 1


# --------------------------------------------------------------------------- a SLURM job


def slurm_args(cfg: TrainCommand) -> SlurmArgs:
    return SlurmArgs(**{f.name: getattr(cfg, f.name) for f in fields(SlurmArgs)})


def slurm_job(launch: LaunchArgs, overrides: list[str], slurm: SlurmArgs) -> Path:
    """Check the launch as on ``slurm.nodes`` machines, then write its sbatch script into the run
    folder: ``accelerate launch`` on every node, ``--resume_from_checkpoint auto`` (unless
    given), so that a requeued job resumes. The job reads only copies made now (the recipe, the
    accelerate config and its DeepSpeed JSON, in ``RUN/slurm/``). The script's path."""
    from judgetrain.cluster import keep_accelerate_config, keep_recipe, processes, sbatch_script, write_script

    from .accelerate_configs import accelerate_args

    given = [f"--{n}" for n in ("num_machines", "machine_rank", "main_process_ip") if getattr(launch, n) is not None]
    if given:
        raise ConfigError(
            [
                f"{', '.join(given)}: SLURM sets them on every node ($SLURM_NNODES, $SLURM_NODEID, node 0's "
                "address); leave them out with --slurm (--nodes N sets the machines)"
            ]
        )
    launch = replace(launch, num_processes=launch.num_processes or processes(slurm))
    targs = check(replace(launch, num_machines=slurm.nodes), overrides)[2]
    run_dir = Path(targs.output_dir).resolve()
    options = keep_accelerate_config(accelerate_args(replace(launch, main_process_port=None)), run_dir)
    assert launch.recipe is not None, "check() refuses a launch without a recipe"
    module_args = ["--config", str(keep_recipe(launch.recipe, run_dir)), *overrides]
    if not any(a.split("=", 1)[0] == "--resume_from_checkpoint" for a in overrides):
        module_args += ["--resume_from_checkpoint", "auto"]
    text = sbatch_script(
        slurm,
        job_name=slurm.job_name or run_dir.name,
        run_dir=run_dir,
        launch_options=options,
        module=MODULE,
        module_args=module_args,
        port=launch.main_process_port,
    )
    return write_script(run_dir, text)


def main(cfg: TrainCommand) -> int:
    from judgetrain.cluster import check_slurm, submit_script

    launch, overrides = launch_config(cfg)
    check_slurm(slurm_args(cfg), cfg.slurm)
    if cfg.submit and not cfg.slurm:
        raise ConfigError(["submit: submits a SLURM job; add --slurm"])
    if cfg.slurm:
        script = slurm_job(launch, overrides, slurm_args(cfg))
        submit_script(script, cfg.submit, cfg.job_name or script.parent.parent.name)
        return 0
    check(launch, overrides)
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from judgetrain.compat.accelerate import launch as accelerate_launch

    argv = command(launch, overrides)
    # several processes: torchrun hands a SIGTERM on to them and waits this long for their checkpoint (default 30 s)
    os.environ.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(SHUTDOWN_SECONDS))
    print("launching: accelerate launch " + shlex.join(argv), flush=True)
    try:
        accelerate_launch(argv)
    except subprocess.CalledProcessError as e:
        return _failed(e.returncode)
    except ChildFailedError as e:  # several processes (torchrun): the first one that failed
        return _failed(e.get_first_failure()[1].exitcode)
    return 0
