"""Training settings derived once (judgetrain.train.settings): the parsed recipe is never assigned
to; every derived setting comes back on new arguments, with why; the gradient accumulation has
one rule (tests/train/test_packing.py checks its arithmetic); DeepSpeed's batch sizes follow it;
run.json and the model card say what was used."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from judgetrain.train import AS_PARSED, TRAINER_PACKING, Facts, derive, parse, setup, train_and_save

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def _parsed(*extra):
    return parse(["--config", str(RECIPE), "--output_dir", "o", *extra])


def test_derive_returns_new_arguments_and_leaves_the_parsed_ones_as_parsed():
    _, data_args, parsed = _parsed("--effective_batch_size", "8", "--per_device_train_batch_size", "2")
    before = parsed.to_dict()
    settings = derive(data_args, parsed, Facts(world_size=2))
    assert parsed.to_dict() == before and parsed.gradient_accumulation_steps == 1
    final = settings.training_args
    assert final is not parsed and final.gradient_accumulation_steps == 2 and settings.trainer_args is final
    assert settings.derived["gradient_accumulation_steps"] == {
        "value": 2, "recipe": 1, "why": "effective_batch_size 8 / (per_device_train_batch_size 2 × 2 process(es))"}
    # nothing else changed: the other fields are the parsed ones
    changed = {k for k, v in final.to_dict().items() if v != before[k]}
    assert changed == set(settings.derived) == {"gradient_accumulation_steps", "ddp_find_unused_parameters"}


def test_packed_rows_derive_the_accumulation_over_records_a_row_and_tell_trl_not_to_pack():
    _, data_args, parsed = _parsed("--packing", "true", "--max_length", "1024", "--effective_batch_size", "12",
                                   "--per_device_train_batch_size", "2")
    settings = derive(data_args, parsed, Facts(world_size=1, records_per_row=80 / 7))
    final, trainer = settings.training_args, settings.trainer_args
    # 12 / (11.43 records a row × 2 rows) = 0.525 -> 1
    assert final.gradient_accumulation_steps == 1 and final.packing is True and trainer.packing is False
    assert final.remove_unused_columns is False and final.dataset_kwargs == {"skip_prepare_dataset": True}
    assert trainer.gradient_accumulation_steps == 1 and trainer.dataset_kwargs == final.dataset_kwargs
    assert settings.derived[TRAINER_PACKING]["value"] is False and "TRL refuses packing" in settings.derived[TRAINER_PACKING]["why"]
    assert settings.derived["gradient_accumulation_steps"]["why"].startswith("effective_batch_size 12 / (11.4 records a packed row")
    assert parsed.packing is True and parsed.remove_unused_columns is True and parsed.dataset_kwargs is None


@pytest.mark.parametrize("facts, ddp", [({"vision_trains": True}, True), ({}, False)])
def test_ddp_is_told_of_unused_parameters_only_when_training_reaches_the_vision_side(facts, ddp):
    _, data_args, parsed = _parsed()
    settings = derive(data_args, parsed, Facts(world_size=2, **facts))
    assert settings.training_args.ddp_find_unused_parameters is ddp and settings.derived["ddp_find_unused_parameters"]["value"] is ddp
    _, data_args, given = _parsed("--ddp_find_unused_parameters", "true")
    kept = derive(data_args, given, Facts(world_size=2))
    assert kept.training_args.ddp_find_unused_parameters is True and "ddp_find_unused_parameters" not in kept.derived


def test_the_run_folders_verdict_and_a_length_column_are_derived_too():
    _, data_args, parsed = _parsed("--ddp_find_unused_parameters", "false")  # the recipe's effective batch: 4, 2 a device
    kept = derive(data_args, parsed, Facts(world_size=1, resume_from_checkpoint=AS_PARSED))
    assert set(kept.derived) == {"gradient_accumulation_steps"} and kept.training_args.resume_from_checkpoint is None
    settings = derive(data_args, parsed, Facts(world_size=1, resume_from_checkpoint="auto", length_column=True))
    assert settings.training_args.resume_from_checkpoint == "auto" and parsed.resume_from_checkpoint is None
    assert settings.training_args.remove_unused_columns is False
    assert set(settings.derived) == {"gradient_accumulation_steps", "resume_from_checkpoint", "remove_unused_columns"}


def test_new_arguments_keep_reusing_the_launchs_process_group():
    """Arguments parsed to reuse the process group a launch set up before them
    (judgetrain.train.run.setup_cpu_distributed) are built anew reusing it too: accelerate's
    shared state is kept, not reset (a mark put into it survives). Without it, it is reset."""
    from accelerate import PartialState

    PartialState(cpu=True)
    _, data_args, parsed = parse(["--config", str(RECIPE), "--output_dir", "o"], configured_state=True)
    PartialState._shared_state["judgetrain_mark"] = True  # accelerate's shared (Borg) state, read in this test only
    derive(data_args, parsed, Facts(world_size=1, configured_state=True))
    assert PartialState._shared_state.get("judgetrain_mark") is True
    derive(data_args, parsed, Facts(world_size=1, configured_state=False))
    assert "judgetrain_mark" not in PartialState._shared_state


def test_deepspeed_batch_sizes_follow_the_derived_accumulation(tmp_path):
    """DeepSpeed's "auto" batch sizes are filled when TrainingArguments are built: arguments built
    anew by derive fill them from the derived accumulation (an assignment afterwards left
    DeepSpeed at the parsed one). In a process of its own: DeepSpeed's state is process-wide."""
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                              "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}))
    code = ("from transformers.integrations import deepspeed_config\nfrom judgetrain.train import Facts, derive, parse\n"
            f"m, d, t = parse(['--config', {str(RECIPE)!r}, '--output_dir', 'o', '--deepspeed', {str(ds)!r}, "
            "'--effective_batch_size', '8', '--per_device_train_batch_size', '2'])\n"
            "parsed = deepspeed_config()['gradient_accumulation_steps']\n"  # the active DeepSpeed config: the newest arguments'
            "f = derive(d, t, Facts(world_size=1)).training_args\n"
            "print(parsed, f.gradient_accumulation_steps, deepspeed_config()['gradient_accumulation_steps'], "
            "deepspeed_config()['train_batch_size'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1", "4", "4", "8"]


