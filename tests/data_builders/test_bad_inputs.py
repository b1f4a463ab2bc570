"""One bad item never aborts a build (issue #24, part 2): every one of the seven builders, run
through the CLI on a manifest holding good items and one of each bad kind, exits 0 with the bad
lines in build.json's ``skipped`` (file:line and a reason naming the problem and the fix), and
under ``--strict`` fails with that one line. The bad kinds: a 4,301-digit number and arrays
nested 100,000 deep (json.loads raises ValueError and RecursionError, not JSONDecodeError), a
16x16 frame or video (below LPIPS's smallest input), a PNG whose header claims 20000x10000 px
(Pillow's DecompressionBombError), a NUL byte in a path, a folder given as a file."""

from __future__ import annotations

import json
import shutil
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judgetrain import records
from judgetrain.cli import main as cli
from judgetrain.data_builders import prism
from judgetrain.data_builders.consistency_views import ConsistencyViewsConfig, build as build_views
from judgetrain.data_builders.core import BuildError
from judgetrain.data_builders.timecatch.sequences import LPIPS_MIN_SIDE
from judgetrain.perceptual import LpipsDistance
from judgetrain.video import encode_mp4

BIG = '{"id": "big", "n": ' + "1" * 4301 + "}"
DEEP = '{"id": "deep", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
BIG_REASON = "not JSON this reader can take: a number of more than 4300 digits; write it as a string"
DEEP_REASON = "levels deep; flatten the nesting"
NUL_REASON = "holds a NUL byte (\\x00), which no file path can; fix the path"
BOMB_REASON = "too large to decode (Image size (200000000 pixels) exceeds limit of 178956970 pixels"


def bomb_png(path: Path) -> Path:
    """A 60-byte PNG whose header claims 20000 x 10000 RGB pixels (2e8 > Pillow's 1.79e8 limit)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 20000, 10000, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0")) + chunk(b"IEND", b""))
    return path


def noise(seed: int, h: int, w: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def skipped(info: dict, manifest: Path) -> dict[int, str]:
    """build.json's skipped entries by line; each names the manifest."""
    assert {s["path"] for s in info["skipped"]} == {str(manifest)}
    return {s["line"]: s["reason"] for s in info["skipped"]}


def assert_reasons(got: dict[int, str], expected: dict[int, str]) -> None:
    assert sorted(got) == sorted(expected), got
    for line, text in expected.items():
        assert text in got[line], (line, got[line])


