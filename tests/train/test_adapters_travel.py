"""Adapters and runs that travel: a base recorded relative to the folder training ran in
loads from there (PEFT, `judgetrain merge`) and, with `--base`, from anywhere; the model
card is huggingface_hub's, with every field, also after PEFT's save and as
`push_to_hub` would upload it; a resumed run continues its wandb run; and a recipe vLLM
cannot serve says so while it trains. Real transformers / PEFT / TRL / wandb on the tiny
Qwen3-VL, trained 2 steps."""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from judgetrain import cli, records
from judgetrain.models import load_model_and_processor
from judgetrain.models.adapters import BaseModelNotFoundError, adapter_base, same_base, stored_base
from judgetrain.models.tiny import build_tiny
from judgetrain.train import COMPLETE_MARKER, main, parse, prepare_trainable, setup, train_and_save

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
BASE = "quickstart/models/qwen3-vl"  # the tiny recipe's own model_name_or_path: a relative folder
LICENSE_CARD = "---\nlicense: apache-2.0\n---\n\n# tiny Qwen3-VL\n"


@pytest.fixture(scope="module")
def project(tmp_path_factory, timecatch_build):
    """A project folder laid out as the tiny recipe expects (its base at BASE, with a
    model card naming a license), the synthetic TimeCatch set, and an adapter trained
    there for 2 steps from the recipe's relative base."""
    root = tmp_path_factory.mktemp("project")
    build_tiny("qwen3-vl", root / BASE)
    (root / BASE / "README.md").write_text(LICENSE_CARD)
    data = timecatch_build[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        run = setup(["--config", str(RECIPE), "--datasets", str(data), "--output_dir", "runs/judge", "--max_steps", "2",
                     "--learning_rate", "1e-2", "--save_strategy", "no", "--max_train_samples", "8"])
        train_and_save(run)
    return root, data, run


def _inputs(run, data):
    row = records.load(data)["validation"][0]
    text = run.processor.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    return run.processor(text=[text], images=[row["images"]], return_tensors="pt")


def _logits(model, inputs):
    model.eval()
    with torch.no_grad():
        return model(**inputs).logits


def test_stored_base_keeps_relative_folders_and_hub_ids_and_makes_other_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "models" / "m").mkdir(parents=True)
    (tmp_path / "home" / "base").mkdir(parents=True)
    assert stored_base("models/m") == "models/m"
    assert stored_base("../" + tmp_path.name + "/models/m") == "../" + tmp_path.name + "/models/m"
    assert stored_base(str(tmp_path / "models" / "m")) == str(tmp_path / "models" / "m")
    assert stored_base("~/base") == str(tmp_path / "home" / "base")
    assert stored_base("Qwen/Qwen3-VL-2B-Instruct") == "Qwen/Qwen3-VL-2B-Instruct"  # a hub id stays one
    # a recorded relative path is the folder given elsewhere when it ends that folder's path
    assert same_base("quickstart/models/qwen3-vl", tmp_path / "models" / "m") is False
    (tmp_path / "x" / "quickstart" / "models" / "qwen3-vl").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "models")
    assert same_base("quickstart/models/qwen3-vl", tmp_path / "x" / "quickstart" / "models" / "qwen3-vl") is True