def test_run_json_and_the_model_card_say_what_was_derived(tmp_path, tiny_model, timecatch_build):
    out = tmp_path / "run"
    run = setup(["--config", str(RECIPE), "--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets",
                 str(timecatch_build[0]), "--output_dir", str(out), "--max_steps", "1", "--save_strategy", "no",
                 "--per_device_train_batch_size", "1", "--effective_batch_size", "3", "--max_train_samples", "3"])
    assert run.training_args.gradient_accumulation_steps == 3 and run.trainer.args.gradient_accumulation_steps == 3
    recorded = json.loads((out / "run.json").read_text())["settings"]
    assert recorded["gradient_accumulation_steps"]["value"] == 3 and recorded == run.settings.derived
    train_and_save(run)
    assert json.loads((out / "run.json").read_text())["settings"] == recorded  # kept when the run finishes
    card = (out / "README.md").read_text()
    assert "## Settings derived from the recipe" in card
    assert "| `gradient_accumulation_steps` | `3` | `1` | effective_batch_size 3 / (per_device_train_batch_size 1 × 1 process(es)) |" in card
    assert yaml.safe_load(card.split("---")[1])["judgetrain"]["settings"]["gradient_accumulation_steps"] == 3
    assert yaml.safe_load((out / "judgetrain_recipe.yaml").read_text())["gradient_accumulation_steps"] == 3


# what the training packages call a parsed configuration (or the Trainer's copy, self.args)
CONFIG_NAMES = {"args", "training_args", "model_args", "data_args", "parsed_args", "trainer_args", "targs", "margs", "dargs"}


def test_no_module_assigns_to_a_parsed_config():
    """Settings are derived in judgetrain.train.settings only, as new objects: no module of the
    training packages assigns to a field of a parsed configuration (``x.args.f = …`` included)."""
    found = []
    for folder in ("judgetrain/train", "judgetrain/consistency", "judgetrain/sweep"):
        for path in sorted((REPO / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for t in targets:
                    owner = t.value if isinstance(t, ast.Attribute) else None
                    name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else None
                    if name in CONFIG_NAMES:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}.{t.attr} = …")
    assert not found, "\n".join(found)
