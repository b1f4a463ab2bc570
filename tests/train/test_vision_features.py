"""The vision-feature cache of `judgetrain train` (judgetrain.train.vision_features): on the
tiny Qwen3-VL (DeepStack) and Qwen2.5-VL in float32, a step with kept features gives the loss
and LoRA gradients of the plain step; a run with the cache trains the adapter the run without
it trains; the kept features stay within their bound; a trainable tower and a family without
precomputed features are refused."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from judgetrain.train import ConfigError, setup, train_and_save
from judgetrain.train.vision_features import IMAGE_KEYS, KeyedCollator, VisionFeatureCache, image_digests

REPO = Path(__file__).resolve().parents[2]
RECIPES = {"qwen3-vl": "qwen3vl", "qwen2.5-vl": "qwen25vl", "llava-onevision": "llava-ov"}
CACHED = ("qwen3-vl", "qwen2.5-vl")


def _argv(family, model, data, out, *extra):
    return [
        "--config",
        str(REPO / "recipes" / "tiny" / f"{RECIPES[family]}-timecatch-lora.yaml"),
        "--model_name_or_path",
        str(model),
        "--datasets",
        str(data),
        "--output_dir",
        str(out),
        "--save_strategy",
        "no",
        *extra,
    ]


def _frames(seed: int, n: int) -> list[Image.Image]:
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)) for _ in range(n)]


def _record(images: list[Image.Image], i: int) -> dict:
    return {
        "images": images,
        "prompt": [
            {"role": "user", "content": [{"type": "image"}] * len(images) + [{"type": "text", "text": f"Sequence {i}: swapped?"}]}
        ],
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": "yes" if i % 2 else "no, frames 2 and 3"}]}],
    }


A, B, C, D = _frames(0, 4)
# frames shared across records, as a TimeCatch sequence's records share them; B twice in the first batch
BATCHES = [[_record([A, B], 0), _record([B, C], 1)], [_record([C, D], 2), _record([A, D], 3)], [_record([D, B], 4)]]


def _trainer(family, tiny_model, data, out, *extra):
    run = setup(_argv(family, tiny_model(family), data, out, "--vision_feature_cache", "true", "--lora_dropout", "0", *extra))
    trainer = run.trainer
    trainer.model.train()
    torch.manual_seed(0)
    for name, p in trainer.model.named_parameters():  # LoRA's B starts at zero: A would get no gradient
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    return trainer


def _step(trainer, batch: dict, cached: bool) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss and the LoRA gradients of one step on ``batch``, with its image keys (the cache) or without."""
    inputs = {k: v for k, v in batch.items() if cached or k != IMAGE_KEYS}
    trainer.model.zero_grad()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}


def _assert_equal_steps(trainer, batch):
    plain_loss, plain = _step(trainer, batch, cached=False)
    loss, grads = _step(trainer, batch, cached=True)
    assert grads.keys() == plain.keys() and any("lora_A" in n for n in grads) and all("lora_" in n for n in grads)
    assert loss == pytest.approx(plain_loss, rel=1e-6, abs=1e-6)
    worst = max((grads[n] - plain[n]).abs().max().item() for n in plain)
    scale = max(g.abs().max().item() for g in plain.values())
    assert worst <= 1e-6 * max(scale, 1.0), (worst, scale)
    return worst


# --------------------------------------------------------------------------- the keys


