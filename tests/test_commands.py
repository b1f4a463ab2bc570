"""The commands around training, as the CLI parses them: `judgetrain train` (launch
options, recipe by word or --config, accelerate's arguments, user errors as one
message before anything launches or after the launched process fails), `merge`,
`quickstart` and `dashboard` on their typed configs. Nothing here trains or launches."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import torch

from judgetrain import cli, config
from judgetrain.train import accelerate_configs, launch

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


@pytest.fixture()
def dataset(tmp_path):
    """A one-record built dataset, which passes the launcher's dataset check (it opens every
    split); nothing trains on it."""
    import datasets

    from judgetrain import records

    row = records.make_record(id="r0", task="pointwise", images=[], instruction="Rate it.", answer="3",
                              choices=list("12345"), label="3", source="s", perturbation="none", position=-1,
                              n_frames=1, layout="P0", meta={})
    folder = tmp_path / "ds"
    records.save(datasets.DatasetDict(train=datasets.Dataset.from_list([row], features=records.FEATURES)), folder,
                 {"builder": "timecatch"})
    return folder


def ok_overrides(dataset, tmp_path):
    return ["--model_name_or_path", "m", "--datasets", str(dataset), "--output_dir", str(tmp_path / "out")]


# --------------------------------------------------------------------------- judgetrain train: parsing


def test_recipe_as_word_or_config_is_the_same_launch(tmp_path):
    by_word = launch.parse_command([str(RECIPE), "--learning_rate", "5e-5", "--max_steps", "2"])
    by_flag = launch.parse_command(["--config", str(RECIPE), "--learning_rate", "5e-5", "--max_steps", "2"])
    by_flag_later = launch.parse_command(["--learning_rate", "5e-5", "--config", str(RECIPE), "--max_steps", "2"])
    assert by_word == by_flag == by_flag_later
    assert by_word[0].recipe == RECIPE and by_word[1] == ["--learning_rate", "5e-5", "--max_steps", "2"]
    assert launch.command(*by_word) == launch.command(*by_flag) == [
        "-m", "judgetrain.train", "--config", str(RECIPE), "--learning_rate", "5e-5", "--max_steps", "2"]
    with pytest.raises(config.ConfigError, match="given twice"):
        launch.parse_command([str(RECIPE), "--config", str(tmp_path / "other.yaml")])


@pytest.mark.parametrize("spelling", ["underscore", "dash"])
def test_launch_options_reach_accelerate(spelling):
    from accelerate.commands.launch import launch_command_parser

    def flag(name):
        return f"--{name}" if spelling == "underscore" else f"--{name.replace('_', '-')}"

    cfg, overrides = launch.parse_command([
        str(RECIPE), flag("accelerate_config"), "zero3", flag("num_processes"), "16", flag("num_machines"), "2",
        flag("machine_rank"), "1", flag("main_process_ip"), "10.0.0.1", flag("main_process_port"), "29500",
        "--lora_r", "4"])
    assert (cfg.accelerate_config, cfg.num_processes, cfg.num_machines, cfg.machine_rank) == ("zero3", 16, 2, 1)
    assert (cfg.main_process_ip, cfg.main_process_port) == ("10.0.0.1", 29500)
    assert overrides == ["--lora_r", "4"]
    argv = accelerate_configs.accelerate_args(cfg)
    assert argv[0] == "--config_file" and Path(argv[1]).name == "zero3.yaml"
    assert argv[2:] == ["--num_processes", "16", "--num_machines", "2", "--machine_rank", "1",
                        "--main_process_ip", "10.0.0.1", "--main_process_port", "29500"]
    parsed = launch_command_parser().parse_args(launch.command(cfg, overrides))
    assert (parsed.num_processes, parsed.num_machines, parsed.machine_rank) == (16, 2, 1)
    assert (parsed.main_process_ip, parsed.main_process_port) == ("10.0.0.1", 29500)
    assert Path(parsed.config_file).name == "zero3.yaml" and parsed.module and parsed.training_script == "judgetrain.train"
    assert parsed.training_script_args == ["--config", str(RECIPE), "--lora_r", "4"]
    assert accelerate_configs.world_size(cfg) == 16


def test_a_launch_repeated_reuses_one_resolved_config_and_leaves_no_folder_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the system temp folder, as TMPDIR sets it
    first = accelerate_configs.accelerate_args(accelerate_configs.LaunchArgs(accelerate_config="zero3", num_processes=2))
    again = accelerate_configs.accelerate_args(accelerate_configs.LaunchArgs(accelerate_config="zero3", num_processes=2))
    kept = Path(first[1])
    assert first == again and kept.name == "zero3.yaml" and kept.parent.parent.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [kept.parent.parent.name]
    assert [p.name for p in kept.parent.parent.iterdir()] == [kept.parent.name]
    assert kept.parent.parent.stat().st_mode & 0o077 == 0
    ds = yaml.safe_load(Path(first[1]).read_text())["deepspeed_config"]["deepspeed_config_file"]
    assert Path(ds).is_absolute() and Path(ds).is_file()


def test_machine_rank_zero_and_unset_options():
    assert accelerate_configs.accelerate_args(accelerate_configs.LaunchArgs(recipe=RECIPE, machine_rank=0)) == ["--machine_rank", "0"]
    assert accelerate_configs.accelerate_args(accelerate_configs.LaunchArgs(recipe=RECIPE)) == []
    # the shipped config names no num_processes: it follows the machine, and the machines
    assert accelerate_configs.world_size(accelerate_configs.LaunchArgs(accelerate_config="zero3")) == \
        accelerate_configs.machine_processes()
    assert accelerate_configs.world_size(accelerate_configs.LaunchArgs(accelerate_config="zero3", num_machines=2)) == \
        2 * accelerate_configs.machine_processes()


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without GPUs launches")
def test_several_processes_without_gpus_launch_through_torchrun(tmp_path, monkeypatch):
    """Without GPUs and without a config naming a distributed type, `accelerate launch
    --num_processes 2` starts one process: `--multi_gpu` is added there (and only there)."""
    import accelerate.commands.config
    from accelerate.commands.launch import launch_command_parser

    monkeypatch.setattr(accelerate.commands.config, "default_config_file", str(tmp_path / "none.yaml"))  # no user default
    args = accelerate_configs.accelerate_args
    assert args(accelerate_configs.LaunchArgs(recipe=RECIPE, num_processes=2)) == ["--num_processes", "2", "--multi_gpu"]
    assert launch_command_parser().parse_args([*args(accelerate_configs.LaunchArgs(num_processes=2)), "x.py"]).multi_gpu
    assert args(accelerate_configs.LaunchArgs(recipe=RECIPE, num_processes=1)) == ["--num_processes", "1"]
    assert args(accelerate_configs.LaunchArgs(accelerate_config="single_gpu", num_processes=2))[-1] == "--multi_gpu"
    for name in ("ddp", "zero2", "zero3"):  # the config's distributed type starts the processes
        assert "--multi_gpu" not in args(accelerate_configs.LaunchArgs(accelerate_config=name, num_processes=2))
    mine = tmp_path / "default.yaml"
    mine.write_text("distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n")
    monkeypatch.setattr(accelerate.commands.config, "default_config_file", str(mine))
    assert args(accelerate_configs.LaunchArgs(recipe=RECIPE)) == []  # the user's own CPU launcher, as configured


def test_no_command_help_imports_torch_or_the_trainer():
    """`--help` of every command, one after another in one fresh process: none loads torch or
    TRL's trainer (`judgetrain train --help` took 9 s, `build timecatch --help` 4 s, for them).
    TRL's lazy `trl.trainer` package may load, for its ModelConfig (a plain dataclass, which
    judgetrain's ModelArguments extends); its SFTConfig and SFTTrainer, which load torch, not."""
    code = ("import contextlib, io, sys\nfrom judgetrain.cli import COMMANDS, main\n"
            "for words in COMMANDS:\n    out = io.StringIO()\n    with contextlib.redirect_stdout(out):\n"
            "        try:\n            main([*words, '--help'])\n        except SystemExit:\n            pass\n"
            "    assert '--help' in out.getvalue(), words\n"
            "print(sorted(m for m in ('torch', 'transformers.training_args', 'trl.trainer.sft_config', "
            "'trl.trainer.sft_trainer') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-3000:]


@pytest.mark.parametrize("words", [("eval", "judge"), ("eval", "timecatch"), ("eval", "phasefusion"), ("eval", "bias")])
def test_evaluation_help_loads_no_dataset_library(words):
    """An evaluation's --help is read before a first run: it does not load datasets (0.6 s warm,
    seconds on a cold disk), which only scoring needs."""
    code = (f"import contextlib, io, sys\nfrom judgetrain.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main([*{list(words)!r}, '--help'])\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('datasets', 'torch', 'matplotlib') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-3000:]


def test_train_help_lists_every_recipe_field(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["train", "--config", str(RECIPE), "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--accelerate_config", "--num_processes", "--main_process_ip", "--config RECIPE",
                 "--model_name_or_path", "--datasets", "--lora_r", "--lora_target_modules",  # judgetrain's dataclasses
                 "--learning_rate", "--per_device_train_batch_size", "--max_length", "--gradient_checkpointing"):  # SFTConfig
        assert flag in text, flag
    assert "recipe fields: TRL's ModelConfig with judgetrain's model fields" in text and "recipe fields: TRL's SFTConfig" in text
    assert "judgetrain train --config recipes/tiny/qwen3vl-timecatch-lora.yaml" in text


# --------------------------------------------------------------------------- judgetrain train: user errors


def _error(capsys, argv) -> str:
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and "CalledProcessError" not in err
    assert err.startswith("error: ")
    return err


def test_bad_recipe_key_fails_before_launching(tmp_path, capsys, dataset, monkeypatch):
    import accelerate.commands.launch

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", lambda args: pytest.fail("launched"))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text() + "learning_rat: 1.0e-4\n")
    err = _error(capsys, ["train", str(recipe), *ok_overrides(dataset, tmp_path)])
    assert "unknown key 'learning_rat'; did you mean 'learning_rate'?" in err
    err = _error(capsys, ["train", "--config", str(RECIPE), *ok_overrides(dataset, tmp_path), "--lora_rr", "4"])
    assert "unknown argument '--lora_rr'; did you mean '--lora_r'?" in err
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), "--lora_r", "four"])
    assert "argument --lora_r/--lora-r: invalid int value: 'four'" in err
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), "--accelerate_config", "zero33"])
    assert "did you mean 'zero3'?" in err
    err = _error(capsys, ["train", str(tmp_path / "missing.yaml")])
    assert "missing.yaml: no such file" in err
    err = _error(capsys, ["train"])
    assert "judgetrain train --config RECIPE" in err


