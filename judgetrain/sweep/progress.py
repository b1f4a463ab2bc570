"""The controller's progress lines, one per event of a trial: when it starts (``trial n of N``,
its place among the study's ``--trials``, and its parameters), each value it reports while it
trains, and how it ends (complete, pruned or failed, with its value).

The values come through the study's storage: the trial's
:class:`~judgetrain.sweep.reporting.SweepCallback` reports the objective at every evaluation
(``trial.report``), and the controller, while it waits for the trial's process, reads the
trial's intermediate values every ``--poll`` seconds (:func:`wait_reporting`) and prints the
new ones; the last look, after the process ends, prints any it missed, so that every reported
value is printed once, in step order. A multi-objective trial reports nothing while it trains
(Optuna prunes only single-objective studies): its values come when it ends.
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["TrialProgress", "escape", "format_params", "format_values", "study_place", "wait_reporting"]


def escape(text: str) -> str:
    """``text`` with its square brackets escaped, so that rich prints them instead of reading markup."""
    from rich.markup import escape as rich_escape  # rich on first use: `judgetrain sweep --help` stays light

    return rich_escape(text)


def study_place(trials: Iterable[Any], number: int) -> int:
    """1-based place of trial ``number`` in the study: 1 + the finished (complete, pruned) and
    running trials numbered before it. Failed and skipped trials take no place, so the place
    never exceeds ``--trials`` (a trial that would is skipped as surplus), and a failed trial's
    re-run takes the place it left."""
    from .sampler import TAKEN

    return 1 + sum(t.number < number and t.state in TAKEN for t in trials)


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def format_params(values: Mapping[str, Any]) -> str:
    """``lora_r=8, learning_rate=0.0003``: the sampled values in the space's order, floats to 4
    significant digits."""
    return ", ".join(f"{k}={_number(v)}" for k, v in values.items())


def format_values(names: Sequence[str], values: Sequence[float | None] | None) -> str:
    """``eval_loss=0.8125``: each objective with its value (``n/a`` where it has none)."""
    values = list(values) if values is not None else [None] * len(names)
    return ", ".join(f"{n}={'n/a' if v is None else _number(float(v))}" for n, v in zip(names, values, strict=True))


class TrialProgress:
    """The progress lines of one trial on the controller's ``console`` (rich)."""

    def __init__(self, console, trial, size: int, objectives: Sequence[str]):
        self.console = console
        self.trial = trial
        self.objectives = list(objectives)
        self.label = f"trial {study_place(trial.study.get_trials(deepcopy=False), trial.number)} of {size} (#{trial.number})"
        self.printed: set[int] = set()  # steps whose reported value was printed
        self.unreadable = False

    def started(self, values: Mapping[str, Any], out) -> None:
        self.console.print(f"[bold]{escape(self.label)}[/]: {escape(format_params(values))} -> {escape(str(out))}")

    def reported(self) -> dict[int, float]:
        """The values the trial has reported so far, ``{step: value}``, read from the storage."""
        from optuna.trial import TrialState

        states = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
        for t in self.trial.study.get_trials(deepcopy=False, states=states):
            if t.number == self.trial.number:
                return dict(t.intermediate_values)
        return {}

    def check(self) -> None:
        """Print the values reported since the last look, in step order."""
        try:
            reported = self.reported()
        except Exception as e:  # noqa: BLE001 - a storage hiccup must cost a progress line, never the trial
            if not self.unreadable:
                self.console.print(f"  {escape(self.label)}: its reported values cannot be read now ({escape(str(e))})")
                self.unreadable = True
            return
        for step in sorted(set(reported) - self.printed):
            self.console.print(
                f"  {escape(self.label)} step {step}: {escape(format_values(self.objectives[:1], [reported[step]]))}"
            )
            self.printed.add(step)

    def finished(
        self, state: str, values: Sequence[float | None] | None = None, step: int | None = None, reason: str | None = None
    ) -> None:
        """The trial's last line: ``complete`` / ``pruned`` with its value(s) and step, or ``failed`` with the reason."""
        colour = {"complete": "green", "pruned": "yellow"}.get(state, "red")
        tail = (
            f": {escape(reason)}"
            if reason
            else (f": {escape(format_values(self.objectives, values))}" + (f" at step {step}" if step is not None else ""))
        )
        self.console.print(f"  {escape(self.label)} [{colour}]{state}[/]{tail}")


def wait_reporting(proc: subprocess.Popen, every: float, check: Callable[[], None]) -> int:
    """Wait for ``proc``, calling ``check`` every ``every`` seconds while it runs and once after it
    ends; its exit code. Interrupted (Ctrl-C), it kills the process before raising, as
    ``subprocess.run`` does."""
    try:
        while True:
            try:
                rc = proc.wait(timeout=every)
                break
            except subprocess.TimeoutExpired:
                check()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    check()
    return rc