def test_digests_tell_images_apart_and_the_collator_keeps_the_inner_ones_attributes(tiny_model, timecatch_build, tmp_path):
    trainer = _trainer("qwen3-vl", tiny_model, timecatch_build[0], tmp_path / "o")
    collate = trainer.data_collator
    assert isinstance(collate, KeyedCollator) and collate.inner.__class__.__name__ == "DataCollatorForVisionLanguageModeling"
    assert collate.processor is collate.inner.processor  # the inner collator's attributes (PackingCollator.records)
    batch = collate(copy.deepcopy(BATCHES[0]))
    keys = batch[IMAGE_KEYS]
    assert keys.dtype == torch.int64 and keys.shape == (4, 2) and batch["image_grid_thw"].shape[0] == 4
    rows = [tuple(r) for r in keys.tolist()]
    assert rows[1] == rows[2] and len(set(rows)) == 3  # A, B, B, C
    assert torch.equal(image_digests(batch["pixel_values"], batch["image_grid_thw"]), keys)
    # data loader workers started by spawn get a copy of the collator (torch pickles it for them)
    loader = torch.utils.data.DataLoader(copy.deepcopy(BATCHES[0]), batch_size=len(BATCHES[0]), collate_fn=collate,
                                         num_workers=1, multiprocessing_context="spawn")
    assert torch.equal(next(iter(loader))[IMAGE_KEYS], keys)


# --------------------------------------------------------------------------- one step: equal loss and gradients


@pytest.mark.parametrize("family", CACHED)
def test_a_step_with_kept_features_equals_the_plain_step(family, tiny_model, timecatch_build, tmp_path):
    trainer = _trainer(family, tiny_model, timecatch_build[0], tmp_path / "o")
    cache = trainer.vision_features
    first = trainer.data_collator(copy.deepcopy(BATCHES[0]))
    _assert_equal_steps(trainer, first)
    assert (cache.seen, cache.encoded, cache.hits) == (4, 3, 1)  # B repeats within the batch
    _assert_equal_steps(trainer, first)  # every feature kept: nothing encoded
    assert (cache.seen, cache.encoded) == (8, 3)
    second = trainer.data_collator(copy.deepcopy(BATCHES[1]))
    _assert_equal_steps(trainer, second)  # C and A kept, D new
    assert (cache.seen, cache.encoded, cache.hits) == (12, 4, 8)
    assert len(cache.kept) == 4 and cache.output_type.__module__.startswith("transformers.")
    if family == "qwen3-vl":
        assert all(len(deep) > 0 for _, deep in cache.kept.values())  # DeepStack layers kept too


# --------------------------------------------------------------------------- the bound


def test_the_kept_features_stay_within_the_bound_and_the_steps_stay_equal(tiny_model, timecatch_build, tmp_path):
    trainer = _trainer("qwen3-vl", tiny_model, timecatch_build[0], tmp_path / "o", "--vision_cache_mb", "3")
    assert trainer.vision_features.capacity == 3 * 2**20
    batches = [trainer.data_collator(copy.deepcopy(b)) for b in BATCHES]
    _step(trainer, batches[0], cached=True)
    entry = trainer.vision_features.bytes // len(trainer.vision_features.kept)  # every frame is 64x48: one size
    cache = trainer.vision_features = VisionFeatureCache(int(2.5 * entry))  # room for two entries
    for batch in batches + batches:
        _assert_equal_steps(trainer, batch)
        assert cache.bytes <= cache.capacity and len(cache.kept) == 2
    assert cache.hits > 0 and cache.encoded > 4  # dropped images came back, and were encoded again
    cache = trainer.vision_features = VisionFeatureCache(0)  # vision_cache_mb 0: one entry, shared within a batch
    for batch in batches:
        _assert_equal_steps(trainer, batch)
        assert len(cache.kept) == 1
    # B twice in the first batch; C, the entry the first batch left; D twice in the second
    assert (cache.seen, cache.hits) == (10, 3)


# --------------------------------------------------------------------------- through judgetrain train


