"""Optuna sweeps over a training recipe: one fresh `accelerate launch` per trial, pruning from inside training.

    judgetrain sweep RECIPE --space SPACE.yaml --trials 50 --storage sqlite:///runs/sweeps.db --study NAME [overrides…]
    judgetrain sweep --config sweep.yaml [overrides…]       # the options below as YAML keys
    judgetrain sweep best NAME --storage sqlite:///runs/sweeps.db [--out best.yaml]

How it fits together (paper 002 §4D, B.1):

- **Search space**: a YAML file (``recipes/spaces/``) mapping recipe fields to
  Optuna distributions (:class:`SearchSpace`). Any field of the recipe's
  dataclasses can be searched; the space is checked against them with the
  trainer's own parser (lowest, highest and every categorical value) before
  any trial starts.
- **Options** (:class:`~judgetrain.sweep.config.SweepConfig`): one dataclass, from which the command's
  parser is made (``--config FILE.yaml`` sets its fields) and which
  :func:`run_sweep` takes; arguments it does not know are recipe overrides
  for every trial.
- **Controller** (:func:`run_sweep`): ``study.optimize`` with TPE seeded per
  trial from (study, ``--seed``, trial number) (:mod:`judgetrain.sweep.sampler`),
  so that a restarted controller, or a second one with the same ``--seed``,
  continues the study's sampling instead of replaying it; a parameter set that
  a finished or running trial already has is skipped (recorded as FAIL with
  ``duplicate_of``), never trained twice (:mod:`judgetrain.sweep.objective`). The objective of a
  trial launches ``accelerate launch -m judgetrain.sweep --config RECIPE <trial overrides>``
  (the package's trial entry: ``judgetrain.train`` with the trial's callback) as a subprocess and
  waits (:mod:`judgetrain.sweep.launch`). DeepSpeed state, GPU memory and out-of-memory errors stay inside the
  trial's process, and LoRA rank or sequence length can differ per trial —
  which ``Trainer.hyperparameter_search`` (one Python process) cannot do.
  ``--trials`` is the size of the *study*: a controller starts a trial only
  while finished + running trials (of every controller) are fewer, and waits
  for the others' running trials otherwise, so several controllers (machines)
  sharing one storage end with exactly ``--trials`` finished trials (:mod:`judgetrain.sweep.study`). While it waits it prints
  a line per trial as it starts (``trial n of N``, its parameters), per value the trial
  reports, and as it ends (:mod:`judgetrain.sweep.progress`).
- **Trial side** (:class:`~judgetrain.sweep.reporting.SweepCallback`, which the trial entry
  :func:`trial_main` hands to ``judgetrain.train.main`` as a callback; it reads
  the controller's ``JUDGETRAIN_SWEEP`` variable): at every evaluation
  it computes the objective (validation loss, or a judge metric such as
  macro-F1 on PRISM-Temporal through the scoring engine), reports it to the
  study (``trial.report``) and stops training when the pruner says so
  (``trial.should_prune``). The final values go to ``sweep_result.json`` in
  the trial's folder, next to its adapter, metrics and resolved recipe.
- **Failures**: a trial process that crashes, runs out of memory or is
  killed is recorded as FAIL with its reason (user attribute
  ``fail_reason``) and re-queued ``--retries`` times with the same
  parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``). With RDB
  storage (SQLite, PostgreSQL, MySQL) a heartbeat marks the trials of a
  controller that died as stale on any machine; on the same machine (and
  for journal files, which have no heartbeat) a rerun controller fails and
  re-queues the RUNNING trials of dead controllers of this host at start, but
  for a ``--slurm`` trial whose job runs or has ended: it takes that trial
  over (waits for the job, records its result) instead (:class:`~judgetrain.sweep.objective.TakeOver`).
  ``--trials_here N``: this controller starts N trials at most, then ends.
  Finished trials are never rerun. The recipe and space are checked once, before the
  first trial, with the trainer's own checks and against the objective (``eval_loss``
  needs evaluations); ``--stop_after_failures`` trials in a row failing with the same
  error stop the sweep with that error (:mod:`judgetrain.sweep.failures`).

- **Results** (:mod:`judgetrain.sweep.results`): the table of trials, the wandb
  summary run, and ``sweep best``'s recipe with exactly the winning trial's overrides.

Docs: "reference/commands/sweep.md", "how-to/sweeps.md". Storage URLs: ``sqlite:///path.db`` (one machine), ``postgresql://…`` /
``mysql://…`` (many machines), ``journal:path`` or a ``*.journal`` / ``*.log``
file (a journal file on a shared file system).
"""

from __future__ import annotations

import sys
from typing import Any

from .config import SweepConfig
from .failures import FailureStreak
from .objective import TakeOver, TrialFailed, trial_objective
from .results import best_recipe, print_summary, wandb_summary
from .space import SweepError
from .study import finished_trials, open_study, retry_trial, wait_for_room

__all__ = ["main", "make_parser", "run_sweep"]


