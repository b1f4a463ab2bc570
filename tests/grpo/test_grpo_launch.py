"""The tiny GRPO recipe on two processes, through `judgetrain train`'s own launch: DDP (gloo) and
DeepSpeed ZeRO-3, with the consistency reward, which gathers a question's completions across
processes and refuses a generation batch that holds one twin without the other: every step logs
it, so every step's twins met. Marked slow: `.ci/run` runs them after the default suite."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-grpo.yaml"
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("stage", ["ddp", "zero3"])
def test_two_processes_train_with_twins_in_every_step(stage, tmp_path, tiny, twins):
    from safetensors.torch import load_file

    out = tmp_path / stage
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    if stage == "ddp":
        env["ACCELERATE_USE_CPU"] = "1"
    done = subprocess.run([str(BIN / "judgetrain"), "train", str(RECIPE), "--accelerate_config", stage, "--num_processes", "2",
                           "--model_name_or_path", str(tiny), "--datasets", str(twins), "--output_dir", str(out),
                           "--max_steps", "2", "--save_steps", "2", "--per_device_train_batch_size", "2",
                           "--effective_batch_size", "4"],
                          capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    assert re.search(r"world size: 2\b", (out / "README.md").read_text())
    steps = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    assert [h["step"] for h in steps] == [1, 2]
    # 4 completions a step (2 prompts = 1 twin pair, 2 generations each), 2 on each process, so each twin on its
    # own process: the consistency reward compared every completion with the twin's, which the other process made
    assert all(0 <= h["rewards/consistency/mean"] <= 1 and 0 <= h["rewards/correct/mean"] <= 1 for h in steps)
    adapter = load_file(out / "adapter_model.safetensors")
    assert adapter and all(t.numel() > 0 for t in adapter.values())  # gathered, not ZeRO-3 partition stubs
    if stage == "zero3":
        assert (out / "checkpoint-2" / "global_step2").is_dir(), "the DeepSpeed engine wrote the checkpoint"
