"""The model registry and the tiny offline checkpoints: build, load, forward, LoRA targets, templates, errors."""

from __future__ import annotations

import hashlib
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from judgetrain.models import (
    FAMILIES,
    ModelNotFoundError,
    detect_family,
    get_family,
    load_model_and_processor,
)
from judgetrain.models.tiny import build_tiny, main

FAMILY_NAMES = list(FAMILIES)
LM_PROJECTIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
SINGLE_TOKEN_ANSWERS = ["yes", "no", "Yes", "No", "A", "B", *[str(i) for i in range(1, 10)]]
# Per family: (video token, eos, pad, the text that opens the assistant's answer).
TOKENS = {
    "qwen3-vl": ("<|video_pad|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>assistant\n"),
    "qwen2.5-vl": ("<|video_pad|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>assistant\n"),
    "llava-onevision": ("<video>", "<|im_end|>", "<|endoftext|>", "<|im_start|>assistant\n"),
    "internvl": ("<video>", "<|im_end|>", "<|endoftext|>", "<|im_start|>assistant\n"),
    "gemma-4": ("<|video|>", "<eos>", "<pad>", "<|turn>model\n"),
}


@pytest.fixture(scope="module")
def loaded(tiny_root: Path) -> dict[str, tuple]:
    """family name -> (model, processor, family), each loaded once through the registry."""
    out = {}
    for name in FAMILY_NAMES:
        model, processor = load_model_and_processor(tiny_root / name, dtype="float32")
        out[name] = (model, processor, detect_family(model.config))
    return out


def _images() -> list[Image.Image]:
    rng = np.random.default_rng(0)
    sizes = [(64, 64), (64, 64), (48, 80), (96, 64)]  # (height, width); the last two are not square
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB") for h, w in sizes]


def _user_message(images: list[Image.Image], text: str) -> dict:
    content = [*({"type": "image", "image": im} for im in images), {"type": "text", "text": text}]
    return {"role": "user", "content": content}


# --------------------------------------------------------------------------- registry


