"""Optuna sweeps over a training recipe (paper 002 §4D, B.1): one fresh ``accelerate launch``
per trial, pruning from inside training, any number of controllers sharing one study.

The parts, one job each:

- :mod:`~judgetrain.sweep.controller`: ``judgetrain sweep`` (:func:`run_sweep`): the study
  optimised until it is full, failures retried, the summary; :mod:`~judgetrain.sweep.config`:
  its options (:class:`SweepConfig`) and their checks;
- :mod:`~judgetrain.sweep.study`: the study every controller shares: opened or joined, how full
  it is, the trials of controllers that died; :mod:`~judgetrain.sweep.definition`: what defines
  a study (recipe content, space, objectives, overrides), recorded by its first controller and
  required of every later one; :mod:`~judgetrain.sweep.objective`: what a trial is
  to the study (sampled, skipped as a duplicate or surplus, its value or why it failed);
  :mod:`~judgetrain.sweep.launch`: a trial's training process, here or as a SLURM job
  (:mod:`~judgetrain.sweep.jobs`);
- :mod:`~judgetrain.sweep.failures`: why a trial failed, and when identical failures in a row
  stop the sweep;
- :mod:`~judgetrain.sweep.space`: what is searched (:class:`SearchSpace`) and optimised
  (:class:`Objective`), and the pruners; :mod:`~judgetrain.sweep.storage`: where the study
  lives (:func:`storage_from_url`);
- :mod:`~judgetrain.sweep.sampler`: TPE seeded per trial, so controllers never replay each
  other, and the no-repeat guarantee;
- :mod:`~judgetrain.sweep.trial` and :mod:`~judgetrain.sweep.reporting`: the trial's side
  (``python -m judgetrain.sweep``: ``judgetrain.train`` with :class:`SweepCallback`);
- :mod:`~judgetrain.sweep.results`: the summary, the wandb run and ``sweep best``;
  :mod:`~judgetrain.sweep.dashboard`: ``judgetrain dashboard`` (:func:`dashboard_storage`).

Names are imported from their modules on first use (:func:`judgetrain.lazy.attach`): the
trial's callback needs transformers and the sampler Optuna, which ``judgetrain sweep
--help`` does not.
Docs: "how-to/sweeps.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "controller": ["main", "make_parser", "run_sweep"],
        "config": ["SweepConfig"],
        "definition": ["DEFINITION", "check_definition", "differences", "overrides_by_field", "study_definition"],
        "study": ["fail_orphans", "finished_trials", "open_study", "study_room", "wait_for_room"],
        "objective": ["MAX_SKIPPED", "TrialFailed", "TrialSkipped", "skip_reason", "trial_objective"],
        "launch": ["TRIAL_MODULE", "train_trial", "trial_command", "trial_overrides"],
        "space": [
            "DEFAULT_OBJECTIVE",
            "ENV",
            "PRUNERS",
            "RESULT_FILE",
            "Objective",
            "Param",
            "SearchSpace",
            "SweepError",
            "flag_value",
            "make_pruner",
            "objective_problems",
            "parse_objectives",
        ],
        "progress": ["TrialProgress", "escape", "format_params", "format_values", "study_place", "wait_reporting"],
        "failures": ["FailureStreak", "failure_key", "failure_reason"],
        "storage": ["DEFAULT_STORAGE", "SCHEMA_LOCK_KEY", "schema_lock", "storage_from_url", "study_lock"],
        "sampler": ["TAKEN", "TrialSeededSampler", "first_duplicate", "trial_seed"],
        "trial": ["sweep_callback", "trial_main"],
        "reporting": ["SweepCallback", "lookup_metric"],
        "results": ["best_recipe", "print_summary", "recipe_with_overrides", "wandb_summary"],
        "dashboard": ["DashboardConfig", "dashboard_storage"],
    },
)