def test_a_relative_base_loads_from_its_folder_with_peft_and_merge_and_elsewhere_with_base(project, tmp_path, monkeypatch,
                                                                                              capsys):
    from peft import PeftConfig, PeftModel

    root, data, run = project
    adapter = root / "runs" / "judge"
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == BASE
    inputs = _inputs(run, data)
    trained = _logits(run.trainer.model, inputs)

    # from the folder training ran in, the recorded relative base resolves: PEFT (the base it records, loaded), and merge
    # (peft's AutoPeftModelForCausalLM would load the base with AutoModelForCausalLM, which has no Qwen3-VL class)
    monkeypatch.chdir(root)
    recorded = PeftConfig.from_pretrained("runs/judge").base_model_name_or_path
    assert recorded == BASE
    base, _ = load_model_and_processor(recorded, dtype="float32")
    torch.testing.assert_close(_logits(PeftModel.from_pretrained(base, "runs/judge"), inputs), trained, atol=1e-5, rtol=1e-5)
    assert cli.main(["merge", "runs/judge", "--out", str(tmp_path / "merged-here")]) == 0
    merged, _ = load_model_and_processor(tmp_path / "merged-here", dtype="float32")
    torch.testing.assert_close(_logits(merged, inputs), trained, atol=1e-4, rtol=1e-4)

    # from another folder: refused with the fix, before any model loads
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert cli.main(["merge", str(adapter), "--out", "merged"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: adapter {adapter}: the adapter records its base as '{BASE}', a path relative to the "
                          f"folder training ran in; from the working directory {elsewhere} it names no folder. Run from "
                          "the folder training ran in, or pass the base model's folder or hub id: "
                          f"`judgetrain merge {adapter} --out DIR --base BASE`"), err
    assert not (elsewhere / "merged").exists()
    with pytest.raises(BaseModelNotFoundError, match="--model BASE --adapter"):
        adapter_base(adapter)
    # … and with --base: the same merged model
    assert cli.main(["merge", str(adapter), "--out", "merged", "--base", str(root / BASE)]) == 0
    merged, _ = load_model_and_processor(elsewhere / "merged", dtype="float32")
    torch.testing.assert_close(_logits(merged, inputs), trained, atol=1e-4, rtol=1e-4)
    # the eval loaders' base + adapter path: the base given elsewhere is the recorded one (no other-base warning)
    base, _ = load_model_and_processor(root / BASE, dtype="float32")
    from judgetrain.models.adapters import load_adapter

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = load_adapter(base, adapter, root / BASE)
    assert [str(w.message) for w in caught if "was trained on base model" in str(w.message)] == []
    torch.testing.assert_close(_logits(model, inputs), trained, atol=1e-5, rtol=1e-5)


def test_the_model_card_is_huggingface_hubs_with_every_field_also_as_push_to_hub_uploads_it(project):
    from huggingface_hub import ModelCard

    root, data, run = project
    out = root / "runs" / "judge"
    hashes = {split: v["content_hash"] for split, v in records.read_build_info(data)["splits"].items()}

    def check_local(card):
        meta = card.data
        assert (meta.base_model, meta.library_name, meta.pipeline_tag, meta.license) == (BASE, "peft", "image-text-to-text",
                                                                                          "apache-2.0")
        assert f"base_model:adapter:{BASE}" in meta.tags and {"judgetrain", "lora", "qwen3-vl"} <= set(meta.tags)
        assert meta.datasets == [str(data)]
        block = meta.judgetrain
        assert block["datasets"] == [{"path": str(data), "builder": "timecatch", "version": records.read_build_info(data)["version"],
                                      "content_hashes": hashes}]
        assert (block["base_model"], block["effective_batch_size"], block["world_size"], block["global_step"]) == (BASE, 4, 1, 2)
        assert hashes["train"] in card.text and f"accelerate launch -m judgetrain.train --config {Path('runs/judge') / 'judgetrain_recipe.yaml'}" in card.text

    check_local(ModelCard.load(out / "README.md"))

    # Trainer.push_to_hub: save_model (PEFT rewrites README.md's tags and base), then create_model_card, then upload
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        run.trainer.save_model(str(out))
        assert "judgetrain" not in ModelCard.load(out / "README.md").data.tags  # PEFT's rewrite
        run.trainer.create_model_card(model_name="judge", tags=["trl", "sft"])
        card = ModelCard.load(out / "README.md")
        check_local(card)
        assert {"trl", "sft"} <= set(card.data.tags)
        # for the hub, local paths stay out of the fields the hub accepts only as ids
        mp.setattr(run.trainer.args, "hub_model_id", "someone/tiny-judge")
        run.trainer.create_model_card(model_name="tiny-judge")
        hub = ModelCard.load(out / "README.md").data
        assert (hub.base_model, hub.datasets, hub.license, hub.library_name, hub.model_name) == (None, None, "apache-2.0", "peft",
                                                                                                "tiny-judge")
        assert not any(t.startswith("base_model:") for t in hub.tags)
        assert hub.judgetrain["base_model"] == BASE and hub.judgetrain["datasets"][0]["content_hashes"] == hashes
        mp.undo()  # hub_model_id unset again, and back in the project folder (the trainer's output_dir is relative)
        mp.chdir(root)
        run.trainer.create_model_card()
    check_local(ModelCard.load(out / "README.md"))


def test_a_resumed_run_continues_its_wandb_run_in_the_sweeps_project_with_the_recipes_data_fields(project, tmp_path,
                                                                                                    monkeypatch):
    import wandb
    from transformers import TrainerCallback

    root, data, _ = project
    for key in [k for k in os.environ if k.startswith("WANDB")] + ["WANDB_DIR", "WANDB_PROJECT"]:
        monkeypatch.setenv(key, "")  # recorded, so that what training sets is undone after the test
        monkeypatch.delenv(key)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc key
    monkeypatch.chdir(root)
    seen = []

    class Seen(TrainerCallback):
        def on_train_end(self, args, state, control, **kwargs):
            seen.append((wandb.run.id, wandb.run.project, dict(wandb.run.config)))

    out = tmp_path / "run"
    argv = ["--config", str(RECIPE), "--datasets", str(data), "--output_dir", str(out), "--report_to", "wandb",
            "--save_steps", "2", "--max_train_samples", "8", "--effective_batch_size", "2"]
    assert main([*argv, "--max_steps", "2"], callbacks=[lambda *a: Seen()]) == 0
    wandb.teardown()  # as a new process would start: nothing of the first run is left in wandb's state
    assert main([*argv, "--max_steps", "3", "--resume_from_checkpoint", "auto"], callbacks=[lambda *a: Seen()]) == 0
    wandb.teardown()  # the offline files are written asynchronously; teardown waits for them

    recorded = json.loads((out / "checkpoint-2" / COMPLETE_MARKER).read_text())["wandb_run_id"]
    folders = sorted((out / "wandb").glob("offline-run-*"))
    assert [f.name.rsplit("-", 1)[1] for f in folders] == [recorded, recorded]
    assert [s[0] for s in seen] == [recorded, recorded] and {s[1] for s in seen} == {"judgetrain"}
    config = seen[1][2]
    assert (config["datasets"], config["family"], config["effective_batch_size"], config["max_steps"]) == ([str(data)], "qwen3-vl", 2, 3)
    assert config["dataset_content_hashes"][str(data)]["train"] == records.read_build_info(data)["splits"]["train"]["content_hash"]
    # a checkpoint folder (what hub_strategy: checkpoint uploads) holds judgetrain's card, not PEFT's
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "checkpoint-2" / "README.md").data
    assert "judgetrain" in card.tags and (card.base_model, card.library_name) == (BASE, "peft")
    assert card.judgetrain["global_step"] == 2 and card.judgetrain["wandb_run_id"] == recorded
    shutil.rmtree(out)


def test_a_recipe_vllm_cannot_serve_warns_at_training_time_with_the_fix(project, monkeypatch, caplog):
    root, _data, run = project
    monkeypatch.chdir(root)
    model, _ = load_model_and_processor(BASE, dtype="float32")
    for extra, expected in ((["--freeze_projector", "false"], "modules_to_save: "),
                            (["--lora_modules_to_save", "lm_head"], "modules_to_save: lm_head"),
                            (["--lora_target_modules", r".*visual\.blocks\.\d+\.attn\.qkv"], "puts LoRA on the vision tower"),
                            ([], None)):
        model_args, _, training_args = parse(["--config", str(RECIPE), *extra])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="judgetrain.train"):
            prepare_trainable(model, run.family, model_args)
        said = [r.getMessage() for r in caplog.records if "vLLM" in r.getMessage()]
        if expected is None:
            assert said == []
        else:
            assert len(said) == 1 and expected in said[0], said
            assert said[0].startswith("vLLM serves LoRA on the language model only: this adapter ")
            assert "merge it first (`judgetrain merge OUTPUT_DIR --out MERGED`, then `vllm serve MERGED`)" in said[0]