def test_registry_entries_are_frozen_and_complete() -> None:
    assert set(FAMILIES) == {"qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "gemma-4"} == set(TOKENS)
    assert {t for f in FAMILIES.values() for t in f.model_types} == {
        "qwen3_vl", "qwen2_5_vl", "llava_onevision", "internvl", "gemma4"}
    fam = FAMILIES["qwen3-vl"]
    with pytest.raises(AttributeError):
        fam.name = "x"  # type: ignore[misc]
    assert all(f.think_prefill is None for f in FAMILIES.values())  # instruct checkpoints only
    assert get_family("llava-critic") is FAMILIES["llava-onevision"]
    assert get_family("Qwen2_5_VL") is FAMILIES["qwen2.5-vl"]  # a model_type works too
    assert get_family("InternVL3_5") is get_family("internvl3") is FAMILIES["internvl"]
    assert get_family("gemma4") is FAMILIES["gemma-4"]


def test_unknown_family_suggests_the_closest() -> None:
    with pytest.raises(ValueError) as info:
        get_family("qwen3vl")
    msg = str(info.value)
    assert "Did you mean" in msg and "'qwen3-vl'" in msg
    assert "Available: gemma-4, internvl, llava-onevision, qwen2.5-vl, qwen3-vl" in msg


def test_unsupported_model_type_lists_supported() -> None:
    from transformers import Qwen2Config

    with pytest.raises(ValueError, match=r"Unsupported model type 'qwen2'.*qwen3_vl \(qwen3-vl\)"):
        detect_family(Qwen2Config())


def test_pixel_budget_is_qwen_only() -> None:
    assert FAMILIES["qwen2.5-vl"].image_size_kwargs(max_pixels=1000) == {"max_pixels": 1000}
    assert FAMILIES["qwen3-vl"].image_size_kwargs() == {}
    with pytest.raises(ValueError, match="no min/max pixel budget"):
        FAMILIES["llava-onevision"].image_size_kwargs(max_pixels=1000)


# --------------------------------------------------------------------------- tiny checkpoints


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_tiny_loads_back_and_is_detected(name: str, tiny_root: Path, loaded: dict) -> None:
    model, processor, family = loaded[name]
    assert family is FAMILIES[name]
    assert detect_family(tiny_root / name) is FAMILIES[name]
    assert (tiny_root / name / "model.safetensors").is_file()
    assert not model.training
    tok = processor.tokenizer
    cfg = model.config
    # The ids the model looks for are the tokenizer's.
    video, eos, pad, _ = TOKENS[name]
    assert cfg.image_token_id == tok.convert_tokens_to_ids(family.image_token)
    # InternVL shows video frames as images (no video id of its own); the processor knows the token.
    assert getattr(cfg, "video_token_id", tok.convert_tokens_to_ids(video)) == tok.convert_tokens_to_ids(video)
    assert processor.video_token == video
    if name.startswith("qwen"):
        assert cfg.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    text = cfg.get_text_config()
    assert tok.eos_token == eos and text.eos_token_id == tok.eos_token_id
    assert tok.pad_token == pad and text.pad_token_id == tok.pad_token_id
    assert tok.padding_side == "right"  # as real checkpoints store it; scoring asks for left per call
    assert text.vocab_size % 64 == 0 and text.vocab_size > len(tok)  # unused rows, as in real checkpoints


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_forward_with_four_images(name: str, loaded: dict) -> None:
    model, processor, family = loaded[name]
    images = _images()
    messages = [_user_message(images, "Are these frames in temporal order? Answer yes or no.")]
    enc = processor.apply_chat_template(
        messages, tokenize=True, return_dict=True, return_tensors="pt", add_generation_prompt=True
    )
    with torch.no_grad():
        out = model(**enc)
        vision_keys = ("pixel_values", "image_grid_thw", "image_sizes", "batch_num_images", "image_position_ids")
        vision_kwargs = {k: enc[k] for k in vision_keys if k in enc}
        features = model.get_image_features(**vision_kwargs).pooler_output
    assert out.logits.shape == (1, enc["input_ids"].shape[1], model.config.get_text_config().vocab_size)
    assert torch.isfinite(out.logits).all()
    # One run of placeholders per image in the prompt; as many as the vision features
    # (per image, or per InternVL crop: rows of every feature tensor together).
    is_image = (enc["input_ids"][0] == model.config.image_token_id).tolist()
    per_image = [len(list(run)) for flag, run in itertools.groupby(is_image) if flag]
    assert len(per_image) == 4
    assert sum(per_image) == sum(f.reshape(-1, f.shape[-1]).shape[0] for f in features)
    # The tiny processors keep frames cheap: Qwen 64x64 -> 4 tokens; LLaVA multi-image -> 16 + newline;
    # InternVL 2x2 crops + thumbnail of 4 tokens each; Gemma-4 its smallest budget (8x8 pooled patches).
    assert per_image[0] == {"llava-onevision": 17, "internvl": 20, "gemma-4": 64}.get(name, 4)


def test_same_seed_same_bytes(tmp_path: Path, tiny_root: Path) -> None:
    def digest(folder: Path) -> str:
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    state = torch.random.get_rng_state()
    again = build_tiny("qwen3-vl", tmp_path / "a", seed=0)
    other = build_tiny("qwen3-vl", tmp_path / "b", seed=1)
    assert torch.equal(state, torch.random.get_rng_state())  # the caller's RNG is untouched
    assert digest(again) == digest(tiny_root / "qwen3-vl")
    assert digest(other) != digest(again)
    for f in ("tokenizer.json", "config.json", "processor_config.json", "chat_template.jinja"):
        assert (again / f).read_bytes() == (tiny_root / "qwen3-vl" / f).read_bytes(), f


def test_cli_builds_and_prints_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0 and "python -m judgetrain.models.tiny --out tiny" in capsys.readouterr().out
    assert main(["--out", str(tmp_path), "--family", "llava-critic"]) == 0
    assert f"llava-onevision: {tmp_path / 'llava-onevision'}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--family", "qwen4-vl"])
    assert "Did you mean" in capsys.readouterr().err


