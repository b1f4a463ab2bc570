"""Contracts with transformers (judgetrain.compat.transformers): each test states what
judgetrain relies on, runs transformers' real code (a Trainer over a two-parameter torch
module, the tiny LLaVA-OneVision), and fails naming transformers and the name it relies on."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

from judgetrain.compat import transformers as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming transformers, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, ImportError, TypeError, KeyError, UpstreamChanged) as e:
        pytest.fail(f"transformers {installed_version('transformers')} changed {name}, which judgetrain relies on: "
                    f"{type(e).__name__}: {e}")


class Line(torch.nn.Module):
    """y = w·x + b with a mean-squared loss: the smallest model a Trainer trains."""

    accepts_loss_kwargs = False  # as Qwen2.5-VL and Qwen3-VL say of their forward

    def __init__(self):
        super().__init__()
        self.w, self.b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))

    def forward(self, x, labels=None):
        y = self.w * x + self.b
        return {"loss": ((y - labels.float()) ** 2).mean(), "logits": y}


def _trainer(cls, tmp_path: Path, n: int = 4, **args):
    from transformers import TrainingArguments

    data = [{"x": torch.tensor([float(i)]), "labels": torch.tensor([2 * i])} for i in range(n)]
    kwargs = {"output_dir": str(tmp_path / "out"), "per_device_train_batch_size": 1, "max_steps": 2, "save_strategy": "no",
              "report_to": [], "use_cpu": True, "logging_steps": 1, "learning_rate": 1e-3, "disable_tqdm": True}
    return cls(model=Line(), args=TrainingArguments(**{**kwargs, **args}), train_dataset=data)


def test_the_trainer_marks_its_own_saves_internal_call(tmp_path):
    """InternalSaves: the Trainer saves each checkpoint through save_model(..., _internal_call=True);
    a save the caller asks for is not marked."""
    from transformers import Trainer

    class Marked(compat.InternalSaves, Trainer):
        def __init__(self, *args, **kwargs):
            self.folders: list[Path] = []
            super().__init__(*args, **kwargs)

        def after_internal_save(self, folder):
            self.folders.append(folder)

    with relied_on("Trainer.save_model(_internal_call=True) for the checkpoints it saves"):
        trainer = _trainer(Marked, tmp_path, save_strategy="steps", save_steps=1)
        trainer.train()
        assert trainer.folders == [tmp_path / "out" / "checkpoint-1", tmp_path / "out" / "checkpoint-2"]
        trainer.save_model(str(tmp_path / "final"))
        assert len(trainer.folders) == 2 and (tmp_path / "final" / "model.safetensors").is_file()


def test_arguments_built_anew_reuse_a_configured_state_when_told_again():
    """restated_accelerator_config: TrainingArguments set up their devices as they are built, and
    with use_configured_state reuse accelerate's state set up before them (a mark put into its
    shared state survives); the parsed arguments' own config no longer says so."""
    import dataclasses

    from accelerate import PartialState
    from transformers import TrainingArguments

    with relied_on("TrainingArguments(accelerator_config={'use_configured_state': True}) and its AcceleratorConfig"):
        PartialState(cpu=True)
        args = TrainingArguments(output_dir="o", use_cpu=True, report_to=[], accelerator_config={"use_configured_state": True})
        PartialState._shared_state["judgetrain_mark"] = True  # accelerate's shared (Borg) state
        again = dataclasses.replace(args, accelerator_config=compat.restated_accelerator_config(args, True))
        assert PartialState._shared_state.get("judgetrain_mark") is True and again.distributed_state is not None
        dataclasses.replace(args, accelerator_config=compat.restated_accelerator_config(args, False))
        assert "judgetrain_mark" not in PartialState._shared_state


