"""TRL's ``padding_free: true`` for image records (judgetrain.train.packing): each micro-batch's
records laid end to end in one row, no padding, on the micro-batches TRL's padded path would
see. A padding-free row gives the padded batch's summed completion loss and LoRA gradients; a
short run trains the same adapter, step for step, as the padded run of the same recipe; what
TRL is told (``padding_free: false``) is derived and recorded in run.json; a recipe that cannot
keep the records of a row apart is refused naming the field and the fix."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image
from safetensors.torch import load_file

from judgetrain.compat.trl import vision_collator
from judgetrain.models import load_model_and_processor
from judgetrain.scoring.model import rope_index_of
from judgetrain.train import check_config, derive, parse, setup, train_and_save
from judgetrain.train.packing import REAL_TOKENS_KEY, PackingCollator, family_packing_problem
from judgetrain.train.settings import TRAINER_PACKING, TRAINER_PADDING_FREE, Facts

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def _record(i: int, n_images: int, size: tuple[int, int], answer: str) -> dict:
    rng = np.random.default_rng(10 + i)
    images = [Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)) for _ in range(n_images)]
    question = [{"type": "text", "text": f"Sequence {i}: are any frames swapped?"}]
    return {
        "images": images,
        "prompt": [{"role": "user", "content": [{"type": "image"}] * n_images + question}],
        "completion": [{"role": "assistant", "content": [{"type": "text", "text": answer}]}],
    }


# one micro-batch of three records of mixed lengths: image counts, sizes and answers differ
RECORDS = [
    _record(0, 2, (64, 48), "no, frames 2 and 3 are swapped"),
    _record(1, 1, (32, 32), "yes"),
    _record(2, 3, (40, 72), "no"),
]


# --------------------------------------------------------------------------- one micro-batch


def _lora_model(family: str, path: Path):
    """The tiny model in float32 with LoRA on every linear layer, A and B both random (B at zero
    would leave A without a gradient), dropout off: the two layouts must see the same function."""
    from peft import LoraConfig, get_peft_model

    base, processor = load_model_and_processor(str(path), dtype="float32", attn_implementation="sdpa")
    rope_index = rope_index_of(base)
    torch.manual_seed(0)
    model = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear", init_lora_weights=False)
    )
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model, processor, rope_index


def _summed_loss_and_grads(model, batch):
    """The completion tokens' summed loss, their number, and the LoRA gradients of that sum."""
    model.zero_grad()
    tokens = int((batch["labels"][:, 1:] != -100).sum())  # what the Trainer counts (labels shift)
    out = model(**{k: v for k, v in batch.items() if k != REAL_TOKENS_KEY}, use_cache=False)
    summed = out.loss * tokens  # the model's loss is the mean over those tokens
    summed.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.requires_grad and p.grad is not None}
    return summed.item(), tokens, grads


@pytest.mark.parametrize("family", ["qwen3-vl", "qwen2.5-vl"])
def test_a_padding_free_row_gives_the_padded_batchs_loss_and_lora_gradients(family, tiny_model):
    """Tolerance: float32, sums in another order: the summed loss to 1e-5 relative, every LoRA
    gradient to 1e-5 of the largest gradient entry (observed: equal loss, gradients within ~1.5e-6).
    The control, the same row read as one sequence (positions not restarting), misses both by far
    (loss ~2e-4 to 7e-4 relative, gradients ~0.5 of the largest)."""
    model, processor, rope_index = _lora_model(family, tiny_model(family))
    padded = vision_collator(processor, completion_only_loss=True)([copy.deepcopy(r) for r in RECORDS])
    mask = padded["attention_mask"]
    assert mask.shape[0] == 3 and mask.eq(0).any(), "the padded batch must hold padding, or the test shows nothing"
    collate = PackingCollator(processor, {"train": RECORDS}, rope_index=rope_index, one_row=True)
    row = collate([{"split": "train", "members": [i]} for i in range(3)])
    # one row, exactly the real tokens, no attention mask (the positions restart at each record)
    assert row["input_ids"].shape == (1, int(mask.sum())) and "attention_mask" not in row
    assert row[REAL_TOKENS_KEY].item() == int(mask.sum())
    assert torch.equal(row["input_ids"][0], padded["input_ids"][mask.bool()])

    loss, tokens, grads = _summed_loss_and_grads(model, padded)
    flat_loss, flat_tokens, flat_grads = _summed_loss_and_grads(model, row)
    assert flat_tokens == tokens > 0
    assert flat_loss == pytest.approx(loss, rel=1e-5)
    assert grads and set(flat_grads) == set(grads) and all(k.count("lora_") for k in grads)
    scale = max(g.abs().max().item() for g in grads.values())
    worst = max((flat_grads[k] - grads[k]).abs().max().item() for k in grads)
    assert scale > 0 and worst <= 1e-5 * scale, f"gradients differ by {worst:.2e} (largest entry {scale:.2e})"

    # the control: the records of the row attending to one another
    mixed = {**row, "position_ids": row["position_ids"].clone()}
    text = mixed["position_ids"][0] if mixed["position_ids"].dim() == 3 else mixed["position_ids"]
    text[0] = torch.arange(text.shape[-1])
    mixed_loss, _, mixed_grads = _summed_loss_and_grads(model, mixed)
    assert mixed_loss != pytest.approx(loss, rel=1e-5)
    assert max((mixed_grads[k] - grads[k]).abs().max().item() for k in grads) > 100 * 1e-5 * scale