# --------------------------------------------------------------------------- LoRA targets and freezing


# PEFT 0.21 still calls a transformers method deprecated in 5.x; not ours to fix.
_PEFT_DEPRECATION = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")


def _lora_wrapped(model: torch.nn.Module, target_modules: str | list[str]) -> list[str]:
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import LoraLayer

    peft_model = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=target_modules))
    return [n for n, m in peft_model.named_modules() if isinstance(m, LoraLayer)]


@_PEFT_DEPRECATION
@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_lora_regex_selects_language_model_projections_only(name: str, tiny_root: Path) -> None:
    family = FAMILIES[name]
    model, _ = load_model_and_processor(tiny_root / name)  # fresh: get_peft_model edits in place
    n_layers = model.config.get_text_config().num_hidden_layers
    decoder = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)
               and re.search(r"\.language_model\.layers\.\d+\.", n) and n.rsplit(".", 1)[1] in LM_PROJECTIONS}
    wrapped = _lora_wrapped(model, family.lora_target_regex)
    assert {n.removeprefix("base_model.model.") for n in wrapped} == decoder  # every decoder projection, nothing else
    # Gemma-4's KV-sharing layers (the last 2 of 4 here) have no k_proj / v_proj of their own.
    assert len(wrapped) == n_layers * len(LM_PROJECTIONS) - (2 * 2 if name == "gemma-4" else 0)
    assert {n.rsplit(".", 1)[1] for n in wrapped} == LM_PROJECTIONS
    for n in wrapped:
        assert ".language_model.layers." in n, n
        assert not family.is_vision_tower(n) and not family.is_projector(n), n


# A bare name list, the usual LoRA recipe, reaches into the vision tower where
# the tower reuses decoder names: SigLIP's q/k/v_proj, Qwen2.5-VL's MLP projections.
NAIVE = {"llava-onevision": ["q_proj", "k_proj", "v_proj"], "qwen2.5-vl": ["gate_proj", "up_proj", "down_proj"],
         "internvl": ["q_proj", "k_proj", "v_proj"]}  # InternViT's attention


@_PEFT_DEPRECATION
@pytest.mark.parametrize("name", sorted(NAIVE))
def test_a_plain_name_list_would_hit_the_vision_tower(name: str, tiny_root: Path) -> None:
    family = FAMILIES[name]
    model, _ = load_model_and_processor(tiny_root / name)
    wrapped = _lora_wrapped(model, NAIVE[name])
    assert any(family.is_vision_tower(n) for n in wrapped)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_vision_and_projector_patterns_partition_the_parameters(name: str, loaded: dict) -> None:
    model, _, family = loaded[name]
    vision, projector, rest = [], [], []
    for n, _ in model.named_parameters():
        assert not (family.is_vision_tower(n) and family.is_projector(n)), n
        (vision if family.is_vision_tower(n) else projector if family.is_projector(n) else rest).append(n)
    assert vision and projector
    assert all(n.startswith(("model.language_model.", "lm_head.")) for n in rest), rest
    towers = {"llava-onevision": ("model.vision_tower.",), "internvl": ("model.vision_tower.",),
              "gemma-4": ("model.vision_tower.", "model.audio_tower.")}.get(name, ("model.visual.",))
    assert all(n.startswith(towers) for n in vision)
    assert {t for t in towers if any(n.startswith(t) for n in vision)} == set(towers)


# --------------------------------------------------------------------------- tokenizer and templates


