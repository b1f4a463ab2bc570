"""A reward head on every family (judgetrain.models.heads, .reward): the judge's decoder and vision tower
loaded exactly as the generative checkpoint holds them (Qwen2.5-VL's 4.x key layout renamed as its
generative class renames it), a scalar head in place of the language-model head, new heads at zero, one
reward per sequence read at its last real token whatever the padding, and a trained reward model that
loads back with one call."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image

from judgetrain.models import REWARD_HEAD, is_reward_adapter, load_model_and_processor, load_reward_model

FAMILIES = ("qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "gemma-4")


def prompts(processor):
    text = processor.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Steps"}]}],
                                         add_generation_prompt=True, tokenize=False)
    images = [[Image.new("RGB", (64, 64), (200, 30, 30))], [Image.new("RGB", (48, 64), (30, 200, 30))]]
    return [text, text + " and more words"], images


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_gets_the_generative_weights_and_a_scalar_head_read_at_the_last_real_token(family, tiny_model):
    path = tiny_model(family)
    reward, processor = load_reward_model(path, dtype="float32")
    generative, _ = load_model_and_processor(path, dtype="float32")
    theirs = dict(generative.named_parameters())
    mine = dict(reward.named_parameters())
    assert set(mine) - set(theirs) == {f"{REWARD_HEAD}.weight"}  # every other weight is the checkpoint's, by name
    assert all(torch.equal(value, theirs[name]) for name, value in mine.items() if name in theirs)
    assert torch.count_nonzero(getattr(reward, REWARD_HEAD).weight) == 0  # a new head starts at zero
    torch.nn.init.normal_(getattr(reward, REWARD_HEAD).weight, generator=torch.Generator().manual_seed(0))
    texts, images = prompts(processor)
    with torch.no_grad():
        left = reward(**processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="left"))
        right = reward(**processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="right"))
        alone = [reward(**processor(text=[t], images=[i], return_tensors="pt")).logits for t, i in zip(texts, images)]
    assert left.logits.shape == (2, 1)
    torch.testing.assert_close(left.logits, torch.cat(alone), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(right.logits, torch.cat(alone), atol=1e-4, rtol=1e-4)
    assert left.logits[0, 0] != left.logits[1, 0]


def test_a_saved_reward_adapter_loads_back_with_one_call_head_and_lora_included(tmp_path, tiny_model):
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import get_family

    path = tiny_model("qwen3-vl")
    model, processor = load_reward_model(path, dtype="float32")
    assert not is_reward_adapter(path)
    peft = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=4, target_modules=get_family("qwen3-vl").lora_target_regex,
                                            init_lora_weights=False))
    with torch.no_grad():
        getattr(peft.base_model.model, REWARD_HEAD).modules_to_save["default"].weight.normal_()
    peft.save_pretrained(tmp_path / "rm")
    assert is_reward_adapter(tmp_path / "rm")
    assert json.loads((tmp_path / "rm" / "adapter_config.json").read_text())["base_model_name_or_path"] == str(path)
    texts, images = prompts(processor)
    inputs = processor(text=texts, images=images, return_tensors="pt", padding=True, padding_side="left")
    with torch.no_grad():
        before = peft.eval()(**inputs).logits
        loaded, _ = load_reward_model(tmp_path / "rm")
        after = loaded(**inputs).logits
    torch.testing.assert_close(after, before)
    assert torch.count_nonzero(after) == 2  # the head came back trained, not new at zero
