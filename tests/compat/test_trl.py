"""Contracts with TRL (judgetrain.compat.trl): each test states what judgetrain relies on, runs
TRL's real code on the tiny Qwen3-VL, and fails naming TRL and the name it relies on."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from PIL import Image

from judgetrain.compat import trl as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming TRL, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, ImportError, TypeError, KeyError, UpstreamChanged) as e:
        pytest.fail(f"trl {installed_version('trl')} changed {name}, which judgetrain relies on: {type(e).__name__}: {e}")


def _record(answer: str) -> dict:
    return {"images": [Image.new("RGB", (64, 48), (200, 30, 30))],
            "prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Is the order right?"}]}],
            "completion": [{"role": "assistant", "content": [{"type": "text", "text": answer}]}]}


@pytest.fixture(scope="module")
def qwen(tiny_model):
    from judgetrain.models import load_model_and_processor

    return load_model_and_processor(tiny_model("qwen3-vl"), dtype="float32")


def test_the_vision_collator_trains_on_the_completion_alone(qwen):
    """vision_collator: TRL's collator of image prompt–completion records gives the model's
    inputs (ids, mask, pixels) and labels that are the completion's tokens, -100 elsewhere."""
    _, processor = qwen
    with relied_on("trl.trainer.sft_trainer.DataCollatorForVisionLanguageModeling"):
        batch = compat.vision_collator(processor, completion_only_loss=True)([_record("yes"), _record("no, frames 2 and 3")])
        assert {"input_ids", "attention_mask", "labels", "pixel_values"} <= set(batch)
        for i, answer in enumerate(("yes", "no, frames 2 and 3")):
            trained = batch["labels"][i] != -100
            assert processor.tokenizer.decode(batch["input_ids"][i][trained]).startswith(answer)
            assert torch.equal(batch["labels"][i][trained], batch["input_ids"][i][trained])


def test_sft_trainer_logs_the_tokens_it_counted_as_num_tokens(qwen, tmp_path):
    """train_tokens / set_train_tokens: SFTTrainer counts the training tokens of each batch
    (its attention mask) in what train_tokens reads, and logs the count set_train_tokens sets
    as num_tokens."""
    import datasets
    from trl import SFTConfig, SFTTrainer

    model, processor = qwen
    records = [_record("yes"), _record("no")]
    args = SFTConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False, max_length=None, max_steps=1)
    with relied_on("SFTTrainer._total_train_tokens and SFTTrainer._metrics['train']['num_tokens']"):
        trainer = SFTTrainer(model=copy.deepcopy(model), args=args, processing_class=processor,
                             train_dataset=datasets.Dataset.from_list(records))
        assert compat.train_tokens(trainer) == 0
        batch = trainer.data_collator([copy.deepcopy(r) for r in records])
        trainer.model.train()
        trainer.compute_loss(trainer.model, dict(batch))
        assert compat.train_tokens(trainer) == int(batch["attention_mask"].sum())
        compat.set_train_tokens(trainer, 12345)
        logs: dict = {"loss": 1.0}
        trainer.log(logs)
        assert trainer.state.log_history[-1]["num_tokens"] == 12345


def test_a_removed_collator_is_named(monkeypatch):
    """No silent fallback: a TRL without the collator fails naming it."""
    import importlib

    monkeypatch.delattr(importlib.import_module("trl.trainer.sft_trainer"), "DataCollatorForVisionLanguageModeling")
    with pytest.raises(UpstreamChanged, match=r"^trl \S+ no longer offers trl\.trainer\.sft_trainer\.DataCollatorForVision"):
        compat.vision_collator(None)


def _listed(dataclass_type) -> list[dict]:
    """What HfArgumentParser makes of each field: the option strings and every value --help shows."""
    from transformers import HfArgumentParser

    return [{"flags": a.option_strings, "dest": a.dest, "nargs": a.nargs, "const": a.const, "default": a.default,
             "choices": list(a.choices) if a.choices else None, "help": a.help, "required": a.required}
            for a in HfArgumentParser(dataclass_type)._actions if a.dest != "help"]


def test_sft_config_read_from_source_is_the_imported_one():
    """sft_config_from_source: the fields read from TRL's and transformers' source (nothing
    imported) are SFTConfig's, in order, with the same defaults, help, init and, as --help shows
    them, the same options; only what the source computes differs (the default optim, the log
    levels' choices), and that is named (SourceField.unread)."""
    import dataclasses

    from trl import SFTConfig

    from judgetrain.compat.dataclass_source import dataclass_fields

    def default(f):
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default

    computed = {("optim", "default"), ("log_level", "choices"), ("log_level_replica", "choices")}
    with relied_on("SFTConfig declared in trl/trainer/sft_config.py over transformers' TrainingArguments "
                   "(transformers/training_args.py), its fields' values as literals"):
        read = dataclass_fields(*compat.SFT_CONFIG_SOURCE)
        live = dataclasses.fields(SFTConfig)
        assert [f.name for f in read] == [f.name for f in live]
        assert {(f.name, u.split(":")[-1].strip("'")) for f in read for u in f.unread} == computed
        for r, f in zip(read, live, strict=True):
            assert (r.init, r.metadata.get("help")) == (f.init, f.metadata.get("help")), f.name
            assert "default" in r.unread or default(r) == default(f), f.name
        listed, imported = _listed(compat.sft_config_from_source()), _listed(SFTConfig)
        assert [a["flags"] for a in listed] == [a["flags"] for a in imported]
        differ = {(a["dest"], k) for a, b in zip(listed, imported, strict=True) for k in a if a[k] != b[k]}
        assert differ == computed


def test_an_sft_config_that_moved_is_named(monkeypatch):
    monkeypatch.setattr(compat, "SFT_CONFIG_SOURCE", ("trl.trainer.sft_configuration", "SFTConfig", {}))
    with pytest.raises(UpstreamChanged, match=r"^trl \S+ no longer offers the module trl\.trainer\.sft_configuration"):
        compat.sft_config_from_source()