def test_the_trainer_counts_num_items_in_batch_once_told_the_model_accepts_it(tmp_path):
    """count_items_in_batch: with model_accepts_loss_kwargs set, the Trainer passes compute_loss
    the loss tokens of the whole accumulated step (here 2 micro-batches of 2 labels); left as
    the model class says (accepts_loss_kwargs = False), it passes None."""
    from transformers import Trainer

    class Recording(Trainer):
        seen: list

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            self.seen.append(num_items_in_batch)
            return super().compute_loss(model, inputs, return_outputs=return_outputs)

    with relied_on("Trainer.model_accepts_loss_kwargs (whether the Trainer counts num_items_in_batch)"):
        plain = _trainer(Recording, tmp_path, n=8, per_device_train_batch_size=2, gradient_accumulation_steps=2, max_steps=1)
        plain.seen = []
        plain.train()
        told = _trainer(Recording, tmp_path, n=8, per_device_train_batch_size=2, gradient_accumulation_steps=2, max_steps=1)
        compat.count_items_in_batch(told)
        told.seen = []
        told.train()
        assert plain.seen == [None, None]
        assert [int(n) for n in told.seen] == [4, 4]


def test_the_training_loop_says_how_many_micro_batches_the_step_has(tmp_path):
    """current_accumulation: inside compute_loss, the micro-batches of the step in progress
    (7 records, accumulation 3: steps of 3, 3 and 1); 1 outside the training loop."""
    from transformers import Trainer

    class Recording(Trainer):
        seen: list

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            self.seen.append(compat.current_accumulation(self))
            return super().compute_loss(model, inputs, return_outputs=return_outputs)

    with relied_on("Trainer.current_gradient_accumulation_steps"):
        trainer = _trainer(Recording, tmp_path, n=7, gradient_accumulation_steps=3, max_steps=-1, num_train_epochs=1)
        trainer.seen = []
        assert compat.current_accumulation(trainer) == 1
        trainer.train()
        assert trainer.seen == [3, 3, 3, 3, 3, 3, 1]


def test_zero3_is_lifted_and_the_active_config_restored():
    """zero3_lifted: a ZeRO-3 config made active (as TrainingArguments or accelerate's DeepSpeed
    plugin does, through HfDeepSpeedConfig) is inactive inside and active again after."""
    from transformers.integrations import HfDeepSpeedConfig, is_deepspeed_zero3_enabled, unset_hf_deepspeed_config

    with relied_on("transformers.integrations.deepspeed's active config (_hf_deepspeed_config_weak_ref, "
                   "set_/unset_hf_deepspeed_config)"):
        config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_batch_size": 1})
        try:
            assert is_deepspeed_zero3_enabled()
            with compat.zero3_lifted():
                assert not is_deepspeed_zero3_enabled()
            assert is_deepspeed_zero3_enabled()
        finally:
            unset_hf_deepspeed_config()
        assert config.is_zero3()
        with compat.zero3_lifted():  # nothing active: nothing to restore
            pass
        assert not is_deepspeed_zero3_enabled()


def test_wandb_names_are_the_wandb_callbacks():
    with relied_on("transformers.integrations.integration_utils.rewrite_logs"):
        assert compat.wandb_names({"loss": 1.0, "eval_loss": 2.0, "test_accuracy": 0.5, "learning_rate": 1e-4}) == {
            "train/loss": 1.0, "eval/loss": 2.0, "test/accuracy": 0.5, "train/learning_rate": 1e-4}


def test_hub_key_layout_writes_the_hub_checkpoints_keys(tiny_model, tmp_path):
    """hub_key_layout: a model from from_pretrained carries the conversions its loading applied
    (_weight_conversions); given the family's whole mapping, save_pretrained writes LLaVA-OneVision
    as the hub has it (vision_tower.vision_model.*), which the tiny model's own files lack."""
    import safetensors

    from judgetrain.models import load_model_and_processor

    def keys(folder):
        with safetensors.safe_open(str(folder / "model.safetensors"), "pt") as f:
            return list(f.keys())

    with relied_on("transformers.conversion_mapping.get_model_conversion_mapping and PreTrainedModel._weight_conversions"):
        model, _ = load_model_and_processor(tiny_model("llava-onevision"), dtype="float32")
        model.save_pretrained(str(tmp_path / "as-loaded"))
        compat.hub_key_layout(model)
        model.save_pretrained(str(tmp_path / "hub"))
        assert not any(k.startswith("vision_tower.vision_model.") for k in keys(tmp_path / "as-loaded"))
        assert any(k.startswith("vision_tower.vision_model.encoder.layers.") for k in keys(tmp_path / "hub"))


