"""Every shipped recipe's first line is a command that runs as written on the
hardware its `# Hardware:` line names: accelerate's own parser reads it, the
process count it implies (its --num_processes, else the named accelerate
config's) is the hardware's, and the recipe passes the trainer's checks at that
world size; a recipe with a tiny twin (recipes/tiny/) has the twin dry-run on CPU
from the twin's own first line."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from judgetrain import train
from judgetrain.models import get_family
from judgetrain.train import LaunchArgs, launch, world_size

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(p.relative_to(REPO) for p in (REPO / "recipes").rglob("*.yaml") if "spaces" not in p.parts)
TWINS = {r: Path(m.group(1)) for r in RECIPES if (m := re.search(r"Tiny twin \(CPU\): (\S+\.yaml)", (REPO / r).read_text()))}


def first_line(recipe: Path):
    """(accelerate's parsed arguments, the world size they imply, the recipe mapping)."""
    from accelerate.commands.launch import launch_command_parser

    text = (REPO / recipe).read_text()
    words = shlex.split(text.splitlines()[0].removeprefix("#"))
    assert words[:2] == ["accelerate", "launch"], words
    parsed = launch_command_parser().parse_args(words[2:])
    assert parsed.module and parsed.training_script == "judgetrain.train"
    assert parsed.training_script_args == ["--config", str(recipe)], "the first line runs this recipe, from the repository root"
    config = parsed.config_file and str(REPO / parsed.config_file)
    return parsed, world_size(LaunchArgs(accelerate_config=config, num_processes=parsed.num_processes)), yaml.safe_load(text)


@pytest.mark.parametrize("recipe", RECIPES, ids=[str(r) for r in RECIPES])
def test_first_line_runs_as_written_on_the_hardware_it_names(recipe):
    parsed, n, config = first_line(recipe)
    # the shipped multi-process configs name no num_processes: the command says it
    assert parsed.num_processes is not None, "the first line passes --num_processes"
    hardware = re.search(r"^# Hardware: (\d+) × (.+)$", (REPO / recipe).read_text(), re.M)
    assert hardware, "the recipe names its hardware on a `# Hardware: N × …` line"
    assert int(hardware.group(1)) == n, f"{hardware.group(0)!r} but the first line launches {n} process(es)"
    if parsed.config_file:
        accel = yaml.safe_load((REPO / parsed.config_file).read_text())
        assert (accel["distributed_type"] == "NO") == (n == 1), "one process goes with the single-process config"
        assert accel.get("mixed_precision", "no") in ("no", "bf16") and (accel.get("mixed_precision") != "bf16" or config["bf16"])
    # the batch check (and every other one) at that world size; bf16 needs a GPU this test may not have
    margs, dargs, targs = train.parse(["--config", str(REPO / recipe), "--bf16", "false"])
    assert train.check_config(margs, dargs, targs, world_size=n) == []
    if dargs.effective_batch_size:
        assert dargs.effective_batch_size // (targs.per_device_train_batch_size * n) >= 1


REAL_SIZE = [r for r in RECIPES if r.parts[1] != "tiny"]
MULTINODE = re.compile(
    r"^# 2 × 8 GPUs \(docs/how-to/cluster\.md, \"On a cluster\"\), on each machine with its "
    r"NODE_RANK \(0, 1\) and rank 0's address: (accelerate launch .+)$",
    re.M,
)


@pytest.mark.parametrize("recipe", REAL_SIZE, ids=[str(r) for r in REAL_SIZE])
def test_a_real_size_recipe_names_its_two_node_command(recipe):
    """Every real-size recipe's header names the command for 2 machines × 8 GPUs (docs/how-to/cluster.md, "On a cluster"):
    accelerate's parser reads it, it runs this recipe on 16 processes over 2 machines with a shipped
    DeepSpeed config (which starts torchrun on each machine), and the recipe passes the checks at 16."""
    from accelerate.commands.launch import launch_command_parser

    line = MULTINODE.search((REPO / recipe).read_text())
    assert line, "the header names its two-node command"
    words = [{"$NODE_RANK": "1", "$MASTER_ADDR": "10.0.0.1"}.get(w, w) for w in shlex.split(line.group(1))]
    parsed = launch_command_parser().parse_args(words[2:])
    assert (parsed.num_processes, parsed.num_machines, parsed.machine_rank, parsed.main_process_ip) == (16, 2, 1, "10.0.0.1")
    assert parsed.module and parsed.training_script == "judgetrain.train"
    assert parsed.training_script_args == ["--config", str(recipe)]
    accel = yaml.safe_load((REPO / parsed.config_file).read_text())
    assert accel["distributed_type"] == "DEEPSPEED"
    assert accel["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"  # torchrun on each machine
    assert world_size(LaunchArgs(accelerate_config=str(REPO / parsed.config_file), num_processes=16, num_machines=2)) == 16
    margs, dargs, targs = train.parse(["--config", str(REPO / recipe), "--bf16", "false"])
    assert train.check_config(margs, dargs, targs, world_size=16) == []


def test_the_batch_check_is_what_the_old_first_lines_failed():
    """The first line used to be `--config_file deepspeed_configs/zero3.yaml` without --num_processes for
    Qwen3-VL-2B: the config's 8 processes × per-device 4 cannot make an effective batch of 16 (the
    recipe then had 4 records a device and no packing)."""
    recipe = REPO / "recipes" / "qwen3vl-2b" / "timecatch-lora.yaml"
    n = world_size(LaunchArgs(accelerate_config="zero3", num_processes=8))  # the 8-GPU node the config stands for
    margs, dargs, targs = train.parse(["--config", str(recipe), "--bf16", "false", "--packing", "false",
                                              "--per_device_train_batch_size", "4"])
    assert n == 8 and any(p.startswith("effective_batch_size: 16 is not a multiple of per_device_train_batch_size (4) × world size (8)")
                          for p in train.check_config(margs, dargs, targs, world_size=n))


@pytest.fixture(scope="module")
def tiny_qwen3(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.mark.parametrize("recipe", sorted(TWINS), ids=[str(r) for r in sorted(TWINS)])
def test_tiny_twin_dry_runs_on_cpu_from_its_first_line(recipe, tmp_path, tiny_qwen3, timecatch_build):
    twin = TWINS[recipe]
    parsed, n, config = first_line(twin)
    assert n == 1 and re.search(r"^# Hardware: 1 × CPU", (REPO / twin).read_text(), re.M)
    real = yaml.safe_load((REPO / recipe).read_text())
    assert (get_family(config["family"]).name, config["use_peft"]) == (get_family(real["family"]).name, real["use_peft"])
    # what `judgetrain train TWIN` checks before launching, then one step (the tiny model and a
    # TimeCatch build stand in for the quickstart's folders; a PRISM twin trains on its detection task)
    overrides = ["--model_name_or_path", str(tiny_qwen3), "--datasets", str(timecatch_build[0]), "--output_dir", str(tmp_path / "o"),
                 "--max_steps", "1", "--save_strategy", "no", "--eval_strategy", "no", "--max_train_samples", "4",
                 "--tasks", "temporal_detect"]
    launch.check(LaunchArgs(recipe=REPO / twin, num_processes=parsed.num_processes), overrides)
    run = train.setup(["--config", str(REPO / twin), *overrides])
    run.trainer.train()
    assert run.trainer.state.global_step == 1 and run.model_args.lora_r == config["lora_r"]


# the pages that show the real-size `judgetrain train` commands, the resume example last
TRAIN_PAGES = ("docs/get-started/train.md", "docs/reference/recipes.md")


def train_commands(page: str) -> list[list[str]]:
    """The arguments after ``judgetrain train`` of the plain ``judgetrain train …`` lines (continuations
    joined; not the ``.venv/bin/`` ones) of every bash block of ``page``."""
    text = (REPO / page).read_text(encoding="utf-8")
    blocks = [block.replace("\\\n", " ") for block in re.findall(r"```bash\n(.*?)```", text, re.S)]
    return [shlex.split(line)[2:] for block in blocks for line in block.splitlines() if line.startswith("judgetrain train ")]


@pytest.mark.parametrize("page", TRAIN_PAGES)
def test_docs_train_examples_run_and_the_resume_is_the_run_it_follows(page):
    """The page's `judgetrain train` commands pass the launcher's checks at the world size they
    launch (bf16 off: this test may have no GPU), and the resume example is the command before it
    plus `--resume_from_checkpoint auto`, so it resumes that run and nothing in it is refused."""
    commands = train_commands(page)
    assert len(commands) >= 2 and commands[-1] == [*commands[-2], "--resume_from_checkpoint", "auto"], commands
    for argv in commands:
        args, overrides = launch.parse_command(argv)
        margs, dargs, targs = train.parse(["--config", str(REPO / args.recipe), *overrides, "--bf16", "false"])
        assert train.check_config(margs, dargs, targs, world_size=world_size(args)) == [], argv
