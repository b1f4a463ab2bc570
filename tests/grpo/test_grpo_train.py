"""GRPO recipes (`method: grpo`) through `judgetrain train`'s own path on the tiny Qwen3-VL: a
few steps on PRISM pairwise twins with the correct and consistency rewards, each logged; the
recipe's problems refused before anything loads; the records ordered so that twins meet in
one generation batch; a run killed after a checkpoint resumes to the adapter of an
uninterrupted one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from judgetrain import records
from judgetrain.grpo import JudgeGRPOConfig, question_order
from judgetrain.train import ConfigError, check_config, loss_figure, parse, setup, train_and_save

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-grpo.yaml"


@pytest.fixture(scope="module")
def warm(tmp_path_factory, tiny, twins):
    """A short SFT warm-up on the twins, the adapter GRPO starts from."""
    out = tmp_path_factory.mktemp("sft-warm-up") / "sft"
    train_and_save(setup(["--config", str(REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"),
                          "--model_name_or_path", str(tiny), "--datasets", str(twins), "--output_dir", str(out),
                          "--eval_strategy", "no", "--eval_split", "null", "--max_steps", "2", "--save_strategy", "no"]))
    return out


def argv(tiny, data, out, *extra):
    return ["--config", str(RECIPE), "--model_name_or_path", str(tiny), "--datasets", str(data), "--output_dir", str(out),
            *extra]


# --------------------------------------------------------------------------- training


def test_a_grpo_recipe_trains_logs_each_reward_and_saves_a_recipe_that_reads_back(tmp_path, tiny, twins):
    out = tmp_path / "run"
    run = setup(argv(tiny, twins, out))
    assert type(run.training_args) is JudgeGRPOConfig and run.training_args.rewards == ["correct", "consistency"]
    train_and_save(run)
    state = json.loads((out / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2, 3, 4]
    for h in steps:  # each reward logged under its name, each a rate in [0, 1]
        assert 0 <= h["rewards/correct/mean"] <= 1 and 0 <= h["rewards/consistency/mean"] <= 1
    assert (out / "adapter_model.safetensors").is_file() and (out / "checkpoint-4").is_dir()
    identity = json.loads((out / "run.json").read_text())["identity"]["training"]
    assert identity["method"] == "grpo" and identity["rewards"] == ["correct", "consistency"]
    assert identity["num_generations"] == 2 and identity["consistency_weight"] == 0.5
    settings = json.loads((out / "run.json").read_text())["settings"]
    assert settings["reward_weights"]["value"] == [1.0, 0.5] and settings["reward_weights"]["recipe"] is None
    # generation never samples an image token (the next forward would count an image the prompt lacks)
    image_token = run.processor.tokenizer.convert_tokens_to_ids(run.processor.image_token)
    generation = settings["generation_kwargs"]["value"]
    assert image_token in generation["suppress_tokens"] and generation["sequence_bias"] == [[[32], 30.0], [[33], 30.0]]
    assert run.trainer.args.generation_kwargs == generation
    saved = yaml.safe_load((out / "judgetrain_recipe.yaml").read_text())
    assert saved["method"] == "grpo" and "generation_batch_size" not in saved and "reward_weights" not in saved
    _, _, again = parse(["--config", str(out / "judgetrain_recipe.yaml")])
    assert type(again) is JudgeGRPOConfig and again.steps_per_generation == again.gradient_accumulation_steps == 2
    assert again.consistency_weight == 0.5 and again.reward_weights is None
    figure = loss_figure(state["log_history"])  # training_loss.png: loss, each reward's mean, learning rate
    assert sorted(line.get_label() for line in figure.axes[1].get_lines()) == ["consistency", "correct"]
    assert (out / "training_loss.png").is_file()
    card = (out / "README.md").read_text()
    assert "GRPO" in card and "consistency × 0.5" in card


def test_prompts_of_different_lengths_share_a_micro_batch(tmp_path, tiny, twins):
    """Without the consistency reward TRL shuffles the records, so a micro-batch holds sequences of 4 and of 8
    frames: the prompts are left-padded, and so are the processor's per-token fields (Qwen-VL's
    mm_token_type_ids, which a right-padding processor would shift against the ids: a shape error in the
    model's image positions at the first such batch)."""
    assert len(set(records.load(twins)["train"]["n_frames"])) > 1
    run = setup(argv(tiny, twins, tmp_path / "mixed", "--rewards", "correct", "--consistency_weight", "null",
                     "--per_device_train_batch_size", "8", "--effective_batch_size", "8", "--max_steps", "3",
                     "--save_strategy", "no"))
    run.trainer.train()
    assert run.trainer.state.global_step == 3 and run.processor.tokenizer.padding_side == "left"