# --------------------------------------------------------------------------- through judgetrain train


def _argv(model, data, out, padding_free: bool):
    fixed = (
        "--max_steps 3 --per_device_train_batch_size 3 --effective_batch_size 6 --lora_dropout 0 --optim sgd "
        "--learning_rate 0.5 --save_strategy no --logging_steps 1 --eval_strategy steps --eval_steps 3 "
        "--per_device_eval_batch_size 4"
    )
    where = ["--model_name_or_path", str(model), "--datasets", str(data), "--output_dir", str(out)]
    return ["--config", str(RECIPE), *where, "--padding_free", str(padding_free).lower(), *fixed.split()]


def _batches(run):
    """The record indices of the Trainer's training micro-batches, in the order of its sampler."""
    return [list(b) for b in run.trainer.get_train_dataloader().base_dataloader.batch_sampler]


def test_a_padding_free_run_trains_the_padded_runs_adapter_step_for_step(tmp_path, tiny_model, timecatch_build, caplog):
    model, data = tiny_model("qwen3-vl"), timecatch_build[0]
    runs, logs, adapters = {}, {}, {}
    for flat in (False, True):
        out = tmp_path / ("flat" if flat else "padded")
        with caplog.at_level(logging.INFO, logger="judgetrain.train"):
            run = setup(_argv(model, data, out, flat))
            batches = _batches(run)
            train_and_save(run)
        logs[flat] = [h for h in run.trainer.state.log_history if "loss" in h or "eval_loss" in h]
        adapters[flat] = load_file(out / "adapter_model.safetensors")
        assert run.trainer.state.global_step == 3 and run.training_args.gradient_accumulation_steps == 2
        runs[flat] = (run, batches, json.loads((out / "run.json").read_text()))
    (padded, padded_batches, padded_info), (flat, flat_batches, flat_info) = runs[False], runs[True]

    # the same micro-batches: one item per record, the same sampler order
    assert len(flat.trainer.train_dataset) == len(padded.trainer.train_dataset) == 80
    assert flat_batches == padded_batches and len(flat_batches[0]) == 3
    assert flat.trainer.args.padding_free is False and flat.training_args.padding_free is True
    entry = flat_info["settings"][TRAINER_PADDING_FREE]
    assert entry["value"] is False and entry["recipe"] is True and "end to end in one row" in entry["why"]
    assert TRAINER_PADDING_FREE not in padded_info["settings"]
    assert any("padding_free: the 3 records of each micro-batch" in r.getMessage() for r in caplog.records)
    assert yaml.safe_load((tmp_path / "flat" / "judgetrain_recipe.yaml").read_text())["padding_free"] is True

    # step for step: the same records (num_tokens counts real tokens in both), loss, and the eval loss of
    # evaluation batches laid out padding-free too
    assert [h.get("num_tokens") for h in logs[True]] == [h.get("num_tokens") for h in logs[False]]
    assert [h["step"] for h in logs[False]] == [1, 2, 3, 3] and "eval_loss" in logs[False][-1]
    for a, b in zip(logs[True], logs[False], strict=True):
        key = "loss" if "loss" in b else "eval_loss"
        assert a[key] == pytest.approx(b[key], rel=1e-5), f"step {b['step']} {key}"
    # the adapters: float32 sums in another order over three SGD steps differ by ~5e-7 of a tensor's norm
    assert adapters[True].keys() == adapters[False].keys()
    for k, w in adapters[False].items():
        relative = ((adapters[True][k] - w).norm() / w.norm()).item()
        assert relative < 1e-5, f"{k}: padding-free and padded differ by {relative:.1e}"
    assert any((w != 0).any() for k, w in adapters[False].items() if "lora_B" in k)  # it trained


