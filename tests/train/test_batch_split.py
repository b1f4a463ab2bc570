"""A global batch's loss does not depend on how it is split: the same four records in
one micro-batch of four, two of two or four of one (accumulated), padded or packed into
rows, give the same step-1 loss and the same update, for every family.

Before judgetrain's trainer said that its loss accepts ``num_items_in_batch``,
Qwen2.5-VL and Qwen3-VL (whose classes set ``accepts_loss_kwargs = False``) trained on
the mean of micro-batch means: Qwen3-VL's step-1 loss was 6.386156 as 4×1, 6.378700 as
2×2 and 6.361336 as 1×4. The update is compared on LoRA's B matrices, which start at
zero, so after one SGD step they are exactly ``-lr × gradient``: a gradient that is a
mean of means differs there by ~0.3 % of its norm; float32 noise is ~1e-6.
Two processes (DDP) splitting the batch are tests/train/test_launch.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from judgetrain.train import setup, train_and_save

REPO = Path(__file__).resolve().parents[2]
RECIPES = {"qwen3-vl": "qwen3vl", "qwen2.5-vl": "qwen25vl", "llava-onevision": "llava-ov"}
# (per-device batch, accumulation steps): four records a step, padded; two rows a step, packed
SPLITS = {"padded": [(4, 1), (2, 2), (1, 4)], "packed": [(2, 1), (1, 2)]}


def _recipe(tmp_path: Path, family: str) -> Path:
    """The family's tiny recipe with the batch left to the command line (no effective_batch_size)."""
    recipe = yaml.safe_load((REPO / "recipes" / "tiny" / f"{RECIPES[family]}-timecatch-lora.yaml").read_text())
    recipe.pop("effective_batch_size")
    path = tmp_path / f"{family}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _one_step(recipe: Path, model: Path, data: Path, out: Path, per_device: int, accumulation: int, packed: bool):
    argv = ["--config", str(recipe), "--model_name_or_path", str(model), "--datasets", str(data), "--output_dir", str(out),
            "--max_steps", "1", "--save_strategy", "no", "--max_train_samples", "4", "--per_device_train_batch_size",
            str(per_device), "--gradient_accumulation_steps", str(accumulation), "--lora_dropout", "0", "--optim", "sgd",
            "--learning_rate", "0.5", "--report_to", "none", "--logging_steps", "1"]
    if packed:
        argv += ["--packing", "true", "--max_length", "1024"]
    run = setup(argv)
    if packed:  # the four records make exactly two rows: two rows a step is the whole set, however it is split
        assert sum(len(m) for m in run.trainer.train_dataset["members"]) == 4 and len(run.trainer.train_dataset) == 2
    train_and_save(run)
    (log,) = [h for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    return log, load_file(out / "adapter_model.safetensors")


@pytest.mark.parametrize("layout", list(SPLITS))
@pytest.mark.parametrize("family", list(RECIPES))
def test_a_global_batch_trains_the_same_however_it_is_split(family, layout, tmp_path, tiny_model, timecatch_build):
    recipe, model, data = _recipe(tmp_path, family), tiny_model(family), timecatch_build[0]
    runs = {split: _one_step(recipe, model, data, tmp_path / f"{split[0]}x{split[1]}", *split, layout == "packed")
            for split in SPLITS[layout]}
    (first, (log0, weights0)), *rest = runs.items()
    b_matrices = [k for k in weights0 if "lora_B" in k]
    assert b_matrices and all(weights0[k].abs().sum() > 0 for k in b_matrices)  # the step moved every B from zero
    for split, (log, weights) in rest:
        assert log["num_tokens"] == log0["num_tokens"], f"{split} saw other records than {first}"
        assert log["loss"] == pytest.approx(log0["loss"], rel=1e-6, abs=0), f"step-1 loss {split} vs {first}"
        for k in b_matrices:  # float32 sums in another order differ by ~1e-6 of the norm; a mean of means by ~3e-3
            relative = ((weights[k] - weights0[k]).norm() / weights0[k].norm()).item()
            assert relative < 1e-5, f"{k}: {split} vs {first} differ by {relative:.1e} of the update"
