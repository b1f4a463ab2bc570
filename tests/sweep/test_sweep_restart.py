"""A retried trial (:func:`judgetrain.sweep.study.retry_trial`) starts with its failed trial's
parameters and identity but without what its failed run left (``fail_reason``, ``slurm_job``,
``controller``, …), with Optuna's ``failed_trial`` and ``retry_history``; and only ``--retries``
times. Fast: an in-memory study, no training.
"""

from __future__ import annotations

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from judgetrain.sweep.study import PER_RUN, retry_trial


def failed_trial(study, **attrs):
    trial = study.ask({"learning_rate": FloatDistribution(1e-5, 1e-3, log=True)})
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    return study.tell(trial, state=TrialState.FAIL)


def test_a_retry_keeps_the_parameters_and_identity_but_not_the_failed_runs_attributes():
    study = optuna.create_study(storage=optuna.storages.InMemoryStorage())
    run = {"fail_reason": "killed by SIGKILL", "fail_key": "killed", "slurm_job": "17", "slurm_restarts": 1,
           "controller": {"host": "login1", "pid": 4242}, "seconds": 3.5, "steps": 2, "metrics": {"eval_loss": 1.0}}
    assert set(run) == set(PER_RUN)
    frozen = failed_trial(study, overrides=["--learning_rate", "0.0001"], output_dir="/runs/trial-0000",
                          slurm_jobs=["17"], **run)
    retry_trial(study, frozen, retries=1)
    retry = study.trials[1]
    assert retry.state == TrialState.WAITING and retry.params == frozen.params
    assert retry.user_attrs == {"overrides": ["--learning_rate", "0.0001"], "output_dir": "/runs/trial-0000",
                                "slurm_jobs": ["17"]}  # its earlier jobs stay listed; nothing of the failure
    assert retry.system_attrs["failed_trial"] == 0 and retry.system_attrs["retry_history"] == [0]
    again = study.tell(study.ask(), state=TrialState.FAIL)  # the retry runs (takes the WAITING trial) and fails too
    assert again.number == 1
    retry_trial(study, again, retries=1)
    assert len(study.trials) == 2  # --retries 1: no third run
