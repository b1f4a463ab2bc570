"""The controller's progress lines: ``trial n of N`` with its parameters when a trial starts, each
value the trial reports while it trains (read from the study's storage, written there by a real
second process as a trial's callback writes it), and how it ends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
from optuna.trial import TrialState
from rich.console import Console

from judgetrain import config, sweep
from judgetrain.sweep.progress import TrialProgress, format_params, format_values, study_place, wait_reporting

REPO = Path(__file__).resolve().parents[2]
TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"
TINY_SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"
PARAMS = {"lora_r": 4, "lora_alpha": 8, "learning_rate": 5e-3}


def controller_console() -> Console:
    return Console(stderr=True, soft_wrap=True)  # as run_sweep makes it


def open_tiny_study(tmp_path: Path, trials: int = 3):
    (cfg,) = config.parse(sweep.make_parser(), [
        str(TINY_RECIPE), "--space", str(TINY_SPACE), "--storage", f"journal:{tmp_path / 's.journal'}", "--study", "p",
        "--objective", "eval_loss", "--trials", str(trials), "--out", str(tmp_path / "trials")])
    return cfg, sweep.open_study(cfg)


def test_place_counts_finished_and_running_trials_before_it_not_failed_ones():
    dist = {"lora_r": optuna.distributions.CategoricalDistribution([4, 8, 16])}
    study = optuna.create_study()
    study.add_trial(optuna.create_trial(value=1.0, params={"lora_r": 4}, distributions=dist))  # 0: complete
    study.add_trial(optuna.create_trial(state=TrialState.FAIL, params={"lora_r": 8}, distributions=dist))  # 1: failed
    study.add_trial(optuna.create_trial(state=TrialState.PRUNED, params={"lora_r": 8}, distributions=dist))  # 2: 1's re-run
    running = study.ask()  # 3: another controller's
    mine = study.ask()  # 4
    trials = study.get_trials(deepcopy=False)
    assert [study_place(trials, n) for n in (0, 1, 2, 3, 4)] == [1, 2, 2, 3, 4]
    assert (running.number, mine.number) == (3, 4)
    assert format_params({"lora_r": 8, "learning_rate": 0.000312345, "gradient_checkpointing": False}) == \
        "lora_r=8, learning_rate=0.0003123, gradient_checkpointing=False"
    assert format_values(["eval_loss", "judge:all/acc"], [0.8125, float("nan")]) == "eval_loss=0.8125, judge:all/acc=n/a"
    assert format_values(["eval_loss"], None) == "eval_loss=n/a"


REPORTER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import optuna
    from judgetrain.sweep import storage_from_url
    url, name, trial_id, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    study = optuna.load_study(study_name=name, storage=storage_from_url(url, heartbeat_interval=None))
    trial = optuna.trial.Trial(study, trial_id)  # as SweepCallback.trial() opens it
    trial.report(1.5, 2)
    deadline = time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:  # until the controller has printed step 2
        time.sleep(0.05)
    trial.report(1.25, 4)
    trial.report(0.8125, 6)  # reported just before the process ends: the controller's last look prints it
""")


def test_a_running_trials_reported_values_are_printed_while_it_runs(tmp_path, capsys):
    cfg, study = open_tiny_study(tmp_path)
    study.enqueue_trial(PARAMS)
    trial = study.ask()
    values = cfg.search_space.suggest(trial)
    progress = TrialProgress(controller_console(), trial, cfg.trials, [o.name for o in cfg.objectives])
    out = cfg.out / "trial-0000"
    progress.started(values, out)
    go = tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", REPORTER, cfg.storage, cfg.study, str(trial._trial_id), str(go)])
    running_when_printed = []

    def check():
        progress.check()
        if 2 in progress.printed and not go.exists():
            running_when_printed.append(proc.poll() is None)
            go.touch()

    assert wait_reporting(proc, 0.1, check) == 0
    assert running_when_printed == [True]  # step 2's line came while the trial's process still ran
    progress.finished("complete", [0.8125], 6)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"trial 1 of 3 (#0): lora_r=4, lora_alpha=8, learning_rate=0.005 -> {out}",
        "  trial 1 of 3 (#0) step 2: eval_loss=1.5",
        "  trial 1 of 3 (#0) step 4: eval_loss=1.25",
        "  trial 1 of 3 (#0) step 6: eval_loss=0.8125",
        "  trial 1 of 3 (#0) complete: eval_loss=0.8125 at step 6",
    ]


def test_the_last_line_says_how_the_trial_ended(tmp_path, capsys):
    cfg, study = open_tiny_study(tmp_path, trials=2)
    done = study.ask()
    cfg.search_space.suggest(done)
    study.tell(done, 1.0)
    trial = study.ask()
    progress = TrialProgress(controller_console(), trial, cfg.trials, ["eval_loss"])
    progress.check()  # nothing reported yet: no line
    progress.finished("pruned", [2.5], 2)
    # a reason with brackets (a rank's prefix) is printed as it is, not read as rich markup
    progress.finished("failed", reason="exited with code 1: [rank0]: CUDA out of memory; log: train.log")
    assert capsys.readouterr().err.splitlines() == [
        "  trial 2 of 2 (#1) pruned: eval_loss=2.5 at step 2",
        "  trial 2 of 2 (#1) failed: exited with code 1: [rank0]: CUDA out of memory; log: train.log",
    ]


def test_an_interrupted_wait_stops_the_trials_process():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    def interrupt():
        raise KeyboardInterrupt

    try:
        wait_reporting(proc, 0.05, interrupt)
    except KeyboardInterrupt:
        pass
    assert proc.poll() is not None  # killed and reaped, not left running