def strict_fails_with_one_line(argv: list[str], manifest: Path, line: int, capsys) -> str:
    """``--strict`` on a manifest whose line ``line`` is bad: exit 2, the error is that one line, no traceback."""
    capsys.readouterr()
    assert cli([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    message = err.split("error: ", 1)[1].rstrip("\n")
    assert "\n" not in message and "Traceback" not in err
    assert message.removeprefix("--replay: ").startswith((f"{manifest}:{line}: ", f"{manifest}:{line} (id "))
    return message


# --------------------------------------------------------------------------- timecatch


@pytest.fixture(scope="module")
def tc_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tc-bad")
    for name in ("v", "adir.mp4", "g", "t", "b"):
        (root / name).mkdir()
    encode_mp4(root / "v/good.mp4", [noise(k, 48, 64) for k in range(6)], fps=2)
    encode_mp4(root / "v/tiny.mp4", [noise(k, 16, 16) for k in range(6)], fps=2)
    for k in range(5):
        Image.fromarray(noise(k, 48, 64)).save(root / f"g/{k}.png")
        Image.fromarray(noise(k, 16, 16)).save(root / f"t/{k}.png")
        Image.fromarray(noise(k, 48, 64)).save(root / f"b/{k}.png")
    bomb_png(root / "b/2.png")
    return root


def test_lpips_minimum_side_is_the_networks_own(tc_root):
    distance = LpipsDistance("alex", pretrained_backbone=False, device="cpu")
    least = LPIPS_MIN_SIDE["alex"]
    frame = np.zeros((least, 40, 3), np.uint8)
    assert distance([frame], [frame]).shape == (1,)
    for h, w in ((least - 1, 40), (40, least - 1)):
        small = np.zeros((h, w, 3), np.uint8)
        with pytest.raises(RuntimeError, match="Output size is too small"):
            distance([small], [small])


def test_timecatch_videos_skip_each_bad_line(tc_root, tmp_path, capsys):
    manifest = write_lines(tc_root / "videos.jsonl", [
        {"id": "good", "video": "v/good.mp4", "source": "s"}, BIG, DEEP, {"id": "tiny", "video": "v/tiny.mp4", "source": "s"},
        {"id": "nul", "video": "v/a\x00b.mp4", "source": "s"}, {"id": "dir", "video": "adir.mp4", "source": "s"}])
    argv = ["build", "timecatch", "--videos", str(manifest), "--lpips-random-backbone", "--interval", "0.5", "--no-progress",
            "--tasks", "temporal_detect", "--prompts", "A", "--splits", "train=1"]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    assert_reasons(skipped(records.read_build_info(tmp_path / "out"), manifest), {
        2: BIG_REASON, 3: DEEP_REASON,
        4: "video: frame 1 is 16x16 px; LPIPS (alex) needs at least 31 px on each side; give frames of at least 31x31 px",
        5: "video: 'v/a\\x00b.mp4' " + NUL_REASON, 6: f"video: {tc_root / 'adir.mp4'}: a folder, not a video file; fix or replace"})
    one = write_lines(tc_root / "one-bad.jsonl", [{"id": "good", "video": "v/good.mp4", "source": "s"},
                                                  {"id": "tiny", "video": "v/tiny.mp4", "source": "s"}])
    argv[3] = str(one)
    message = strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, 2, capsys)
    assert "LPIPS (alex) needs at least 31 px" in message and not (tmp_path / "strict").exists()


def test_timecatch_frames_skip_each_bad_line(tc_root, tmp_path, capsys):
    frames = [f"g/{k}.png" for k in range(5)]
    manifest = write_lines(tc_root / "frames.jsonl", [
        {"id": "good", "frames": frames, "source": "s"}, BIG, DEEP,
        {"id": "tiny", "frames": [f"t/{k}.png" for k in range(5)], "source": "s"},
        {"id": "bomb", "frames": [f"b/{k}.png" for k in range(5)], "source": "s"},
        {"id": "nul", "frames": ["g/0.png\x00", *frames[1:]], "source": "s"},
        {"id": "dir", "frames": ["g", *frames[1:]], "source": "s"}])
    argv = ["build", "timecatch", "--frames", str(manifest), "--lpips-random-backbone", "--no-progress",
            "--tasks", "temporal_detect", "--prompts", "A", "--splits", "train=1"]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    assert_reasons(skipped(records.read_build_info(tmp_path / "out"), manifest), {
        2: BIG_REASON, 3: DEEP_REASON, 4: "frames: frame 1 is 16x16 px; LPIPS (alex) needs at least 31 px on each side",
        5: f"frames: {tc_root / 'b/2.png'}: {BOMB_REASON}", 6: "frames: 'g/0.png\\x00' " + NUL_REASON,
        7: f"frames: {tc_root / 'g'}: a folder, not an image file; give the path of the image file"})
    one = write_lines(tc_root / "one-bad-frames.jsonl", [{"id": "good", "frames": frames, "source": "s"},
                                                         {"id": "bomb", "frames": [f"b/{k}.png" for k in range(5)], "source": "s"}])
    argv[3] = str(one)
    assert BOMB_REASON in strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, 2, capsys)


