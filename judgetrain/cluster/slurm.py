"""The sbatch script of a SLURM job that runs `accelerate launch` on every node it was given.

:class:`SlurmArgs` are the job's resources (nodes, GPUs per node, partition, time, account),
shared by ``judgetrain train --slurm``, ``judgetrain slurm eval …`` and ``judgetrain sweep
--slurm``. :func:`sbatch_script` renders the script: ``#SBATCH`` lines (one task per node,
``--requeue``, logs appended per job and per rank), node 0's address as the rendezvous
(``scontrol show hostnames``), and one ``srun`` that starts ``accelerate launch`` on every
node with ``--num_machines $SLURM_NNODES --machine_rank $SLURM_NODEID``; SLURM, accelerate
and torch.distributed do the scheduling and the rendezvous. :func:`write_script` keeps the
exact script in the run folder. Submitting and watching jobs is :mod:`judgetrain.cluster.jobs`.
README: "`judgetrain sweep --slurm`, SLURM".
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from judgetrain.config import ConfigError, arg
from judgetrain.io import write_text

__all__ = [
    "LOG_FOLDER",
    "PORT_BASE",
    "SCRIPT",
    "SlurmArgs",
    "accelerate_executable",
    "check_slurm",
    "keep_accelerate_config",
    "processes",
    "rank_log",
    "sbatch_script",
    "slurm_problems",
    "write_script",
]

LOG_FOLDER = "slurm"  # in the run folder: the script and the logs of every job that ran it
SCRIPT = "job.sbatch"
# node 0's port when none is given: one per job id, so that two jobs sharing a node do not collide
PORT_BASE = 20000


@dataclass
class SlurmArgs:
    """A SLURM job's resources; the job runs one task per node, which starts a process per GPU."""

    nodes: int = arg(1, "SLURM: nodes (machines) of the job (#SBATCH --nodes)")
    gpus_per_node: int = arg(
        0,
        "SLURM: GPUs per node, one training or evaluation process each (#SBATCH --gpus-per-node); "
        "0: a job without GPUs, one process per node",
    )
    partition: str | None = arg(None, "SLURM: partition (#SBATCH --partition; None: the cluster's default)")
    time: str | None = arg(None, "SLURM: time limit as sbatch writes it (24:00:00, 2-00:00:00; None: the partition's)")
    account: str | None = arg(None, "SLURM: account to charge (#SBATCH --account)")
    cpus_per_node: int | None = arg(None, "SLURM: CPU cores of the job on each node (#SBATCH --cpus-per-task)")
    job_name: str | None = arg(None, "SLURM: job name (None: the run folder's name)")
    sbatch_options: str | None = arg(None, 'SLURM: further sbatch options, one string ("--qos=high --constraint=h200")')


_DEFAULTS = {f.name: f.default for f in fields(SlurmArgs)}


def slurm_problems(args: SlurmArgs, slurm: bool) -> list[str]:
    """The SLURM options' problems: a size below its minimum, or an option given without ``--slurm``."""
    if not slurm:
        given = [f"--{n}" for n, default in _DEFAULTS.items() if getattr(args, n) != default]
        return [
            f"{', '.join(given)}: SLURM options; add --slurm to write (and --submit to submit) a SLURM job" for _ in given[:1]
        ]
    problems = [
        f"{name}: {getattr(args, name)}; give at least {low}"
        for name, low in (("nodes", 1), ("gpus_per_node", 0))
        if getattr(args, name) < low
    ]
    if args.cpus_per_node is not None and args.cpus_per_node < 1:
        problems.append(f"cpus_per_node: {args.cpus_per_node}; give at least 1 (or leave it out)")
    return problems


def processes(args: SlurmArgs) -> int:
    """The job's processes on all nodes together: one per GPU, or one per node without GPUs."""
    return args.nodes * max(args.gpus_per_node, 1)


def accelerate_executable() -> str:
    """``accelerate`` of this environment (next to its Python), so the job runs the same install."""
    found = Path(sys.executable).with_name("accelerate")
    return str(found) if found.is_file() else "accelerate"


def rank_log(run_dir: Path, job_name: str, job_id: str, rank: int = 0) -> Path:
    """Where node ``rank`` of job ``job_id`` writes its output (srun's ``%x-%j-%t.log``)."""
    return Path(run_dir) / LOG_FOLDER / f"{job_name}-{job_id}-{rank}.log"


