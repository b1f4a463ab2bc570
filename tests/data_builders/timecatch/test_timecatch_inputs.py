"""TimeCatch's inputs (issue 35): ``--interval S`` wins over the per-source table and bad values are
refused naming the flag; copies of the same media (by content) land in one split, reported in
build.json; a repeated manifest id is a skip naming the id, its line and its source.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from judgetrain import records
from judgetrain.cli import main as cli
from judgetrain.data_builders import timecatch


@pytest.fixture(scope="module")
def two_clips(tmp_path_factory) -> Path:
    """Two short, small synthetic clips (64x48 px, 6–7.5 s), so LPIPS is quick."""
    from judgetrain.data_builders.synthetic import write_physics_videos

    return write_physics_videos(
        tmp_path_factory.mktemp("two"), 2, seed=3, size=(64, 48), duration_range_s=(6.0, 7.5), progress=False
    )


@pytest.mark.parametrize("value", ["0", "-0", "-1.5", "nan", "inf", "clevrer=0", "clevrer=nan"])
def test_a_bad_interval_is_refused_naming_the_flag(tmp_path, value, capsys):
    argv = ["build", "timecatch", "--out", str(tmp_path / "ds"), "--synthetic", "2", "--lpips-random-backbone"]
    assert cli([*argv, f"--interval={value}", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"--interval {value!r}: " in err and "Traceback" not in err
    assert ("positive" in err) or ("finite" in err)
    assert not (tmp_path / "ds").exists()


def test_interval_wins_over_the_per_source_table():
    cfg = timecatch.TimeCatchConfig(out=Path("x"), synthetic=2, interval=["1.0"])
    for source in ("clevrer", "craft", "synthetic-physics", "mtl-aqa", "other"):
        assert cfg.interval_for(source) == 1.0, source
    cfg = timecatch.TimeCatchConfig(out=Path("x"), synthetic=2, interval=["2.0", "mtl-aqa=0.5"])
    assert (cfg.interval_for("clevrer"), cfg.interval_for("mtl-aqa")) == (2.0, 0.5)
    unset = timecatch.TimeCatchConfig(out=Path("x"), synthetic=2)
    assert {s: unset.interval_for(s) for s in timecatch.SOURCE_INTERVALS_S} == timecatch.SOURCE_INTERVALS_S


def test_the_help_example_builds_at_one_second(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        cli(["build", "timecatch", "--help"])
    (example,) = [line.split()[3:] for line in capsys.readouterr().out.splitlines() if "--interval 1.0" in line]
    monkeypatch.chdir(tmp_path)
    example = [tmp_path / "ds" if arg == "data/timecatch-1s" else arg for arg in example]
    assert cli(["build", "timecatch", *map(str, example), "--no-progress"]) == 0
    info = records.read_build_info(tmp_path / "ds")
    assert info["protocol"]["intervals_s"] == {"synthetic-physics": 1.0}
    for split in records.load(tmp_path / "ds").values():
        for meta in map(json.loads, split["meta"]):
            assert all(abs(t - round(t)) < 0.05 for t in meta["times_s"]), meta["times_s"]


def test_copies_of_the_same_media_go_to_one_split_and_a_repeated_id_is_named(tmp_path, two_clips, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "clips"
    (root / "copy").mkdir(parents=True)
    first, second = [Path(json.loads(line)["video"]) for line in two_clips.read_text().splitlines()]
    for name in (first, second):
        shutil.copy(two_clips.parent / name, root / name.name)
    shutil.copy(two_clips.parent / first, root / "copy" / first.name)
    lines = [
        {"id": "a", "video": first.name, "source": "clevrer"},
        {"id": "b", "video": first.name, "source": "clevrer"},  # the same file under another id
        {"id": "c", "video": f"copy/{first.name}", "source": "clevrer"},  # a copy of it
        {"id": "d", "video": second.name, "source": "clevrer"},
        {"id": "a", "video": second.name, "source": "craft"},  # a repeated id
    ]
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    argv = ["build", "timecatch", "--out", "ds", "--videos", str(root / "m.jsonl"), "--lpips-random-backbone"]
    argv += ["--lpips-threshold", "0", "--tasks", "temporal_detect", "--splits", "train=0.5,validation=0.5"]
    assert cli([*argv, "--interval", "1.0", "--no-progress"]) == 0
    info = records.read_build_info(tmp_path / "ds")
    digest = hashlib.sha256((root / first.name).read_bytes()).hexdigest()
    (group,) = info["shared_media"]
    assert group["ids"] == ["a", "b", "c"] and group["sha256"] == [digest]
    ds = records.load(tmp_path / "ds")
    split_of = {json.loads(m)["sequence_id"]: name for name, split in ds.items() for m in split["meta"]}
    assert split_of["a"] == split_of["b"] == split_of["c"] == group["split"]
    # the repeated id: its line, the id, the source it names
    (skip,) = info["skipped"]
    assert (skip["line"], skip["id"], skip["source"]) == (5, "a", "craft")
    assert skip["reason"].startswith("id: 'a' is also on line 1; ")
    assert info["counts"]["sequences"]["craft"] == {"skipped": 1}
    assert "unknown (malformed line)" not in info["counts"]["sequences"]
    assert info["protocol"]["intervals_s"] == {"clevrer": 1.0}


def test_assign_splits_keeps_a_group_together():
    seqs = [timecatch.SourceSequence(id=i, source="s", description="", video=Path(f"{i}.mp4")) for i in ("x", "y")]
    apart = timecatch.assign_splits(seqs, {"train": 0.5, "validation": 0.5}, seed=0)
    assert apart["x"] != apart["y"]  # exact counts: one each
    together = timecatch.assign_splits(seqs, {"train": 0.5, "validation": 0.5}, seed=0, together=[["x", "y"]])
    assert together["x"] == together["y"]
