"""The training output folder: run.json records the run's identity (and the checkout's git
state); a rerun into a folder holding checkpoints resumes the same run (or, finished, does
nothing), refuses another (old →
new, before any model loads) and replaces it only with --overwrite. And the launch: a shipped
multi-process accelerate config follows the machine, so `judgetrain --help`'s own example,
`judgetrain train --config recipes/tiny/qwen3vl-timecatch-lora.yaml --accelerate_config zero3`,
runs here as written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from judgetrain.identity import git_state
from judgetrain.train import ConfigError, parse, setup, train_and_save
from judgetrain.train.accelerate_configs import (
    CPU_PROCESSES,
    LaunchArgs,
    accelerate_args,
    config_dir,
    launch_problems,
    machine_processes,
    world_size,
)
from judgetrain.train.launch import check
from judgetrain.train.run import main
from judgetrain.train.run_folder import RUN_FILE, AlreadyTrained, output_dir_problems, run_identity

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
WAYS_OUT = ("Give another --output_dir; or --resume_from_checkpoint auto (or a checkpoint folder) to continue that run with "
            "this recipe; or --overwrite to remove that run's checkpoints and outputs and train anew")


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


def overrides(tiny, data, out, *extra):
    return ["--model_name_or_path", str(tiny), "--datasets", str(data), "--output_dir", str(out), "--max_steps", "2",
            "--save_steps", "2", "--max_train_samples", "8", "--learning_rate", "1e-3", *extra]


def args(tiny, data, out, *extra):
    return ["--config", str(RECIPE), *overrides(tiny, data, out, *extra)]


def test_checkpoints_without_a_recorded_identity_are_refused_before_anything_loads(tmp_path, tiny, timecatch_build):
    """The bug: a rerun into a folder holding another run's checkpoints trained from step 0 beside them."""
    out = tmp_path / "run"
    (out / "checkpoint-4").mkdir(parents=True)
    expected = f"output_dir: {out} holds checkpoints or weights with no {RUN_FILE} saying what trained them\n    (checkpoint-4)."
    with pytest.raises(ConfigError) as exc:
        setup(args(tiny, timecatch_build[0], out))
    assert expected in str(exc.value) and WAYS_OUT in str(exc.value)
    with pytest.raises(ConfigError) as exc:  # `judgetrain train` refuses it before launching any process
        check(LaunchArgs(recipe=RECIPE), overrides(tiny, timecatch_build[0], out))
    assert expected in str(exc.value)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-4"]  # nothing written


def test_same_run_resumes_another_is_refused_and_overwrite_replaces_it(tmp_path, tiny, timecatch_build):
    data, out = timecatch_build[0], tmp_path / "run"
    base = args(tiny, data, out)
    train_and_save(setup(list(base)))
    info = json.loads((out / RUN_FILE).read_text())
    assert (info["git_commit"], info["git_dirty"]) == tuple(git_state().values()) and isinstance(info["git_dirty"], bool)
    assert info["identity"]["training"]["learning_rate"] == 1e-3 and info["identity"]["global_batch"] == 4
    assert info["identity"]["datasets"] == [{s: v["content_hash"] for s, v in
                                             json.loads((data / "build.json").read_text())["splits"].items()}]
    assert info["global_step"] == 2 and "finished" in info

    # another identity: refused, old → new, by the trainer and by the launcher
    with pytest.raises(ConfigError) as exc:
        setup([*base, "--learning_rate", "5e-4", "--lora_r", "4"])
    text = str(exc.value)
    assert (f"output_dir: {out} holds another run's checkpoints; what differs (that run → this one):\n"
            "      training.learning_rate: 0.001 → 0.0005\n      training.lora_r: 8 → 4\n") in text and WAYS_OUT in text
    with pytest.raises(ConfigError, match="training.learning_rate: 0.001 → 0.0005"):
        check(LaunchArgs(recipe=RECIPE), overrides(tiny, data, out, "--learning_rate", "5e-4"))
    # a different global batch is another run too; the same batch split another way is the same run
    assert output_dir_problems(*parse([*base, "--effective_batch_size", "2"]), world_size=1)[0].count("global_batch: 4 → 2") == 1
    assert output_dir_problems(*parse([*base, "--per_device_train_batch_size", "1"]), world_size=1) == []

    # the same identity, finished: nothing to train and nothing rewritten (resuming it would
    # rewrite its outputs, and under ZeRO-3 on two processes train one step past max_steps)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    with pytest.raises(AlreadyTrained, match="already trained with this recipe"):
        setup(list(base))
    assert main(list(base)) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before
    # the same identity, killed before it finished: resumes from the newest checkpoint, as
    # --resume_from_checkpoint auto does
    (out / RUN_FILE).write_text(json.dumps({k: v for k, v in info.items() if k not in ("finished", "global_step")}))
    run = setup(list(base))
    assert run.training_args.resume_from_checkpoint == "auto"
    train_and_save(run)
    assert run.trainer.state.global_step == 2

    # --overwrite: the old run's checkpoints and outputs go first, then it trains anew
    (out / "train.log").write_text("kept: not the run's\n")
    run = setup([*base, "--learning_rate", "5e-4", "--overwrite", "true"])
    assert not (out / "checkpoint-2").exists() and not (out / "adapter_model.safetensors").exists()
    assert (out / "train.log").read_text() == "kept: not the run's\n"
    train_and_save(run)
    assert json.loads((out / RUN_FILE).read_text())["identity"]["training"]["learning_rate"] == 5e-4
    saved = yaml.safe_load((out / "checkpoint-2" / "judgetrain_recipe.yaml").read_text())
    assert saved["learning_rate"] == 5e-4 and "overwrite" not in saved  # a rerun of the saved recipe must not wipe the folder