def test_length_grouped_padding_free_batches_are_the_padded_runs(tmp_path, tiny_model, timecatch_build):
    """``group_by_length``: the items carry each record's length, so the Trainer's length-grouped
    sampler makes the padded run's micro-batches."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    model, data = tiny_model("qwen3-vl"), timecatch_build[0]
    grouped = ("--train_sampling_strategy", "group_by_length")
    # (the sampler draws from torch's global generator, which each setup seeds: read each right after it)
    padded = setup([*_argv(model, data, tmp_path / "p", False), *grouped])
    padded_batches = _batches(padded)
    flat = setup([*_argv(model, data, tmp_path / "f", True), *grouped])
    assert flat.trainer.train_dataset["length"] == padded.trainer.train_dataset["length"]
    assert _batches(flat) == padded_batches and len(padded_batches[0]) == 3
    sampler = flat.trainer.get_train_dataloader().base_dataloader.batch_sampler.sampler
    assert isinstance(sampler, LengthGroupedSampler)


# --------------------------------------------------------------------------- settings and refusals


def _parsed(*extra):
    return parse(["--config", str(RECIPE), "--output_dir", "o", *extra])


def test_padding_free_keeps_the_unpacked_accumulation_and_tells_trl_not_to():
    _, data_args, unpacked = _parsed("--effective_batch_size", "8", "--per_device_train_batch_size", "2")
    _, _, parsed = _parsed("--effective_batch_size", "8", "--per_device_train_batch_size", "2", "--padding_free", "true")
    plain, settings = derive(data_args, unpacked, Facts(world_size=2)), derive(data_args, parsed, Facts(world_size=2))
    final, trainer = settings.training_args, settings.trainer_args
    assert final.gradient_accumulation_steps == plain.training_args.gradient_accumulation_steps == 2
    assert settings.derived["gradient_accumulation_steps"] == plain.derived["gradient_accumulation_steps"]
    assert final.padding_free is True and trainer.padding_free is False and parsed.padding_free is True
    assert final.remove_unused_columns is False and final.dataset_kwargs == {"skip_prepare_dataset": True}
    assert settings.derived[TRAINER_PADDING_FREE]["recipe"] is True and TRAINER_PACKING not in settings.derived
    assert TRAINER_PADDING_FREE not in plain.derived and plain.trainer_args.padding_free is False


def test_with_packing_padding_free_is_implied_and_handled_once(tmp_path, tiny_model, timecatch_build):
    """Packed rows are padding-free already: the rows are packing's, and TRL, which would refuse
    padding_free beside judgetrain's collator, is told neither."""
    _, data_args, parsed = _parsed("--packing", "true", "--padding_free", "true", "--max_length", "1024")
    settings = derive(data_args, parsed, Facts(world_size=1, records_per_row=4.0))
    assert settings.trainer_args.packing is False and settings.trainer_args.padding_free is False
    assert "padding-free already" in settings.derived[TRAINER_PADDING_FREE]["why"]
    assert settings.derived["gradient_accumulation_steps"]["why"].startswith("effective_batch_size 4 / (4 records a packed row")
    where = ["--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets", str(timecatch_build[0])]
    argv = ["--config", str(RECIPE), *where, "--output_dir", str(tmp_path / "o")]
    run = setup([*argv, "--packing", "true", "--padding_free", "true", "--max_length", "1024"])
    rows = run.trainer.train_dataset
    assert len(rows) < sum(len(m) for m in rows["members"]) == 80  # packed into rows, not one item a record
    assert run.trainer.args.padding_free is False and run.trainer.data_collator.one_row is False


def test_refusals_name_the_field_and_the_fix(tiny_model):
    model = str(tiny_model("qwen3-vl"))
    attention = ("--attn_implementation", "paged|sdpa", "--model_name_or_path", model)
    problems = check_config(*_parsed("--padding_free", "true", *attention), world_size=1)
    assert problems == [
        "padding_free: attn_implementation='paged|sdpa' cannot keep the records of a padding-free row apart; use sdpa, "
        "eager, flex_attention or flash_attention_2, or set `padding_free: false`"
    ]
    assert check_config(*_parsed(*attention), world_size=1) == []
    # with packing, packing's own check says it, once
    packed = check_config(
        *_parsed("--padding_free", "true", "--packing", "true", "--max_length", "1024", *attention), world_size=1
    )
    assert len(packed) == 1 and packed[0].startswith("packing: attn_implementation='paged|sdpa'")
    consistency = check_config(
        *_parsed(
            "--padding_free", "true", "--consistency_objective", "js", "--consistency_lambda", "1", "--model_name_or_path", model
        ),
        world_size=1,
    )
    assert any(p.startswith("padding_free: a question's views") and "`padding_free: false`" in p for p in consistency)
    assert family_packing_problem("some-vlm", "padding_free") == (
        "padding_free: the some-vlm family cannot lay image records out padding-free yet (verified: "
        "qwen3-vl, qwen2.5-vl, llava-onevision, internvl, gemma-4); set `padding_free: false`"
    )
