"""PhaseFusion's data identity is the manifest's bytes and the bytes of every video read
(judgetrain issue #24): a video replaced in place under an unchanged manifest is refused,
never scored beside predictions of the old one; byte-identical manifests and videos at
another path are the same data for ``eval compare``, whose differences read first → other."""

from __future__ import annotations

import json
import shutil

import pytest

from judgetrain.eval.core import compare as C, runs
from judgetrain.identity import sha256_file

ARGS = ["--budget", "2", "--phases", "2", "--orderings", "2", "--arms", "single,fusion", "--latency-lines", "0",
        "--no-progress"]


def _cli(*argv):
    from judgetrain.cli import main

    return main(["eval", *map(str, argv)])


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model("qwen3-vl")


def _copy(clips, folder):
    """The manifest and its videos in another folder: the same bytes at another path."""
    shutil.copytree(clips.parent, folder)
    return folder / clips.name


def test_video_replaced_in_place_under_an_unchanged_manifest_is_refused(model, clips, tmp_path, capsys):
    manifest = _copy(clips, tmp_path / "clips")
    video = manifest.parent / "videos" / "physics-00000.mp4"  # pf-0's
    out = tmp_path / "run"
    assert _cli("phasefusion", "--model", model, "--manifest", manifest, "--out", out, *ARGS, "--limit", 1) == 0
    media = json.loads((out / runs.RUN_INFO).read_text())["identity"]["data"]["media"]
    old = sha256_file(video)
    assert media == {"videos/physics-00000.mp4": old}
    rows = (out / runs.PREDICTIONS).read_bytes()

    shutil.copyfile(manifest.parent / "videos" / "physics-00002.mp4", video)  # another clip, same name
    new = sha256_file(video)
    capsys.readouterr()
    # before: pf-0 kept from the old video, pf-1 scored on the new set, exit 0
    assert _cli("phasefusion", "--model", model, "--manifest", manifest, "--out", out, *ARGS, "--limit", 2) == 2
    err = capsys.readouterr().err
    assert f"  - data.media.videos/physics-00000.mp4: {old!r} → {new!r}\n" in err and "--overwrite" in err
    assert (out / runs.PREDICTIONS).read_bytes() == rows

    assert _cli("phasefusion", "--model", model, "--manifest", manifest, "--out", out, *ARGS, "--limit", 2,
                "--overwrite") == 0
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["identity"]["data"]["media"]["videos/physics-00000.mp4"] == new
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS) if r["kind"] == "question"] == ["pf-0", "pf-1"]


def test_compare_of_runs_on_byte_identical_data_at_different_paths(model, clips, tmp_path, capsys):
    first, second = _copy(clips, tmp_path / "a"), _copy(clips, tmp_path / "b")
    runs_ = [tmp_path / "run-a", tmp_path / "run-b"]
    for manifest, out in zip((first, second), runs_):
        assert _cli("phasefusion", "--model", model, "--manifest", manifest, "--out", out, *ARGS, "--limit", 1) == 0
    result = C.compare(runs_)  # before: refused as "different data" (the manifests' paths)
    assert result["differences"] == {}
    assert _cli("compare", *runs_) == 0

    lines = [json.loads(x) for x in second.read_text().splitlines()]
    lines[0]["question"] = "Which object touches the floor last?"
    second.write_text("".join(json.dumps(x) + "\n" for x in lines))
    other = tmp_path / "run-c"
    assert _cli("phasefusion", "--model", model, "--manifest", second, "--out", other, *ARGS, "--limit", 1) == 0
    capsys.readouterr()
    assert _cli("compare", runs_[0], other) == 2
    err = capsys.readouterr().err
    # the first run's value, then the other's (before: "data: <other> vs <first>")
    assert f"  - run-a → run-c: data.sha256: {sha256_file(first)!r} → {sha256_file(second)!r}\n" in err
