"""Padding-free packing of image–text records (judgetrain.train.packing): the
best-fit rows, and, for every family on its tiny model in float32, that a
packed row gives the loss, the gradients and each record's logits of the same
records run one by one through TRL's own collator."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from judgetrain.compat.trl import vision_collator
from judgetrain.models import load_model_and_processor
from judgetrain.scoring.model import rope_index_of
from judgetrain.train import (
    PACKABLE_FAMILIES,
    REAL_TOKENS_KEY,
    ConfigError,
    PackingCollator,
    gradient_accumulation,
    pack_bins,
    setup,
    train_and_save,
)

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- rows


def test_best_fit_decreasing_rows_hand_worked():
    # longest first: 8 -> new row 0 (room 2); 6 -> new row 1 (room 4); 5 -> new row 2 (room 5);
    # 4 -> row 1, the tightest fit (room 0); 3 -> row 2 (room 2); 2 -> row 0 (room 2, opened before row 2)
    assert pack_bins([5, 3, 8, 2, 6, 4], 10) == [[2, 3], [4, 5], [0, 1]]
    assert pack_bins([10, 10], 10) == [[0], [1]]
    assert pack_bins([], 10) == []
    with pytest.raises(ValueError, match="record 1 has 11 tokens"):
        pack_bins([3, 11], 10)


def test_rows_hold_every_record_once_within_max_length():
    rng = np.random.default_rng(0)
    lengths = rng.integers(100, 1700, 500).tolist()
    rows = pack_bins(lengths, 4096)
    assert sorted(i for r in rows for i in r) == list(range(500))
    assert all(sum(lengths[i] for i in r) <= 4096 for r in rows)
    # best fit leaves little room: fewer rows than one more than the tokens need
    assert len(rows) <= sum(lengths) // 4096 + 2


def test_gradient_accumulation_keeps_records_per_step():
    # 120 records in 40 rows: 3 a row; 16 records a step with 1 row a device on 2 devices -> 16 / 6 = 2.67 -> 3
    assert gradient_accumulation(16, 1, 2, 120 / 40) == 3
    assert gradient_accumulation(4, 2, 1, 120 / 40) == 1  # 0.67, and at least one
    assert gradient_accumulation(1, 4, 2) == 1  # 0.125 -> at least one
    # one rule for every part: the nearest whole number, halves up (Python's round would give 2 and 4)
    assert gradient_accumulation(10, 1, 1, 4.0) == 3 and gradient_accumulation(18, 1, 1, 4.0) == 5
    assert gradient_accumulation(16, 2, 2) == 4  # unpacked: the exact quotient


# --------------------------------------------------------------------------- packed = one by one, per family


def _record(i: int, n_images: int, size: tuple[int, int]) -> dict:
    rng = np.random.default_rng(i)
    images = [Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)) for _ in range(n_images)]
    answer = "yes" if i % 2 else "no, frames 2 and 3"
    return {"images": images,
            "prompt": [{"role": "user", "content": [{"type": "image"}] * n_images + [{"type": "text", "text": f"Sequence {i}: swapped?"}]}],
            "completion": [{"role": "assistant", "content": [{"type": "text", "text": answer}]}]}


# records of different image counts and sizes share a row
RECORDS = [_record(0, 2, (64, 48)), _record(1, 1, (96, 96)), _record(2, 3, (40, 72))]


@pytest.fixture(scope="module")
def family_models(tiny_model):
    return tiny_model


def _load(path, family):
    # Gemma-4's audio tower has no sdpa; the others run sdpa, the CPU default
    model, processor = load_model_and_processor(str(path), dtype="float32", attn_implementation="eager" if family == "gemma-4" else "sdpa")
    model.train()
    for m in model.modules():  # dropout off: the two runs must see the same function
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model, processor


def _model_inputs(batch):
    """The packed batch without the real-token count (JudgeSFTTrainer logs it, the model never sees it)."""
    return {k: v for k, v in batch.items() if k != REAL_TOKENS_KEY}


def _one_by_one(model, processor):
    """Token-weighted loss and gradients of the records run alone, and each record's logits."""
    collate = vision_collator(processor, completion_only_loss=True)
    model.zero_grad()
    total, tokens, logits = 0.0, 0, []
    for r in RECORDS:
        batch = collate([copy.deepcopy(r)])
        out = model(**batch, use_cache=False)
        n = int((batch["labels"][:, 1:] != -100).sum())
        (out.loss * n).backward()
        total, tokens = total + out.loss.item() * n, tokens + n
        logits.append(out.logits[0].detach())
    grads = {k: p.grad / tokens for k, p in model.named_parameters() if p.grad is not None}
    return total / tokens, grads, logits