def test_a_missing_conversion_mapping_fails_loudly_rather_than_write_another_layout(monkeypatch, tiny_model):
    """No silent fallback: without the mapping (a release that renames it) the merge would write
    the tiny model's own layout, which vLLM does not load; compat raises, naming it."""
    import importlib

    from judgetrain.models import load_model_and_processor

    model, _ = load_model_and_processor(tiny_model("llava-onevision"), dtype="float32")
    monkeypatch.delattr(importlib.import_module("transformers.conversion_mapping"), "get_model_conversion_mapping")
    with pytest.raises(UpstreamChanged, match=r"^transformers \S+ no longer offers transformers\.conversion_mapping\."
                                              r"get_model_conversion_mapping"):
        compat.hub_key_layout(model)
    monkeypatch.undo()
    del model._weight_conversions
    with pytest.raises(UpstreamChanged, match=r"PreTrainedModel\._weight_conversions"):
        compat.hub_key_layout(model)


def test_cache_rows_continue_as_the_full_sequences_and_leave_the_cache_alone(tiny_model):
    """cache_rows: rows of a prompt cache (repeated, reordered) continue each row exactly as a
    forward pass over the whole sequence does, and the prompt cache keeps its rows and length
    (what shared-prefix scoring relies on to serve every continuation from one cache)."""
    import inspect

    from judgetrain.models import load_model_and_processor

    model, _ = load_model_and_processor(tiny_model("llava-onevision"), dtype="float32")
    arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    ids, rows, nxt = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]]), torch.tensor([1, 0, 1]), torch.tensor([[3], [4], [5]])
    with relied_on("Cache.layers (shallow-copied per layer) and Cache.batch_select_indices"), torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        cache = getattr(out, arg)
        before = [layer.keys.clone() for layer in cache.layers]
        continued = model(input_ids=nxt, use_cache=True, **{arg: compat.cache_rows(cache, rows)}).logits[:, -1]
        whole = model(input_ids=torch.cat([ids[rows], nxt], 1)).logits[:, -1]
        assert torch.allclose(continued, whole, atol=1e-5)
        assert cache.get_seq_length() == 4 and all(torch.equal(b, layer.keys) for b, layer in zip(before, cache.layers, strict=True))


def test_a_cache_without_layers_is_named():
    class Renamed:
        def batch_select_indices(self, rows):
            pass

    with pytest.raises(UpstreamChanged, match=r"^transformers \S+ no longer offers Renamed\.layers"):
        compat.cache_rows(Renamed(), torch.tensor([0]))


def test_an_argument_group_heads_its_fields_in_help_and_parses_as_its_dataclass():
    """argument_group: HfArgumentParser lists the fields of a dataclass carrying
    _argument_group_name under that heading, and parses them into an instance of it."""
    import dataclasses

    from transformers import HfArgumentParser

    @dataclasses.dataclass
    class Options:
        rank: int = dataclasses.field(default=4, metadata={"help": "the rank"})

    with relied_on("HfArgumentParser's _argument_group_name"):
        titled = compat.argument_group(Options, "judgetrain's options")
        parser = HfArgumentParser(titled)
        text = parser.format_help()
        assert "judgetrain's options:\n  --rank RANK" in text, text
        (parsed,) = parser.parse_args_into_dataclasses(["--rank", "8"])
        assert isinstance(parsed, Options) and parsed.rank == 8