def _render(processor, messages: list[dict], **kwargs) -> str:
    return processor.apply_chat_template(messages, tokenize=False, **kwargs)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_closed_answers_are_single_tokens_after_the_assistant_cue(name: str, loaded: dict) -> None:
    _, processor, _ = loaded[name]
    tok = processor.tokenizer
    prompt = _render(processor, [_user_message(_images()[:2], "Answer yes or no.")], add_generation_prompt=True)
    assert prompt.endswith(TOKENS[name][3])
    base = tok(prompt, add_special_tokens=False)["input_ids"]
    for answer in SINGLE_TOKEN_ANSWERS:
        ids = tok(prompt + answer, add_special_tokens=False)["input_ids"]
        assert ids[: len(base)] == base and len(ids) == len(base) + 1, answer
        assert tok.decode(ids[len(base):]) == answer
    # Qwen's pre-tokenizer (kept by Qwen2Tokenizer on every load) splits numbers
    # into digits, so "12" is two tokens here as in every real Qwen checkpoint.
    ids = tok(prompt + "12", add_special_tokens=False)["input_ids"]
    assert ids[len(base):] == tok.convert_tokens_to_ids(["1", "2"])


# TRL 1.16 has no training (generation-marker) variant of Gemma 4's or InternVL's template, so
# assistant_only_loss is for these three; judgetrain's prompt-completion records train on the
# completion through TRL's completion mask, which needs no markers.
@pytest.mark.parametrize("name", ["qwen3-vl", "qwen2.5-vl", "llava-onevision"])
def test_assistant_mask_marks_exactly_the_answer(name: str, loaded: dict) -> None:
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    _, processor, _ = loaded[name]
    if name == "llava-onevision":
        # No TRL template exists for it: the shipped one carries the markers itself.
        assert has_generation_markers(processor.chat_template)
        assert get_training_chat_template(processor) is None
        template = None
    else:
        # The real, marker-free template ships, so TRL recognises it and swaps in
        # its training variant when SFTConfig(assistant_only_loss=True).
        assert not has_generation_markers(processor.chat_template)
        template = get_training_chat_template(processor)
        assert template is not None and has_generation_markers(template)
    messages = [
        _user_message(_images()[:2], "Are these frames in order?"),
        {"role": "assistant", "content": [{"type": "text", "text": "yes"}]},
    ]
    enc = processor.apply_chat_template(
        messages,
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_tensors="pt",
        return_assistant_tokens_mask=True,
    )
    mask = enc["assistant_masks"][0].bool()
    ids = enc["input_ids"][0]
    assert processor.tokenizer.decode(ids[mask]) == "yes<|im_end|>\n"
    # The rendered text is the real template's: the markers change the mask only.
    assert _render(processor, messages, chat_template=template) == _render(processor, messages)


def test_chat_templates_are_the_real_ones(loaded: dict) -> None:
    import trl

    shipped = Path(trl.__file__).parent / "chat_templates"
    for name, trl_file in (("qwen3-vl", "qwen3_vl.jinja"), ("qwen2.5-vl", "qwen2_5_vl.jinja")):
        assert loaded[name][1].chat_template == (shipped / trl_file).read_text(encoding="utf-8")
    assert loaded["gemma-4"][1].chat_template == (shipped / "gemma4_v5.jinja").read_text(encoding="utf-8")
    _, processor, _ = loaded["llava-onevision"]
    text = _render(processor, [_user_message(_images()[:2], "Q?")], add_generation_prompt=True)
    assert text == "<|im_start|>user\n<image>\n<image>\nQ?<|im_end|>\n<|im_start|>assistant\n"
    # InternVL: the template transformers' conversion script writes into every -hf checkpoint.
    text = _render(loaded["internvl"][1], [_user_message(_images()[:2], "Q?")], add_generation_prompt=True)
    assert text == "<|im_start|>user\n<IMG_CONTEXT>\n<IMG_CONTEXT>\nQ?<|im_end|>\n<|im_start|>assistant\n"
    text = _render(loaded["gemma-4"][1], [_user_message(_images()[:2], "Q?")], add_generation_prompt=True)
    assert text == "<bos><|turn>user\n<|image|><|image|>Q?<turn|>\n<|turn>model\n"


# --------------------------------------------------------------------------- missing models