@pytest.mark.parametrize("family", PACKABLE_FAMILIES)
def test_packed_row_equals_records_one_by_one(family, family_models):
    model, processor = _load(family_models(family), family)
    loss, grads, logits = _one_by_one(model, processor)

    collate = PackingCollator(processor, {"train": RECORDS}, rope_index=rope_index_of(model))
    packed = collate([{"split": "train", "members": [0, 1, 2]}])
    assert "attention_mask" not in packed  # the mask comes from the restarting positions
    model.zero_grad()
    out = model(**_model_inputs(packed), use_cache=False)
    out.loss.backward()

    assert out.loss.item() == pytest.approx(loss, abs=1e-5)
    assert grads and set(grads) == {k for k, p in model.named_parameters() if p.grad is not None}
    worst = max((p.grad - grads[k]).abs().max().item() for k, p in model.named_parameters() if p.grad is not None)
    assert worst < 1e-5
    start = 0
    for alone in logits:
        inside = out.logits[0, start:start + len(alone)].detach()
        assert (inside - alone).abs().max().item() < 1e-5
        start += len(alone)
    assert start == packed["input_ids"].shape[1]  # one row, no padding


def test_positions_restart_and_record_starts_are_not_predicted(family_models):
    model, processor = _load(family_models("qwen3-vl"), "qwen3-vl")
    collate = PackingCollator(processor, {"train": RECORDS}, rope_index=rope_index_of(model))
    single = [collate([{"split": "train", "members": [j]}]) for j in range(3)]
    packed = collate([{"split": "train", "members": [0, 1, 2]}])
    lengths = [b["input_ids"].shape[1] for b in single]
    positions = packed["position_ids"]
    assert positions.shape == (4, 1, sum(lengths))  # text row + temporal/height/width
    starts = np.cumsum([0] + lengths[:-1]).tolist()
    text = positions[0, 0].tolist()
    assert [text[s] for s in starts] == [0, 0, 0]
    assert text == [p for n in lengths for p in range(n)]
    # the M-RoPE rows of each record are the model's own for that record alone
    for s, n, b in zip(starts, lengths, single, strict=True):
        assert torch.equal(positions[1:, 0, s:s + n], b["position_ids"][1:, 0])
    assert all(packed["labels"][0, s].item() == -100 for s in starts)
    assert torch.equal(packed["input_ids"][0], torch.cat([b["input_ids"][0] for b in single]))


def test_without_restarting_positions_the_records_would_mix(family_models):
    """The control: the equality above is not a property of any concatenation."""
    model, processor = _load(family_models("llava-onevision"), "llava-onevision")
    collate = PackingCollator(processor, {"train": RECORDS}, rope_index=None)
    packed = collate([{"split": "train", "members": [0, 1]}])
    alone = collate([{"split": "train", "members": [1]}])
    n = alone["input_ids"].shape[1]
    with torch.no_grad():
        packed, alone = _model_inputs(packed), _model_inputs(alone)
        restarted = model(**packed, use_cache=False).logits[0, -n:]
        packed["position_ids"] = torch.arange(packed["input_ids"].shape[1])[None]  # one sequence: attends across records
        mixed = model(**packed, use_cache=False).logits[0, -n:]
        reference = model(**alone, use_cache=False).logits[0]
    assert (restarted - reference).abs().max().item() < 1e-5
    assert (mixed - reference).abs().max().item() > 1e-3


def test_two_rows_a_micro_batch_pad_the_shorter_row_apart(family_models):
    model, processor = _load(family_models("qwen2.5-vl"), "qwen2.5-vl")
    loss, _, logits = _one_by_one(model, processor)
    collate = PackingCollator(processor, {"train": RECORDS}, rope_index=rope_index_of(model))
    batch = collate([{"split": "train", "members": [0, 2]}, {"split": "train", "members": [1]}])
    width = len(logits[0]) + len(logits[2])
    assert batch["input_ids"].shape == (2, width) and batch["position_ids"].shape == (4, 2, width)
    tail = width - len(logits[1])
    assert batch["labels"][1, -tail:].eq(-100).all()
    assert batch["position_ids"][0, 1, -tail:].tolist() == list(range(tail))  # the padding is a sequence of its own
    assert batch[REAL_TOKENS_KEY].item() == sum(len(x) for x in logits)  # every record's tokens, no padding
    with torch.no_grad():
        out = model(**_model_inputs(batch), use_cache=False)
    assert out.loss.item() == pytest.approx(loss, abs=1e-5)
    assert (out.logits[1, :len(logits[1])] - logits[1]).abs().max().item() < 1e-5


