"""How a sweep samples without repeating itself. Docs: "how-to/sweeps.md".

A TPE sampler seeded once per controller replays the same start-up samples whenever a
controller is restarted, and two controllers started with the same seed draw the same
parameters. :class:`TrialSeededSampler` seeds a fresh TPE sampler for every trial from
(study name, ``--seed``, trial number): trial numbers are unique within a study (the
storage hands them out), so a restart or a second controller continues the study's
sampling instead of replaying it, and the same study, seed and trial number always give
the same draw. TPE itself still reads the whole study's history, so the search is the
usual TPE search. :func:`first_duplicate` then catches the parameter sets that TPE
proposes twice (a small categorical space), which the controller skips.

Imported lazily (it imports Optuna), so that ``judgetrain sweep --help`` stays fast.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import optuna
from optuna.samplers import BaseSampler, TPESampler
from optuna.trial import FrozenTrial, TrialState

__all__ = ["TrialSeededSampler", "first_duplicate", "trial_seed"]

# the trials a new parameter set must not repeat: finished ones and those being trained
TAKEN = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)


def trial_seed(study_name: str, seed: int, trial_number: int) -> int:
    """The sampler seed of one trial: stable across machines and Python processes (sha256,
    not Python's salted ``hash``)."""
    digest = hashlib.sha256(f"judgetrain-sweep\0{study_name}\0{seed}\0{trial_number}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


class TrialSeededSampler(BaseSampler):
    """A TPE sampler per trial, seeded by :func:`trial_seed`; every call is delegated to it."""

    def __init__(self, seed: int, **tpe_kwargs: Any):
        self.seed = seed
        self.tpe_kwargs = tpe_kwargs
        self._samplers: dict[tuple[str, int], TPESampler] = {}

    def for_trial(self, study: optuna.Study, trial: FrozenTrial) -> TPESampler:
        key = (study.study_name, trial.number)
        if key not in self._samplers:
            self._samplers.clear()  # one trial at a time: keep only the current one
            self._samplers[key] = TPESampler(seed=trial_seed(study.study_name, self.seed, trial.number), **self.tpe_kwargs)
        return self._samplers[key]

    def infer_relative_search_space(self, study, trial):
        return self.for_trial(study, trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self.for_trial(study, trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self.for_trial(study, trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial):
        self.for_trial(study, trial).before_trial(study, trial)

    def after_trial(self, study, trial, state, values):
        self.for_trial(study, trial).after_trial(study, trial, state, values)


def first_duplicate(trials: Iterable[FrozenTrial], number: int, params: dict[str, Any]) -> int | None:
    """The number of a finished or running trial other than ``number`` that has exactly
    ``params``, else ``None``. Failed and waiting trials do not count: a failed trial's
    re-run is meant to repeat its parameters."""
    for t in trials:
        if t.number != number and t.state in TAKEN and t.params == params:
            return t.number
    return None
