"""A sweep as one SLURM job array (``judgetrain sweep RECIPE … --slurm --array K``), for clusters
that kill long processes on their login nodes: nothing of the sweep runs there once it is
submitted.

:func:`write_array_job` writes ``OUT/slurm/sweep-array.sbatch``, one array of ``--trials`` tasks
with at most ``K`` running at once (``#SBATCH --array=0-(trials-1)%K``), and the sweep's options
as ``OUT/slurm/sweep.yaml`` beside copies of the recipe, the search space and the ``--enqueue``
file (fixed at submission: an edit afterwards changes nothing of the submitted sweep). Each task
is an Optuna worker on its node: ``judgetrain sweep --config sweep.yaml --trials_here 1`` runs
one trial there, on the shared study, and ends; the study's size (``--trials``) still holds for
all tasks together, a task that finds the study full ends at once, and a failed trial is
retried (``--retries``) by a later task. The storage URL (a password in it) reaches the tasks
through sbatch's environment (:data:`STORAGE_ENV`), never a file.
Docs: "how-to/cluster.md".
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

from judgetrain.cluster import LOG_FOLDER, SlurmArgs, keep_recipe, sbatch_lines

from .config import SweepConfig
from .space import SweepError

__all__ = ["ARRAY_CONFIG", "ARRAY_SCRIPT", "STORAGE_ENV", "array_problems", "submit_array", "write_array_job"]

ARRAY_SCRIPT = "sweep-array.sbatch"
ARRAY_CONFIG = "sweep.yaml"
STORAGE_ENV = "JUDGETRAIN_SWEEP_STORAGE"
# options that are the array's, not a task's controller's
_NOT_TASKS = {f.name for f in dataclasses.fields(SlurmArgs)} | {"slurm", "array", "trials_here", "storage", "parallel"}


def array_problems(cfg: SweepConfig) -> list[str]:
    """Why ``cfg`` cannot run as a job array: a task is one node's controller, and every task
    must reach the study."""
    problems = []
    if cfg.nodes != 1:
        problems.append(
            f"--array: each task trains its trial on its own node; give --nodes 1 (a trial of {cfg.nodes} nodes: "
            "--slurm without --array, one job a trial)"
        )
    if cfg.storage.startswith("sqlite:"):
        problems.append(
            f"--storage {cfg.storage}: the array's tasks run on many nodes; give a storage every node reaches "
            "(postgresql://…, mysql://…, or journal:/shared/…/study.journal)"
        )
    return problems


def task_config(cfg: SweepConfig, run_dir: Path) -> dict[str, Any]:
    """The sweep's options as a task's controller reads them (``--config sweep.yaml``): those
    given, without the array's own and the storage, with the files kept in ``run_dir/slurm/``
    (:func:`~judgetrain.cluster.keep_recipe`: a changed copy is refused)."""
    doc: dict[str, Any] = {}
    for f in dataclasses.fields(SweepConfig):
        value = getattr(cfg, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.name in _NOT_TASKS or f.name == "study_name" or value == default:
            continue
        doc[f.name] = str(value) if isinstance(value, Path) else value
    doc.update(recipe=str(keep_recipe(cfg.recipe_file, run_dir)), study=cfg.study)
    if cfg.space is not None:
        doc["space"] = str(keep_recipe(cfg.space, run_dir, "space.yaml"))
    doc["out"] = str(cfg.trials_dir.resolve())
    if cfg.num_processes is None and cfg.gpus_per_node:  # the task's trial: one process per GPU of its node
        doc["num_processes"] = cfg.gpus_per_node
    if cfg.enqueue is not None:
        doc["enqueue"] = str(keep_recipe(cfg.enqueue, run_dir, "enqueue.yaml"))
    return doc


def write_array_job(cfg: SweepConfig) -> Path:
    """Write the array's script and the tasks' options into ``OUT/slurm/``; the script's path."""
    import yaml

    from judgetrain.io import write_text

    problems = array_problems(cfg)
    if problems:
        raise SweepError("; ".join(problems))
    folder = cfg.trials_dir.resolve() / LOG_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    options = folder / ARRAY_CONFIG
    write_text(options, yaml.safe_dump(task_config(cfg, cfg.trials_dir), sort_keys=False))
    one_node = dataclasses.replace(
        cfg, signal_before_end=0, sbatch_options=f"{cfg.sbatch_options or ''} --array=0-{cfg.trials - 1}%{cfg.array}".strip()
    )
    executable = Path(sys.executable).with_name("judgetrain")
    task = [str(executable) if executable.is_file() else "judgetrain", "sweep", "--config", str(options)]
    lines = [
        "#!/bin/bash",
        f"# submit: {STORAGE_ENV}=URL sbatch {folder / ARRAY_SCRIPT}",
        *sbatch_lines(one_node, job_name=cfg.job_name or f"{cfg.study}-sweep", run_dir=cfg.trials_dir, workdir=Path.cwd()),
        "",
        "set -eu",
        f': "${{{STORAGE_ENV}:?the study storage URL: submit with {STORAGE_ENV}=URL sbatch …}}"',
        'echo "array task ${SLURM_ARRAY_TASK_ID:-?} of job ${SLURM_ARRAY_JOB_ID:-?} on ${SLURM_JOB_NODELIST:-this machine}"',
        f'exec {shlex.join(task)} --storage "${STORAGE_ENV}" --trials_here 1',
    ]
    script = folder / ARRAY_SCRIPT
    write_text(script, "\n".join(lines) + "\n")
    return script


def submit_array(cfg: SweepConfig) -> str:
    """Check the search space against the recipe and open the study (a storage or study that
    refuses this sweep fails here, not in every task), write the array job and submit it, its
    storage through sbatch's environment; the job id."""
    from judgetrain.cluster import submit

    from .study import open_study

    cfg.search_space.validate(cfg.recipe_file, cfg.overrides, world_size=cfg.world_size, objectives=cfg.objectives)
    open_study(cfg)
    script = write_array_job(cfg)
    job = submit(script, env={STORAGE_ENV: cfg.storage})
    name = cfg.job_name or f"{cfg.study}-sweep"
    print(
        f"submitted SLURM job array {job} ({cfg.trials} tasks, {cfg.array} at once): {script}\n"
        f"  logs: {script.parent}/{name}-JOBID.log per task; the study: judgetrain dashboard --storage URL; squeue -j {job}"
    )
    return job