def test_missing_dataset_and_world_size_problems_fail_before_launching(tmp_path, capsys, dataset, monkeypatch):
    import accelerate.commands.launch

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", lambda args: pytest.fail("launched"))
    err = _error(capsys, ["train", str(RECIPE), "--model_name_or_path", "m", "--datasets", str(dataset), str(tmp_path / "nope"),
                          "--output_dir", str(tmp_path / "o")])
    assert f"datasets: {tmp_path / 'nope'}: no such dataset folder" in err
    # the tiny recipe: effective batch 4, 2 per device; three processes cannot make 4
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), "--num_processes", "3"])
    assert "effective_batch_size: 4 is not a multiple of per_device_train_batch_size (2) × world size (3)" in err


def test_bf16_without_a_bf16_gpu_is_one_message(tmp_path, capsys, dataset):
    from judgetrain import train

    if train.bf16_capable():
        pytest.skip("this machine has a bf16 GPU")
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), "--bf16", "true"])
    assert "bf16: true, but this machine has no GPU that supports bfloat16: set `bf16: false`" in err


@pytest.mark.parametrize("flags, message", [
    (["--learning_rate", "inf"], "learning_rate: inf is not a finite number; give a positive rate (the LoRA recipes use 1e-4"),
    (["--learning_rate", "nan"], "learning_rate: nan is not a finite number; give a positive rate"),
    (["--learning_rate", "0"], "learning_rate: 0.0 is zero; give a positive rate"),
    (["--per_device_train_batch_size", "0"], "per_device_train_batch_size: 0 is below 1; give at least 1 record per device"),
    (["--gradient_accumulation_steps", "0"], "gradient_accumulation_steps: 0 is below 1; give at least 1"),
    (["--warmup_steps=-0.1"], "warmup_steps: -0.1 is negative; give 0 (no warmup), or a number of steps"),
    (["--adam_beta2", "1"], "adam_beta2: 1.0 must be below 1; give a number in [0, 1)"),
    (["--max_grad_norm", "inf"], "max_grad_norm: inf is not a finite number"),
    (["--num_train_epochs", "nan"], "num_train_epochs: nan is not a finite number; give a positive number of epochs"),
    (["--max_length", "0"], "max_length: 0 is below 1; give a positive number of tokens"),
    (["--seed=-1"], "seed: -1 is negative; give an integer in [0, 4294967295]"),
    (["--effective_batch_size", "0"], "effective_batch_size: 0 is below 1; give an integer of at least 1"),
    (["--mixture_weights", "nan"], "mixture_weights: nan is not a finite number; give a number of at least 0"),
    (["--num_processes", "0"], "num_processes: 0 is below 1; give an integer of at least 1"),  # the launcher's own
    (["--main_process_port", "70000"], "main_process_port: 70000 is above 65535; give an integer in [1, 65535]"),
])
def test_a_non_finite_or_out_of_range_number_fails_before_launching(flags, message, tmp_path, capsys, dataset):
    """`--learning_rate inf` trained an all-NaN adapter and exited 0; `nan` was a traceback in the
    training process, a batch size of 0 a ZeroDivisionError in the launcher."""
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), *flags])
    assert f"{message}" in err and f"(given as --{flags[0].split('=')[0][2:]})" in err


