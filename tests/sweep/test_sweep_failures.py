"""A sweep that cannot work says so once: a recipe its objective cannot measure fails before the
first trial, identical failures in a row stop the sweep with the error, a mistyped option is
named as the sweep's own, and `sweep best` of a study that is not there lists those that are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from judgetrain import cli, sweep
from judgetrain.sweep.failures import FailureStreak, failure_key, failure_reason

REPO = Path(__file__).resolve().parents[2]
TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"
TINY_SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.fixture()
def recipe(tmp_path, tiny):
    doc = yaml.safe_load(TINY_RECIPE.read_text())
    doc.update(model_name_or_path=str(tiny))
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_mistyped_sweep_option_suggests_the_sweep_option(capsys):
    assert cli.main(["sweep", str(TINY_RECIPE), "--space", str(TINY_SPACE), "--trails", "2"]) == 2
    err = capsys.readouterr().err
    assert "unknown argument '--trails'; did you mean '--trials'?" in err and "train_split" not in err, err


def test_an_objective_the_recipe_cannot_measure_fails_before_the_first_trial(tmp_path, recipe, capsys):
    """The bug: eval_loss with `eval_strategy: no` failed every trial (10 in 300 s) inside accelerate."""
    journal = f"journal:{tmp_path / 's.journal'}"
    argv = ["sweep", str(recipe), "--space", str(TINY_SPACE), "--storage", journal, "--out", str(tmp_path / "trials"),
            "--objective", "eval_loss", "--eval_strategy", "no"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert (f"the recipe {recipe} (with this sweep's overrides) cannot run a trial, before any searched value:\n"
            "  - eval_strategy: 'no', but the objective eval_loss needs evaluations during training: set `eval_strategy: steps`") in err
    assert "Traceback" not in err and not (tmp_path / "trials").exists() and not (tmp_path / "s.journal").exists()
    recipe.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text()), "eval_split": None}))
    assert cli.main(argv[:-4]) == 2  # a judge metric (the default) needs validation records
    assert "eval_split: none, but the objective judge:PRISM-Temporal/macro_f1 is measured on validation records" in \
        capsys.readouterr().err


def test_failure_reason_is_the_training_error_not_the_launchers_traceback(tmp_path):
    logs = []
    for n in (3, 4):
        out = tmp_path / f"trial-{n:04d}"
        out.mkdir()
        (out / "train.log").write_text(
            f"$ python -m accelerate.commands.launch -m judgetrain.sweep --output_dir {out}\n"
            "error: invalid training configuration:\n"
            f"  - output_dir: {out} holds checkpoints or weights with no run.json saying what trained them\n"
            "error: invalid training configuration:\n"
            f"  - output_dir: {out} holds checkpoints or weights with no run.json saying what trained them\n"
            "Traceback (most recent call last):\n  File \"accelerate/commands/launch.py\", line 1\n"
            f"subprocess.CalledProcessError: Command '[..., '--output_dir', '{out}']' returned non-zero exit status 2.\n")
        logs.append((out, failure_reason(1, out / "train.log")))
    (out3, reason3), (out4, reason4) = logs
    assert reason3 == (f"exited with code 1: error: invalid training configuration:\n  - output_dir: {out3} holds checkpoints "
                       f"or weights with no run.json saying what trained them; log: {out3 / 'train.log'}")
    assert failure_key(reason3, out3) == failure_key(reason4, out4) != failure_key(reason3.replace("run.json", "x"), out3)


def test_a_crash_is_keyed_by_its_exception_not_the_launchers_command_with_the_trials_parameters(tmp_path):
    """A training process that dies of an exception (no `error:` message) leaves a traceback, then accelerate's
    CalledProcessError repeating the trial's command: its sampled parameters and folder. Two trials of one crash
    share a key (so --stop_after_failures stops the sweep); another exception does not."""
    keys, reasons = [], []
    for n, lr, exc in ((3, "0.0014", "IndexError: too many indices for tensor of dimension 1"),
                       (4, "8.6e-05", "IndexError: too many indices for tensor of dimension 1"),
                       (5, "2.7e-05", "KeyError: 'pixel_values'")):
        out = tmp_path / f"trial-{n:04d}"
        out.mkdir()
        (out / "train.log").write_text(
            "Traceback (most recent call last):\n  File \"judgetrain/train/run.py\", line 1\n"
            f"{exc}\n"
            "Traceback (most recent call last):\n  File \"accelerate/commands/launch.py\", line 1\n"
            f"subprocess.CalledProcessError: Command '[..., '--learning_rate', '{lr}', '--output_dir', '{out}']' returned "
            "non-zero exit status 1.\n")
        reasons.append(failure_reason(1, out / "train.log"))
        keys.append(failure_key(reasons[-1], out))
    assert reasons[0].startswith("exited with code 1: IndexError: too many indices for tensor of dimension 1; log: ")
    assert keys[0] == keys[1] != keys[2]


def test_identical_failures_in_a_row_stop_only_at_the_limit():
    study = optuna.create_study()

    def trial(state, **attrs):
        t = study.ask()
        for k, v in attrs.items():
            t.set_user_attr(k, v)
        study.tell(t, 1.0 if state == TrialState.COMPLETE else None, state=state)
        return study.trials[-1]

    streak = FailureStreak(3)
    assert not streak(trial(TrialState.FAIL, fail_key="A", fail_reason="A; log: 1"))
    assert not streak(trial(TrialState.FAIL, fail_key="A", fail_reason="A; log: 2"))
    assert not streak(trial(TrialState.COMPLETE))  # a trial that worked ends the streak
    assert not streak(trial(TrialState.FAIL, fail_key="A"))
    assert not streak(trial(TrialState.FAIL, fail_key="B"))  # another error starts a new one
    assert not streak(trial(TrialState.FAIL, fail_key="B"))
    assert not streak(trial(TrialState.FAIL, duplicate_of=0))  # skipped, never trained: not a failure
    assert streak(trial(TrialState.FAIL, fail_key="B", fail_reason="B; log: 7")) and (streak.count, streak.reason) == (3, "B; log: 7")
    never = FailureStreak(0)
    assert not any(never(trial(TrialState.FAIL, fail_key="C")) for _ in range(5))


def test_best_of_a_study_that_is_not_there_names_those_that_are(tmp_path, capsys):
    journal = f"journal:{tmp_path / 's.journal'}"
    optuna.create_study(study_name="prism-ov7b", storage=sweep.storage_from_url(journal, heartbeat_interval=None))
    assert cli.main(["sweep", "best", "prism-ov7", "--storage", journal]) == 2
    err = capsys.readouterr().err
    assert f"error: no study 'prism-ov7' in {journal}; did you mean 'prism-ov7b'?; it holds 'prism-ov7b'" in err
    assert "Traceback" not in err and "KeyError" not in err
    assert cli.main(["sweep", "best", "prism-ov7b", "--storage", journal]) == 2
    assert "study 'prism-ov7b' has no complete trial yet (no trials)" in capsys.readouterr().err
    db = tmp_path / "none.db"
    assert cli.main(["sweep", "best", "nosuch", "--storage", f"sqlite:///{db}"]) == 2
    assert f"no such file {db}" in capsys.readouterr().err and not db.exists()  # reading never creates a database


@pytest.mark.slow
def test_a_sweep_whose_every_trial_fails_the_same_way_stops_with_the_error(tmp_path, recipe):
    """Trials whose base model is not there (the controller does not load models) fail alike: three, then stop."""
    storage = f"journal:{tmp_path / 's.journal'}"
    done = subprocess.run([str(BIN / "judgetrain"), "sweep", str(recipe), "--space", str(TINY_SPACE), "--storage", storage,
                           "--study", "broken", "--out", str(tmp_path / "trials"), "--objective", "eval_loss", "--trials", "10",
                           "--model_name_or_path", str(tmp_path / "no-model")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 2, done.stderr[-3000:]
    assert ("stopped: the last 3 trials failed with the same error (--stop_after_failures 3), so the next would too." in done.stderr
            and f"error: Model folder '{tmp_path / 'no-model'}' does not exist" in done.stderr), done.stderr[-3000:]
    study = optuna.load_study(study_name="broken", storage=sweep.storage_from_url(storage, heartbeat_interval=None))
    assert [t.state for t in study.trials] == [TrialState.FAIL] * 3