def test_the_base_model_and_the_data_count_by_content(tmp_path, tiny, timecatch_build):
    """Another model's files under the same path is another run; the same files elsewhere is the same."""
    model = tmp_path / "model"
    shutil.copytree(tiny, model)
    out = tmp_path / "run"
    cfgs = parse(args(model, timecatch_build[0], out))
    (out / "checkpoint-2").mkdir(parents=True)
    (out / RUN_FILE).write_text(json.dumps({"identity": run_identity(*cfgs, world_size=1)}))
    assert output_dir_problems(*cfgs, world_size=1) == []
    moved = tmp_path / "moved"
    shutil.copytree(model, moved)
    assert output_dir_problems(*parse(args(moved, timecatch_build[0], out)), world_size=1) == []
    config = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**config, "temperature": 0.123}))
    problems = output_dir_problems(*parse(args(model, timecatch_build[0], out)), world_size=1)
    assert len(problems) == 1 and "      base_model.files.generation_config.json: '" in problems[0]


# --------------------------------------------------------------------------- the launch


def test_a_shipped_multi_process_config_follows_the_machine(tmp_path):
    expected = torch.cuda.device_count() if torch.cuda.is_available() else min(CPU_PROCESSES, os.cpu_count())
    assert machine_processes() == expected
    for name in ("ddp", "zero2", "zero3", "zero3_offload"):  # they name no num_processes: the command says it
        assert "num_processes" not in yaml.safe_load((config_dir() / f"{name}.yaml").read_text())
        assert world_size(LaunchArgs(accelerate_config=name)) == expected
        assert accelerate_args(LaunchArgs(accelerate_config=name))[-2:] == ["--num_processes", str(expected)]
        # on two machines: this machine's processes on each, all of them counted
        assert world_size(LaunchArgs(accelerate_config=name, num_machines=2)) == 2 * expected
    assert world_size(LaunchArgs(accelerate_config="zero3", num_processes=3)) == 3
    assert world_size(LaunchArgs(accelerate_config="single_gpu")) == 1
    assert world_size(LaunchArgs(accelerate_config="zero3_multinode")) == 2 * expected  # its num_machines: 2
    own = tmp_path / "mine.yaml"
    own.write_text("distributed_type: MULTI_GPU\nnum_processes: 8\n")
    assert world_size(LaunchArgs(accelerate_config=str(own))) == 8  # the user's own file is taken as written
    assert world_size(LaunchArgs(accelerate_config=str(own), num_machines=2)) == 8  # all machines' processes together


def test_processes_that_do_not_split_over_the_machines_are_refused_before_launching():
    """accelerate starts num_processes // num_machines on each machine: 3 over 2 would be one each, silently."""
    assert launch_problems(LaunchArgs(accelerate_config="ddp", num_processes=4, num_machines=2)) == []
    problem, = launch_problems(LaunchArgs(accelerate_config="ddp", num_processes=3, num_machines=2))
    assert problem.startswith("num_processes: 3 processes do not split evenly over 2 machines; --num_processes counts the "
                              "processes of all machines together (e.g. --num_processes ")


def test_the_help_example_passes_the_launch_checks_here(tiny, timecatch_build):
    """`judgetrain train --config recipes/tiny/qwen3vl-timecatch-lora.yaml --accelerate_config zero3` once failed after
    the processes started (effective_batch_size 4 at world size 8): the world size is now the machine's, where the
    recipe's batch divides."""
    launch = LaunchArgs(recipe=RECIPE, accelerate_config="zero3")
    if machine_processes() == 2:
        check(launch, ["--model_name_or_path", str(tiny), "--datasets", str(timecatch_build[0])])


@pytest.mark.slow
def test_the_help_example_runs_as_written(tmp_path, tiny, timecatch_build):
    """The example, word for word, in a folder laid out as `judgetrain quickstart` leaves it (~1 min on 2 CPU cores)."""
    (tmp_path / "quickstart" / "models").mkdir(parents=True)
    (tmp_path / "quickstart" / "models" / "qwen3-vl").symlink_to(tiny)
    (tmp_path / "quickstart" / "timecatch").symlink_to(timecatch_build[0])
    (tmp_path / "recipes").symlink_to(REPO / "recipes")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    done = subprocess.run([str(Path(sys.executable).parent / "judgetrain"), "train", "--config",
                           "recipes/tiny/qwen3vl-timecatch-lora.yaml", "--accelerate_config", "zero3"],
                          capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f" --num_processes {machine_processes()} -m judgetrain.train" in done.stdout
    out = tmp_path / "runs" / "tiny-qwen3vl-timecatch"
    assert json.loads((out / RUN_FILE).read_text())["world_size"] == machine_processes()
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
