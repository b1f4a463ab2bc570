"""Optuna sweeps: search spaces checked against the recipe, the trial callback
reporting and pruning from inside real training, the controller end to end
(one fresh `accelerate launch` per trial) with journal, SQLite and PostgreSQL
storage, killed trials and controllers, and the dashboard's JSON API.

The end-to-end sweeps launch many training processes and are marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from judgetrain import sweep, train
from judgetrain.models.tiny import build_tiny

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny("qwen3-vl", tmp_path_factory.mktemp("m") / "qwen3-vl")


@pytest.fixture(scope="module")
def prism_data(tmp_path_factory):
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism") / "ds"
    prism.build(prism.PrismConfig(out=out, synthetic=12, seed=3, layouts=("P0",), modes=("pairwise",), synthetic_size=64,
                                  progress=False))
    return out


@pytest.fixture()
def recipe(tmp_path, tiny, prism_data):
    """The tiny PRISM recipe pointed at this session's model and data."""
    doc = yaml.safe_load(RECIPE.read_text())
    doc.update(model_name_or_path=str(tiny), datasets=[str(prism_data)], max_eval_samples=8)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def journal(path: Path) -> str:
    return f"journal:{path}"


def load(storage: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=sweep.storage_from_url(storage, heartbeat_interval=None))


# --------------------------------------------------------------------------- search spaces


def write_space(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.yaml"
    path.write_text(text)
    return path


def test_shipped_spaces_fit_their_recipes():
    for space, recipe in [("paper002", "llava-ov-7b/prism-pairwise-lora.yaml"), ("lora-wide", "llava-ov-7b/prism-pairwise-lora.yaml"),
                          ("tiny", "tiny/qwen3vl-prism-pairwise-lora.yaml")]:
        # bf16 off: the GPU recipes parse on this CPU-only machine only so
        sweep.SearchSpace.load(REPO / "recipes" / "spaces" / f"{space}.yaml").validate(REPO / "recipes" / recipe, ["--bf16", "false"])
    paper = {p.name: p for p in sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "paper002.yaml").params}
    # paper 002 B.1
    assert paper["lora_r"].choices == (16, 32, 64, 128) and paper["lora_alpha"].choices == (16, 32, 64, 128)
    assert (paper["lora_dropout"].low, paper["lora_dropout"].high) == (0.01, 0.10)
    assert (paper["learning_rate"].low, paper["learning_rate"].high, paper["learning_rate"].log) == (2e-6, 5e-5, True)
    assert paper["max_length"].choices == (4096, 8192, 12000)
    wide = {p.name: p for p in sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "lora-wide.yaml").params}
    assert wide["learning_rate"].high == 5e-4


def test_space_errors_name_the_field_and_the_fix(tmp_path):
    space = write_space(tmp_path, "params:\n  lora_rank: {choices: [8, 16]}\n  learning_rate: {low: 1.0e-3, high: 1.0e-4}\n"
                                  "  weight_decay: {low: 0, high: 0.1, log: true}\n  warmup_ratio: {low: 2e-6, high: 0.1}\n"
                                  "  lora_dropout: {choices: []}\n")
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(space)
    text = str(exc.value)
    assert "params.learning_rate: low (0.001) must be below high (0.0001)" in text
    assert "params.weight_decay: a log range needs low > 0" in text
    assert "params.warmup_ratio: low and high must be numbers (write 2.0e-6" in text
    assert "params.lora_dropout.choices: give a non-empty list" in text

    space = write_space(tmp_path, "params:\n  lora_rr: {choices: [8, 16]}\n  lora_r: {choices: [8, big]}\n"
                                  "  lora_dropout: {low: 0.5, high: 1.5}\n")
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(space).validate(RECIPE)
    assert "'lora_rr' is not a recipe field; did you mean 'lora_r'?" in str(exc.value)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(write_space(tmp_path, "params:\n  lora_r: {choices: [8, big]}\n  lora_dropout: {low: 0.5, high: 1.5}\n")).validate(RECIPE)
    text = str(exc.value)
    assert "params.lora_r = 'big' does not parse" in text
    assert "params.lora_dropout = 1.5: lora_dropout: 1.5 must be in [0, 1)" in text
    assert "0.5" not in text.split("lora_dropout = 1.5")[0]  # the valid end of the range is not reported


