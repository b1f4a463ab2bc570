"""A hub base model's identity carries the commit its revision resolves to
(judgetrain.train.base_model), read offline from a Hugging Face cache laid out as
huggingface_hub lays it out (models--ORG--NAME/refs/REF, snapshots/COMMIT/…), built here in a
temporary folder; and ``model_revision`` reaches the model loader."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from judgetrain.train import base_model_identity, hub_commit

REPO = Path(__file__).resolve().parents[2]
MAIN, V2 = "a" * 40, "b" * 40
HUB_ID = "judgetrain-test/tiny-qwen3vl"


def fake_hub(root: Path, repo: str, snapshots: dict[str, Path | None], refs: dict[str, str]) -> Path:
    """A Hugging Face cache in ``root`` holding ``repo``: one snapshot per commit (the files of a
    model folder, or only an empty config) and the refs naming them."""
    folder = root / f"models--{repo.replace('/', '--')}"
    for commit, source in snapshots.items():
        snapshot = folder / "snapshots" / commit
        if source is None:
            snapshot.mkdir(parents=True)
            (snapshot / "config.json").write_text("{}")
        else:
            shutil.copytree(source, snapshot)
    (folder / "refs").mkdir(parents=True)
    for ref, commit in refs.items():
        (folder / "refs" / ref).write_text(commit)
    return root


def test_a_revision_resolves_to_its_commit_from_the_cache(tmp_path):
    cache = fake_hub(tmp_path, HUB_ID, {MAIN: None, V2: None}, {"main": MAIN, "v2": V2})
    assert hub_commit(HUB_ID, None, cache) == hub_commit(HUB_ID, "main", cache) == MAIN
    assert hub_commit(HUB_ID, "v2", cache) == V2 and hub_commit(HUB_ID, V2, cache) == V2
    assert hub_commit(HUB_ID, "v3", cache) is None and hub_commit("judgetrain-test/absent", None, cache) is None
    assert base_model_identity(HUB_ID, "v2", cache) == {"hub_id": HUB_ID, "sha": V2}
    assert base_model_identity("not a hub id/../x", None, cache) == {"hub_id": "not a hub id/../x", "sha": None}


def test_a_local_base_is_identified_by_its_files(tiny_model):
    identity = base_model_identity(tiny_model("qwen3-vl"), "main")
    assert set(identity) == {"files"} and "config.json" in identity["files"]


def test_a_hub_base_trains_at_its_revision_and_the_run_records_the_commit(tmp_path, tiny_model, timecatch_build):
    """main's snapshot holds no model (an empty config): the run at v2 trains only because
    model_revision reaches the config, the processor and the weights alike. run.json's
    identity and the model card name the commit v2 resolved to."""
    cache = fake_hub(tmp_path / "hub", HUB_ID, {MAIN: None, V2: tiny_model("qwen3-vl")}, {"main": MAIN, "v2": V2})
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}

    def train(out: Path, *revision: str):
        return subprocess.run([sys.executable, "-m", "judgetrain.train", "--config",
                               str(REPO / "recipes/tiny/qwen3vl-timecatch-lora.yaml"), "--model_name_or_path", HUB_ID,
                               *revision, "--datasets", str(timecatch_build[0]), "--output_dir", str(out), "--max_steps", "1",
                               "--save_strategy", "no", "--max_train_samples", "2"],
                              capture_output=True, text=True, env=env, timeout=600)

    out = tmp_path / "run"
    done = train(out, "--model_revision", "v2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["identity"]["base_model"] == {"hub_id": HUB_ID, "sha": V2}
    card = (out / "README.md").read_text()
    assert f"- base model: `{HUB_ID}` (qwen3-vl), commit `{V2}`" in card
    assert yaml.safe_load(card.split("---")[1])["judgetrain"]["base_model_sha"] == V2
    assert yaml.safe_load((out / "judgetrain_recipe.yaml").read_text())["model_revision"] == "v2"
    at_main = train(tmp_path / "main")
    # main's empty config is what loads without the revision: what v2 trained was v2's
    assert at_main.returncode != 0 and "Should have a `model_type` key in its config.json" in at_main.stderr
    assert json.loads((tmp_path / "main" / "run.json").read_text())["identity"]["base_model"]["sha"] == MAIN
