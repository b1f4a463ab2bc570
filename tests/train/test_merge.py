"""`judgetrain merge` (judgetrain issue #24): the merged folder is written in the key layout
of the family's original hub checkpoints (what vLLM loads: LLaVA-OneVision's
``vision_tower.vision_model.*``, not ``vision_tower.*``), still loads with
``from_pretrained`` and gives base + adapter's logits; a second, different merge into the
same ``--out`` is refused (old → new) and ``--overwrite`` replaces it."""

from __future__ import annotations

import json

import pytest
import safetensors
import torch

from judgetrain import cli
from judgetrain.identity import sha256_file
from judgetrain.train.merge import MERGE_INFO, merge_adapter

# the top-level key prefixes of the original hub checkpoints (llava-hf/llava-onevision-qwen2-*-ov-hf,
# Qwen/Qwen2.5-VL-*-Instruct, Qwen/Qwen3-VL-*-Instruct, OpenGVLab/InternVL3-*-hf)
HUB_PREFIXES = {
    "llava-onevision": ("language_model.model.", "language_model.lm_head.", "vision_tower.vision_model.",
                        "multi_modal_projector.", "image_newline"),
    "qwen2.5-vl": ("model.embed_tokens.", "model.layers.", "model.norm.", "lm_head.", "visual."),
    "qwen3-vl": ("model.language_model.", "model.visual.", "lm_head."),
    "internvl": ("language_model.model.", "language_model.lm_head.", "vision_tower.", "multi_modal_projector."),
}


def _adapter(base, out, seed):
    """A LoRA adapter on the language model's q/v projections with random (non-zero) weights."""
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import load_model_and_processor

    model, _ = load_model_and_processor(base, dtype="float32")
    torch.manual_seed(seed)
    config = LoraConfig(r=2, lora_alpha=4, target_modules=r".*language_model.*\.(q_proj|v_proj)", init_lora_weights=False)
    get_peft_model(model, config).save_pretrained(str(out))
    return out


def _keys(folder):
    keys = []
    for path in sorted(folder.glob("*.safetensors")):
        with safetensors.safe_open(str(path), "pt") as f:
            keys += list(f.keys())
    return keys


def _logits(model):
    ids = torch.tensor([[1, 5, 9, 3, 7, 2]])
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits


@pytest.mark.parametrize("family", list(HUB_PREFIXES))
def test_merged_keys_follow_the_hub_layout_and_reload_to_the_same_logits(family, tiny_model, tmp_path):
    from peft import PeftModel

    from judgetrain.models import load_model_and_processor

    base = tiny_model(family)
    adapter = _adapter(base, tmp_path / "adapter", seed=1)
    out = merge_adapter(adapter, tmp_path / "merged")
    keys = _keys(out)
    stray = [k for k in keys if not k.startswith(HUB_PREFIXES[family])]
    assert keys and not stray, stray[:5]
    if family == "llava-onevision":  # before: vision_tower.embeddings.*, which vLLM cannot load
        assert any(k.startswith("vision_tower.vision_model.encoder.layers.") for k in keys)

    merged, _ = load_model_and_processor(out, dtype="float32")
    model, _ = load_model_and_processor(base, dtype="float32")
    expected = _logits(PeftModel.from_pretrained(model, str(adapter)))
    torch.testing.assert_close(_logits(merged), expected, atol=1e-4, rtol=1e-4)


def test_a_second_merge_into_one_out_is_refused_and_overwrite_replaces_it(tiny_model, tmp_path, capsys):
    base = tiny_model("qwen3-vl")
    first, second = _adapter(base, tmp_path / "first", seed=1), _adapter(base, tmp_path / "second", seed=2)
    out = tmp_path / "merged"
    assert cli.main(["merge", str(first), "--out", str(out)]) == 0
    weights = (out / "model.safetensors").read_bytes()
    info = json.loads((out / MERGE_INFO).read_text())
    assert info["identity"]["adapter"]["files"]["adapter_model.safetensors"] == sha256_file(first / "adapter_model.safetensors")

    capsys.readouterr()
    assert cli.main(["merge", str(first), "--out", str(out)]) == 0  # the same merge: found done
    assert "Nothing to do" in capsys.readouterr().out and (out / "model.safetensors").read_bytes() == weights

    # before: silently replaced by (or mixed with) the second adapter's merge
    assert cli.main(["merge", str(second), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    old, new = (sha256_file(a / "adapter_model.safetensors") for a in (first, second))
    assert "holds another merge (old → new)" in err
    assert f"  - adapter.files.adapter_model.safetensors: {old!r} → {new!r}\n" in err
    assert "--out NEW_FOLDER" in err and "--overwrite" in err
    assert (out / "model.safetensors").read_bytes() == weights

    assert cli.main(["merge", str(second), "--out", str(out), "--overwrite"]) == 0
    assert (out / "model.safetensors").read_bytes() != weights
    assert json.loads((out / MERGE_INFO).read_text())["identity"]["adapter"]["files"]["adapter_model.safetensors"] == new
    assert not [p for p in tmp_path.glob(".merged.*") if p.is_dir()]  # no temporary folder left beside it (the lock is a file)


def test_merge_into_a_folder_of_other_files_is_refused(tiny_model, tmp_path, capsys):
    adapter = _adapter(tiny_model("qwen3-vl"), tmp_path / "adapter", seed=1)
    out = tmp_path / "notes"
    out.mkdir()
    (out / "todo.txt").write_text("keep me")
    assert cli.main(["merge", str(adapter), "--out", str(out)]) == 2
    assert "holds files that are no merge of judgetrain's (todo.txt)" in capsys.readouterr().err
    assert (out / "todo.txt").read_text() == "keep me"
