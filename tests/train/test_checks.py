"""The checks of a training configuration that need nothing loaded: TRL's numbers in range
as the training process parses its recipe, and again in check_config for arguments built
in code; each dataset once, however its folder is spelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgetrain.train import ConfigError, check_config, parse
from judgetrain.train.checks import TRAINING_RANGES, dataset_repeats

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def _argv(tmp_path, *extra):
    return ["--config", str(RECIPE), "--model_name_or_path", str(tmp_path / "no-model"), "--datasets", str(tmp_path),
            "--output_dir", str(tmp_path / "o"), *extra]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_the_training_process_refuses_a_non_finite_rate_as_it_parses(value, tmp_path):
    """What `accelerate launch -m judgetrain.train` parses: a NaN rate was a traceback inside
    the optimizer, an infinite one an adapter of NaNs."""
    with pytest.raises(ConfigError) as exc:
        parse(_argv(tmp_path, f"--learning_rate={value}"))
    assert exc.value.problems == [
        f"learning_rate: {value} is not a finite number; give a positive rate (the LoRA recipes use 1e-4; "
        f"recipes/spaces/ search 1e-5 to 5e-4) (given as --learning_rate)"
    ]


def test_numbers_set_in_code_are_checked_by_check_config(tmp_path):
    """A sweep or a test may set fields after parsing: check_config applies the same ranges."""
    margs, dargs, targs = parse(_argv(tmp_path))
    targs.learning_rate, targs.per_device_train_batch_size, targs.adam_beta1 = float("inf"), 0, -0.5
    dargs.max_frames, margs.lora_r, margs.lora_alpha = 0, 0, -8
    problems = check_config(margs, dargs, targs, world_size=1)  # no ZeroDivisionError from the batch check
    for expected in ("learning_rate: inf is not a finite number", "per_device_train_batch_size: 0 is below 1",
                     "adam_beta1: -0.5 is negative; give a number in [0, 1)", "max_frames: 0 is below 1",
                     "lora_r: 0 is not positive; give a positive rank", "lora_alpha: -8 is not positive"):
        assert any(p.startswith(expected) for p in problems), (expected, problems)


def test_trl_defaults_are_inside_the_ranges(tmp_path):
    _, _, targs = parse(["--model_name_or_path", "m", "--datasets", "d", "--output_dir", str(tmp_path / "o")])
    from judgetrain.config import range_problems

    assert range_problems(targs, TRAINING_RANGES) == []
    assert {name for name in TRAINING_RANGES if hasattr(targs, name)} >= {
        "learning_rate", "weight_decay", "max_grad_norm", "num_train_epochs", "per_device_train_batch_size",
        "per_device_eval_batch_size", "gradient_accumulation_steps", "max_length", "warmup_steps"}


def test_a_dataset_under_two_spellings_is_one_dataset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "to-a").symlink_to(tmp_path / "a")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # a folder that cannot be there: compared by its spelling
    assert dataset_repeats(["a", "b", str(tmp_path / "loop")]) == []
    problems = dataset_repeats(["a", str(tmp_path / "a"), "a/", "to-a", "./b", "b", "loop", str(tmp_path / "loop")])
    assert [p.split(";")[0] for p in problems] == [
        f"datasets: {tmp_path / 'a'} is a again (the same folder)",
        "datasets: a/ is a again (the same folder)",
        "datasets: to-a is a again (the same folder)",
        "datasets: b is ./b again (the same folder)",
        f"datasets: {tmp_path / 'loop'} is loop again (the same folder)",
    ]


def _train_cli(capsys, argv) -> str:
    """`judgetrain train ARGV` as a user runs it: exit status 2, one `error: …`, no traceback."""
    from judgetrain import cli

    rc = cli.main(["train", *argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


@pytest.mark.parametrize("flag, value, problem", [
    ("--per_device_train_batch_size", "0", "per_device_train_batch_size: 0 is below 1"),  # was a ZeroDivisionError
    ("--learning_rate", "inf", "learning_rate: inf is not a finite number"),  # trained an adapter of NaNs
    ("--learning_rate", "nan", "learning_rate: nan is not a finite number"),
    ("--gradient_accumulation_steps", "-1", "gradient_accumulation_steps: -1 is below 1"),
    ("--num_train_epochs", "-1", "num_train_epochs: -1.0 is negative"),
])
def test_the_launcher_refuses_a_number_out_of_range(flag, value, problem, tmp_path, capsys):
    err = _train_cli(capsys, ["--config", str(RECIPE), "--output_dir", str(tmp_path / "o"), flag, value])
    assert f"{problem}; give " in err and f"(given as {flag})" in err
    assert not (tmp_path / "o").exists()


def test_a_recipe_value_of_the_wrong_type_or_range_names_the_file_and_line(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"model_name_or_path: m\ndatasets: [{tmp_path}]\noutput_dir: {tmp_path / 'o'}\n"
        "learning_rate: .inf\nper_device_train_batch_size: 0\nmax_steps: 2.5\n"
    )
    err = _train_cli(capsys, ["--config", str(recipe)])
    assert f"{recipe}, line 6: max_steps: 2.5 is not an integer, as --max_steps takes" in err
    recipe.write_text(recipe.read_text().replace("max_steps: 2.5", "max_steps: 2"))
    err = _train_cli(capsys, ["--config", str(recipe)])
    assert f"learning_rate: inf is not a finite number; give a positive rate" in err and f"({recipe}, line 4)" in err
    assert f"per_device_train_batch_size: 0 is below 1; give at least 1 record per device" in err
    assert f"({recipe}, line 5)" in err


def test_the_launcher_refuses_a_dataset_given_twice_naming_it_once(tmp_path, capsys):
    data = tmp_path / "d1"
    err = _train_cli(capsys, ["--config", str(RECIPE), "--output_dir", str(tmp_path / "o"), "--datasets", str(data), str(data)])
    assert f"datasets: {data} is given twice; give each dataset once" in err
    assert err.count(f"datasets: {data}: no such dataset folder") == 1


def test_a_checkpoint_recipe_is_read_by_the_hardened_loader(tmp_path):
    """The recipe a checkpoint recorded (compared before a resume) is YAML like any other:
    a key given twice there is refused naming both lines, not silently the last one."""
    from judgetrain.train.outputs import RECIPE_FILE
    from judgetrain.yamlfile import YamlError

    ckpt = tmp_path / "o" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (ckpt / RECIPE_FILE).write_text("learning_rate: 0.001\nlora_r: 8\nlearning_rate: 0.0001\n")
    margs, dargs, targs = parse(_argv(tmp_path, "--resume_from_checkpoint", str(ckpt)))
    with pytest.raises(YamlError, match=rf"{RECIPE_FILE}: line 3: key 'learning_rate' is given twice \(first on line 1\)"):
        check_config(margs, dargs, targs, world_size=1)


@pytest.mark.parametrize(
    ("flags", "module", "field"),
    [(["--use_liger_kernel", "true"], "liger_kernel", "use_liger_kernel"),
     (["--attn_implementation", "flash_attention_2"], "flash_attn", "attn_implementation")],
)
def test_a_fused_kernel_this_machine_lacks_is_refused_before_loading_naming_the_install(flags, module, field, tmp_path):
    """Liger's fused cross-entropy and flash-attention are used where installed; where not, check_config says so
    (with the pip command and the setting that needs none) instead of transformers failing after the model loads."""
    import importlib.util

    problems = [p for p in check_config(*parse(_argv(tmp_path, *flags)), world_size=1) if p.startswith(f"{field}:")]
    if importlib.util.find_spec(module) is None:
        assert len(problems) == 1 and "pip install" in problems[0] and "not installed" in problems[0], problems
    else:
        assert problems == []
