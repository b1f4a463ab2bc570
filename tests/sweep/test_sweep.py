"""Optuna sweeps: search spaces checked against the recipe, the trial callback
reporting and pruning from inside real training, the controller end to end
(one fresh `accelerate launch` per trial) with journal, SQLite and PostgreSQL
storage, killed trials and controllers, and the dashboard's JSON API.

The end-to-end sweeps launch many training processes and are marked slow.
"""

from __future__ import annotations

import json
import os
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
from judgetrain.sweep import sampler as sweep_sampler, storage as sweep_storage

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.fixture(scope="module")
def prism_data(tmp_path_factory):
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism") / "ds"
    prism.build(
        prism.PrismConfig(out=out, synthetic=12, seed=3, layouts=("P0",), modes=("pairwise",), synthetic_size=64, progress=False)
    )
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
    for space, recipe in [
        ("paper002", "llava-ov-7b/prism-pairwise-lora.yaml"),
        ("lora-wide", "llava-ov-7b/prism-pairwise-lora.yaml"),
        ("tiny", "tiny/qwen3vl-prism-pairwise-lora.yaml"),
        ("grpo", "tiny/qwen3vl-prism-grpo.yaml"),
        ("grpo", "qwen3vl-8b/prism-pairwise-grpo.yaml"),
    ]:
        # bf16 off: the GPU recipes parse on this CPU-only machine only so
        sweep.SearchSpace.load(REPO / "recipes" / "spaces" / f"{space}.yaml").validate(
            REPO / "recipes" / recipe, ["--bf16", "false"]
        )
    paper = {p.name: p for p in sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "paper002.yaml").params}
    # paper 002 B.1
    assert paper["lora_r"].choices == (16, 32, 64, 128) and paper["lora_alpha"].choices == (16, 32, 64, 128)
    assert (paper["lora_dropout"].low, paper["lora_dropout"].high) == (0.01, 0.10)
    assert (paper["learning_rate"].low, paper["learning_rate"].high, paper["learning_rate"].log) == (2e-6, 5e-5, True)
    assert paper["max_length"].choices == (4096, 8192, 12000)
    # §4D: batch size in [4, 16] at the global batch of 128, gradient accumulation following it
    assert paper["per_device_train_batch_size"].choices == (4, 8, 16)
    space = sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "paper002.yaml")
    assert space.fixed == {"effective_batch_size": 128, "packing": False}
    margs, dargs, targs = train.parse(
        [
            "--config",
            str(REPO / "recipes" / "llava-ov-7b" / "prism-pairwise-lora.yaml"),
            "--bf16",
            "false",
            *space.overrides({"per_device_train_batch_size": 8}),
        ]
    )
    assert train.check_config(margs, dargs, targs, world_size=2) == []
    # the recipe's effective batch on 2 processes: 128 / (8 x 2)
    assert dargs.effective_batch_size // (targs.per_device_train_batch_size * 2) == 8
    with pytest.raises(sweep.SweepError, match=r"per_device_train_batch_size = 16: effective_batch_size: 128 is not a multiple"):
        space.validate(REPO / "recipes" / "llava-ov-7b" / "prism-pairwise-lora.yaml", ["--bf16", "false"], world_size=3)
    text = (REPO / "recipes" / "spaces" / "paper002.yaml").read_text()
    assert all(
        ("[paper]" in line or "[ours]" in line)
        for line in text.splitlines()
        if line.strip().startswith(tuple(p.name + ":" for p in space.params))
    )  # every range says whose it is
    wide = {p.name: p for p in sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "lora-wide.yaml").params}
    assert wide["learning_rate"].high == 5e-4


def test_space_errors_name_the_field_and_the_fix(tmp_path):
    space = write_space(
        tmp_path,
        "params:\n  lora_rank: {choices: [8, 16]}\n  learning_rate: {low: 1.0e-3, high: 1.0e-4}\n"
        "  weight_decay: {low: 0, high: 0.1, log: true}\n  warmup_ratio: {low: 2e-6, high: 0.1}\n"
        "  lora_dropout: {choices: []}\n",
    )
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(space)
    text = str(exc.value)
    assert "params.learning_rate: low (0.001) must be below high (0.0001)" in text
    assert "params.weight_decay: a log range needs low > 0" in text
    assert "params.warmup_ratio: low and high must be numbers (write 2.0e-6" in text
    assert "params.lora_dropout.choices: give a non-empty list" in text

    space = write_space(
        tmp_path, "params:\n  lora_rr: {choices: [8, 16]}\n  lora_r: {choices: [8, big]}\n  lora_dropout: {low: 0.5, high: 1.5}\n"
    )
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(space).validate(RECIPE)
    assert "'lora_rr' is not a recipe field; did you mean 'lora_r'?" in str(exc.value)
    with pytest.raises(sweep.SweepError) as exc:
        sweep.SearchSpace.load(
            write_space(tmp_path, "params:\n  lora_r: {choices: [8, big]}\n  lora_dropout: {low: 0.5, high: 1.5}\n")
        ).validate(RECIPE)
    text = str(exc.value)
    assert "params.lora_r = 'big' does not parse" in text
    assert "params.lora_dropout = 1.5: lora_dropout: 1.5 must be in [0, 1)" in text
    assert "0.5" not in text.split("lora_dropout = 1.5")[0]  # the valid end of the range is not reported