def test_a_killed_grpo_run_resumes_to_the_adapter_of_an_uninterrupted_one(tmp_path, tiny, twins):
    """The kill comes from inside: a callback after the Trainer's own, at the save of step 2, once the
    checkpoint is marked complete; the resumed run then generates and trains steps 3 and 4 as the
    uninterrupted run did (the RNG state, the data position and the optimizer from the checkpoint)."""
    from safetensors.torch import load_file

    kill = (
        "import os, signal, sys\n"
        "from transformers import TrainerCallback\n"
        "from judgetrain.train.run import script\n"
        "class Kill(TrainerCallback):\n"
        "    def on_save(self, args, state, control, **kw):\n"
        "        if state.global_step == 2:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "sys.exit(script(sys.argv[1:], callbacks=[lambda *a: Kill()]))\n"
    )
    full, killed = tmp_path / "full", tmp_path / "killed"
    train_and_save(setup(argv(tiny, twins, full)))
    done = subprocess.run([sys.executable, "-c", kill, *argv(tiny, twins, killed)], capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, done.stderr[-3000:]
    assert (killed / "checkpoint-2" / "judgetrain_checkpoint_complete.json").is_file()
    assert not (killed / "adapter_model.safetensors").exists()
    train_and_save(setup(argv(tiny, twins, killed, "--resume_from_checkpoint", "auto")))
    a, b = load_file(full / "adapter_model.safetensors"), load_file(killed / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    assert any(a[k].abs().sum() > 0 for k in a if "lora_B" in k), "GRPO changed no LoRA weight in 4 steps"
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)
    logged = [h for h in json.loads((killed / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    first = [h for h in json.loads((full / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    assert [h["rewards/correct/mean"] for h in logged] == [h["rewards/correct/mean"] for h in first]


# --------------------------------------------------------------------------- the recipe's problems


def problems(tiny, data, *extra) -> list[str]:
    try:
        model_args, data_args, training_args = parse(argv(tiny, data, "unused", *extra))
    except ConfigError as e:
        return e.problems
    return check_config(model_args, data_args, training_args, 1)


def test_a_grpo_recipes_problems_are_each_named_with_the_fix(tiny, twins):
    found = problems(tiny, twins, "--rewards", "correct", "sharp", "--reward_weights", "1", "2", "3", "--consistency_weight", "null")
    assert "rewards: 'sharp' is not a reward; use correct, format or consistency" in found
    assert any(p.startswith("reward_weights: 3 weight(s) for 2 reward(s)") for p in found)
    found = problems(tiny, twins, "--reward_weights", "1", "1")
    assert found == ["reward_weights and consistency_weight: give the weights one way, the list reward_weights (in the "
                     "order of rewards) or a <reward>_weight per reward (what a sweep searches)"]
    found = problems(tiny, twins, "--rewards", "correct", "consistency", "--format_weight", "2")
    assert found == ["format_weight: set, but rewards ['correct', 'consistency'] do not include format; add it to rewards "
                     "or drop the weight"]
    found = problems(tiny, twins, "--num_generations", "1")
    assert any(p.startswith("num_generations: 1 is below 2") for p in found)
    found = problems(tiny, twins, "--per_device_train_batch_size", "3")
    assert found == ["generation_batch_size (3) must be divisible by num_generations (2). (refused by TRL's training "
                     "arguments; change the fields it names)"]
    found = problems(tiny, twins, "--steps_per_generation", "4")
    assert any(p.startswith("steps_per_generation: 4 steps a generation batch, but an optimizer step accumulates 2") for p in found)
    assert problems(tiny, twins, "--method", "ppo") == ["--method: 'ppo' is not a training method; use sft, grpo or reward"]
    assert problems(tiny, twins, "--rewards", "correct", "--consistency_weight", "null", "--steps_per_generation", "4") == []


def test_vllm_asked_for_where_it_is_not_installed_is_refused(tiny, twins):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    found = problems(tiny, twins, "--use_vllm", "true")
    assert any(p.startswith("use_vllm: true, but vLLM is not installed here") for p in found)


def test_sft_recipes_read_as_before_and_say_their_method(tiny, twins):
    _, _, args = parse(["--config", str(REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml")])
    assert args.method == "sft" and not hasattr(args, "num_generations")
    with pytest.raises(ConfigError, match="num_generations"):
        parse(["--config", str(REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"), "--num_generations", "4"])


# --------------------------------------------------------------------------- twins in one generation batch


def _rows(twins_path):
    ds = records.load(twins_path)["train"].filter(lambda r: r["task"] == "pairwise")
    return ds["task"], ds["meta"], ds["id"]


def test_twins_are_ordered_next_to_each_other_in_a_seeded_order(twins):
    tasks, metas, ids = _rows(twins)
    order = question_order(tasks, metas, ids, prompts_per_batch=4, seed=1)
    assert sorted(order) == list(range(len(ids)))
    keys = [json.loads(metas[i])["twin"] for i in order]
    assert all(keys[i] == keys[i + 1] for i in range(0, len(keys), 2))  # each twin pair consecutive
    assert len(set(keys[::2])) == len(keys) // 2
    assert question_order(tasks, metas, ids, 4, seed=1) == order  # the same seed: the same order
    assert question_order(tasks, metas, ids, 4, seed=2) != order


def test_an_order_that_would_split_twins_is_refused_naming_the_records(twins):
    tasks, metas, ids = _rows(twins)
    with pytest.raises(ConfigError, match=r"generation_batch_size: 3 prompts a generation batch .* multiple of 2"):
        question_order(tasks, metas, ids, prompts_per_batch=3, seed=1)
    with pytest.raises(ConfigError, match=r"1 question\(s\) have not all their presentations") as e:
        question_order(tasks[1:], metas[1:], ids[1:], prompts_per_batch=4, seed=1)
    assert ids[2] in str(e.value) or ids[1] in str(e.value)
    alone = [json.dumps({}), *metas[1:]]
    with pytest.raises(ConfigError, match=r"1 record\(s\) present their question once \(e.g. \['" + ids[0]):
        question_order(tasks, alone, ids, prompts_per_batch=4, seed=1)


# --------------------------------------------------------------------------- SFT, then GRPO from its adapter


def test_grpo_starts_from_an_sft_warm_ups_adapter_and_names_it_in_its_identity(tmp_path, tiny, twins, warm):
    from safetensors.torch import load_file

    sft = warm
    warm_weights = load_file(sft / "adapter_model.safetensors")
    assert any(v.abs().sum() > 0 for k, v in warm_weights.items() if "lora_B" in k)
    out = tmp_path / "grpo"
    # a learning rate too small to move float32 weights: what GRPO saves is what it started from
    train_and_save(setup(argv(tiny, twins, out, "--init_adapter", str(sft), "--max_steps", "1", "--learning_rate", "1e-30",
                              "--save_strategy", "no")))
    after = load_file(out / "adapter_model.safetensors")
    assert after.keys() == warm_weights.keys()
    for k in warm_weights:
        torch.testing.assert_close(after[k], warm_weights[k])
    identity = json.loads((out / "run.json").read_text())["identity"]
    assert set(identity["init_adapter"]["files"]) >= {"adapter_model.safetensors", "adapter_config.json"}
    found = problems(tiny, twins, "--init_adapter", str(sft), "--lora_r", "4")
    assert found == [f"lora_r: 4, but init_adapter {sft} was trained with 8; set `lora_r: 8` (the adapter's shape trains on)"]
    assert problems(tiny, twins, "--init_adapter", str(tmp_path)) == [
        f"init_adapter: {tmp_path} holds no adapter_config.json; give the output_dir of a LoRA run (`judgetrain train` "
        "writes the adapter there)"]


# --------------------------------------------------------------------------- a sweep over GRPO's own fields


def test_a_sweep_searches_grpos_fields_and_the_consistency_weight(tmp_path, tiny, twins):
    """recipes/spaces/grpo.yaml on the tiny GRPO recipe: one trial trains with its sampled β, completions a prompt,
    temperature, consistency weight and learning rate, and is scored by the judge objective when it ends."""
    import optuna

    from judgetrain import sweep
    from judgetrain.cli import main as cli_main

    storage = f"sqlite:///{tmp_path / 'sweeps.db'}"
    assert cli_main(["sweep", str(RECIPE), "--space", str(REPO / "recipes" / "spaces" / "grpo.yaml"), "--trials", "1",
                     "--storage", storage, "--study", "grpo", "--objective", "judge:all/accuracy", "--out", str(tmp_path / "s"),
                     "--model_name_or_path", str(tiny), "--datasets", str(twins), "--eval_split", "train",
                     "--max_steps", "1", "--max_eval_samples", "4"]) == 0
    (trial,) = optuna.load_study(study_name="grpo", storage=sweep.storage_from_url(storage, heartbeat_interval=None)).trials
    assert trial.state.name == "COMPLETE" and 0 <= trial.value <= 1
    assert set(trial.params) == {"beta", "num_generations", "temperature", "consistency_weight", "learning_rate"}
    used = yaml.safe_load((tmp_path / "s" / "trial-0000" / "judgetrain_recipe.yaml").read_text())
    assert used["method"] == "grpo" and used["consistency_weight"] == pytest.approx(trial.params["consistency_weight"])
    assert used["num_generations"] == trial.params["num_generations"]