@pytest.mark.parametrize("packing", [False, True], ids=["records", "packed"])
def test_a_run_with_the_cache_trains_the_adapter_of_a_run_without(packing, tiny_model, timecatch_build, tmp_path, caplog):
    extra = [
        "--max_steps",
        "3",
        "--max_train_samples",
        "4",
        "--per_device_train_batch_size",
        "2",
        "--effective_batch_size",
        "2",
        "--learning_rate",
        "1e-2",
        "--logging_steps",
        "1",
    ]
    if packing:
        extra += ["--packing", "true", "--max_length", "4096", "--per_device_train_batch_size", "1", "--max_train_samples", "8"]
    adapters, runs = [], []
    for cache in ("false", "true"):
        run = setup(
            _argv(
                "qwen3-vl", tiny_model("qwen3-vl"), timecatch_build[0], tmp_path / cache, *extra, "--vision_feature_cache", cache
            )
        )
        with caplog.at_level(logging.INFO, logger="judgetrain.train"):
            out = train_and_save(run)
        adapters.append(load_file(str(out / "adapter_model.safetensors")))
        runs.append(run)
    plain, cached = adapters
    assert plain.keys() == cached.keys()
    worst = max((plain[k] - cached[k]).abs().max().item() for k in plain)
    assert worst < 1e-5
    assert runs[0].trainer.vision_features is None
    cache = runs[1].trainer.vision_features
    assert 0 < cache.encoded < cache.seen  # frames repeat across records and steps
    logged = [h for h in runs[1].trainer.state.log_history if "vision_cache_encoded" in h]
    assert logged and logged[-1]["vision_cache_encoded"] == cache.encoded and logged[-1]["vision_cache_hits"] == cache.hits
    assert any(r.getMessage() == cache.summary() for r in caplog.records)
    if packing:
        assert runs[1].trainer.data_collator.records["train"]  # PackingCollator's attributes through the keyed one


# --------------------------------------------------------------------------- refusals


def test_a_trainable_vision_tower_is_refused_naming_the_fix(tiny_model, timecatch_build, tmp_path):
    with pytest.raises(ConfigError, match=r"vision_feature_cache: the vision tower or projector trains .*freeze_vision_tower"):
        setup(
            _argv(
                "qwen3-vl",
                tiny_model("qwen3-vl"),
                timecatch_build[0],
                tmp_path / "o",
                "--vision_feature_cache",
                "true",
                "--freeze_vision_tower",
                "false",
            )
        )


def test_a_family_without_precomputed_features_is_refused(tiny_model, timecatch_build, tmp_path):
    with pytest.raises(ConfigError, match=r"vision_feature_cache: llava_onevision's forward does not take .*mm_encoder_outputs"):
        setup(
            _argv(
                "llava-onevision",
                tiny_model("llava-onevision"),
                timecatch_build[0],
                tmp_path / "o",
                "--vision_feature_cache",
                "true",
            )
        )


# --------------------------------------------------------------------------- consistency tuning


def test_consistency_tuning_takes_the_cache_too(clips, tiny_model, tmp_path):
    """ConsistencyTrainer is a JudgeSFTTrainer whose view collator wraps the keyed one: the views of a
    question show the same frames in other orders, so most are reused, and the adapter is the same."""
    from judgetrain.consistency.trainer import ConsistencyTrainer
    from judgetrain.data_builders.consistency_views import ConsistencyViewsConfig, build

    data = tmp_path / "views"
    build(ConsistencyViewsConfig(manifest=clips, out=data, budget=2, phases=2, orderings=3, splits="train=1.0", progress=False))
    recipe = REPO / "recipes" / "tiny" / "qwen25vl-consistency-lora.yaml"
    adapters, caches = [], []
    for cache in ("false", "true"):
        argv = ["--config", str(recipe), "--model_name_or_path", str(tiny_model("qwen2.5-vl")), "--datasets", str(data)]
        argv += ["--output_dir", str(tmp_path / cache), "--max_steps", "2", "--eval_strategy", "no", "--save_strategy", "no"]
        run = setup([*argv, "--consistency_lambda", "3", "--vision_feature_cache", cache])
        assert type(run.trainer) is ConsistencyTrainer
        out = train_and_save(run)
        adapters.append(load_file(str(out / "adapter_model.safetensors")))
        caches.append(run.trainer.vision_features)
    assert max((adapters[0][k] - adapters[1][k]).abs().max().item() for k in adapters[0]) < 1e-5
    assert caches[0] is None and 0 < caches[1].encoded < caches[1].seen
