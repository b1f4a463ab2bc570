"""An evaluation folder's identity is content, not spelling (judgetrain issue #24): a model
rebuilt in place behind an unchanged ``config.json`` is refused with its weights named (old
→ new); a relative and an absolute path to one model, or ``--dtype float32`` and the default
that resolves to it, resume; ``run.json`` records the checkout's commit and dirty flag."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from judgetrain.eval.core import runs
from judgetrain.identity import git_state, sha256_file

ROOT = Path(__file__).resolve().parents[3]


def _timecatch(model, data, out, *extra):
    from judgetrain.cli import main

    return main(["eval", "timecatch", "--model", str(model), "--data", str(data), "--split", "validation",
                 "--out", str(out), "--batch-size", "4", "--no-progress", *map(str, extra)])


@pytest.fixture(scope="module")
def own_model(tiny_model, tmp_path_factory):
    """A copy of the tiny Qwen3-VL that a test may rebuild in place."""
    folder = tmp_path_factory.mktemp("own") / "qwen3-vl"
    shutil.copytree(tiny_model("qwen3-vl"), folder)
    return folder


def test_model_rebuilt_in_place_with_another_seed_is_refused_naming_the_weights(tiny_model, timecatch_build,
                                                                                tmp_path, capsys):
    from judgetrain.models.tiny import build_tiny

    model = tmp_path / "qwen3-vl"
    shutil.copytree(tiny_model("qwen3-vl"), model)
    out = tmp_path / "run"
    assert _timecatch(model, timecatch_build[0], out, "--limit", 4) == 0
    config, old = sha256_file(model / "config.json"), sha256_file(model / "model.safetensors")
    rows = (out / runs.PREDICTIONS).read_bytes()

    shutil.rmtree(model)
    build_tiny("qwen3-vl", model, seed=1)  # the same folder and config.json, other weights
    new = sha256_file(model / "model.safetensors")
    assert sha256_file(model / "config.json") == config and new != old
    capsys.readouterr()
    assert _timecatch(model, timecatch_build[0], out, "--limit", 8) == 2  # before: 8 rows from two models, exit 0
    err = capsys.readouterr().err
    assert "holds predictions of another run (old → new)" in err
    assert f"  - model.files.model.safetensors: {old!r} → {new!r}\n" in err  # the old weights first
    assert (out / runs.PREDICTIONS).read_bytes() == rows  # nothing mixed in

    assert _timecatch(model, timecatch_build[0], out, "--limit", 8, "--overwrite") == 0
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["identity"]["model"]["files"]["model.safetensors"] == new
    assert len(runs.read_predictions(out / runs.PREDICTIONS)) == 8


def test_a_relative_and_an_absolute_path_to_one_model_resume_one_run(own_model, timecatch_build, tmp_path, monkeypatch,
                                                                     capsys):
    out = tmp_path / "run"
    monkeypatch.chdir(own_model.parent)
    assert _timecatch("qwen3-vl", timecatch_build[0], out, "--limit", 4) == 0  # before: refused as model.name
    before = (out / runs.PREDICTIONS).read_bytes()
    capsys.readouterr()
    assert _timecatch(own_model.resolve(), timecatch_build[0], out, "--limit", 4) == 0
    assert "Nothing left to score" in capsys.readouterr().out
    assert (out / runs.PREDICTIONS).read_bytes() == before
    identity = json.loads((out / runs.RUN_INFO).read_text())["identity"]
    assert "name" not in identity["model"] and set(identity["model"]["files"]) >= {"config.json", "model.safetensors"}


def test_dtype_float32_and_the_default_that_resolves_to_it_resume_one_run(own_model, timecatch_build, tmp_path, capsys):
    out = tmp_path / "run"
    assert _timecatch(own_model, timecatch_build[0], out, "--limit", 4, "--dtype", "float32") == 0
    before = (out / runs.PREDICTIONS).read_bytes()
    capsys.readouterr()
    assert _timecatch(own_model, timecatch_build[0], out, "--limit", 4) == 0  # before: dtype: 'float32' → None
    assert "Nothing left to score" in capsys.readouterr().out
    assert (out / runs.PREDICTIONS).read_bytes() == before
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["identity"]["dtype"] == "float32" and info["dtype"] is None  # the config as given, the identity resolved
    # another dtype is other work, named old → new
    capsys.readouterr()
    assert _timecatch(own_model, timecatch_build[0], out, "--limit", 4, "--dtype", "bfloat16") == 2
    assert "  - dtype: 'float32' → 'bfloat16'\n" in capsys.readouterr().err


def test_resolved_dtype_hand_worked(own_model):
    recorded = json.loads((own_model / "config.json").read_text())
    assert (recorded.get("dtype") or recorded.get("torch_dtype")) == "float32"
    assert runs.resolved_dtype(None, own_model, "cpu") == "float32"
    assert runs.resolved_dtype(None, own_model, "cuda") == "float32"  # "auto": the checkpoint's
    assert runs.resolved_dtype("auto", own_model, "cpu") == "float32"
    assert runs.resolved_dtype("bf16", own_model, "cpu") == "bfloat16"
    assert runs.resolved_dtype("FP16", own_model, "cpu") == "float16"
    assert runs.resolved_dtype(None, "Qwen/Qwen3-VL-2B-Instruct", "cuda") == "auto"  # a hub id: its hashes decide
    assert runs.resolved_dtype(None, "Qwen/Qwen3-VL-2B-Instruct", "cpu") == "float32"


def test_refusal_lists_old_before_new(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    old = {"evaluation": "timecatch", "identity": {"split": "validation", "data": {"content_hash": {"validation": "a"}}}}
    (out / runs.RUN_INFO).write_text(json.dumps(old))
    (out / runs.PREDICTIONS).write_text("")
    new = {"evaluation": "timecatch", "identity": {"split": "test", "data": {"content_hash": {"validation": "a",
                                                                                               "test": "b"}}}}
    with pytest.raises(runs.PredictionsError) as e:
        runs.check_resume(out, new)
    assert str(e.value).splitlines()[1:3] == ["  - data.content_hash.test: None → 'b'", "  - split: 'validation' → 'test'"]


def test_media_read_by_one_run_only_is_no_difference_but_other_bytes_are():
    old = {"data": {"sha256": "m", "media": {"a.mp4": "1", "b.mp4": "2"}}}
    assert runs.identity_changes(old, {"data": {"sha256": "m", "media": {"a.mp4": "1", "c.mp4": "3"}}}) == []
    assert runs.identity_changes(old, {"data": {"sha256": "m", "media": {"b.mp4": "9"}}}) == ["data.media.b.mp4: '2' → '9'"]


def test_run_json_records_the_commit_and_dirty_flag_of_the_checkout(own_model, timecatch_build, tmp_path):
    out = tmp_path / "run"
    assert _timecatch(own_model, timecatch_build[0], out, "--limit", 2) == 0
    info = json.loads((out / runs.RUN_INFO).read_text())
    expected = git_state(ROOT)
    if expected["commit"] is None:
        pytest.skip("not a git checkout")
    assert (info["git_commit"], info["git_dirty"]) == (expected["commit"], expected["dirty"])  # before: always None
