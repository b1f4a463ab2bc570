"""The loss curve ``training_loss.png``: what is drawn from a Trainer's ``log_history`` (train
loss, eval loss on the same axes, the learning rate below), the cases with nothing, one point or
only evaluations, and drawing it afterwards from a run folder's ``trainer_state.json``."""

from __future__ import annotations

import json
import logging

import pytest

from judgetrain.plotting import pyplot
from judgetrain.train import curves

# as transformers logs it: a train entry every 2 steps, evaluations at steps 2 and 4, the run's summary at the end
HISTORY = [
    {"epoch": 0.5, "grad_norm": 1.5, "learning_rate": 5e-4, "loss": 2.5, "step": 2},
    {"epoch": 0.5, "eval_loss": 2.25, "eval_runtime": 0.1, "step": 2},
    {"epoch": 1.0, "grad_norm": 1.25, "learning_rate": 2.5e-4, "loss": 1.75, "step": 4},
    {"epoch": 1.0, "eval_loss": 2.0, "eval_runtime": 0.1, "step": 4},
    {"epoch": 1.0, "step": 4, "total_flos": 10.0, "train_loss": 2.125, "train_runtime": 3.0},
]


def lines(ax) -> dict[str, tuple[list, list]]:
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def is_png(path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_series_are_the_logged_points_and_not_the_runs_mean():
    assert curves.loss_series(HISTORY) == {"loss": [(2, 2.5), (4, 1.75)], "eval_loss": [(2, 2.25), (4, 2.0)],
                                           "learning_rate": [(2, 5e-4), (4, 2.5e-4)]}
    # a NaN loss, an entry with no step and a bool are left out, not drawn as gaps or zeros
    odd = [{"loss": float("nan"), "step": 1}, {"loss": 3.0}, {"loss": True, "step": 2}, {"loss": 1, "step": 3.0}]
    assert curves.loss_series(odd) == {"loss": [(3, 1.0)], "eval_loss": [], "learning_rate": []}


def test_train_and_eval_loss_share_a_panel_and_the_learning_rate_has_its_own(tmp_path):
    fig = curves.loss_figure(HISTORY, "run-a: loss per step")
    loss_ax, lr_ax = fig.axes
    assert lines(loss_ax) == {"train loss": ([2, 4], [2.5, 1.75]), "eval loss": ([2, 4], [2.25, 2.0])}
    assert lines(lr_ax) == {"learning rate": ([2, 4], [5e-4, 2.5e-4])}
    assert (loss_ax.get_title(), loss_ax.get_ylabel(), lr_ax.get_ylabel(), lr_ax.get_xlabel()) == \
        ("run-a: loss per step", "loss", "learning rate", "step")
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["train loss", "eval loss"]
    pyplot().close(fig)

    out = tmp_path / "run-a"
    assert curves.plot_log_history(HISTORY, out) == out / curves.LOSS_PLOT
    assert is_png(out / "training_loss.png") and [p.name for p in out.iterdir()] == ["training_loss.png"]  # no temp file


def test_one_point_and_eval_only_are_drawn_nothing_logged_writes_nothing(tmp_path, caplog):
    one = curves.loss_figure([{"loss": 0.5, "learning_rate": 1e-3, "step": 1}])
    assert lines(one.axes[0]) == {"train loss": ([1], [0.5])} and one.axes[0].get_lines()[0].get_marker() == "o"
    pyplot().close(one)
    long = curves.loss_figure([{"loss": 1.0 / s, "step": s} for s in range(1, curves.MARKED + 2)])
    assert long.axes[0].get_lines()[0].get_marker() in ("", "None")  # no marker on each of 61 points
    pyplot().close(long)

    evals = curves.loss_figure([{"eval_loss": 1.5, "step": 3}, {"eval_loss": 1.25, "step": 6}])
    assert len(evals.axes) == 1 and lines(evals.axes[0]) == {"eval loss": ([3, 6], [1.5, 1.25])}
    pyplot().close(evals)

    # a learning rate alone is no loss curve
    assert curves.loss_figure([{"learning_rate": 1e-3, "step": 1}]) is None
    with caplog.at_level(logging.WARNING, logger="judgetrain.train"):
        assert curves.plot_log_history([], tmp_path / "fresh") is None
    assert "no loss logged yet" in caplog.text and "training_loss.png not written" in caplog.text
    assert not (tmp_path / "fresh").exists()


def test_an_old_run_is_drawn_from_its_trainer_state(tmp_path):
    run = tmp_path / "old-run"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "checkpoint-10").mkdir()
    (run / "checkpoint-2" / curves.STATE_FILE).write_text(json.dumps({"global_step": 2, "log_history": []}))
    (run / "checkpoint-10" / curves.STATE_FILE).write_text(json.dumps({"global_step": 4, "log_history": HISTORY[:4]}))
    # a run stopped before it finished: the newest checkpoint's state (10, not 2, which has no loss: steps are numbers)
    assert curves.plot_trainer_state(run) == run / curves.LOSS_PLOT and is_png(run / curves.LOSS_PLOT)
    (run / curves.LOSS_PLOT).unlink()
    (run / curves.STATE_FILE).write_text('{"global_step": 0, "log_history": []}')
    assert curves.plot_trainer_state(run) is None  # the run's own state wins over its checkpoints'
    assert not (run / curves.LOSS_PLOT).exists()

    with pytest.raises(FileNotFoundError, match=f"{tmp_path / 'empty'}: no trainer_state.json here or in a checkpoint-N"):
        curves.plot_trainer_state(tmp_path / "empty")
    (run / curves.STATE_FILE).write_text('{"log_history": [')
    with pytest.raises(ValueError, match="trainer_state.json: not JSON"):
        curves.plot_trainer_state(run)
    (run / curves.STATE_FILE).write_text('{"global_step": 0}')
    with pytest.raises(ValueError, match="trainer_state.json: no log_history list"):
        curves.plot_trainer_state(run)