def _sbatch_lines(args: SlurmArgs, job_name: str, logs: Path, workdir: Path) -> list[str]:
    options = [f"--job-name={job_name}", f"--nodes={args.nodes}", "--ntasks-per-node=1"]
    if args.gpus_per_node:
        options.append(f"--gpus-per-node={args.gpus_per_node}")
    named = (("cpus-per-task", "cpus_per_node"), ("partition", "partition"), ("time", "time"), ("account", "account"))
    options += [f"--{name}={getattr(args, key)}" for name, key in named if getattr(args, key) is not None]
    # a preempted or failed node puts the job back in the queue; its rerun resumes (appending to the same logs)
    options += ["--requeue", "--open-mode=append", f"--chdir={workdir}", f"--output={logs / '%x-%j.log'}"]
    options += shlex.split(args.sbatch_options or "")
    return [f"#SBATCH {o}" for o in options]


def _quoted_command(lines: list[str]) -> str:
    """``lines`` as one single-quoted word for ``bash -c`` (continued lines), evaluated on each node."""
    text = " \\\n  ".join(lines)
    return f"'{text}'" if "'" not in text else shlex.quote(text)


def sbatch_script(
    args: SlurmArgs,
    *,
    job_name: str,
    run_dir: Path,
    launch_options: list[str],
    module: str,
    module_args: list[str],
    env: dict[str, str] | None = None,
    port: int | None = None,
    workdir: Path | None = None,
    command: list[str] | None = None,
) -> str:
    """The sbatch script of ``accelerate launch LAUNCH_OPTIONS -m MODULE MODULE_ARGS`` on
    ``args.nodes`` nodes: logs in ``run_dir/slurm/`` (``%x-%j.log`` the script's,
    ``%x-%j-%t.log`` node ``%t``'s), ``env`` exported, node 0 at ``port`` (None: ``PORT_BASE`` +
    the job id modulo 10000) as the rendezvous, the job started in ``workdir`` (None: here).
    ``command``, the judgetrain command that wrote it, is kept in a comment. ``launch_options``
    hold no machine rank or address: each node's come from SLURM's environment."""
    logs = Path(run_dir).resolve() / LOG_FOLDER
    workdir = Path(workdir or Path.cwd()).resolve()
    lines = ["#!/bin/bash"]
    if command:
        lines.append(f"# written by: {shlex.join(command)}")
    lines += [f"# submit: sbatch {logs / SCRIPT}", *_sbatch_lines(args, job_name, logs, workdir), "", "set -eu"]
    lines += [f"export {k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    lines += [
        "# node 0 is the rendezvous of accelerate launch (torch.distributed) on every node",
        'MAIN_PROCESS_IP=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"MAIN_PROCESS_PORT={port}" if port else f"MAIN_PROCESS_PORT=$(( {PORT_BASE} + SLURM_JOB_ID % 10000 ))",
        "export MAIN_PROCESS_IP MAIN_PROCESS_PORT",
        'echo "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}) on $SLURM_JOB_NODELIST,'
        ' rendezvous $MAIN_PROCESS_IP:$MAIN_PROCESS_PORT"',
    ]
    launch = [
        f"exec {shlex.quote(accelerate_executable())} launch",
        '--num_machines "$SLURM_NNODES" --machine_rank "$SLURM_NODEID"',
        '--main_process_ip "$MAIN_PROCESS_IP" --main_process_port "$MAIN_PROCESS_PORT"',
    ]
    if launch_options:
        launch.append(shlex.join(launch_options))
    launch.append(shlex.join(["-m", module, *module_args]))
    srun = shlex.join(
        [
            "srun",
            "--ntasks-per-node=1",
            "--kill-on-bad-exit=1",
            "--open-mode=append",
            f"--output={logs / '%x-%j-%t.log'}",
            "bash",
            "-c",
        ]
    )
    lines.append(f"{srun} {_quoted_command(launch)}")
    return "\n".join(lines) + "\n"


def write_script(run_dir: Path, text: str) -> Path:
    """Keep ``text`` as ``run_dir/slurm/job.sbatch`` (atomically, executable); its path."""
    path = Path(run_dir).resolve() / LOG_FOLDER / SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)
    path.chmod(0o755)
    return path


def check_slurm(args: SlurmArgs, slurm: bool) -> None:
    """:func:`slurm_problems` as one :class:`~judgetrain.config.ConfigError`."""
    problems = slurm_problems(args, slurm)
    if problems:
        raise ConfigError(problems)


def keep_accelerate_config(options: list[str], run_dir: Path) -> list[str]:
    """``options`` with the file of ``--config_file`` (perhaps a temporary copy on this machine)
    kept beside the script as ``slurm/accelerate.yaml``, which every node of the job reads."""
    options = list(options)
    if "--config_file" in options:
        i = options.index("--config_file") + 1
        kept = Path(run_dir).resolve() / LOG_FOLDER / "accelerate.yaml"
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_text(kept, Path(options[i]).read_text())
        options[i] = str(kept)
    return options
