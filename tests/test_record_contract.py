"""The contract between builders and models: a built record goes through each
family's real chat template and processor as is, with one image placeholder
per image, and the model runs on it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from judgetrain import records
from judgetrain.models import get_family, load_model_and_processor
from judgetrain.models.tiny import build_tiny

FAMILIES = ["qwen3-vl", "qwen2.5-vl", "llava-onevision"]


@pytest.mark.parametrize("name", FAMILIES)
def test_timecatch_record_renders_and_runs(name, tmp_path, timecatch_build):
    out, _, _ = timecatch_build
    row = records.load(out)["validation"][0]
    model, processor = load_model_and_processor(build_tiny(name, tmp_path / name), dtype="float32")
    text = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    assert text.rstrip().endswith(row["label"] + "<|im_end|>")
    assert row["prompt"][0]["content"][-1]["text"] in text
    inputs = processor(text=[text], images=[row["images"]], return_tensors="pt")
    family = get_family(name)
    image_token_id = processor.tokenizer.convert_tokens_to_ids(family.image_token)
    with torch.no_grad():
        features = model.get_image_features(**{k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")})
        logits = model(**inputs).logits
    per_image = features.pooler_output
    assert len(per_image) == row["n_frames"]
    assert int((inputs["input_ids"] == image_token_id).sum()) == sum(f.shape[0] for f in per_image)
    assert logits.shape[:2] == inputs["input_ids"].shape


def test_synthetic_frame_folders_build(tmp_path):
    out = tmp_path / "frames-ds"
    done = subprocess.run([sys.executable, "-m", "judgetrain", "build", "timecatch", "--out", str(out), "--synthetic", "4",
                           "--synthetic-kind", "frames", "--lpips-random-backbone", "--no-progress", "--splits", "train=1.0"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"Dataset written to {out}" in done.stdout
    ds = records.load(out, verify=True)
    assert set(ds["train"]["source"]) == {"synthetic-frames"}
    info = json.loads((out / "build.json").read_text())
    assert info["args"]["synthetic_kind"] == "frames"
