"""Contracts with Optuna (judgetrain.compat.optuna): what a sweep relies on, run on Optuna's real
journal storage shared by two Study objects (a controller and a trial's training process),
failing naming Optuna and the name it relies on."""

from __future__ import annotations

import contextlib

import optuna
import pytest
from optuna.storages import JournalStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from judgetrain.compat import optuna as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming Optuna, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, TypeError, KeyError, UpstreamChanged) as e:
        pytest.fail(f"optuna {installed_version('optuna')} changed {name}, which judgetrain relies on: {type(e).__name__}: {e}")


def _studies(tmp_path):
    """A controller's study and another process's view of it, over one journal file."""
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "s.journal")))
    controller = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    other = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(tmp_path / "s.journal"))),
                              pruner=optuna.pruners.MedianPruner(n_startup_trials=0, n_warmup_steps=0))
    return controller, other


def test_a_trial_reopened_by_id_in_another_study_object_reports_to_the_same_trial(tmp_path):
    """trial_id + reopen_trial: the id of an asked trial (and of its FrozenTrial) opens it from
    another Study object over the same storage, and what that reports, its pruner judges, and
    the asker sees (what a sweep trial's training process does)."""
    controller, other = _studies(tmp_path)
    for value in (1.0, 2.0):
        done = controller.ask()
        done.report(value, 1)
        controller.tell(done, value)
    asked = controller.ask()
    with relied_on("Trial._trial_id / FrozenTrial._trial_id and optuna.trial.Trial(study, trial_id)"):
        tid = compat.trial_id(asked)
        assert compat.trial_id(controller.trials[-1]) == tid
        reopened = compat.reopen_trial(other, tid)
        assert reopened.number == asked.number
        reopened.report(0.5, 1)
        reopened.set_user_attr("steps", 1)
        assert reopened.should_prune()  # below the median of the finished trials at step 1
        frozen = controller.trials[-1]
        assert frozen.intermediate_values == {1: 0.5} and frozen.user_attrs == {"steps": 1}


def test_an_orphaned_trial_is_failed_and_queued_again_from_another_study_object(tmp_path):
    """What judgetrain.sweep.study.fail_orphans does to a RUNNING trial whose controller died: note why on
    the reopened trial, fail it with study.tell (public), re-queue it from the FrozenTrial tell
    returns; a second controller doing the same finds it finished."""
    controller, other = _studies(tmp_path)
    asked = controller.ask({"lora_r": optuna.distributions.CategoricalDistribution([4, 8])})
    with relied_on("optuna.trial.Trial(study, trial_id).set_user_attr on another process's RUNNING trial"):
        compat.reopen_trial(other, compat.trial_id(other.trials[0])).set_user_attr("fail_reason", "controller died")
        frozen = other.tell(asked.number, state=TrialState.FAIL)
        RetryHeartbeatStaleTrialCallback(max_retry=1)(other, frozen)
        trials = controller.trials
        assert [t.state for t in trials] == [TrialState.FAIL, TrialState.WAITING]
        assert trials[0].user_attrs["fail_reason"] == "controller died" and trials[1].params == asked.params
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):  # the second controller: got there first
        compat.reopen_trial(controller, compat.trial_id(trials[0])).set_user_attr("fail_reason", "again")
    with pytest.raises(ValueError, match="Cannot tell a FAIL trial"):
        controller.tell(asked.number, state=TrialState.FAIL)


def test_a_failed_trial_is_requeued_with_its_parameters_and_without_the_attributes_named(tmp_path):
    """What judgetrain.sweep.study.retry_trial relies on: RetryHeartbeatStaleTrialCallback given a copy of
    the FrozenTrial whose user_attrs were replaced queues those attrs, the parameters and Optuna's retry
    system attrs, and stops after max_retry."""
    controller, _ = _studies(tmp_path)
    asked = controller.ask({"lora_r": optuna.distributions.CategoricalDistribution([4, 8])})
    asked.set_user_attr("fail_reason", "boom")
    asked.set_user_attr("overrides", ["--lora_r", "4"])
    frozen = controller.tell(asked.number, state=TrialState.FAIL)
    with relied_on("RetryHeartbeatStaleTrialCallback reads the (copied) trial's user_attrs"):
        compat.requeue_failed(controller, frozen, 1, ("fail_reason",))
        retry = controller.trials[1]
        assert retry.state == TrialState.WAITING and retry.params == asked.params
        assert retry.user_attrs == {"overrides": ["--lora_r", "4"]} and retry.system_attrs["failed_trial"] == 0
        assert frozen.user_attrs["fail_reason"] == "boom"  # the failed trial itself keeps its reason
    again = controller.tell(controller.ask().number, state=TrialState.FAIL)  # ask() takes the queued retry
    assert again.number == 1
    compat.requeue_failed(controller, again, 1, ("fail_reason",))  # a retry's retry: over max_retry 1
    assert len(controller.trials) == 2


def test_a_trial_without_a_storage_id_is_named():
    class Renamed:
        number = 0

    with pytest.raises(UpstreamChanged, match=r"^optuna \S+ no longer offers Trial\._trial_id"):
        compat.trial_id(Renamed())


def test_the_values_are_named_without_an_experimental_warning(tmp_path, recwarn):
    """What the sweep relies on to name its objectives in optuna-dashboard: Study.set_metric_names, silently."""
    study, _ = _studies(tmp_path)
    with relied_on("Study.set_metric_names (experimental)"):
        compat.name_values(study, ["judge:all/accuracy"])
        assert study.metric_names == ["judge:all/accuracy"]
    assert not [w for w in recwarn if issubclass(w.category, optuna.exceptions.ExperimentalWarning)]
