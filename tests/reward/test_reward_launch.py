"""The tiny reward recipe on two processes under DeepSpeed ZeRO-3, through `judgetrain train`'s own
launch, against one process at the same global batch (four pairs a step: 1 pair × 2 accumulation ×
2 processes, and 2 pairs × 2 accumulation on one): the same losses, the same trained LoRA and head
(gathered from ZeRO-3's partitions, not stubs). Marked slow: `.ci/run` runs it after the default suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-reward.yaml"
BIN = Path(sys.executable).parent


def test_zero3_on_two_processes_trains_the_reward_model_one_process_trains(tmp_path, tiny, pointwise):
    from safetensors.torch import load_file

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    common = [str(RECIPE), "--model_name_or_path", str(tiny), "--datasets", str(pointwise), "--eval_split", "null",
              "--eval_strategy", "no", "--max_steps", "3", "--save_steps", "3", "--effective_batch_size", "4",
              # SGD: an update follows its gradient; Adam's first steps divide near-zero gradients (the head starts at
              # zero) by their own size, which turns float rounding of the sum over processes into whole updates
              "--optim", "sgd", "--learning_rate", "0.5"]
    runs = {
        "zero3": ["--accelerate_config", "zero3", "--num_processes", "2", "--per_device_train_batch_size", "1"],
        "one": ["--num_processes", "1", "--per_device_train_batch_size", "2"],
    }
    for name, extra in runs.items():
        done = subprocess.run([str(BIN / "judgetrain"), "train", *common, *extra, "--output_dir", str(tmp_path / name)],
                              capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
        assert done.returncode == 0, (name, done.stdout[-2000:], done.stderr[-4000:])
    assert (tmp_path / "zero3" / "checkpoint-3" / "global_step3").is_dir(), "the DeepSpeed engine wrote the checkpoint"
    losses = {name: [h["loss"] for h in json.loads((tmp_path / name / "trainer_state.json").read_text())["log_history"]
                     if "loss" in h] for name in runs}
    assert len(losses["one"]) == 3
    torch.testing.assert_close(torch.tensor(losses["zero3"]), torch.tensor(losses["one"]), atol=1e-5, rtol=1e-5)
    two, one = (load_file(tmp_path / name / "adapter_model.safetensors") for name in runs)
    assert two.keys() == one.keys() and any(".score." in k for k in one)
    for k in one:
        assert two[k].numel() > 0, f"{k}: a ZeRO-3 partition stub, not the gathered weight"
        torch.testing.assert_close(two[k], one[k], atol=1e-5, rtol=1e-5, msg=k)