def test_overrides_and_objectives(tmp_path):
    space = sweep.SearchSpace.load(write_space(tmp_path, "params:\n  lora_r: {choices: [4, 8]}\nfixed:\n  gradient_checkpointing: false\n"))
    assert space.overrides({"lora_r": 8, "learning_rate": 1e-4}) == [
        "--gradient_checkpointing", "false", "--lora_r", "8", "--learning_rate", "0.0001"]
    objs = sweep.parse_objectives("judge:PRISM-Temporal/macro_f1,eval_loss", None)
    assert [(o.name, o.direction) for o in objs] == [("judge:PRISM-Temporal/macro_f1", "maximize"), ("eval_loss", "minimize")]
    assert (objs[0].subset, objs[0].metric) == ("PRISM-Temporal", "macro_f1")
    with pytest.raises(sweep.SweepError, match="one per objective"):
        sweep.parse_objectives("eval_loss", "minimize,maximize")
    with pytest.raises(sweep.SweepError, match="use eval_loss or judge:SUBSET/METRIC"):
        sweep.parse_objectives("f1", None)


# --------------------------------------------------------------------------- the trial callback, in process


def _trial_env(monkeypatch, storage: str, study: optuna.Study, trial: optuna.Trial, objectives, pruner=("median", 0, 0)):
    monkeypatch.setenv(sweep.ENV, json.dumps({
        "storage": storage, "study": study.study_name, "trial_id": trial._trial_id, "trial_number": trial.number,
        "objectives": objectives, "controller_pid": os.getpid(), "pruner": list(pruner)}))


def test_callback_reports_every_evaluation_and_writes_the_result(tmp_path, monkeypatch, recipe):
    storage = journal(tmp_path / "s.journal")
    study = optuna.create_study(study_name="cb", storage=sweep.storage_from_url(storage), direction="minimize")
    trial = study.ask()
    _trial_env(monkeypatch, storage, study, trial, [["eval_loss", "minimize"]])
    out = tmp_path / "run"
    train.main(["--config", str(recipe), "--output_dir", str(out), "--max_steps", "5", "--eval_steps", "2"])
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    eval_losses = {h["step"]: h["eval_loss"] for h in history if "eval_loss" in h}
    # evaluations at steps 2 and 4 by the recipe, and at the last step (5) for the final value
    assert sorted(eval_losses) == [2, 4, 5]
    reported = load(storage, "cb").trials[0].intermediate_values
    assert reported == pytest.approx(eval_losses, abs=1e-6)
    result = json.loads((out / sweep.RESULT_FILE).read_text())
    assert result["state"] == "complete" and result["step"] == 5
    assert result["values"] == pytest.approx([eval_losses[5]])
    assert (out / "adapter_model.safetensors").is_file()


def test_callback_stops_training_when_the_pruner_says_so(tmp_path, monkeypatch, recipe):
    storage = journal(tmp_path / "s.journal")
    study = optuna.create_study(study_name="prune", storage=sweep.storage_from_url(storage), direction="minimize")
    for v in (0.1, 0.2):  # two finished trials far better than an untrained model at every step
        study.add_trial(optuna.create_trial(value=v, intermediate_values={s: v for s in range(1, 9)}))
    trial = study.ask()
    _trial_env(monkeypatch, storage, study, trial, [["eval_loss", "minimize"]], pruner=("median", 0, 2))
    out = tmp_path / "run"
    train.main(["--config", str(recipe), "--output_dir", str(out), "--max_steps", "8", "--eval_steps", "2"])
    result = json.loads((out / sweep.RESULT_FILE).read_text())
    assert result["state"] == "pruned" and result["step"] == 2
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    assert list(load(storage, "prune").trials[2].intermediate_values) == [2]


# --------------------------------------------------------------------------- the dashboard


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_serves_the_study(tmp_path):
    path = tmp_path / "s.journal"
    study = optuna.create_study(study_name="dash", storage=sweep.storage_from_url(journal(path)), direction="maximize")
    study.add_trial(optuna.create_trial(value=0.75, params={"lora_r": 8},
                                        distributions={"lora_r": optuna.distributions.CategoricalDistribution([4, 8])}))
    port = _free_port()
    proc = subprocess.Popen([str(BIN / "judgetrain"), "dashboard", str(path), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=5) as r:
                    studies = json.loads(r.read())
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "dashboard did not answer within 60 s"
                time.sleep(0.5)
        listed = {s["study_name"]: s for s in studies["study_summaries"]}
        assert "dash" in listed
        sid = listed["dash"]["study_id"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{sid}", timeout=5) as r:
            detail = json.loads(r.read())
        assert [t["values"] for t in detail["trials"]] == [[0.75]]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
