"""What judgetrain relies on in Optuna beyond its documented API, each reliance with a contract
test in ``tests/compat/test_optuna.py`` that fails naming it when a release changes it. Where a
release no longer offers it, these raise :class:`~judgetrain.compat.versions.UpstreamChanged`.
Docs: "get-started/install.md".
"""

from __future__ import annotations

from typing import Any

from .versions import UpstreamChanged

__all__ = ["name_values", "reopen_trial", "requeue_failed", "trial_id"]

LIBRARY = "optuna"


def trial_id(trial: Any) -> int:
    """The storage's id of ``trial`` (a ``Trial`` or ``FrozenTrial``: ``_trial_id``), by which
    another process opens the same trial (:func:`reopen_trial`); Optuna's public API names a
    trial by its number only within the ``Study`` object that asked for it."""
    if not isinstance(getattr(trial, "_trial_id", None), int):
        raise UpstreamChanged(
            LIBRARY,
            "Trial._trial_id / FrozenTrial._trial_id (the storage's id of a trial)",
            "let a sweep trial's training process report to the trial its controller asked for",
        )
    return trial._trial_id


def reopen_trial(study: Any, trial_id: int) -> Any:
    """The running trial ``trial_id`` of ``study`` as a ``optuna.trial.Trial`` (what
    ``Study.ask`` returns): ``report``, ``should_prune`` and ``set_user_attr`` write to the
    shared storage as from the process that asked for it. Relies on ``Trial(study, trial_id)``,
    the constructor ``Study.ask`` uses, which Optuna does not document for users."""
    import inspect

    from optuna.trial import Trial

    if list(inspect.signature(Trial).parameters)[:2] != ["study", "trial_id"]:
        raise UpstreamChanged(
            LIBRARY,
            "optuna.trial.Trial(study, trial_id)",
            "let a sweep trial's training process report to the trial its controller asked for",
        )
    return Trial(study, trial_id)


def requeue_failed(study: Any, trial: Any, max_retry: int, drop_user_attrs: tuple[str, ...] = ()) -> None:
    """Queue the FAILed ``trial`` (a ``FrozenTrial``) again with its parameters, ``max_retry``
    times at most, as Optuna's ``RetryHeartbeatStaleTrialCallback`` does (experimental: the
    ``failed_trial`` and ``retry_history`` system attrs), without the user attrs named in
    ``drop_user_attrs`` (the callback copies every one). Relies on the callback reading the
    trial's ``user_attrs``, which a copy of the trial may set."""
    import copy
    import warnings

    try:
        from optuna.exceptions import ExperimentalWarning
        from optuna.storages import RetryHeartbeatStaleTrialCallback
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY, "optuna.storages.RetryHeartbeatStaleTrialCallback", "queue a failed sweep trial again", str(e)
        ) from None
    kept = copy.copy(trial)
    kept.user_attrs = {k: v for k, v in trial.user_attrs.items() if k not in drop_user_attrs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        RetryHeartbeatStaleTrialCallback(max_retry=max_retry)(study, kept)


def name_values(study: Any, names: list[str]) -> None:
    """Name the study's objective values (what optuna-dashboard and ``trials_dataframe`` show instead
    of "Objective 0"): ``Study.set_metric_names``, experimental since Optuna 3.2, without its
    ExperimentalWarning (judgetrain chose it; the user cannot act on it)."""
    import warnings

    try:
        from optuna.exceptions import ExperimentalWarning
    except ImportError as e:
        raise UpstreamChanged(LIBRARY, "optuna.exceptions.ExperimentalWarning", "name a study's objectives", str(e)) from None
    if not callable(getattr(study, "set_metric_names", None)):
        raise UpstreamChanged(LIBRARY, "Study.set_metric_names", "name a study's objectives", "no such method")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        study.set_metric_names(list(names))
