"""The loss curve of a training run: ``training_loss.png`` in the run's folder, drawn from the
Trainer's ``state.log_history`` (the list ``trainer_state.json`` stores).

The top panel has the training loss per logged step and, where the run evaluated, the
evaluation loss on the same axes; a GRPO run (:mod:`judgetrain.grpo`) adds a panel of each
reward's mean per step (TRL's ``rewards/<name>/mean``); the bottom panel has the learning rate. A run that has
logged no loss yet gets no file (:func:`plot_log_history` returns ``None`` and says so).
:func:`plot_trainer_state` draws it afterwards for a run folder (or one of its
checkpoints) that a run without this file left behind.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "LOSS_PLOT",
    "STATE_FILE",
    "loss_figure",
    "loss_series",
    "pair_accuracy_series",
    "plot_log_history",
    "plot_trainer_state",
    "reward_series",
]

LOSS_PLOT = "training_loss.png"
STATE_FILE = "trainer_state.json"  # what ``Trainer.save_state`` writes, in the run folder and every checkpoint

logger = logging.getLogger("judgetrain.train")

# the log_history keys drawn, and their legend labels; "train_loss" (the run's mean, logged once at the end) is not a point
SERIES = {"loss": "train loss", "eval_loss": "eval loss", "learning_rate": "learning rate"}
MARKED = 60  # series of up to this many points get a marker on each


def loss_series(log_history: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{"loss": [(step, value), …], "eval_loss": […], "learning_rate": […]}`` from a Trainer's
    ``log_history``, in logged order. Entries without a ``step``, and values that are not finite
    numbers (a NaN loss), are left out."""
    series: dict[str, list[tuple[int, float]]] = {key: [] for key in SERIES}
    for entry in log_history:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("step"), (int, float)):
            continue
        for key, points in series.items():
            value = entry.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                points.append((int(entry["step"]), float(value)))
    return series


def reward_series(log_history: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{reward name: [(step, mean), …]}`` from TRL's ``rewards/<name>/mean`` entries (a GRPO run), in
    logged order, finite values only; ``{}`` for a run that logged no reward."""
    series: dict[str, list[tuple[int, float]]] = {}
    for entry in log_history:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("step"), (int, float)):
            continue
        for key, value in entry.items():
            name = key[len("rewards/") : -len("/mean")] if key.startswith("rewards/") and key.endswith("/mean") else None
            if name and isinstance(value, (int, float)) and math.isfinite(value):
                series.setdefault(name, []).append((int(entry["step"]), float(value)))
    return series


def pair_accuracy_series(log_history: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{"pair accuracy (train)" / "(eval)": [(step, accuracy), …]}`` from TRL's reward trainer's ``accuracy``
    and ``eval_accuracy`` (the share of pairs whose chosen sequence out-scores the rejected one), logged with its
    ``margin``; ``{}`` for a run that is no reward model's."""
    series: dict[str, list[tuple[int, float]]] = {}
    for entry in log_history:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("step"), (int, float)):
            continue
        for prefix, label in (("", "pair accuracy (train)"), ("eval_", "pair accuracy (eval)")):
            value = entry.get(f"{prefix}accuracy")
            if f"{prefix}margin" in entry and isinstance(value, (int, float)) and math.isfinite(value):
                series.setdefault(label, []).append((int(entry["step"]), float(value)))
    return series


def _draw(ax, points: list[tuple[int, float]], label: str, **style: Any) -> None:
    # markers while the points are few (a run of one logged step still shows it); a long run's line alone
    ax.plot(
        [s for s, _ in points],
        [v for _, v in points],
        label=label,
        marker="o" if len(points) <= MARKED else "",
        markersize=3 if len(points) > 1 else 5,
        **style,
    )