def test_every_number_out_of_range_is_named_at_once_with_where_it_was_set(tmp_path, capsys, dataset):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text() + "weight_decay: -0.5\n")
    line = len(RECIPE.read_text().splitlines()) + 1
    err = _error(capsys, ["train", str(recipe), *ok_overrides(dataset, tmp_path), "--learning_rate", "inf",
                          "--per_device_eval_batch_size", "0"])
    assert f"weight_decay: -0.5 is negative; give 0 (none) or a positive value such as 0.1 ({recipe}, line {line})" in err
    assert "learning_rate: inf is not a finite number" in err and "per_device_eval_batch_size: 0 is below 1" in err


@pytest.mark.parametrize("spelling", ["same", "relative", "trailing slash", "symlink"])
def test_the_same_dataset_twice_is_refused(spelling, tmp_path, capsys, dataset, monkeypatch):
    """`--datasets X X` trained on every record twice (and evaluated each twice), under any spelling of X."""
    monkeypatch.chdir(tmp_path)
    other = {"same": str(dataset), "relative": dataset.name, "trailing slash": f"{dataset}/",
             "symlink": str(tmp_path / "link")}[spelling]
    (tmp_path / "link").symlink_to(dataset, target_is_directory=True)
    err = _error(capsys, ["train", str(RECIPE), "--model_name_or_path", "m", "--datasets", str(dataset), other,
                          "--output_dir", str(tmp_path / "out")])
    again = "is given twice" if spelling == "same" else f"is {dataset} again (the same folder)"
    assert f"datasets: {other} {again}; give each dataset once" in err