def test_parser_actions_are_every_flag_of_an_hf_argument_parser_in_order():
    """parser_actions: an HfArgumentParser (argparse underneath) keeps one Action per flag, in
    the order added, with the dest, flags, type and nargs judgetrain's config checks read."""
    import dataclasses

    from transformers import HfArgumentParser

    @dataclasses.dataclass
    class Options:
        rank: int = dataclasses.field(default=4, metadata={"help": "the rank"})
        names: list[str] = dataclasses.field(default_factory=list, metadata={"help": "names"})

    with relied_on("ArgumentParser._actions"):
        actions = compat.parser_actions(HfArgumentParser(Options))
        assert [a.dest for a in actions] == ["help", "rank", "names"]
        rank, names = actions[1], actions[2]
        assert rank.option_strings == ["--rank"] and rank.type("8") == 8
        assert names.option_strings == ["--names"] and names.nargs in ("+", "*")


def test_parser_actions_refuses_a_parser_that_keeps_no_actions():
    with pytest.raises(compat.UpstreamChanged, match="ArgumentParser._actions"):
        compat.parser_actions(object())


def test_the_attention_implementation_is_the_one_set_and_takes_back(tiny_model):
    """attention_implementation: what the model runs, as set_attn_implementation takes it back."""
    from judgetrain.models import load_model_and_processor

    model, _ = load_model_and_processor(tiny_model("qwen3-vl"), dtype="float32", attn_implementation="eager")
    with relied_on("PretrainedConfig._attn_implementation"):
        before = compat.attention_implementation(model)
        assert before == "eager"
        model.set_attn_implementation("sdpa")
        assert compat.attention_implementation(model) == "sdpa"
        model.set_attn_implementation(before)
        assert compat.attention_implementation(model) == "eager"


def test_the_sequence_classifier_reads_a_scalar_head_at_each_rows_last_non_pad_token(tiny_model):
    from transformers import AutoConfig, AutoModel

    with relied_on("transformers.modeling_layers.GenericForSequenceClassification"):
        head = compat.sequence_classifier()
        config = AutoConfig.from_pretrained(tiny_model("qwen3-vl"), num_labels=1)
        base = AutoModel.from_config(config)
        family = type(base).__mro__[1]
        cls = type("ProbeRewardModel", (head, family), {"config_class": type(config)})
        model = cls(config).eval()
        assert isinstance(model.score, torch.nn.Linear) and model.score.out_features == 1
        pad = config.get_text_config().pad_token_id
        ids = torch.tensor([[5, 6, 7], [pad, 5, 6]])
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=(ids != pad).long())
            hidden = model.model(input_ids=ids, attention_mask=(ids != pad).long()).last_hidden_state
        torch.testing.assert_close(out.logits, model.score(hidden[:, -1]))


def test_a_registered_key_mapping_loads_the_4x_layout_into_another_class(tiny_model):
    """Qwen2.5-VL's checkpoints (and the tiny one) store `model.layers…`; a class registered with the
    generative class's renames loads them where that class would."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModel, AutoModelForImageTextToText

    path = tiny_model("qwen2.5-vl")
    assert any(k.startswith("model.layers.") for k in load_file(path / "model.safetensors"))
    with relied_on("transformers.conversion_mapping.register_checkpoint_conversion_mapping"):
        config = AutoConfig.from_pretrained(path, num_labels=1)
        family = type(AutoModel.from_config(config)).__mro__[1]
        cls = type("Qwen2_5_VLProbeHead", (compat.sequence_classifier(), family), {"config_class": type(config)})
        compat.register_reward_key_mapping(cls.__name__, "Qwen2_5_VLForConditionalGeneration")
        mine = cls.from_pretrained(path, config=config)
        theirs = AutoModelForImageTextToText.from_pretrained(path)
        name = "model.language_model.layers.0.self_attn.q_proj.weight"
        assert torch.equal(dict(mine.named_parameters())[name], dict(theirs.named_parameters())[name])


def test_init_zeros_is_the_initialisation_that_spares_loaded_weights():
    with relied_on("transformers.initialization.zeros_"):
        fresh, loaded = torch.ones(3), torch.ones(3)
        loaded._is_hf_initialized = True  # what transformers marks on a weight it loaded from the checkpoint
        compat.init_zeros(fresh)
        compat.init_zeros(loaded)
        assert fresh.tolist() == [0.0] * 3 and loaded.tolist() == [1.0] * 3
