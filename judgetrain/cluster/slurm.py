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
    "exit_record",
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
    signal_before_end: int = arg(
        300,
        "SLURM: seconds before the time limit at which the job is signalled (#SBATCH --signal=B:USR1@N) to save a "
        "checkpoint at the next step and requeue itself; 0: no signal",
    )


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
        for name, low in (("nodes", 1), ("gpus_per_node", 0), ("signal_before_end", 0))
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


def exit_record(run_dir: Path, job_id: str) -> Path:
    """Where the job's script records how the job ended (``RUN/slurm/JOBID.exit``, JSON: ``state``,
    ``exit_code``, ``restarts``), the answer once SLURM has forgotten the job (past ``MinJobAge``)."""
    return Path(run_dir) / LOG_FOLDER / f"{job_id}.exit"


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
    if args.signal_before_end:  # the script's trap: checkpoint at the next step, then requeue (sbatch_script)
        options.append(f"--signal=B:USR1@{args.signal_before_end}")
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
        'trap "" USR1;',  # the launcher ignores the stop signal its training processes handle (inherited, kept by exec)
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
    lines += [*_STOP_TRAP, f"{srun} {_quoted_command(launch)} &", *_wait_then_requeue_or_record(logs)]
    return "\n".join(lines) + "\n"


# SIGUSR1 to the script (SLURM before the time limit: #SBATCH --signal=B:USR1@N; by hand: scancel --batch
# --signal=USR1 JOB) goes on to every process of the srun step; the training processes save a checkpoint at
# their next step and stop (judgetrain.train.stop_signal), then the script requeues the job
_STOP_TRAP = [
    "REQUEUE=0",
    'trap \'echo "job $SLURM_JOB_ID: SIGUSR1: a checkpoint at the next step, then the job requeues itself"; '
    'REQUEUE=1; kill -USR1 "$SRUN_PID" 2>/dev/null || true\' USR1',
    "SRUN_PID=",
]


def _wait_then_requeue_or_record(logs: Path) -> list[str]:
    """The script's end: wait for srun through trapped signals; requeue after a stop signal,
    else record how the job ended (:func:`exit_record`) and exit with srun's code."""
    record = shlex.quote(str(logs)) + '/"$SLURM_JOB_ID".exit'
    return [
        "SRUN_PID=$!",
        'while true; do set +e; wait "$SRUN_PID"; RC=$?; set -e; kill -0 "$SRUN_PID" 2>/dev/null || break; done',
        'set +e; wait "$SRUN_PID"; RC=$?; set -e  # its own code, also when a trap interrupted the last wait',
        'if [ "$REQUEUE" = 1 ]; then',
        '  echo "job $SLURM_JOB_ID: training stopped (code $RC); requeueing: the next run resumes from the checkpoint"',
        '  scontrol requeue "$SLURM_JOB_ID"',
        "  exit 0",
        "fi",
        '[ "$RC" = 0 ] && STATE=COMPLETED || STATE=FAILED',
        f'printf \'{{"state": "%s", "exit_code": %d, "restarts": %d}}\\n\' "$STATE" "$RC" "${{SLURM_RESTART_COUNT:-0}}" '
        f"> {record}.tmp && mv -f {record}.tmp {record}",
        'exit "$RC"',
    ]


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
