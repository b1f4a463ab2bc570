"""The model and LoRA fields of a recipe are TRL's ModelConfig (judgetrain.train.model_args):
``trl.get_peft_config`` reads them as TRL users expect, judgetrain's LoRA config is built
through it, a renamed key fails naming TRL's name, and TRL's fields judgetrain does not
support (quantized loading) or that cannot apply are refused naming the field."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import trl

from judgetrain.models import get_family
from judgetrain.train import (
    QUANTIZATION_FIELDS,
    ConfigError,
    ModelArguments,
    check_config,
    lora_config,
    model_problems,
    parse,
    setup,
)

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def _model_args(*extra) -> ModelArguments:
    return parse(["--config", str(RECIPE), "--output_dir", "o", *extra])[0]


def test_the_model_fields_are_trls_model_config_with_judgetrains_defaults():
    args = _model_args()
    assert isinstance(args, trl.ModelConfig)
    defaults = ModelArguments()
    assert (defaults.use_peft, defaults.dtype, defaults.model_revision, defaults.lora_task_type) == (True, "auto", "main", "CAUSAL_LM")
    peft = trl.get_peft_config(_model_args("--use_dora", "true", "--use_rslora", "true", "--lora_target_modules", "q_proj", "v_proj"))
    assert (peft.r, peft.lora_alpha, peft.use_dora, peft.use_rslora) == (8, 16, True, True)
    assert set(peft.target_modules) == {"q_proj", "v_proj"}


def test_judgetrains_lora_config_is_trls_with_the_familys_targets_and_unfrozen_towers():
    family = get_family("qwen3-vl")
    args = _model_args("--use_dora", "true", "--use_rslora", "true", "--lora_target_parameters", "mlp.experts.gate_up_proj")
    mine, trls = lora_config(args, family), trl.get_peft_config(args)
    assert mine.target_modules == family.lora_target_regex and trls.target_modules is None  # TRL's: PEFT's own default
    same = ("r", "lora_alpha", "lora_dropout", "use_dora", "use_rslora", "target_parameters", "task_type", "bias")
    assert {k: getattr(mine, k) for k in same} == {k: getattr(trls, k) for k in same}
    assert mine.target_parameters == ["mlp.experts.gate_up_proj"]
    unfrozen = lora_config(dataclasses.replace(args, freeze_vision_tower=False, lora_target_modules=r".*q_proj"), family)
    assert unfrozen.target_modules == r".*q_proj" and set(family.vision_modules) <= set(unfrozen.modules_to_save)


def test_a_key_renamed_to_trls_name_fails_naming_it(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text().replace("use_peft: true", "use_lora: true"))
    with pytest.raises(ConfigError, match=r"unknown key 'use_lora'; did you mean 'use_peft'\? \(use_lora is now TRL's ModelConfig"):
        parse(["--config", str(recipe)])
    with pytest.raises(ConfigError, match=r"unknown argument '--use_lora'; did you mean '--use_peft'\?"):
        parse(["--config", str(RECIPE), "--use_lora", "false"])


def test_one_lora_target_is_a_regex_written_as_a_string_in_a_recipe(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text() + "lora_target_modules: .*language_model.*q_proj\n")
    args = parse(["--config", str(recipe), "--output_dir", "o"])
    assert args[0].lora_target_modules == ".*language_model.*q_proj"
    assert not [p for p in check_config(*args, world_size=1) if p.startswith("lora_target_modules")]
    assert _model_args("--lora_target_modules", ".*q_proj").lora_target_modules == ".*q_proj"  # TRL: one value, a string


@pytest.mark.parametrize("flag, value", [("load_in_4bit", "true"), ("load_in_8bit", "true"), ("bnb_4bit_quant_type", "fp4"),
                                         ("use_bnb_nested_quant", "true"), ("bnb_4bit_quant_storage", "uint8")])
def test_quantized_loading_is_refused_naming_the_field(flag, value):
    assert flag in QUANTIZATION_FIELDS
    problems = model_problems(_model_args(f"--{flag}", value))
    assert len(problems) == 1 and problems[0].startswith(f"{flag}: ") and "loads the base model unquantized" in problems[0]


def test_a_task_other_than_the_causal_lm_and_a_revision_of_a_local_folder_are_refused(tiny_model):
    assert model_problems(_model_args("--lora_task_type", "SEQ_CLS"))[0].startswith("lora_task_type: 'SEQ_CLS'")
    local = str(tiny_model("qwen3-vl"))
    assert model_problems(_model_args("--model_name_or_path", local)) == []
    problem = model_problems(_model_args("--model_name_or_path", local, "--model_revision", "v2"))
    assert problem == [f"model_revision: 'v2' names a hub commit, but {local} is a local folder (its files are what trains); "
                       "drop model_revision, or give the hub id"]


def test_dora_and_rslora_reach_the_adapter_that_trains(tmp_path, tiny_model, timecatch_build):
    run = setup(["--config", str(RECIPE), "--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets",
                 str(timecatch_build[0]), "--output_dir", str(tmp_path / "o"), "--max_steps", "1", "--save_strategy", "no",
                 "--use_dora", "true", "--use_rslora", "true"])
    config = run.trainer.model.peft_config["default"]
    assert config.use_dora and config.use_rslora
    trainable = [n for n, p in run.trainer.model.named_parameters() if p.requires_grad]
    assert any("lora_magnitude_vector" in n for n in trainable)  # DoRA's magnitudes train
    layer = next(m for n, m in run.trainer.model.named_modules() if n.endswith("self_attn.q_proj"))
    assert layer.scaling["default"] == pytest.approx(16 / math.sqrt(8))  # rsLoRA: alpha / √r, not alpha / r
    run.trainer.train()


def test_without_peft_the_language_model_trains_fully(tmp_path, tiny_model, timecatch_build):
    run = setup(["--config", str(RECIPE), "--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets",
                 str(timecatch_build[0]), "--output_dir", str(tmp_path / "o"), "--max_steps", "1", "--save_strategy", "no",
                 "--use_peft", "false"])
    family = run.family
    trainable = {n for n, p in run.trainer.model.named_parameters() if p.requires_grad}
    assert getattr(run.trainer.model, "peft_config", None) is None and not any("lora_" in n for n in trainable)
    assert any("language_model" in n for n in trainable) and not any(family.is_vision_tower(n) for n in trainable)