def test_missing_folder_says_how_to_provide_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(ModelNotFoundError) as info:
        load_model_and_processor(missing)
    msg = str(info.value)
    assert isinstance(info.value, OSError)
    assert str(missing) in msg and "does not exist" in msg
    assert "hf download" in msg and "--local-dir" in msg and "python -m judgetrain.models.tiny" in msg


def test_incomplete_folder_names_what_is_missing(tmp_path: Path, tiny_root: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_bytes((tiny_root / "qwen3-vl" / "config.json").read_bytes())
    with pytest.raises(ModelNotFoundError, match=r"has no processor files.*it holds: config\.json"):
        load_model_and_processor(partial)


def test_hub_id_offline_says_how_to_provide_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read once at import
    hub_id = "judgetrain-tests/no-such-model"
    with pytest.raises(ModelNotFoundError) as info:
        load_model_and_processor(hub_id)
    msg = str(info.value)
    assert hub_id in msg and "HF_HUB_OFFLINE=1" in msg
    assert f"hf download {hub_id} --local-dir DIR" in msg and "HF_HOME" in msg
    with pytest.raises(ModelNotFoundError):
        detect_family(hub_id)


def test_family_mismatch_and_bad_dtype(tiny_root: Path) -> None:
    with pytest.raises(ValueError, match="family='qwen3-vl'"):
        load_model_and_processor(tiny_root / "qwen3-vl", family="llava-onevision")
    with pytest.raises(ValueError, match="Did you mean: 'bfloat16'"):
        load_model_and_processor(tiny_root / "qwen3-vl", dtype="bfloat61")


def test_pixel_budget_reaches_the_image_processor_only(tiny_root: Path) -> None:
    _, processor = load_model_and_processor(tiny_root / "qwen2.5-vl", min_pixels=28 * 28, max_pixels=28 * 28 * 2)
    assert processor.image_processor.size.longest_edge == 28 * 28 * 2
    assert processor.video_processor.size.longest_edge != 28 * 28 * 2
    grid = processor.image_processor(images=[_images()[0]], return_tensors="pt")["image_grid_thw"]
    assert int(grid.prod()) // 4 <= 2


# --------------------------------------------------------------------------- real widths, random weights


def test_real_width_qwen3_vl_8b_has_the_published_parameter_count() -> None:
    from judgetrain.models.tiny import random_real_width

    model, _ = random_real_width("qwen3-vl-8b", device="meta")
    cfg = model.config
    assert (len(model.model.language_model.layers), len(model.model.visual.blocks)) == (36, 27)
    assert cfg.vision_config.deepstack_visual_indexes == [8, 16, 24]
    assert len(model.model.visual.deepstack_merger_list) == 3
    total = sum(p.numel() for p in model.parameters())
    vocab_params = model.get_input_embeddings().weight.numel() + model.get_output_embeddings().weight.numel()
    # Qwen/Qwen3-VL-8B-Instruct's safetensors hold 8,767,123,696 parameters, of which the
    # untied 151936 x 4096 embedding and head are two; everything else must match exactly.
    assert total - vocab_params + 2 * 151936 * 4096 == 8_767_123_696


def test_real_width_at_reduced_depth_scores_through_the_engine() -> None:
    from judgetrain.models.tiny import random_real_width
    from judgetrain.scoring import score

    model, processor = random_real_width("qwen3-vl-8b", text_layers=2, vision_layers=3, seed=1)
    assert model.config.vision_config.deepstack_visual_indexes == [0, 1]  # 8/27, 16/27 of 3 layers; 2 decoder layers
    assert model.get_input_embeddings().weight.shape[1] == 4096 and model.dtype == torch.float32
    images = _images()[:2]
    [scores] = score(model, processor, [([_user_message(images, "Which frame comes first? Answer A or B.")],
                                         images, ["A", "B"])], batch_size=1, progress=False)
    assert len(scores.probs) == 2 and abs(sum(scores.probs) - 1) < 1e-5
    with pytest.raises(ValueError, match="unknown real width 'qwen3-vl-80b'; known: qwen3-vl-8b"):
        random_real_width("qwen3-vl-80b")
