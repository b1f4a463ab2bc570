"""The families paper 000's Table 2 adds to Qwen: InternVL (3 and 3.5, transformers-native -hf)
and Gemma-4. Their tiny builds, LoRA regex against the vision (and audio) towers' module names,
Gemma's BOS quirk, shared-prefix scoring, generation and `judgetrain eval timecatch --model`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from judgetrain.models import FAMILIES, detect_family, get_family, load_model_and_processor
from judgetrain.models.tiny import QUICKSTART_FAMILIES, VARIANTS, build_all, build_tiny, main
from judgetrain.scoring import PrefixGroup, generate, render_prompt, score, score_shared_prefix

NEW = ["internvl", "internvl3.5", "gemma-4"]  # builds: InternVL3, InternVL3.5, Gemma-4
LM_PROJECTIONS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
ATOL = 1e-5


@pytest.fixture(scope="module")
def loaded(tiny_root: Path) -> dict[str, tuple]:
    return {name: load_model_and_processor(tiny_root / name, dtype="float32") for name in NEW}


def _image(seed: int, size: tuple[int, int] = (64, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8), "RGB")


def _chat(n_images: int, text: str) -> list[dict]:
    return [{"role": "user", "content": [*({"type": "image"} for _ in range(n_images)), {"type": "text", "text": text}]}]


# --------------------------------------------------------------------------- registry


def test_table_2_hub_ids_belong_to_their_families() -> None:
    # Paper 000 §4.1 / Table 2: the five models, by the hub ids docs/reference/api/registry.md lists.
    table2 = {
        "Qwen/Qwen2.5-VL-7B-Instruct": "qwen2.5-vl",
        "Qwen/Qwen3-VL-8B-Instruct": "qwen3-vl",
        "google/gemma-4-E4B-it": "gemma-4",
        "OpenGVLab/InternVL3-8B-hf": "internvl",
        "OpenGVLab/InternVL3_5-8B-HF": "internvl",
    }
    for hub_id, family in table2.items():
        assert hub_id in FAMILIES[family].example_checkpoints, hub_id
    assert {get_family(a).name for a in ("InternVL3", "internvl3.5", "InternVL3_5", "internvl")} == {"internvl"}
    assert get_family("Gemma4") is get_family("gemma-4")  # the model_type spelling too


def test_variant_builds_load_as_their_family(tiny_root: Path, loaded: dict) -> None:
    assert set(VARIANTS) == {"internvl3.5", "qwen3-vl-thinking"}
    text_types = {name: loaded[name][0].config.get_text_config().model_type for name in NEW}
    assert text_types == {"internvl": "qwen2", "internvl3.5": "qwen3", "gemma-4": "gemma4_text"}
    assert {detect_family(tiny_root / n).name for n in NEW} == {"internvl", "gemma-4"}
    assert detect_family(tiny_root / "internvl3.5") is FAMILIES["internvl"]


def test_build_all_defaults_to_the_quickstart_families(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The quickstart calls build_all() with no families: adding families must not make it build more.
    assert QUICKSTART_FAMILIES == ("qwen3-vl", "qwen2.5-vl", "llava-onevision")
    assert main(["--out", str(tmp_path), "--family", "internvl3.5", "--family", "InternVL3"]) == 0
    out = capsys.readouterr().out
    assert f"internvl3.5: {tmp_path / 'internvl3.5'}" in out and f"internvl: {tmp_path / 'internvl'}" in out
    assert list(build_all(tmp_path / "x", families=["internvl3_5"])) == ["internvl"]  # an alias builds the family


def test_tiny_builds_are_deterministic(tmp_path: Path, tiny_root: Path) -> None:
    for name in NEW:
        again = build_tiny(name, tmp_path / name, seed=0)
        for f in ("model.safetensors", "tokenizer.json", "config.json", "processor_config.json"):
            assert (again / f).read_bytes() == (tiny_root / name / f).read_bytes(), (name, f)


# --------------------------------------------------------------------------- tokens and templates


def test_internvl_tokens_follow_the_conversion_order(loaded: dict) -> None:
    # transformers' conversion appends <img> </img> <IMG_CONTEXT> ... after the Qwen vocabulary
    # (so <IMG_CONTEXT> is 151667 in InternVL3-*-hf); the tiny vocabulary keeps that order.
    for name in ("internvl", "internvl3.5"):
        model, processor = loaded[name]
        tok = processor.tokenizer
        ids = tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"])
        assert ids[2:5] == list(range(ids[2], ids[2] + 3)) and ids[0] < ids[1] < ids[2] < ids[5]
        assert model.config.image_token_id == ids[4] == tok.context_image_token_id
        assert (tok.start_image_token, tok.end_image_token, tok.video_token) == ("<img>", "</img>", "<video>")
    think = loaded["internvl3.5"][1].tokenizer.convert_tokens_to_ids("<think>")
    assert think < loaded["internvl3.5"][1].tokenizer.convert_tokens_to_ids("<img>")  # Qwen3's vocabulary first


def test_gemma_template_bos_is_not_doubled(loaded: dict) -> None:
    model, processor = loaded["gemma-4"]
    tok = processor.tokenizer
    chat = _chat(2, "Are these frames in order? Answer yes or no.")
    images = [_image(1), _image(2)]
    raw = processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert raw.startswith("<bos><|turn>user\n") and tok("x")["input_ids"][0] == tok.bos_token_id
    text = render_prompt(processor, chat)
    assert text == raw[len("<bos>"):]
    ids = processor(text=[text], images=[images], return_tensors="pt")["input_ids"][0].tolist()
    assert ids.count(tok.bos_token_id) == 1 and ids[0] == tok.bos_token_id
    # exactly what transformers' own tokenizing chat template gives
    ref = processor.apply_chat_template([{**chat[0], "content": [{"type": "image", "image": im} for im in images]
                                          + chat[0]["content"][2:]}], tokenize=True, add_generation_prompt=True,
                                        return_dict=True, return_tensors="pt")
    assert ids == ref["input_ids"][0].tolist()
    # a tokenizer that adds no BOS (InternVL, Qwen) keeps its template's text as it is
    _, ivl = loaded["internvl"]
    assert render_prompt(ivl, chat) == ivl.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


# --------------------------------------------------------------------------- LoRA against the towers


_TOWER_LEAVES = re.compile(r"\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|fc1|fc2|linear)$")


@pytest.mark.parametrize("name", NEW)
def test_lora_regex_spares_every_vision_and_audio_module(name: str, loaded: dict) -> None:
    model, _ = loaded[name]
    family = detect_family(model.config)
    names = [n for n, _ in model.named_modules() if n]
    tower = [n for n in names if family.is_vision_tower(n) or family.is_projector(n)]
    decoder = [n for n in names if re.search(r"\.language_model\.layers\.\d+\.(self_attn|mlp)\.\w+_proj$", n)
               and n.rsplit(".", 1)[1] in LM_PROJECTIONS]
    # The towers do reuse the decoder's projection names, so a name list would reach them.
    reused = {m.group(1) for n in tower if (m := _TOWER_LEAVES.search(n))}
    assert {"q_proj", "k_proj", "v_proj"} <= reused
    if name == "gemma-4":
        assert {"gate_proj", "up_proj", "down_proj", "o_proj"} <= reused  # vision MLP, wrapped linears
        assert any(n.startswith("model.audio_tower.") for n in tower)
    assert not [n for n in tower if family.is_lora_target(n)]
    assert decoder and all(family.is_lora_target(n) for n in decoder)
    # nothing else in the model is a target (per-layer-embedding gates, norms, the head)
    assert {n for n in names if family.is_lora_target(n)} == set(decoder)


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_a_plain_name_list_fails_on_gemma_4s_vision_tower(tiny_root: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model, _ = load_model_and_processor(tiny_root / "gemma-4")
    # Its vision q_proj is a Gemma4ClippableLinear (a Linear inside), which PEFT cannot wrap.
    with pytest.raises(ValueError, match="Gemma4ClippableLinear"):
        get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))


# --------------------------------------------------------------------------- scoring and generation


# Gemma-4 attends through a sliding window (24 tokens here, 512 real). The continuation rows
# of shared-prefix scoring would put pads between the cached prefix and the rest, slots the
# window counts; with a sliding window the engine batches only rows of equal length, and the
# choices below (one to three tokens) make rows of different lengths.
@pytest.mark.parametrize("name", ["internvl", "internvl3.5", "gemma-4"])
def test_shared_prefix_equals_scoring_each_prompt(name: str, loaded: dict) -> None:
    from judgetrain.scoring.model import has_sliding_window

    model, processor = loaded[name]
    assert has_sliding_window(model) == (name == "gemma-4")
    images = [_image(10 + k) for k in range(3)]
    question = "Which two frames were swapped? Answer with the two frame numbers."
    prompts = [_chat(3, f"{question}\nOptions: {o}") for o in ("1 and 2, 2 and 3", "2 and 3, 1 and 2")]
    choices = [["1 and 2", "2 and 3", "12"], ["yes", "no"]]
    [shared] = score_shared_prefix(model, processor, [PrefixGroup(images, prompts, choices)], batch_size=1,
                                   progress=False)
    each = score(model, processor, [(p, images, c) for p, c in zip(prompts, choices)], batch_size=2, progress=False)
    for a, b in zip(shared, each):
        np.testing.assert_allclose(a.raw_logprobs, b.raw_logprobs, atol=ATOL, rtol=0)


def _choice_logprob(model, processor, prompt, images, choice: str) -> float:
    """The model's own forward on prompt + choice, with every input its processor gives."""
    text = render_prompt(processor, prompt)
    full = processor(text=[text + choice], images=[images], return_tensors="pt")
    n = len(full["input_ids"][0]) - len(processor(text=[text], images=[images], return_tensors="pt")["input_ids"][0])
    with torch.no_grad():
        logp = model(**full).logits[0].log_softmax(-1)
    ids = full["input_ids"][0]
    return float(sum(logp[len(ids) - n - 1 + k, ids[len(ids) - n + k]] for k in range(n)))


