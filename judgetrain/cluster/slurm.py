"""The sbatch script of a SLURM job that runs `accelerate launch` on every node it was given.

:class:`SlurmArgs` are the job's resources (nodes, GPUs per node, partition, time, account),
shared by ``judgetrain train --slurm``, ``judgetrain slurm eval …`` and ``judgetrain sweep
--slurm``. :func:`sbatch_script` renders the script: ``#SBATCH`` lines (one task per node,
``--requeue``, logs appended per job and per rank), node 0's address as the rendezvous
(``scontrol show hostnames``), and one ``srun`` that starts ``accelerate launch`` on every
node with ``--num_machines $SLURM_NNODES --machine_rank $SLURM_NODEID``; SLURM, accelerate
and torch.distributed do the scheduling and the rendezvous. :func:`write_script` keeps the
exact script in the run folder. Submitting and watching jobs is :mod:`judgetrain.cluster.jobs`.
Docs: "how-to/cluster.md".
"""

from __future__ import annotations

import re
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
    "keep_file",
    "keep_recipe",
    "processes",
    "rank_log",
    "resources",
    "sbatch_lines",
    "sbatch_script",
    "setup_lines",
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
    cpus_per_node: int | None = arg(
        None,
        "SLURM: CPU cores of the job on each node (#SBATCH --cpus-per-task); None: --cpus_per_gpu × --gpus_per_node, "
        "SLURM's default (1) without GPUs",
    )
    cpus_per_gpu: int = arg(8, "SLURM: CPU cores per GPU (its process and data loader workers) when --cpus_per_node is not given")
    mem: str | None = arg(
        None,
        "SLURM: memory of the job on each node as sbatch writes it (#SBATCH --mem=500G; 0: all of each node's "
        "memory); None: --mem_per_gpu per GPU, the cluster's default without GPUs",
    )
    mem_per_gpu: str = arg("32G", "SLURM: memory per GPU when --mem is not given (#SBATCH --mem-per-gpu)")
    exclusive: bool = arg(False, "SLURM: the job's nodes are not shared with other jobs (#SBATCH --exclusive)")
    setup: str | None = arg(
        None,
        "SLURM: a shell snippet copied into the script after its #SBATCH lines, run on node 0 before the launch "
        "(module load cuda/12.4, source venv/bin/activate, export NCCL_…); as it is when the script is written",
    )
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
    if args.cpus_per_gpu < 1:
        problems.append(f"cpus_per_gpu: {args.cpus_per_gpu}; give at least 1")
    problems += [
        f"{name}: {value!r}; give a size as sbatch writes it: a number with K, M, G or T (500G; 0 for --mem: all of it)"
        for name, value in (("mem", args.mem), ("mem_per_gpu", args.mem_per_gpu))
        if value is not None and not re.fullmatch(r"\d+[KMGT]?", value)
    ]
    if "--export" in (args.sbatch_options or ""):
        problems.append(
            "sbatch_options: --export: the job needs the submitting environment (a sweep's storage reaches its trials "
            "through it); leave --export out and set variables in --setup"
        )
    if args.setup is not None and not Path(args.setup).is_file():
        problems.append(f"setup: {args.setup}: no such file; give a shell snippet (module load …) or leave it out")
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


def resources(args: SlurmArgs) -> list[str]:
    """The sbatch options of what each node gives the job: GPUs, CPUs (``--cpus_per_node``, else
    ``--cpus_per_gpu`` per GPU), memory (``--mem``, else ``--mem_per_gpu`` per GPU), ``--exclusive``."""
    options = []
    if args.gpus_per_node:
        options.append(f"--gpus-per-node={args.gpus_per_node}")
    cpus = args.cpus_per_node or args.gpus_per_node * args.cpus_per_gpu
    if cpus:  # one task per node: its CPUs are all the job's CPUs on the node
        options.append(f"--cpus-per-task={cpus}")
    if args.mem is not None:
        options.append(f"--mem={args.mem}")
    elif args.gpus_per_node:
        options.append(f"--mem-per-gpu={args.mem_per_gpu}")
    return options + (["--exclusive"] if args.exclusive else [])


def setup_lines(args: SlurmArgs) -> list[str]:
    """The ``--setup`` snippet's lines as the script runs them (read now: the script holds them)."""
    if not args.setup:
        return []
    text = Path(args.setup).read_text()
    return ["", f"# set-up: {Path(args.setup).resolve()} as it was when this script was written", *text.splitlines()]


