"""A tiny build never silently replaces a folder holding another model: the same build is a no-op,
other weights or foreign files are refused naming the fix, ``--overwrite`` replaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgetrain.errors import UserError
from judgetrain.models.tiny import DEFAULT_SEED, RECORD_FILE, TinyModelExistsError, build_all, build_tiny, main
from judgetrain.quickstart import QuickstartConfig


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder`` by relative name: its bytes and mtime."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def no_leftovers(parent: Path) -> bool:
    """No staging (``.NAME.partial-…``) or replaced (``.NAME.old-…``) folder is left beside the builds."""
    return not [p.name for p in parent.iterdir() if ".partial-" in p.name or ".old-" in p.name]


def test_the_same_build_again_rewrites_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = build_tiny("qwen3-vl", tmp_path / "qwen3-vl", seed=3)
    assert json.loads((folder / RECORD_FILE).read_text()) == {
        "builder": "judgetrain.models.tiny",
        "family": "qwen3-vl",
        "seed": 3,
    }
    before = snapshot(folder)
    assert build_tiny("qwen3-vl", folder, seed=3) == folder
    assert main(["--out", str(tmp_path), "--family", "qwen3-vl", "--seed", "3"]) == 0
    assert f"qwen3-vl: {folder}" in capsys.readouterr().out
    assert snapshot(folder) == before  # same bytes, same mtimes: nothing was written
    assert build_tiny("qwen3-vl", folder, seed=3, overwrite=True) == folder and snapshot(folder) == before
    assert no_leftovers(tmp_path) and [p.name for p in tmp_path.iterdir()] == ["qwen3-vl"]


def test_another_seed_is_refused_naming_the_folder_and_the_fixes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = build_tiny("qwen3-vl", tmp_path / "qwen3-vl", seed=42)
    before = snapshot(folder)
    assert main(["--out", str(tmp_path), "--family", "qwen3-vl", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder} already holds the tiny qwen3-vl built with seed 42, not the tiny qwen3-vl of seed 0")
    assert "Pass --overwrite to replace it" in err and "choose another --out" in err and "pass --seed 42" in err
    assert "Traceback" not in err
    with pytest.raises(TinyModelExistsError) as info:
        build_tiny("qwen3-vl", folder, seed=0)
    assert isinstance(info.value, UserError) and isinstance(info.value, FileExistsError) and str(folder) in str(info.value)
    assert snapshot(folder) == before and no_leftovers(tmp_path)


def test_overwrite_replaces_the_folder_whole(tmp_path: Path) -> None:
    folder = build_tiny("qwen3-vl", tmp_path / "qwen3-vl", seed=42)
    (folder / "notes.txt").write_text("mine\n")
    old = (folder / "model.safetensors").read_bytes()
    assert main(["--out", str(tmp_path), "--family", "qwen3-vl", "--seed", "0", "--overwrite"]) == 0
    fresh = build_tiny("qwen3-vl", tmp_path / "fresh" / "qwen3-vl", seed=0)
    assert (folder / "model.safetensors").read_bytes() != old
    assert {k: v[0] for k, v in snapshot(folder).items()} == {k: v[0] for k, v in snapshot(fresh).items()}
    assert json.loads((folder / RECORD_FILE).read_text())["seed"] == 0 and not (folder / "notes.txt").exists()
    assert no_leftovers(tmp_path)


def test_a_folder_of_other_files_is_refused_unless_overwrite(tmp_path: Path) -> None:
    folder = tmp_path / "qwen3-vl"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a model\n")
    with pytest.raises(TinyModelExistsError) as info:
        build_tiny("qwen3-vl", folder)
    message = str(info.value)
    assert f"{folder} already holds files that are not a tiny model built by judgetrain (notes.txt)" in message
    assert "Pass --overwrite to replace it" in message and "--seed" not in message
    assert (folder / "notes.txt").read_text() == "not a model\n" and no_leftovers(tmp_path)
    build_tiny("qwen3-vl", folder, overwrite=True)
    assert (folder / "model.safetensors").is_file() and not (folder / "notes.txt").exists()

    empty = tmp_path / "empty"
    empty.mkdir()
    assert (build_tiny("qwen3-vl", empty) / "model.safetensors").is_file()  # an empty folder holds nothing to keep


def test_changed_files_and_a_build_without_record_are_judged_by_their_bytes(tmp_path: Path) -> None:
    folder = build_tiny("llava-onevision", tmp_path / "llava-onevision", seed=5)
    config = (folder / "config.json").read_text()
    edited = config.replace('"vision_feature_layer": -1', '"vision_feature_layer": -2')
    assert edited != config
    (folder / "config.json").write_text(edited)
    with pytest.raises(
        TinyModelExistsError, match=r"built with seed 5, but its config\.json differs from what this build writes"
    ) as info:
        build_tiny("llava-onevision", folder, seed=5)
    assert "--seed" not in str(info.value)
    (folder / "config.json").write_text(config)

    # built before the record was written: the same build keeps it as it is (no record added), another is refused
    (folder / RECORD_FILE).unlink()
    before = snapshot(folder)
    build_tiny("llava-onevision", folder, seed=5)
    assert snapshot(folder) == before and not (folder / RECORD_FILE).exists()
    with pytest.raises(
        TinyModelExistsError, match=f"holds a model other than the tiny llava-onevision of seed 6 .*no {RECORD_FILE}"
    ):
        build_tiny("llava-onevision", folder, seed=6)
    assert snapshot(folder) == before


def test_one_refused_folder_stops_the_whole_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_tiny("qwen3-vl", tmp_path / "qwen3-vl", seed=1)
    assert main(["--out", str(tmp_path), "--family", "llava-onevision", "--family", "qwen3-vl", "--seed", "2"]) == 2
    assert "already holds the tiny qwen3-vl built with seed 1" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3-vl"]  # llava-onevision was not put in place either


def test_the_command_line_after_the_quickstart_changes_no_byte(tmp_path: Path) -> None:
    """The issue: the quickstart built seed 42, the command line's default was 0 and replaced it."""
    assert QuickstartConfig().seed == DEFAULT_SEED == 42
    models = tmp_path / "quickstart" / "models"
    build_all(models, seed=QuickstartConfig().seed, families=["qwen3-vl"])  # what `judgetrain quickstart` builds
    before = snapshot(models)
    assert main(["--out", str(models), "--family", "qwen3-vl"]) == 0
    assert snapshot(models) == before