@pytest.mark.parametrize("line, message", [
    ("per_device_train_batch_size: 2.5", "per_device_train_batch_size: 2.5 is not an integer, as --per_device_train_batch_size takes"),
    ("learning_rate: [1.0e-4]", "learning_rate: [0.0001] is not a number, as --learning_rate takes"),
    ("save_strategy: no", "save_strategy: False is not one of no, steps, epoch, best, as --save_strategy takes; YAML reads an "
                          "unquoted yes, no, on, off, true or false as a boolean: quote the word (save_strategy: \"no\")"),
    ("lora_r: 4\nlora_r: 8", "line {n}: key 'lora_r' is given twice (first on line {first}); keep one"),
])
def test_recipe_values_are_checked_as_flags_and_keys_once(line, message, tmp_path, capsys, dataset):
    recipe = tmp_path / "r.yaml"
    text = "\n".join(row for row in RECIPE.read_text().splitlines() if not row.startswith(line.split(":")[0] + ":"))
    recipe.write_text(f"{text}\n{line}\n")
    n = len(text.splitlines()) + 1
    err = _error(capsys, ["train", str(recipe), *ok_overrides(dataset, tmp_path)])
    assert f"{recipe}, line {n}: {message}" in err or f"{recipe}: {message.format(n=n + 1, first=n)}" in err, err


def test_an_accelerate_config_with_a_key_twice_is_refused(tmp_path, capsys, dataset):
    config_file = tmp_path / "acc.yaml"
    config_file.write_text("distributed_type: NO\nnum_processes: 1\nnum_processes: 4\n")
    err = _error(capsys, ["train", str(RECIPE), *ok_overrides(dataset, tmp_path), "--accelerate_config", str(config_file)])
    assert f"{config_file}: line 3: key 'num_processes' is given twice (first on line 2)" in err


def test_a_failed_training_process_is_one_line_and_its_exit_code(tmp_path, capsys, dataset, monkeypatch):
    import accelerate.commands.launch

    launched = []

    def fail(args):
        launched.append(args)
        raise subprocess.CalledProcessError(returncode=3, cmd=["python", "-m", "judgetrain.train"])

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", fail)
    rc = cli.main(["train", str(RECIPE), *ok_overrides(dataset, tmp_path)])
    captured = capsys.readouterr()
    assert rc == 3
    assert launched and launched[0].training_script == "judgetrain.train"
    assert "launching: accelerate launch -m judgetrain.train --config" in captured.out
    assert captured.err.strip() == "error: the training process exited with code 3; its output above says why"

    def killed(args):
        raise subprocess.CalledProcessError(returncode=-9, cmd=["python"])

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", killed)
    assert cli.main(["train", str(RECIPE), *ok_overrides(dataset, tmp_path)]) == 137
    assert "killed by SIGKILL (out of memory?)" in capsys.readouterr().err