def _sbatch_lines(args: SlurmArgs, job_name: str, logs: Path, workdir: Path) -> list[str]:
    options = [f"--job-name={job_name}", f"--nodes={args.nodes}", "--ntasks-per-node=1", *resources(args)]
    named = (("partition", "partition"), ("time", "time"), ("account", "account"))
    options += [f"--{name}={getattr(args, key)}" for name, key in named if getattr(args, key) is not None]
    # a preempted or failed node puts the job back in the queue; its rerun resumes (appending to the same logs)
    options += ["--requeue", "--open-mode=append", f"--chdir={workdir}", f"--output={logs / '%x-%j.log'}"]
    if args.signal_before_end:  # the script's trap: checkpoint at the next step, then requeue (sbatch_script)
        options.append(f"--signal=B:USR1@{args.signal_before_end}")
    options += shlex.split(args.sbatch_options or "")
    return [f"#SBATCH {o}" for o in options] + setup_lines(args)  # set-up after the last #SBATCH line


def sbatch_lines(args: SlurmArgs, *, job_name: str, run_dir: Path, workdir: Path) -> list[str]:
    """The ``#SBATCH`` lines (and the ``--setup`` lines after them) of a job of ``args``' resources named ``job_name``, its log in
    ``run_dir/slurm/``, started in ``workdir`` (a script of another body: a sweep's job array)."""
    return _sbatch_lines(args, job_name, Path(run_dir).resolve() / LOG_FOLDER, Path(workdir).resolve())


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
    """Keep ``text`` as ``run_dir/slurm/job.sbatch`` (atomically, mode 0644: sbatch reads it, and
    SLURM keeps its own copy for a requeue); its path. It holds no secret: those go in sbatch's
    environment (:func:`~judgetrain.cluster.jobs.submit`)."""
    path = Path(run_dir).resolve() / LOG_FOLDER / SCRIPT
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)
    path.chmod(0o644)
    return path


def keep_file(run_dir: Path, name: str, text: str, source: Path) -> Path:
    """Keep ``text`` (``source``'s content, perhaps with its paths made the copies') as
    ``run_dir/slurm/NAME``, the file the job reads at every start, requeues included; its path.
    A copy already there with other content is refused: a queued or requeued job of this run
    reads it, and a run resumed with other settings than it was trained with fails."""
    kept = Path(run_dir).resolve() / LOG_FOLDER / name
    if kept.is_file() and kept.read_text() != text:
        raise ConfigError(
            [
                f"{kept}: this run's SLURM job reads this copy of {source}, which has changed since; a requeued job "
                "would run with the new one. Give the changed run a new --output_dir (an evaluation: --out), or delete "
                f"{kept} once no job of this run is queued or running (squeue --me)"
            ]
        )
    kept.parent.mkdir(parents=True, exist_ok=True)
    write_text(kept, text)
    return kept


def keep_recipe(recipe: Path, run_dir: Path, name: str = "recipe.yaml") -> Path:
    """The recipe (or an evaluation's ``--config``) kept as ``run_dir/slurm/NAME``
    (:func:`keep_file`); the path the job's command names."""
    return keep_file(run_dir, name, Path(recipe).read_text(), Path(recipe).resolve())


def check_slurm(args: SlurmArgs, slurm: bool) -> None:
    """:func:`slurm_problems` as one :class:`~judgetrain.config.ConfigError`."""
    problems = slurm_problems(args, slurm)
    if problems:
        raise ConfigError(problems)


def keep_accelerate_config(options: list[str], run_dir: Path) -> list[str]:
    """``options`` with the file of ``--config_file`` (perhaps a temporary copy on this machine)
    kept beside the script as ``slurm/accelerate.yaml``, which every node of the job reads, and
    the DeepSpeed JSON it names kept beside it (``slurm/deepspeed.json``), named by the copy."""
    import yaml

    options = list(options)
    if "--config_file" in options:
        i = options.index("--config_file") + 1
        source = Path(options[i])
        text = source.read_text()
        config = yaml.safe_load(text) or {}
        ds = (config.get("deepspeed_config") or {}).get("deepspeed_config_file")
        if ds:
            ds_path = Path(ds) if Path(ds).is_absolute() else source.parent / ds
            kept_ds = keep_file(run_dir, "deepspeed.json", ds_path.read_text(), ds_path.resolve())
            config["deepspeed_config"]["deepspeed_config_file"] = str(kept_ds)
            text = yaml.safe_dump(config, sort_keys=False)
        options[i] = str(keep_file(run_dir, "accelerate.yaml", text, source.resolve()))
    return options