def test_timecatch_missing_manifest_is_reported_before_any_model_loads(tmp_path, monkeypatch, capsys):
    # no LPIPS weights and no network: were the model loaded first, this would be a failed AlexNet download
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    for flag in ("--videos", "--frames"):
        started = time.monotonic()
        assert cli(["build", "timecatch", flag, str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
        assert time.monotonic() - started < 5
        assert capsys.readouterr().err == f"error: {flag} {tmp_path / 'nope.jsonl'}: no such manifest; give the JSON Lines manifest's path\n"
    assert not (tmp_path / "torch").exists()


def test_an_empty_manifest_says_so(tmp_path, capsys):
    empty = write_lines(tmp_path / "empty.jsonl", ["", "  "])
    assert cli(["build", "timecatch", "--videos", str(empty), "--out", str(tmp_path / "o"), "--lpips-random-backbone",
                "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"error: {empty}: holds no sequence (the file is empty or has only blank lines); "
                                       "write one JSON object per sequence, one per line\n")
    assert cli(["build", "ordering-probe", "--procedures", str(empty), "--out", str(tmp_path / "p"), "--no-progress"]) == 2
    assert f"error: {empty}: holds no procedure (the file is empty" in capsys.readouterr().err


# --------------------------------------------------------------------------- prism, ordering-probe (procedures), mirage


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("images-bad")
    (root / "adir.png").mkdir()
    bomb_png(root / "bomb.png")
    for i in range(4):
        (root / f"p{i}").mkdir()
        for k in range(4):
            Image.fromarray(noise(10 * i + k, 32, 32)).save(root / f"p{i}/{k}.png")
    return root


def procedure(pid: str, i: int, category: str, image: str | None = None) -> dict:
    steps = [{"text": f"step {k}", "image": f"p{i}/{k}.png"} for k in range(4)]
    if image is not None:
        steps[1]["image"] = image
    return {"id": pid, "category": category, "steps": steps}


@pytest.mark.parametrize("builder, extra", [("prism", ["--layouts", "P0", "--perturbations", "swap,semantic-1"]),
                                            ("ordering-probe", [])])
def test_procedure_builders_skip_each_bad_line(image_root, tmp_path, capsys, builder, extra):
    good = [procedure(f"p{i}", i, "ab"[i // 2]) for i in range(4)]
    manifest = write_lines(image_root / f"{builder}.jsonl", [
        *good, BIG, DEEP, procedure("bomb", 0, "a", "bomb.png"), procedure("nul", 0, "a", "p0/1.png\x00"),
        procedure("dir", 0, "a", "adir.png"), {"id": "str", "category": "a", "steps": "p0"}])
    argv = ["build", builder, "--procedures", str(manifest), "--no-progress", *extra]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    assert_reasons(skipped(records.read_build_info(tmp_path / "out"), manifest), {
        5: BIG_REASON, 6: DEEP_REASON, 7: f"steps[1].image: {image_root / 'bomb.png'}: {BOMB_REASON}",
        8: "steps[1].image: 'p0/1.png\\x00' " + NUL_REASON,
        9: f"steps[1].image: {image_root / 'adir.png'}: a folder, not an image file; give the path of the image file",
        10: 'steps: a string, not an array; give a non-empty list of {"text", "image"} objects'})  # was "a str"
    one = write_lines(image_root / f"{builder}-one.jsonl", [*good, procedure("nul", 0, "a", "p0/1.png\x00")])
    argv[3] = str(one)
    assert NUL_REASON in strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, 5, capsys)


def test_mirage_skips_each_bad_sequence(image_root, tmp_path, capsys):
    def prompt(pid: str, negative_image: str | None = None) -> dict:
        neg = [f"p1/{k}.png" for k in range(4)]
        if negative_image is not None:
            neg[1] = negative_image
        return {"id": pid, "domain": "recipes", "prompt": "make it", "sequences": [
            {"id": "pos", "generator": "g1", "images": [f"p0/{k}.png" for k in range(4)], "votes": [1, 1, 1]},
            {"id": "neg", "generator": "g2", "images": neg, "votes": [0, 0, 0]}]}

    manifest = write_lines(image_root / "mirage.jsonl", [prompt("m0"), prompt("m1"), BIG, DEEP, prompt("bomb", "bomb.png"),
                                                         prompt("nul", "p0/1.png\x00"), prompt("dir", "adir.png")])
    argv = ["build", "mirage", "--manifest", str(manifest), "--layouts", "P0", "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    seq = "sequences[1] (id 'neg').images[1]: "
    assert_reasons(skipped(records.read_build_info(tmp_path / "out"), manifest), {
        3: BIG_REASON, 4: DEEP_REASON, 5: f"{seq}{image_root / 'bomb.png'}: {BOMB_REASON}", 6: f"{seq}'p0/1.png\\x00' {NUL_REASON}",
        7: f"{seq}{image_root / 'adir.png'}: a folder, not an image file"})
    one = write_lines(image_root / "mirage-one.jsonl", [prompt("m0"), prompt("m1"), prompt("bomb", "bomb.png")])
    argv[3] = str(one)
    assert BOMB_REASON in strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, 3, capsys)


# --------------------------------------------------------------------------- video-mcq, consistency-views, rationales


@pytest.fixture(scope="module")
def video_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("videos-bad")
    (root / "videos" / "adir.mp4").mkdir(parents=True)
    encode_mp4(root / "videos/good.mp4", [noise(k, 48, 64) for k in range(24)], fps=8)
    encode_mp4(root / "videos/one.mp4", [noise(0, 48, 64)], fps=8)
    encode_mp4(root / "videos/tiny.mp4", [noise(k, 16, 16) for k in range(24)], fps=8)
    return root


def mcq_folder(root: Path, video_root: Path) -> Path:
    """A conversion's --out: its videos/ holds the good video and a folder named like a video."""
    (root / "videos" / "adir.mp4").mkdir(parents=True)
    shutil.copy(video_root / "videos/good.mp4", root / "videos/good.mp4")
    return root


def test_video_mcq_conversion_skips_each_bad_line(video_root, tmp_path, capsys):
    def item(video: str) -> dict:
        return {"video": video, "question": "Which?", "candidates": ["a", "b"], "answer": "a"}

    out = mcq_folder(tmp_path / "all", video_root)
    annotations = write_lines(tmp_path / "toy.jsonl", [item("good.mp4"), BIG, DEEP, item("a\x00b.mp4"), item("adir.mp4")])
    argv = ["build", "video-mcq", "--from", "mvbench", "--annotations", str(annotations), "--videos", str(out / "videos"),
            "--out", str(out), "--probe", "--no-progress"]
    assert cli(argv) == 0
    info = json.loads((out / "build.json").read_text())
    assert info["counts"]["questions"] == 1
    assert_reasons(skipped(info, annotations), {
        2: BIG_REASON, 3: DEEP_REASON, 4: f"video: {str(out / 'videos/a')!r}"[:-1],
        5: f"video: {out / 'videos/adir.mp4'} is a folder, not a video file; put the video there"})
    assert NUL_REASON.replace("the path", "the annotation") in skipped(info, annotations)[4]
    one = write_lines(tmp_path / "one-bad.jsonl", [item("good.mp4"), DEEP])
    out = mcq_folder(tmp_path / "strict", video_root)
    argv = [*argv[:5], str(one), "--videos", str(out / "videos"), "--out", str(out), "--probe", "--no-progress"]
    assert DEEP_REASON in strict_fails_with_one_line(argv, one, 2, capsys)


def test_video_mcq_plain_json_that_json_cannot_hold_is_one_located_error(video_root, tmp_path, capsys):
    for name, text, reason in (("big.json", "[" + BIG + "]", BIG_REASON), ("deep.json", DEEP, DEEP_REASON)):
        annotations = tmp_path / name
        annotations.write_text(text)
        out = mcq_folder(tmp_path / name.split(".")[0], video_root)
        assert cli(["build", "video-mcq", "--from", "mvbench", "--annotations", str(annotations), "--videos",
                    str(out / "videos"), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {annotations}: not JSON this reader can take") and reason in err and "Traceback" not in err


def mcq_line(qid: str, video: str) -> dict:
    return {"id": qid, "video": video, "question": "Which?", "options": ["a", "b", "c"], "answer": 1, "benchmark": "toy"}


def test_consistency_views_skip_each_bad_line(video_root, tmp_path, capsys):
    manifest = write_lines(video_root / "views.jsonl", [
        mcq_line("good", "videos/good.mp4"), BIG, DEEP, mcq_line("nul", "videos/a\x00b.mp4"), mcq_line("dir", "videos/adir.mp4"),
        mcq_line("one", "videos/one.mp4"), mcq_line("tiny", "videos/tiny.mp4"), mcq_line("out", "../x.mp4")])
    argv = ["build", "consistency-views", "--manifest", str(manifest), "--budget", "4", "--phases", "2", "--orderings", "1",
            "--splits", "train=1", "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    info = records.read_build_info(tmp_path / "out")
    assert info["counts"]["questions"] == {"manifest": 4, "kept": 2, "skipped": 6}  # 4 lines read; a 16x16 video is fine here
    assert_reasons(skipped(info, manifest), {
        2: BIG_REASON, 3: DEEP_REASON, 4: "video: 'videos/a\\x00b.mp4' " + NUL_REASON,
        5: f"video: {video_root / 'videos/adir.mp4'}: a folder, not a video file; fix or replace the file, or drop the line",
        6: f"video: {video_root / 'videos/one.mp4'} has 1 frame; every view would show that one frame 4 times; "
           "give a video of at least 2 frames, or drop the line",
        8: "video: '../x.mp4' points outside the manifest's folder"})  # once "video: video: '../x.mp4' …"
    assert "video: video:" not in json.dumps(info["skipped"])
    one = write_lines(video_root / "views-one.jsonl", [mcq_line("good", "videos/good.mp4"), mcq_line("one", "videos/one.mp4")])
    argv[3] = str(one)
    assert "has 1 frame" in strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, 2, capsys)


def test_consistency_views_refuse_phase_grids_that_are_all_the_same(video_root, tmp_path):
    # 24 frames, 8 frames per view: three phases differ; a 2-frame video gives 2 identical phase grids
    encode_mp4(video_root / "videos/two.mp4", [noise(k, 48, 64) for k in range(2)], fps=8)
    manifest = write_lines(video_root / "views-two.jsonl", [mcq_line("good", "videos/good.mp4"), mcq_line("two", "videos/two.mp4")])
    info = build_views(ConsistencyViewsConfig(manifest=manifest, out=tmp_path / "out", budget=8, phases=2, orderings=1,
                                              splits={"train": 1.0}, progress=False))
    (reason,) = [s["reason"] for s in info["skipped"]]
    assert reason == (f"video: {video_root / 'videos/two.mp4'} has 2 frames, too few for 2 different phase grids of 8 frames "
                      "(all pick frames [1, 1, 1, 1, 2, 2, 2, 2]); give a longer video, lower --budget, or use --phases 1")


def test_a_missing_views_manifest_is_named(tmp_path):
    with pytest.raises(BuildError, match=r"^--manifest .*nope.jsonl: no such manifest; build one with"):
        build_views(ConsistencyViewsConfig(manifest=tmp_path / "nope.jsonl", out=tmp_path / "o", progress=False))


def test_rationales_replay_skips_lines_json_cannot_hold(tmp_path, capsys):
    data = tmp_path / "prism"
    prism.build(prism.PrismConfig(out=data, synthetic=2, layouts=("P0",), perturbations=("shuffle",), modes=("pairwise",),
                                  synthetic_size=64, progress=False))
    ids = sorted(r["id"] for split in records.load(data).values() for r in split)
    replay = write_lines(tmp_path / "replay.jsonl", [{"id": ids[0], "rationale": "fine", "answer": "A"}, BIG, DEEP])
    argv = ["build", "rationales", "--data", str(data), "--teacher", "replay", "--replay", str(replay), "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "out")]) == 0
    assert_reasons(skipped(records.read_build_info(tmp_path / "out" / "with_rationale"), replay), {2: BIG_REASON, 3: DEEP_REASON})
    one = write_lines(tmp_path / "one.jsonl", [*(json.dumps({"id": i, "rationale": "fine", "answer": "A"}) for i in ids), BIG])
    argv[argv.index(str(replay))] = str(one)
    assert BIG_REASON in strict_fails_with_one_line([*argv, "--out", str(tmp_path / "strict")], one, len(ids) + 1, capsys)
