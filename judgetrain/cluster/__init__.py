"""SLURM jobs for training, evaluations and sweep trials: the sbatch script of an
``accelerate launch`` on every node (:mod:`judgetrain.cluster.slurm`), SLURM's commands to
submit, watch and cancel it (:mod:`judgetrain.cluster.jobs`), and ``judgetrain slurm eval …``
(:mod:`judgetrain.cluster.command`).
Docs: "how-to/cluster.md".
"""

from .jobs import (
    ENDED,
    PATIENCE,
    ClusterError,
    ControllerUnavailable,
    JobState,
    cancel,
    forgotten_job_state,
    job_state,
    require_slurm,
    submit,
    submit_script,
    wait_for_job,
)
from .slurm import (
    LOG_FOLDER,
    PORT_BASE,
    SCRIPT,
    SlurmArgs,
    accelerate_executable,
    check_slurm,
    exit_record,
    keep_accelerate_config,
    keep_file,
    keep_recipe,
    processes,
    rank_log,
    resources,
    sbatch_lines,
    sbatch_script,
    setup_lines,
    slurm_problems,
    write_script,
)

__all__ = [
    "ENDED",
    "LOG_FOLDER",
    "PORT_BASE",
    "SCRIPT",
    "PATIENCE",
    "ClusterError",
    "ControllerUnavailable",
    "JobState",
    "SlurmArgs",
    "accelerate_executable",
    "cancel",
    "check_slurm",
    "exit_record",
    "forgotten_job_state",
    "job_state",
    "keep_accelerate_config",
    "keep_file",
    "keep_recipe",
    "processes",
    "rank_log",
    "require_slurm",
    "resources",
    "sbatch_lines",
    "sbatch_script",
    "setup_lines",
    "slurm_problems",
    "submit",
    "submit_script",
    "wait_for_job",
    "write_script",
]