def test_overrides_and_objectives(tmp_path):
    space = sweep.SearchSpace.load(
        write_space(tmp_path, "params:\n  lora_r: {choices: [4, 8]}\nfixed:\n  gradient_checkpointing: false\n")
    )
    assert space.overrides({"lora_r": 8, "learning_rate": 1e-4}) == [
        "--gradient_checkpointing",
        "false",
        "--lora_r",
        "8",
        "--learning_rate",
        "0.0001",
    ]
    objs = sweep.parse_objectives("judge:PRISM-Temporal/macro_f1,eval_loss", None)
    assert [(o.name, o.direction) for o in objs] == [("judge:PRISM-Temporal/macro_f1", "maximize"), ("eval_loss", "minimize")]
    assert (objs[0].subset, objs[0].metric) == ("PRISM-Temporal", "macro_f1")
    with pytest.raises(sweep.SweepError, match="one per objective"):
        sweep.parse_objectives("eval_loss", "minimize,maximize")
    with pytest.raises(sweep.SweepError, match="use eval_loss or judge:SUBSET/METRIC"):
        sweep.parse_objectives("f1", None)


# --------------------------------------------------------------------------- the command's options


def parse_sweep(argv: list[str]) -> sweep.SweepConfig:
    from judgetrain import config

    (cfg,) = config.parse(sweep.make_parser(), argv)
    return cfg


TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"
TINY_SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"


def test_options_from_flags_with_overrides_for_every_trial():
    cfg = parse_sweep(
        [
            str(TINY_RECIPE),
            "--space",
            str(TINY_SPACE),
            "--trials",
            "6",
            "--startup-trials",
            "4",
            "--max_steps",
            "30",
            "--warmup_steps",
            "1",
            "--eval_steps",
            "10",
            "--accelerate-config",
            "ddp",
        ]
    )
    assert (cfg.recipe, cfg.space, cfg.trials, cfg.startup_trials, cfg.warmup_steps) == (TINY_RECIPE, TINY_SPACE, 6, 4, 1)
    assert cfg.overrides == ["--max_steps", "30", "--eval_steps", "10"]  # every argument sweep does not know
    assert (cfg.study, cfg.out) == ("qwen3vl-prism-pairwise-lora", Path("runs/sweeps/qwen3vl-prism-pairwise-lora"))
    assert [(o.name, o.direction) for o in cfg.objectives] == [(sweep.DEFAULT_OBJECTIVE, "maximize")]
    assert cfg.search_space.path == TINY_SPACE and cfg.enqueued == []
    cmd = sweep.trial_command(cfg, cfg.search_space.overrides({"lora_r": 4}) + cfg.overrides)
    i = cmd.index("-m", 3)
    assert cmd[:3] == [sys.executable, "-m", "accelerate.commands.launch"] and cmd[3] == "--config_file"
    assert cmd[i:] == [
        "-m",
        sweep.TRIAL_MODULE,
        "--config",
        str(TINY_RECIPE),
        *sweep.SearchSpace.load(TINY_SPACE).overrides({"lora_r": 4}),
        "--max_steps",
        "30",
        "--eval_steps",
        "10",
    ]


def test_options_from_a_config_file_flags_win(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"recipe: {TINY_RECIPE}\nspace: {TINY_SPACE}\ntrials: 3\nobjective: eval_loss\npruner: none\n"
        "study: tiny\noverrides: {max_steps: 30, eval_steps: 10}\n"
    )
    cfg = parse_sweep(["--config", str(path), "--trials", "4", "--report_to", "none"])
    assert (cfg.recipe, cfg.space, cfg.trials, cfg.pruner, cfg.study) == (TINY_RECIPE, TINY_SPACE, 4, "none", "tiny")
    assert [(o.name, o.direction) for o in cfg.objectives] == [("eval_loss", "minimize")]
    assert cfg.overrides == ["--max_steps", "30", "--eval_steps", "10", "--report_to", "none"]
    assert cfg.out == Path("runs/sweeps/tiny")
    other = tmp_path / "other.yaml"
    other.write_text(TINY_RECIPE.read_text())
    assert parse_sweep([str(other), "--config", str(path)]).recipe == other  # the first word wins over the file
    path.write_text("trails: 3\n")
    from judgetrain.config import ConfigError

    with pytest.raises(ConfigError, match="unknown key 'trails'; did you mean 'trials'"):
        parse_sweep(["--config", str(path)])


def test_best_takes_the_study_as_its_second_word():
    cfg = parse_sweep(
        ["best", "prism-ov7b", "--storage", "sqlite:///runs/sweeps.db", "--out", "recipes/best.yaml", "--trial", "3"]
    )
    assert cfg.is_best and (cfg.study_name, cfg.storage, cfg.out, cfg.trial) == (
        "prism-ov7b",
        "sqlite:///runs/sweeps.db",
        Path("recipes/best.yaml"),
        3,
    )