def loss_figure(log_history: Iterable[Mapping[str, Any]], title: str = "training loss"):
    """The figure of :func:`plot_log_history`, or ``None`` when no loss (train or eval) was logged.
    Axes: ``fig.axes[0]`` the losses, then the rewards' means (a GRPO run) or the pair accuracy (a reward
    model: :func:`pair_accuracy_series`), then the learning rate
    (when one was logged)."""
    from judgetrain.plotting import pyplot

    series = loss_series(log_history)
    if not series["loss"] and not series["eval_loss"]:
        return None
    lr, rewards = series["learning_rate"], reward_series(log_history) or pair_accuracy_series(log_history)
    plt = pyplot()
    heights = [3.0] + ([2.0] if rewards else []) + ([1.4] if lr else [])
    fig, axes = plt.subplots(
        len(heights),
        1,
        figsize=(6.4, 3.4 + 1.8 * (len(heights) - 1)),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": heights} if len(heights) > 1 else None,
    )
    loss_ax = axes[0][0]
    if series["loss"]:
        _draw(loss_ax, series["loss"], SERIES["loss"], color="#4C72B0")
    if series["eval_loss"]:
        _draw(loss_ax, series["eval_loss"], SERIES["eval_loss"], color="#C44E52", linestyle="--")
    loss_ax.set_ylabel("loss")
    loss_ax.set_title(title, fontsize=10)
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize=8, loc="upper right")
    if rewards:
        reward_ax = axes[1][0]
        for name, points in rewards.items():
            _draw(reward_ax, points, name)
        reward_ax.set_ylabel("pair accuracy" if any(name.startswith("pair accuracy") for name in rewards) else "mean reward")
        reward_ax.grid(alpha=0.3)
        reward_ax.legend(fontsize=8, loc="upper left")
    if lr:
        lr_ax = axes[-1][0]
        _draw(lr_ax, lr, SERIES["learning_rate"], color="#55A868")
        lr_ax.set_ylabel("learning rate")
        lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
        lr_ax.grid(alpha=0.3)
    axes[-1][0].set_xlabel("step")
    fig.tight_layout()
    return fig


def plot_log_history(log_history: Iterable[Mapping[str, Any]], out: str | os.PathLike, title: str | None = None) -> Path | None:
    """Write ``out/training_loss.png`` (atomically) from a Trainer's ``state.log_history`` and
    return its path; ``None``, with a log message and no file, when no loss was logged yet."""
    from judgetrain.plotting import save_figure

    out = Path(out)
    fig = loss_figure(log_history, title or f"{out.name}: loss per step")
    if fig is None:
        logger.warning("no loss logged yet (log_history holds no loss or eval_loss): %s not written in %s", LOSS_PLOT, out)
        return None
    out.mkdir(parents=True, exist_ok=True)
    save_figure(fig, out / LOSS_PLOT)
    return out / LOSS_PLOT


def _state_file(folder: Path) -> Path:
    """``folder/trainer_state.json``, else that of its checkpoint with the highest step."""
    if (folder / STATE_FILE).is_file():
        return folder / STATE_FILE
    steps = {}
    for path in folder.glob(f"checkpoint-*/{STATE_FILE}"):
        suffix = path.parent.name.removeprefix("checkpoint-")
        if suffix.isdigit():
            steps[int(suffix)] = path
    if not steps:
        raise FileNotFoundError(
            f"{folder}: no {STATE_FILE} here or in a checkpoint-N folder; give the output_dir of a "
            "training run (the Trainer writes it when it saves a checkpoint and when training ends)"
        )
    return steps[max(steps)]


def plot_trainer_state(folder: str | os.PathLike) -> Path | None:
    """Draw ``training_loss.png`` into ``folder`` from its ``trainer_state.json`` (for runs made
    before the curve was written; a run stopped early: its newest checkpoint's). Returns the
    path, or ``None`` when the state holds no loss yet."""
    folder = Path(folder)
    path = _state_file(folder)
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e}); the Trainer writes it, so the file was cut short or edited") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{path}: no log_history list; is it a transformers trainer_state.json?")
    return plot_log_history(history, folder, title=f"{folder.name}: loss per step ({path.relative_to(folder)})")
