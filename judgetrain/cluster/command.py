"""Run an evaluation as a SLURM job: `judgetrain slurm eval NAME [SLURM options] [its options]`.

The evaluation's own options are checked by its own parser first (a wrong ``--model`` or a
missing ``--out`` fails here, not in the queue); then the sbatch script of ``accelerate
launch -m judgetrain.eval.NAME …`` on ``--nodes`` nodes, one process per GPU, is kept in the
run folder (``OUT/slurm/job.sbatch``, :mod:`judgetrain.cluster.slurm`) and, with
``--submit``, submitted. Every process takes its share of the items; a requeued job resumes
from the predictions already written, as rerunning the command does.
Docs: "reference/commands/slurm.md", "how-to/cluster.md".
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, fields
from pathlib import Path

from judgetrain.config import ConfigError, arg

from .jobs import submit_script
from .slurm import SlurmArgs, check_slurm, keep_recipe, processes, sbatch_script, write_script

__all__ = ["EVALUATIONS", "SlurmEvalCommand", "eval_job", "main", "make_parser"]

# the evaluations that run data-parallel under `accelerate launch`: name -> their package (python -m PACKAGE)
EVALUATIONS = {
    "timecatch": "judgetrain.eval.timecatch",
    "judge": "judgetrain.eval.judge",
    "phasefusion": "judgetrain.eval.phasefusion",
}
USAGE = "judgetrain slurm eval (timecatch|judge|phasefusion) [--nodes N --gpus_per_node G …] [--submit] [evaluation options]"


@dataclass
class SlurmEvalCommand(SlurmArgs):
    """``judgetrain slurm``: the job's resources, ``--submit``, and the evaluation's words and options."""

    submit: bool = arg(False, "submit the script (sbatch) too; else it is only written")
    eval_config: str | None = arg(None, "the evaluation's --config FILE.yaml (handed on to it)", aliases=["--config"])
    words: list[str] = arg([], argparse.SUPPRESS, passthrough=True)


def make_parser():
    from judgetrain import config

    epilog = (
        "examples:\n"
        "  judgetrain slurm eval phasefusion --nodes 2 --gpus_per_node 8 --time 4:00:00 \\\n"
        "      --model runs/merged --manifest videomme.jsonl --out results/pf   # writes results/pf/slurm/job.sbatch\n"
        "\n--submit submits it too; every other option is the evaluation's (`judgetrain eval NAME --help`).\n"
    )
    return config.make_parser(
        SlurmEvalCommand, prog="judgetrain slurm", description=__doc__.strip().splitlines()[0], usage=USAGE, epilog=epilog
    )


def eval_job(cfg: SlurmEvalCommand) -> Path:
    """Check the evaluation's options with its own parser, then write the job's script into its
    ``--out`` folder; the script's path."""
    from judgetrain import config

    words = list(cfg.words)
    if len(words) < 2 or words[0] != "eval" or words[1] not in EVALUATIONS:
        given = " ".join(words[:2]) or "nothing"
        raise ConfigError(
            [
                f"command: give `eval NAME` with NAME one of {', '.join(EVALUATIONS)} (got {given}); "
                "a training run is `judgetrain train RECIPE --slurm`, a sweep `judgetrain sweep RECIPE --slurm`"
            ]
        )
    args = words[2:] + (["--config", cfg.eval_config] if cfg.eval_config else [])
    package = EVALUATIONS[words[1]]
    command = importlib.import_module(f"{package}.command")  # by name, as the CLI's registry loads a command
    (evaluation, *_) = config.parse(command.make_parser(), args, help_hint=f"`judgetrain eval {words[1]} --help`")
    run_dir = Path(evaluation.out).resolve()
    if cfg.eval_config:  # the job reads the copy made now, also when requeued after the file was edited
        args[-1] = str(keep_recipe(Path(cfg.eval_config), run_dir, "eval.yaml"))
    n = processes(cfg)
    options = ["--num_processes", str(n)] + (["--multi_gpu"] if n > 1 else [])
    text = sbatch_script(
        cfg, job_name=cfg.job_name or run_dir.name, run_dir=run_dir, launch_options=options, module=package, module_args=args
    )
    return write_script(run_dir, text)


def main(cfg: SlurmEvalCommand) -> int:
    check_slurm(SlurmArgs(**{f.name: getattr(cfg, f.name) for f in fields(SlurmArgs)}), True)
    script = eval_job(cfg)
    submit_script(script, cfg.submit, cfg.job_name or script.parent.parent.name)
    return 0