def run_sweep(cfg: SweepConfig) -> Any:
    """Run trials until the study holds ``cfg.trials`` finished (complete or pruned) ones."""
    import optuna
    from optuna.trial import TrialState
    from rich.console import Console

    from judgetrain.wandb_mode import offline_mode_hidden

    console = Console(stderr=True, soft_wrap=True)  # messages stay on one line in logs
    if len(cfg.objectives) > 1 and cfg.pruner != "none":
        console.print("multi-objective study: Optuna cannot prune it, so --pruner is ignored")
    with offline_mode_hidden():  # checking uses no wandb: no "[INFO] Running in WANDB offline mode" from transformers
        cfg.search_space.validate(cfg.recipe_file, cfg.overrides, world_size=cfg.world_size, objectives=cfg.objectives)
    study = open_study(cfg)  # refuses a controller of other settings before anything is written
    cfg.trials_dir.mkdir(parents=True, exist_ok=True)
    take_over = TakeOver(cfg, study, console)  # a killed controller's trials: their SLURM jobs' work kept
    orphans_failed = take_over()
    if orphans_failed:
        console.print(
            f"trials {orphans_failed} were RUNNING under a controller that died: marked failed"
            + (", queued again" if cfg.retries else "")
        )
    for params in cfg.enqueued:
        study.enqueue_trial(params, skip_if_exists=True)
    streak = FailureStreak(cfg.stop_after_failures)
    if not wait_for_room(study, cfg, console, take_over):
        console.print(
            f"study {cfg.study!r} already holds {finished_trials(study)} finished trials (--trials {cfg.trials}); nothing to run"
        )
    else:

        def retry_failed(study, trial):
            skipped = "duplicate_of" in trial.user_attrs or "surplus" in trial.user_attrs
            if trial.state == TrialState.FAIL and cfg.retries and not skipped:
                retry_trial(study, trial, cfg.retries)

        def hold_size(study, trial):
            if streak(trial) or not wait_for_room(study, cfg, console, take_over):
                study.stop()

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study.optimize(
            trial_objective(cfg, console),
            n_trials=cfg.trials_here,  # None: until hold_size stops it (the study is full)
            n_jobs=cfg.parallel,
            catch=(TrialFailed,),
            callbacks=[retry_failed, hold_size],
        )
    for thread in take_over.threads:  # taken-over trials whose jobs still run: their outcome belongs to this sweep
        thread.join()
    print_summary(study, cfg, console)
    if streak.stopped:
        raise SweepError(
            f"stopped: the last {streak.count} trials failed with the same error (--stop_after_failures "
            f"{cfg.stop_after_failures}), so the next would too. Fix it and rerun the same command (the "
            f"study keeps its trials):\n  {streak.reason}"
        )
    if "wandb" in _report_to(cfg):
        wandb_summary(study, cfg.trials_dir, [o.name for o in cfg.objectives])
    return study


def _report_to(cfg: SweepConfig) -> list[str]:
    """The trials' report_to: the last --report_to override, else the recipe's."""
    from judgetrain.yamlfile import read_yaml

    if "--report_to" in cfg.overrides:
        return [cfg.overrides[len(cfg.overrides) - 1 - cfg.overrides[::-1].index("--report_to") + 1]]
    value = (read_yaml(cfg.recipe_file) or {}).get("report_to") or []
    return [value] if isinstance(value, str) else list(value)


# --------------------------------------------------------------------------- CLI


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        SweepConfig,
        "judgetrain sweep",
        __doc__.strip().splitlines()[0],
        "examples:\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family qwen3-vl   # the model the tiny recipes name\n"
        "  judgetrain build prism --out data/prism-tiny --synthetic 12 --layouts P0     # the set the tiny PRISM recipe names\n"
        "  judgetrain sweep recipes/tiny/qwen3vl-prism-pairwise-lora.yaml --space recipes/spaces/tiny.yaml \\\n"
        "      --trials 2 --storage sqlite:///runs/sweeps.db --study tiny --objective eval_loss --max_steps 2\n"
        "  judgetrain sweep best tiny --storage sqlite:///runs/sweeps.db --out recipes/best.yaml\n"
        "\nany further --field value is passed to every trial as a recipe override (--max_steps 2 above).\n"
        "the paper's search, on GPUs (docs: how-to/sweeps.md).\n",
        usage="judgetrain sweep RECIPE --space SPACE.yaml [options] [--field value …]\n"
        "       judgetrain sweep best STUDY [--storage URL] [--out FILE] [--trial N]",
    )


def main(cfg: SweepConfig) -> int:
    if cfg.is_best:
        name = cfg.study_name or cfg.study  # `sweep best STUDY`, or the study of a sweep's --config file
        if not name:
            raise SweepError("usage: judgetrain sweep best STUDY --storage URL [--out FILE]")
        text, best = best_recipe(cfg.storage, name, cfg.trial, cfg.out)
        if cfg.out:
            from judgetrain.io import write_text

            cfg.out.parent.mkdir(parents=True, exist_ok=True)
            write_text(cfg.out, text)
            print(f"best trial {best.number} ({best.values}) written as a recipe to {cfg.out}", file=sys.stderr)
        else:
            sys.stdout.write(text)
        return 0
    cfg.check()
    if cfg.array:
        from .array import submit_array

        submit_array(cfg)
        return 0
    run_sweep(cfg)
    return 0
