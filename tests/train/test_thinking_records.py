"""Training records of a reasoning checkpoint: the prefill every evaluation scores after (what
closes the thinking block its chat template opens) is on the prompt side of the training text,
the answer after it, and the loss covers only the answer. TRL's own vision collator on a tiny
Qwen3-VL with a Thinking-style chat template."""

from __future__ import annotations

import pytest

from judgetrain import records
from judgetrain.models.registry import load_processor
from judgetrain.train.data import ConfigError, prefill_records, record_length, training_prefill

CLOSE = "\n</think>\n\n"


@pytest.fixture(scope="module")
def train_records(timecatch_build):
    return records.load(timecatch_build[0])["train"].select(range(3))


def _collate(processor, rows):
    from judgetrain.compat.trl import vision_collator

    collator = vision_collator(processor, completion_only_loss=True)
    return collator([dict(r) for r in rows])  # TRL rewrites what it collates, in place


def test_a_thinking_model_trains_on_the_answer_after_the_prefill(tiny_model, train_records):
    processor = load_processor(tiny_model("qwen3-vl-thinking"))
    prefill = training_prefill(processor)
    assert prefill == CLOSE
    rows = list(prefill_records(train_records, processor, prefill))
    batch = _collate(processor, rows)
    tok = processor.tokenizer
    for i, (row, record) in enumerate(zip(rows, train_records, strict=True)):
        assert row["prompt"].endswith("<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert row["completion"] == record["label"] + "<|im_end|>\n"
        ids, labels, mask = batch["input_ids"][i], batch["labels"][i], batch["attention_mask"][i].bool()
        # the loss covers exactly the answer and the end of the turn, never the closed think block
        assert tok.decode(ids[labels != -100]) == record["label"] + "<|im_end|>\n"
        assert tok.decode(ids[mask]).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n" + record["label"]
                                              + "<|im_end|>\n")
        assert record_length(processor, row) == record_length(processor, record) == int(mask.sum())
    # as the records stand (conversational), TRL would train on the closing text as well
    plain = _collate(processor, list(train_records))
    trained = plain["input_ids"][0][plain["labels"][0] != -100]
    assert tok.decode(trained) == CLOSE + train_records[0]["label"] + "<|im_end|>\n"


def test_an_instruct_model_keeps_its_records(tiny_model, train_records):
    processor = load_processor(tiny_model("qwen3-vl"))
    assert training_prefill(processor) is None
    assert prefill_records(train_records, processor, training_prefill(processor)) is train_records


def test_a_prefill_the_template_does_not_write_is_refused_naming_the_record(tiny_model, train_records):
    processor = load_processor(tiny_model("qwen3-vl-thinking"))
    with pytest.raises(ConfigError, match=f"record {train_records[0]['id']}: the chat template does not write the "
                                          "answer after the prefill '</answer>'"):
        prefill_records(train_records, processor, "</answer>")


def test_judgetrain_train_of_a_thinking_model_trains_after_its_prefill(tmp_path, tiny_model, timecatch_build):
    """Through `setup`: the records the Trainer gets are the rendered text with the prefill on
    the prompt side (the eval-loss records too), and the model card says so."""
    from pathlib import Path

    from judgetrain.train import setup, train_and_save

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
    run = setup(["--config", str(recipe), "--model_name_or_path", str(tiny_model("qwen3-vl-thinking")),
                 "--datasets", str(timecatch_build[0]), "--output_dir", str(tmp_path / "run"), "--max_steps", "1",
                 "--save_strategy", "no", "--max_train_samples", "4", "--max_eval_samples", "2", "--eval_strategy", "steps",
                 "--eval_steps", "1"])
    assert run.data_info["prefill"] == CLOSE
    for split in (run.trainer.train_dataset, run.trainer.eval_dataset):
        assert all(r["prompt"].endswith("assistant\n<think>\n" + CLOSE) and r["completion"].endswith("<|im_end|>\n") for r in split)
    out = train_and_save(run)
    assert "each answer is trained after the prefill '\\n</think>\\n\\n'" in (out / "README.md").read_text()