def test_option_errors_are_one_message(tmp_path, capsys):
    from judgetrain import cli

    for argv, message in [
        ([str(TINY_RECIPE)], "--space: give a search space YAML"),
        ([str(tmp_path / "nope.yaml"), "--space", str(TINY_SPACE)], "nope.yaml not found"),
        ([str(TINY_RECIPE), "--space", str(TINY_SPACE), "--objective", "f1"], "use eval_loss or judge:SUBSET/METRIC"),
        ([str(TINY_RECIPE), "--space", str(TINY_SPACE), "--accelerate_config", "zero33"], "did you mean 'zero3'"),
        (["best"], "usage: judgetrain sweep best STUDY"),
    ]:
        assert cli.main(["sweep", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err, (argv, err)


# --------------------------------------------------------------------------- sampling, study size and the best recipe, in process


def _sample(study: optuna.Study, cfg: sweep.SweepConfig, n: int) -> None:
    """``n`` trials as a controller samples them, told complete at once (no training)."""
    for _ in range(n):
        trial = study.ask()
        values = cfg.search_space.suggest(trial)
        study.tell(trial, float(values["learning_rate"]))


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_restarted_and_parallel_controllers_continue_the_sampling(tmp_path, kind):
    """A controller restarted with the same --seed, and a second controller started with
    the default seed, continue the study's sampling: no parameter set repeats (before,
    each new TPESampler(seed=42) replayed the first start-up draws)."""
    storage = journal(tmp_path / "s.journal") if kind == "journal" else f"sqlite:///{tmp_path / 's.db'}"
    cfg = parse_sweep(
        [str(TINY_RECIPE), "--space", str(TINY_SPACE), "--storage", storage, "--study", "s", "--objective", "eval_loss"]
    )
    first = sweep.open_study(cfg)
    _sample(first, cfg, 3)
    restarted = sweep.open_study(cfg)  # the same command again, after a kill
    _sample(restarted, cfg, 3)
    a, b = sweep.open_study(cfg), sweep.open_study(cfg)  # two controllers on the same study, same seed
    for _ in range(2):
        _sample(a, cfg, 1)
        _sample(b, cfg, 1)
    params = [tuple(sorted(t.params.items())) for t in load(storage, "s").trials]
    assert len(params) == 10 and len(set(params)) == 10
    # the draw is a function of (study, seed, trial number): a fresh study with the same seed draws the same sequence
    cfg2 = parse_sweep(
        [
            str(TINY_RECIPE),
            "--space",
            str(TINY_SPACE),
            "--storage",
            journal(tmp_path / "t.journal"),
            "--study",
            "s",
            "--objective",
            "eval_loss",
        ]
    )
    _sample(sweep.open_study(cfg2), cfg2, 3)
    assert [t.params for t in load(cfg2.storage, "s").trials] == [t.params for t in load(storage, "s").trials[:3]]
    assert sweep_sampler.trial_seed("s", 42, 3) != sweep_sampler.trial_seed("s", 42, 4) != sweep_sampler.trial_seed("t", 42, 4)


def test_a_repeated_or_surplus_trial_is_skipped_not_trained(tmp_path):
    dist = {"lora_r": optuna.distributions.CategoricalDistribution([4, 8, 16, 32])}
    study = optuna.create_study(storage=sweep.storage_from_url(journal(tmp_path / "s.journal")), study_name="d")
    study.add_trial(optuna.create_trial(value=1.0, params={"lora_r": 4}, distributions=dist))
    study.add_trial(optuna.create_trial(state=TrialState.FAIL, params={"lora_r": 8}, distributions=dist))
    study.enqueue_trial({"lora_r": 16})
    running = study.ask(dist)  # trial 2, another controller's, being trained
    new = study.ask()  # trial 3
    assert (running.number, running.params, new.number) == (2, {"lora_r": 16}, 3)
    trials = study.get_trials(deepcopy=False)
    assert sweep_sampler.first_duplicate(trials, 3, {"lora_r": 4}) == 0  # a finished trial has it
    assert sweep_sampler.first_duplicate(trials, 3, {"lora_r": 16}) == 2  # a running one has it
    assert sweep_sampler.first_duplicate(trials, 3, {"lora_r": 8}) is None  # a failed trial's re-run may repeat it
    assert sweep.skip_reason(study, new, {"lora_r": 4}, size=10) == "same parameters as trial 0: skipped, never trained twice"
    assert study.get_trials()[3].user_attrs["duplicate_of"] == 0
    # trials 0 (complete) and 2 (running) come before trial 3: a study of size 2 is full
    assert (
        sweep.skip_reason(study, new, {"lora_r": 32}, size=2) == "2 earlier trials are finished or running (--trials 2): skipped"
    )
    assert study.get_trials()[3].user_attrs["surplus"] is True
    assert sweep.skip_reason(study, new, {"lora_r": 32}, size=3) is None


def test_the_study_names_its_values_after_the_objectives(tmp_path):
    """optuna-dashboard and the study's dataframe label each value by the study's metric names
    ("Objective 0" without them)."""
    import warnings

    storage = journal(tmp_path / "s.journal")
    space = write_space(tmp_path, "params:\n  lora_r: {choices: [4, 8]}\n")
    cfg = parse_sweep([str(TINY_RECIPE), "--space", str(space), "--storage", storage, "--study", "m",
                       "--objective", "eval_loss,judge:PRISM-Temporal/macro_f1"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning of Optuna's reaches the user for it
        sweep.open_study(cfg)
    study = optuna.load_study(study_name="m", storage=sweep.storage_from_url(storage))
    assert study.metric_names == ["eval_loss", "judge:PRISM-Temporal/macro_f1"]


def test_study_room_counts_finished_and_running_trials_of_every_controller():
    dist = {"lora_r": optuna.distributions.CategoricalDistribution([4, 8])}
    study = optuna.create_study()
    assert sweep.study_room(study, 2) == ("room", 0, 0)
    study.add_trial(optuna.create_trial(value=1.0, params={"lora_r": 4}, distributions=dist))
    study.add_trial(optuna.create_trial(state=TrialState.FAIL, params={"lora_r": 8}, distributions=dist))
    assert sweep.study_room(study, 2) == ("room", 1, 0)  # a failed trial leaves room
    running = study.ask()
    assert sweep.study_room(study, 2) == ("wait", 1, 1)  # another controller's trial may still fill the study
    study.tell(running, state=TrialState.PRUNED)
    assert sweep.study_room(study, 2) == ("full", 2, 0)


def test_best_recipe_is_exactly_what_the_winning_trial_ran(tmp_path):
    """The recipe + the sweep's --field value overrides + the space's fixed fields + the
    sampled values, with the types the trainer gives them; the header names --out."""
    storage = journal(tmp_path / "s.journal")
    space = write_space(
        tmp_path,
        "params:\n  lora_r: {choices: [4, 8]}\n  learning_rate: {low: 1.0e-5, high: 1.0e-2, log: true}\n"
        "fixed:\n  gradient_checkpointing: false\n",
    )
    cfg = parse_sweep(
        [
            str(TINY_RECIPE),
            "--space",
            str(space),
            "--storage",
            storage,
            "--study",
            "b",
            "--objective",
            "eval_loss",
            "--max_steps",
            "4",
            "--model_name_or_path",
            str(tmp_path / "my-model"),
            "--report_to",
            "none",
            "--learning_rate",
            "3e-4",
        ]
    )
    study = sweep.open_study(cfg)
    for value in (0.5, 0.25, 0.75):
        trial = study.ask()
        values = cfg.search_space.suggest(trial)
        trial.set_user_attr("overrides", sweep.trial_overrides(cfg, values))
        study.tell(trial, value)
    out = tmp_path / "elsewhere" / "best.yaml"
    text, best = sweep.best_recipe(storage, "b", out=out)
    assert best.number == 1 and text.startswith(f"# accelerate launch -m judgetrain.train --config {out}\n")
    doc = yaml.safe_load(text)
    base = yaml.safe_load(TINY_RECIPE.read_text())
    assert doc["max_steps"] == 4 and doc["model_name_or_path"] == str(tmp_path / "my-model") and doc["report_to"] == "none"
    assert doc["gradient_checkpointing"] is False and doc["lora_r"] == best.params["lora_r"]
    assert doc["learning_rate"] == 3e-4  # the sweep's override came after the sampled value, as on the trial's command line
    assert (doc["output_dir"], doc["run_name"]) == ("runs/b-trial-0001", "b-trial-0001")
    assert {
        k: v
        for k, v in doc.items()
        if k
        not in (
            "max_steps",
            "model_name_or_path",
            "report_to",
            "gradient_checkpointing",
            "lora_r",
            "learning_rate",
            "output_dir",
            "run_name",
        )
    } == {
        k: v
        for k, v in base.items()
        if k
        not in (
            "max_steps",
            "model_name_or_path",
            "report_to",
            "gradient_checkpointing",
            "lora_r",
            "learning_rate",
            "output_dir",
            "run_name",
        )
    }
    with pytest.raises(sweep.SweepError, match="override --lora_rank: not a recipe field"):
        sweep.recipe_with_overrides({}, ["--lora_rank", "4"])


def test_best_reads_the_typed_overrides_a_trial_stored_without_loading_the_trainer(tmp_path):
    """`sweep best` on trials that stored their overrides typed (as the objective stores them) writes the
    recipe the trainer's parser gives, without importing transformers (seconds on a cold machine)."""
    storage = journal(tmp_path / "s.journal")
    space = write_space(
        tmp_path, "params:\n  lora_r: {choices: [4, 8]}\n  learning_rate: {low: 1.0e-5, high: 1.0e-2, log: true}\n"
    )
    cfg = parse_sweep(
        [
            str(TINY_RECIPE),
            "--space",
            str(space),
            "--storage",
            storage,
            "--study",
            "t",
            "--objective",
            "eval_loss",
            "--max_steps",
            "4",
            "--report_to",
            "none",
        ]
    )
    study = sweep.open_study(cfg)
    for value in (0.5, 0.75):
        trial = study.ask()
        overrides = sweep.trial_overrides(cfg, cfg.search_space.suggest(trial))
        trial.set_user_attr("overrides", overrides)
        trial.set_user_attr("recipe_overrides", sweep.recipe_with_overrides({}, overrides))
        study.tell(trial, value)
    parsed, _ = sweep.best_recipe(storage, "t")  # in this process the parser is loaded: the typed attrs are what it gives
    code = (
        "import sys\nfrom judgetrain import cli\n"
        f"cli.main(['sweep', 'best', 't', '--storage', {storage!r}, '--out', {str(tmp_path / 'best.yaml')!r}])\n"
        "print(sorted(m for m in ('transformers', 'peft', 'torch') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    written = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert written == yaml.safe_load(parsed) and written["max_steps"] == 4 and isinstance(written["lora_r"], int)


def test_sweep_help_does_not_import_the_trainer():
    code = (
        "import sys\nfrom judgetrain import cli\ntry:\n    cli.main(['sweep', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('transformers', 'torch', 'peft', 'optuna') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--space" in proc.stdout and proc.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- the trial callback, in process


def _trial_env(monkeypatch, storage: str, study: optuna.Study, trial: optuna.Trial, objectives, pruner=("median", 0, 0)):
    monkeypatch.setenv(
        sweep.ENV,
        json.dumps(
            {
                "storage": storage,
                "study": study.study_name,
                "trial_id": trial._trial_id,
                "trial_number": trial.number,
                "objectives": objectives,
                "controller_pid": os.getpid(),
                "pruner": list(pruner),
            }
        ),
    )


def test_callback_reports_every_evaluation_and_writes_the_result(tmp_path, monkeypatch, recipe):
    storage = journal(tmp_path / "s.journal")
    study = optuna.create_study(study_name="cb", storage=sweep.storage_from_url(storage), direction="minimize")
    trial = study.ask()
    _trial_env(monkeypatch, storage, study, trial, [["eval_loss", "minimize"]])
    out = tmp_path / "run"
    assert sweep.trial_main(["--config", str(recipe), "--output_dir", str(out), "--max_steps", "5", "--eval_steps", "2"]) == 0
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
    assert sweep.trial_main(["--config", str(recipe), "--output_dir", str(out), "--max_steps", "8", "--eval_steps", "2"]) == 0
    result = json.loads((out / sweep.RESULT_FILE).read_text())
    assert result["state"] == "pruned" and result["step"] == 2
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    assert list(load(storage, "prune").trials[2].intermediate_values) == [2]


def test_multi_objective_trial_writes_every_value_and_reports_none(tmp_path, monkeypatch, recipe):
    # Optuna cannot prune multi-objective studies (trial.report refuses them): values only at the end
    storage = journal(tmp_path / "s.journal")
    study = optuna.create_study(study_name="multi", storage=sweep.storage_from_url(storage), directions=["maximize", "minimize"])
    trial = study.ask()
    _trial_env(monkeypatch, storage, study, trial, [[sweep.DEFAULT_OBJECTIVE, "maximize"], ["eval_loss", "minimize"]])
    out = tmp_path / "run"
    assert sweep.trial_main(["--config", str(recipe), "--output_dir", str(out), "--max_steps", "2", "--eval_steps", "2"]) == 0
    result = json.loads((out / sweep.RESULT_FILE).read_text())
    eval_loss = [h["eval_loss"] for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "eval_loss" in h]
    assert result["state"] == "complete" and result["objectives"] == [sweep.DEFAULT_OBJECTIVE, "eval_loss"]
    assert result["values"][1] == pytest.approx(eval_loss[-1]) and 0.0 <= result["values"][0] <= 1.0
    assert load(storage, "multi").trials[0].intermediate_values == {}


# --------------------------------------------------------------------------- the dashboard


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_serves_the_study(tmp_path):
    path = tmp_path / "s.journal"
    study = optuna.create_study(study_name="dash", storage=sweep.storage_from_url(journal(path)), direction="maximize")
    study.add_trial(
        optuna.create_trial(
            value=0.75, params={"lora_r": 8}, distributions={"lora_r": optuna.distributions.CategoricalDistribution([4, 8])}
        )
    )
    port = _free_port()
    proc = subprocess.Popen(
        [str(BIN / "judgetrain"), "dashboard", str(path), "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
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


# --------------------------------------------------------------------------- the controller, end to end (slow)


def sweep_cmd(recipe: Path, storage: str, study: str, out: Path, *extra: str) -> list[str]:
    return [
        str(BIN / "judgetrain"),
        "sweep",
        str(recipe),
        "--space",
        str(REPO / "recipes" / "spaces" / "tiny.yaml"),
        "--storage",
        storage,
        "--study",
        study,
        "--out",
        str(out),
        "--objective",
        "eval_loss",
        *extra,
    ]


def run_ok(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_sweep_end_to_end_prunes_two_of_six_and_writes_the_best_recipe(tmp_path, recipe):
    # four useful learning rates first (the pruner's startup trials), then two
    # that barely move the loss: the median pruner stops those at their first evaluation
    enqueue = tmp_path / "enqueue.yaml"
    good = [{"lora_r": r, "lora_alpha": a, "learning_rate": 5e-3} for r, a in [(4, 8), (8, 8), (4, 16), (8, 16)]]
    slow = [{"lora_r": 4, "lora_alpha": 8, "learning_rate": 1e-4}, {"lora_r": 8, "lora_alpha": 16, "learning_rate": 1e-4}]
    enqueue.write_text(yaml.safe_dump(good + slow))
    storage, out = f"sqlite:///{tmp_path / 'sweeps.db'}", tmp_path / "trials"  # the one-machine storage of docs/how-to/sweeps.md
    # the model comes as a sweep override, as a user points a shipped recipe at their checkpoint
    doc = yaml.safe_load(recipe.read_text())
    model = doc.pop("model_name_or_path")
    recipe.write_text(yaml.safe_dump(doc))
    printed = run_ok(
        sweep_cmd(
            recipe,
            storage,
            "e2e",
            out,
            "--trials",
            "6",
            "--enqueue",
            str(enqueue),
            "--startup-trials",
            "4",
            "--max_steps",
            "6",
            "--model_name_or_path",
            model,
        )
    ).stderr
    study = load(storage, "e2e")
    trials = study.trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4 + [TrialState.PRUNED] * 2
    assert [t.params for t in trials] == good + slow
    # a progress line per trial, per value it reported while it trained, and per ending
    assert f"trial 1 of 6 (#0): lora_r=4, lora_alpha=8, learning_rate=0.005 -> {(out / 'trial-0000').resolve()}" in printed
    for t in trials:
        label = f"trial {t.number + 1} of 6 (#{t.number})"
        assert [line.split(": ", 1)[1] for line in printed.splitlines() if line.startswith(f"  {label} step ")] == [
            f"eval_loss={v:.4g}" for _, v in sorted(t.intermediate_values.items())
        ], printed[-3000:]
        ending = "complete" if t.state == TrialState.COMPLETE else "pruned"
        assert f"  {label} {ending}: eval_loss={t.intermediate_values[max(t.intermediate_values)]:.4g} at step " in printed
    for t in trials:
        folder = out / f"trial-{t.number:04d}"
        result = json.loads((folder / sweep.RESULT_FILE).read_text())
        evals = {
            h["step"]: h["eval_loss"]
            for h in json.loads((folder / "trainer_state.json").read_text())["log_history"]
            if "eval_loss" in h
        }
        assert t.intermediate_values == pytest.approx(evals, abs=1e-6)
        assert (folder / "adapter_model.safetensors").is_file() and (folder / "judgetrain_recipe.yaml").is_file()
        if t.state == TrialState.PRUNED:
            assert result["state"] == "pruned" and list(evals) == [2]
        else:
            assert result["state"] == "complete" and list(evals) == [2, 4, 6]
            assert t.value == pytest.approx(evals[6], abs=1e-6)
    best = min((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    best_yaml = tmp_path / "recipes" / "best.yaml"
    run_ok([str(BIN / "judgetrain"), "sweep", "best", "e2e", "--storage", storage, "--out", str(best_yaml)])
    text = best_yaml.read_text()
    assert text.startswith(f"# accelerate launch -m judgetrain.train --config {best_yaml}\n")
    doc = yaml.safe_load(text)
    assert {k: doc[k] for k in best.params} == best.params
    assert (doc["max_steps"], doc["model_name_or_path"]) == (6, model)  # the sweep's overrides are part of the winner
    margs, dargs, targs = train.parse(["--config", str(best_yaml)])
    assert (margs.lora_r, margs.lora_alpha, targs.learning_rate) == (
        best.params["lora_r"],
        best.params["lora_alpha"],
        best.params["learning_rate"],
    )
    # retrained from the written recipe alone, the winner reaches the same objective
    again = tmp_path / "retrained"
    run_ok([str(BIN / "judgetrain"), "train", str(best_yaml), "--output_dir", str(again)])
    evals = [h["eval_loss"] for h in json.loads((again / "trainer_state.json").read_text())["log_history"] if "eval_loss" in h]
    assert evals[-1] == pytest.approx(best.value, abs=1e-6)


def assert_no_repeats(study: optuna.Study) -> None:
    """No finished trial repeats another's parameter set; every trial that was not
    finished was skipped for a stated reason (or is a failure under test)."""
    finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    params = [tuple(sorted(t.params.items())) for t in finished]
    assert len(set(params)) == len(params), [t.params for t in finished]


def _two_controllers(tmp_path: Path, recipe: Path, storage: str) -> None:
    """Two controllers with the same (default) --seed, started together on one study."""
    out = tmp_path / "trials"
    procs = [
        subprocess.Popen(
            sweep_cmd(recipe, storage, "shared", out, "--trials", "4", "--pruner", "none", "--poll", "0.5", "--max_steps", "2"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    for p in procs:
        log = p.communicate(timeout=1200)[0]
        assert p.returncode == 0, log[-3000:]
    study = load(storage, "shared")
    numbers = [t.number for t in study.trials]
    assert numbers == list(range(len(numbers)))  # no trial lost or written twice
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 4  # the study at its size: a controller waits rather than start a fifth trial
    # anything else was skipped before training (two controllers asking at the same moment), never trained
    assert all(
        t.state == TrialState.FAIL and ("surplus" in t.user_attrs or "duplicate_of" in t.user_attrs)
        for t in study.trials
        if t.state != TrialState.COMPLETE
    )
    assert_no_repeats(study)
    owners = {t.user_attrs["controller"]["pid"] for t in complete}
    assert len(owners) == 2  # both controllers ran trials
    for t in complete:  # every trial has its own folder holding its own result
        result = json.loads((out / f"trial-{t.number:04d}" / sweep.RESULT_FILE).read_text())
        assert result["trial_number"] == t.number and result["values"] == pytest.approx([t.value])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_two_controllers_share_a_study(tmp_path, recipe, kind):
    _two_controllers(
        tmp_path, recipe, journal(tmp_path / "shared.journal") if kind == "journal" else f"sqlite:///{tmp_path / 's.db'}"
    )


def _open_while_locked(url: str) -> None:
    """A second opener of a fresh database waits while the schema lock is held: no table
    exists until it is released, then it creates the whole schema."""
    import threading

    import sqlalchemy

    opened: list = []
    with sweep_storage.schema_lock(url):
        opener = threading.Thread(target=lambda: opened.append(sweep.storage_from_url(url, heartbeat_interval=None)))
        opener.start()
        opener.join(1.5)
        assert opener.is_alive() and not opened  # blocked on the lock, not merely slow
        engine = sqlalchemy.create_engine(url)
        assert "studies" not in sqlalchemy.inspect(engine).get_table_names()
        engine.dispose()
    opener.join(60)
    assert not opener.is_alive() and len(opened) == 1
    optuna.create_study(study_name="after-the-lock", storage=opened[0])


def test_a_second_opener_waits_for_the_schema_lock(tmp_path):
    _open_while_locked(f"sqlite:///{tmp_path / 'locked.db'}")


def test_controllers_opening_a_fresh_sqlite_study_at_once_all_succeed(tmp_path):
    """Six processes open one empty SQLite database at the same moment (the CI failure of
    session 6: the second to stamp Optuna's alembic version hit a UNIQUE constraint)."""
    url = f"sqlite:///{tmp_path / 'race.db'}"
    code = (
        "import sys, optuna; from judgetrain.sweep.storage import storage_from_url; "
        "s = storage_from_url(sys.argv[1], heartbeat_interval=None); "
        "optuna.create_study(study_name='race', storage=s, load_if_exists=True)"
    )
    go = tmp_path / "go"
    starter = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", starter + code.replace("; ", "\n"), url],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(6)
    ]
    time.sleep(3.0)  # every process imported and waiting, so they open the database together
    go.touch()
    for p in procs:
        log = p.communicate(timeout=300)[0]
        assert p.returncode == 0, log[-2000:]
    assert optuna.study.get_all_study_names(storage=url) == ["race"]


@pytest.fixture(scope="module")
def postgres(start_postgres):
    """A PostgreSQL server on 127.0.0.1 for this module (tests/conftest.py)."""
    return start_postgres()


@pytest.mark.slow
def test_a_second_postgresql_opener_waits_for_the_schema_lock(postgres):
    _open_while_locked(postgres)


@pytest.mark.slow
def test_two_controllers_share_a_postgresql_study(tmp_path, recipe, postgres):
    _two_controllers(tmp_path, recipe, postgres)


def _pids(pattern: str) -> list[int]:
    found = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found if int(p) != os.getpid()]


def _wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return got


def _stop_group(proc: subprocess.Popen) -> None:
    """Leave no controller or trial process behind when a test fails midway."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@pytest.mark.slow
def test_a_killed_trial_is_recorded_and_retried(tmp_path, recipe):
    storage, out = journal(tmp_path / "s.journal"), tmp_path / "trials"
    ctl = subprocess.Popen(
        sweep_cmd(
            recipe,
            storage,
            "kill-trial",
            out,
            "--trials",
            "2",
            "--retries",
            "1",
            "--pruner",
            "none",
            "--max_steps",
            "30",
            "--eval_steps",
            "10",
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # the training process of trial 0 (not its accelerate launcher): SIGKILL it once it has trained a little
        pattern = f"-m {sweep.TRIAL_MODULE} .*{out}/trial-0000"
        trainer = _wait_for(
            lambda: [p for p in _pids(pattern) if b"accelerate" not in Path(f"/proc/{p}/cmdline").read_bytes()],
            300,
            "trial 0 to start",
        )
        _wait_for(lambda: "{'loss'" in (out / "trial-0000" / "train.log").read_text(errors="replace"), 300, "trial 0 to train")
        os.kill(trainer[0], signal.SIGKILL)
        log = ctl.communicate(timeout=1200)[0]
    finally:
        _stop_group(ctl)
    assert ctl.returncode == 0, log[-3000:]
    trials = load(storage, "kill-trial").trials
    assert trials[0].state == TrialState.FAIL and "killed by SIGKILL" in trials[0].user_attrs["fail_reason"]
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == 0]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE and retry[0].params == trials[0].params
    assert "fail_reason" not in retry[0].user_attrs  # the retry ran well: it carries no failure of its own
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 2


@pytest.mark.slow
# journal only: finding the killed controller's trial reads the pid it recorded, the same through
# every storage; a restarted controller on SQLite is tests/cluster/test_sweep_controller_restart.py's
# and two controllers sharing SQLite test_two_controllers_share_a_study's (a minute of CI each)
@pytest.mark.parametrize("kind", ["journal"])
def test_a_killed_controller_is_continued_without_losing_or_repeating_trials(tmp_path, recipe, kind):
    storage = journal(tmp_path / "s.journal") if kind == "journal" else f"sqlite:///{tmp_path / 's.db'}"
    out = tmp_path / "trials"
    cmd = sweep_cmd(
        recipe,
        storage,
        "kill-ctl",
        out,
        "--trials",
        "3",
        "--retries",
        "1",
        "--pruner",
        "none",
        "--max_steps",
        "20",
        "--eval_steps",
        "10",
    )
    ctl = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: (out / "trial-0001" / "train.log").is_file(), 600, "trial 1 to start")
        first = (out / "trial-0000" / sweep.RESULT_FILE).read_bytes()
        ctl.send_signal(signal.SIGKILL)  # the controller alone: its trial's processes live on
        ctl.wait()
        # the orphaned training process notices that its controller is gone and stops by itself
        _wait_for(lambda: not _pids(f"{out}/trial-0001"), 300, "the orphaned trial to stop")
    finally:
        _stop_group(ctl)
    assert load(storage, "kill-ctl").trials[1].state == TrialState.RUNNING
    proc = run_ok(cmd, timeout=1200)
    assert "marked failed, queued again" in proc.stderr
    trials = load(storage, "kill-ctl").trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    assert "controller pid" in trials[1].user_attrs["fail_reason"]
    assert trials[2].system_attrs["failed_trial"] == 1 and trials[2].params == trials[1].params
    assert "fail_reason" not in trials[2].user_attrs and trials[2].user_attrs["controller"]["pid"] != ctl.pid
    assert (out / "trial-0000" / sweep.RESULT_FILE).read_bytes() == first  # the finished trial was not run again
    assert_no_repeats(load(storage, "kill-ctl"))  # the restarted controller did not replay trial 0's draw


def test_wandb_study_summary_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)  # conftest disables wandb; this test runs it offline
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc with a key
    study = optuna.create_study(study_name="wb", direction="maximize")
    dist = {"lora_r": optuna.distributions.CategoricalDistribution([4, 8])}
    for r, v in ((4, 0.5), (8, 0.75)):
        study.add_trial(optuna.create_trial(value=v, params={"lora_r": r}, distributions=dist, user_attrs={"steps": 6}))
    study.add_trial(optuna.create_trial(state=TrialState.PRUNED, params={"lora_r": 4}, distributions=dist))
    run_dir, summary = sweep.wandb_summary(study, tmp_path, ["judge:PRISM-Temporal/macro_f1"])
    assert os.environ["WANDB_MODE"] == "offline" and run_dir.parent == tmp_path / "wandb"
    logged = b"".join(p.read_bytes() for p in run_dir.glob("*.wandb"))  # the offline run, for `wandb sync`
    assert all(k.encode() in logged for k in summary) and b"trials" in logged
    assert summary["best/trial"] == 1 and summary["best/judge:PRISM-Temporal/macro_f1"] == 0.75 and summary["best/lora_r"] == 8
    assert (summary["trials/complete"], summary["trials/pruned"]) == (2, 1)


def test_judge_objective_is_the_judge_evaluation_of_the_trained_adapter(tmp_path, monkeypatch, recipe, prism_data):
    """The default objective (macro-F1 on PRISM-Temporal validation) reported from inside
    training equals `judgetrain eval judge` run afterwards on the saved adapter."""
    from judgetrain import records
    from judgetrain.eval.judge import judge_metrics, metric_value
    from judgetrain.scoring import Scorer

    storage = journal(tmp_path / "s.journal")
    study = optuna.create_study(study_name="judge", storage=sweep.storage_from_url(storage), direction="maximize")
    trial = study.ask()
    _trial_env(monkeypatch, storage, study, trial, [[sweep.DEFAULT_OBJECTIVE, "maximize"]])
    out = tmp_path / "run"
    assert (
        sweep.trial_main(
            [
                "--config",
                str(recipe),
                "--output_dir",
                str(out),
                "--max_steps",
                "2",
                "--eval_steps",
                "2",
                "--max_eval_samples",
                "12",
            ]
        )
        == 0
    )
    result = json.loads((out / sweep.RESULT_FILE).read_text())
    assert result["state"] == "complete"
    validation = records.load(prism_data)["validation"].select(range(12))
    after = judge_metrics(Scorer.from_pretrained(out, batch_size=4), None, validation, subsets=["PRISM-Temporal"])
    expected = metric_value(after, "PRISM-Temporal", "macro_f1")
    assert expected is not None
    assert result["values"] == pytest.approx([expected], abs=1e-9)
    assert load(storage, "judge").trials[0].intermediate_values == {2: pytest.approx(expected, abs=1e-9)}