def test_gemma_4_bidirectional_image_attention_reaches_scoring(tiny_root: Path, tmp_path: Path) -> None:
    """Gemma-4's larger checkpoints (26B, 31B: use_bidirectional_attention "vision") let image
    tokens attend to each other both ways, which the model reads from mm_token_type_ids: the
    engine must pass them (it dropped them for every model without M-RoPE), so that its scores
    are the model's own; the tiny default (None) is causal and the two must differ."""
    import shutil

    folder = tmp_path / "gemma-4-bidir"
    shutil.copytree(tiny_root / "gemma-4", folder)
    config = json.loads((folder / "config.json").read_text())
    config["text_config"]["use_bidirectional_attention"] = "vision"
    (folder / "config.json").write_text(json.dumps(config))
    bidir, processor = load_model_and_processor(folder)
    causal, _ = load_model_and_processor(tiny_root / "gemma-4")
    images = [_image(30 + k, (64, 48)) for k in range(2)]
    prompt = _chat(2, "Were two frames swapped? Answer yes or no.")
    choices = ["yes", "no"]
    for model in (bidir, causal):
        [engine] = score(model, processor, [(prompt, images, choices)], batch_size=1, progress=False)
        own = [_choice_logprob(model, processor, prompt, images, c) for c in choices]
        np.testing.assert_allclose(engine.raw_logprobs, own, atol=ATOL, rtol=0)
    [b] = score(bidir, processor, [(prompt, images, choices)], progress=False)
    [c] = score(causal, processor, [(prompt, images, choices)], progress=False)
    assert np.abs(np.subtract(b.raw_logprobs, c.raw_logprobs)).max() > 1e-3
    [shared] = score_shared_prefix(bidir, processor, [PrefixGroup(images, [prompt, prompt], [choices, choices])],
                                   batch_size=1, progress=False)
    for one in shared:
        np.testing.assert_allclose(one.raw_logprobs, b.raw_logprobs, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", NEW)
def test_generate_batched_equals_one_at_a_time(name: str, loaded: dict) -> None:
    model, processor = loaded[name]
    items = [(_chat(n, "Put the frames in order." * (n + 1)), [_image(20 + k) for k in range(n)]) for n in (1, 2, 3)]
    batched = generate(model, processor, items, max_new_tokens=5, parser=lambda t: t, batch_size=3, progress=False)
    single = generate(model, processor, items, max_new_tokens=5, parser=lambda t: t, batch_size=1, progress=False)
    assert [g.text for g in batched] == [g.text for g in single]
    assert all(1 <= g.num_tokens <= 5 for g in batched)


# --------------------------------------------------------------------------- judgetrain eval timecatch --model


@pytest.mark.parametrize("name", NEW)
def test_eval_timecatch_takes_the_family(name: str, tiny_root: Path, loaded: dict, timecatch_build, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from judgetrain import records
    from judgetrain.cli import main as cli_main
    from judgetrain.eval.core import runs
    from judgetrain.eval.timecatch import report as R

    data, limit = timecatch_build[0], 4
    out = tmp_path / "run"
    assert cli_main(["eval", "timecatch", "--model", str(tiny_root / name), "--data", str(data), "--split",
                     "validation", "--out", str(out), "--batch-size", "3", "--limit", str(limit), "--no-progress"]) == 0
    rows = runs.read_predictions(out / runs.PREDICTIONS)
    ds = records.load(data)["validation"].select(range(limit))
    assert [r["id"] for r in rows] == ds["id"]
    # The run's probabilities are the scoring engine's on the same records, through this family.
    model, processor = loaded[name]
    direct = score(model, processor, ds, batch_size=4, progress=False)
    for r, s in zip(rows, direct):
        np.testing.assert_allclose(r["probs"], s.probs, atol=1e-5, rtol=0)
        assert r["prediction"] == s.prediction and r["model"] == str(tiny_root / name)
    metrics = json.loads((out / runs.METRICS).read_text())
    assert metrics["n"] == limit and metrics == R.report(out)
    assert torch.isfinite(torch.tensor([p for r in rows for p in r["probs"]])).all()