# --------------------------------------------------------------------------- through judgetrain train


@pytest.fixture(scope="module")
def tiny_qwen3(tiny_model):
    return tiny_model("qwen3-vl")


def _argv(model, data, out, *extra):
    return ["--config", str(REPO / "recipes/tiny/qwen3vl-timecatch-lora.yaml"), "--model_name_or_path", str(model),
            "--datasets", str(data), "--output_dir", str(out), "--packing", "true", "--max_length", "1024", *extra]


def test_packed_training_runs_the_steps_its_rows_imply(tmp_path, tiny_qwen3, timecatch_build):
    data = timecatch_build[0]
    run = setup(_argv(tiny_qwen3, data, tmp_path / "o", "--max_steps", "-1", "--num_train_epochs", "1",
                      "--per_device_train_batch_size", "2", "--effective_batch_size", "12", "--save_strategy", "no",
                      "--logging_steps", "1"))
    rows = run.trainer.train_dataset
    n_records = sum(len(m) for m in rows["members"])
    assert n_records == 80 and len(rows) < n_records
    accumulation = gradient_accumulation(12, 2, 1, 80 / len(rows))
    assert run.training_args.gradient_accumulation_steps == accumulation
    out = train_and_save(run)
    micro_batches = -(-len(rows) // 2)
    assert run.trainer.state.global_step == -(-micro_batches // accumulation)
    # the logged num_tokens counts every record's real tokens once (TRL alone would count rows)
    from judgetrain.train import record_length

    records = run.trainer.data_collator.records["train"]
    logged = [h["num_tokens"] for h in run.trainer.state.log_history if "num_tokens" in h]
    assert logged[-1] == sum(record_length(run.processor, records[j]) for m in rows["members"] for j in m)
    saved = yaml.safe_load((out / "judgetrain_recipe.yaml").read_text())
    assert saved["packing"] is True and saved["gradient_accumulation_steps"] == accumulation


def test_packed_batch_in_records_hand_worked():
    """80 records in 7 rows (11.43 a row): one row a step is 11.43 records, which misses an
    effective batch of 4 by far more than a quarter (said), and an effective batch of 12 by
    less (not said)."""
    from judgetrain.train import packed_batch

    small = packed_batch(80, 7, 1, 4)
    assert (small["records_per_row"], small["rows_per_step"], small["records_per_step"]) == (11.429, 1, 11.43)
    assert small["warning"].startswith("packing: effective_batch_size 4 counts records, but a step takes 1 row(s) of 11.4 "
                                       "records on average, 11.4 records a step")
    assert "warning" not in packed_batch(80, 7, 1, 12) and "warning" not in packed_batch(80, 7, 1, None)
    assert packed_batch(80, 8, 3, 30)["records_per_step"] == 30.0


def test_a_small_effective_batch_with_packing_is_said_and_the_card_counts_records(tmp_path, tiny_qwen3, timecatch_build, caplog):
    """Accumulation cannot go below one row: rows of ~11 records overshoot an effective batch of
    4. The run says so, and the model card reports records a step, not rows."""
    import logging

    run = setup(_argv(tiny_qwen3, timecatch_build[0], tmp_path / "o", "--max_steps", "1", "--per_device_train_batch_size", "1",
                      "--effective_batch_size", "4", "--save_strategy", "no", "--max_length", "4096"))
    rows = run.trainer.train_dataset
    per_row = sum(len(m) for m in rows["members"]) / len(rows)
    assert per_row > 8 and run.training_args.gradient_accumulation_steps == 1
    assert any(r.levelno == logging.WARNING and "effective_batch_size 4 counts records" in r.getMessage() for r in caplog.records)
    out = train_and_save(run)
    card = (out / "README.md").read_text()
    assert f"gradient accumulation: 1 (effective batch 1 packed rows ≈ {round(per_row, 2)} records a step" in card
    meta = yaml.safe_load(card.split("---")[1])["judgetrain"]
    assert (meta["effective_batch_size"], meta["packed_rows_per_step"]) == (round(per_row, 2), 1)


@pytest.mark.parametrize("flags, field", [
    (["--packing_strategy", "wrapped"], "packing_strategy"),
    (["--check_lengths", "false"], "check_lengths"),
])
def test_packing_refuses_what_would_cut_or_mix_records(tmp_path, tiny_qwen3, timecatch_build, flags, field):
    with pytest.raises(ConfigError, match=field):
        setup(_argv(tiny_qwen3, timecatch_build[0], tmp_path / "o", *flags))


def test_length_grouped_sampling_reads_the_measured_lengths(tmp_path, tiny_qwen3, timecatch_build):
    """Unpacked, `group_by_length` batches records of like length; image records have no input_ids
    for the Trainer to measure, so the lengths check_records measured are the sampler's column."""
    from judgetrain.train import record_length

    run = setup(_argv(tiny_qwen3, timecatch_build[0], tmp_path / "o", "--packing", "false",
                      "--train_sampling_strategy", "group_by_length"))
    ds = run.trainer.train_dataset
    assert ds["length"][:5] == [record_length(run.processor, ds[i]) for i in range(5)]
    from transformers.trainer_pt_utils import LengthGroupedSampler

    loader = run.trainer.get_train_dataloader()
    sampler = loader.base_dataloader.batch_sampler.sampler  # inside accelerate's shard of the Trainer's loader
    assert isinstance(sampler, LengthGroupedSampler) and sampler.lengths == ds["length"]
    run.trainer.train()
    assert run.trainer.state.global_step == 6


def test_length_grouped_packed_rows_pair_rows_of_like_length(tmp_path, tiny_qwen3, timecatch_build):
    """Packed, `group_by_length` hands the sampler each row's tokens: the rows of a micro-batch,
    padded to the longer, are then of like length."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from judgetrain.train import record_length

    flags = ("--max_steps", "2", "--per_device_train_batch_size", "2", "--save_strategy", "no")
    run = setup(_argv(tiny_qwen3, timecatch_build[0], tmp_path / "g", "--train_sampling_strategy", "group_by_length", *flags))
    rows, records = run.trainer.train_dataset, run.trainer.data_collator.records["train"]
    assert rows["length"] == [sum(record_length(run.processor, records[j]) for j in m) for m in rows["members"]]
    loader = run.trainer.get_train_dataloader()
    sampler = loader.base_dataloader.batch_sampler.sampler
    assert isinstance(sampler, LengthGroupedSampler) and sampler.lengths == rows["length"]
    # LengthGroupedSampler puts the longest row first; the micro-batches hold every row once
    batches = list(loader.base_dataloader.batch_sampler)
    order = [i for b in batches for i in b]
    assert sorted(order) == list(range(len(rows))) and rows["length"][order[0]] == max(rows["length"])
    run.trainer.train()
    assert run.trainer.state.global_step == 2


def test_a_packed_resume_derives_its_accumulation_over_the_records_a_row_held(tmp_path, tiny_qwen3, timecatch_build):
    """Each packed checkpoint records the records a row held (the data and max_length it fixes keep
    it); a resume derives the gradient accumulation over it, by the run's one rule, before any data
    loads: the same global batch of rows resumes, another is refused."""
    import json

    from judgetrain.train import check_config, parse

    out = tmp_path / "o"
    argv = _argv(tiny_qwen3, timecatch_build[0], out, "--max_steps", "1", "--save_steps", "1", "--per_device_train_batch_size",
                 "1", "--effective_batch_size", "24")
    run = setup(argv)
    rows = len(run.trainer.train_dataset)
    train_and_save(run)
    marker = json.loads((out / "checkpoint-1" / "judgetrain_checkpoint_complete.json").read_text())
    assert marker["records_per_row"] == pytest.approx(80 / rows) and marker["global_batch"] == gradient_accumulation(24, 1, 1, 80 / rows)
    resume = [*argv, "--resume_from_checkpoint", "auto"]
    assert check_config(*parse(resume), world_size=1) == []
    problems = check_config(*parse([*resume, "--effective_batch_size", "80"]), world_size=1)
    assert len(problems) == 1 and problems[0].startswith(f"effective_batch_size: {out / 'checkpoint-1'} was trained with a global batch")