def test_the_launch_starts_from_the_callers_environment(tmp_path, dataset, monkeypatch):
    """Parsing the recipe in the launcher sets its env: and TrainingArguments' variables; the launch must not inherit them."""
    import os

    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text() + "env:\n  JUDGETRAIN_TEST_VAR: from-recipe\n")
    monkeypatch.delenv("JUDGETRAIN_TEST_VAR", raising=False)
    before = dict(os.environ)
    launch.check(*launch.parse_command([str(recipe), *ok_overrides(dataset, tmp_path)]))
    assert dict(os.environ) == before


def test_a_user_error_in_the_training_process_is_one_message(tmp_path):
    """`python -m judgetrain.train` (what accelerate launches): the message and exit code 2, no traceback."""
    done = subprocess.run([sys.executable, "-m", "judgetrain.train", "--config", str(RECIPE), "--datasets", str(tmp_path / "nope"),
                           "--model_name_or_path", str(tmp_path / "no-model"), "--output_dir", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "error: " in done.stderr


def test_train_does_not_import_sweep():
    code = "import sys, judgetrain.train; print('judgetrain.sweep' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
    imported = {getattr(node, "module", None) or alias.name for p in (REPO / "judgetrain" / "train").glob("*.py")
                for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert not [m for m in imported if m and m.startswith("judgetrain.sweep")]


# --------------------------------------------------------------------------- merge, quickstart, dashboard


def _parse(module, argv):
    return config.parse(module.make_parser(), argv)


def test_merge_takes_the_adapter_as_word_flag_or_yaml(tmp_path):
    from judgetrain.train import merge

    (cfg,) = _parse(merge, ["runs/tiny", "--out", "runs/tiny-merged"])  # the README's spelling
    assert cfg == merge.MergeConfig(adapter=Path("runs/tiny"), out=Path("runs/tiny-merged"))
    assert _parse(merge, ["--adapter", "runs/tiny", "--out", "runs/tiny-merged"]) == (cfg,)
    path = tmp_path / "merge.yaml"
    path.write_text("adapter: runs/tiny\nout: runs/tiny-merged\ndtype: bfloat16\n")
    assert _parse(merge, ["--config", str(path)]) == (merge.MergeConfig(Path("runs/tiny"), Path("runs/tiny-merged"), None, "bfloat16"),)
    (cfg,) = _parse(merge, ["runs/other", "--config", str(path), "--dtype", "float32"])
    assert (cfg.adapter, cfg.dtype) == (Path("runs/other"), "float32")  # words and flags win over the file
    with pytest.raises(config.ConfigError, match="unknown argument 'runs/extra'"):
        _parse(merge, ["runs/tiny", "runs/extra", "--out", "x"])


def test_merge_of_a_folder_without_an_adapter_is_one_message(tmp_path, capsys):
    assert cli.main(["merge", str(tmp_path), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "no adapter_config.json; pass the output folder of `judgetrain train`" in err and "Traceback" not in err


def test_quickstart_flags_as_the_readme_spells_them(tmp_path):
    from judgetrain import quickstart

    (cfg,) = _parse(quickstart, ["--out", "quickstart", "--clips", "24", "--train-steps", "6", "--eval-limit", "60",
                                 "--lpips-random-backbone"])
    assert cfg == quickstart.QuickstartConfig(out=Path("quickstart"), clips=24, train_steps=6, eval_limit=60,
                                              lpips_random_backbone=True)
    assert _parse(quickstart, []) == (quickstart.QuickstartConfig(),)
    path = tmp_path / "qs.yaml"
    path.write_text("clips: 6\ntrain_steps: 0\n")
    (cfg,) = _parse(quickstart, ["--config", str(path), "--clips", "8"])
    assert (cfg.clips, cfg.train_steps) == (8, 0)


def test_dashboard_takes_the_storage_as_a_word(tmp_path, capsys):
    from judgetrain.sweep import dashboard

    (cfg,) = _parse(dashboard, ["journal:/shared/sweeps/prism.journal", "--port", "8081"])
    assert cfg == dashboard.DashboardConfig(storage="journal:/shared/sweeps/prism.journal", port=8081)
    (cfg,) = _parse(dashboard, ["postgresql://optuna@db-host/sweeps", "--host", "0.0.0.0"])
    assert (cfg.storage, cfg.host, cfg.port) == ("postgresql://optuna@db-host/sweeps", "0.0.0.0", 8080)
    assert cli.main(["dashboard", str(tmp_path / "missing.db")]) == 2
    err = capsys.readouterr().err
    assert "no such database file" in err and "Traceback" not in err
