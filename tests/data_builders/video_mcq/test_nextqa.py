"""Tests for the NExT-QA converter of ``judgetrain build video-mcq --from nextqa``
(data_builders/video_mcq/benchmarks.py) on a hand-written CSV in NExT-QA's multiple-choice format
(doc-doc/NExT-QA dataset/nextqa/val.csv: its header, its quoting, lines modelled on its own), its
map_vid_vidorID.json and two tiny MP4s in the NExTVideo layout."""

import json
import random
import re
import shutil

import numpy as np
import pytest

from judgetrain import cli
from judgetrain.data_builders import video_mcq as V
from judgetrain.data_builders.core import BuildError
from judgetrain.mcq import load_manifest
from judgetrain.video import encode_mp4

HEADER = "video,frame_count,width,height,question,answer,qid,type,a0,a1,a2,a3,a4"
LINES = [
    HEADER,                                                                                                     # 1
    "4882821564,2697,640,480,why did the boy pick up one present from the group of them and move to the sofa,2,1,CW,"
    "share with the girl,approach lady sitting there,unwrap it,playing with toy train,gesture something",     # 2
    '4882821564,2697,640,480,"what does the boy do after sitting down, near the end",0,3,TN,'
    "unwrap the present,cry,stand up,look at the lady,jump",                                                  # 3
    # val.csv:3572 repeats "resting": the repeat (a3) is dropped, the answer (a4) becomes index 3
    "13884293626,5395,640,360,why is the lady in purple bending over the table,4,2,CW,"
    "stabilize food,resting,blow the candles,resting,writing",                                                # 4
    '13884293626,5395,640,360,"what happens\nnext",1,5,TC,a,b,c,d,e',                                          # 5-6
    "5256928210,606,640,360,what does the man wear on his head,1,7,DO,scarf,cap,turban,spectacles,hat",      # 7 no video
    "9999999999,300,640,360,where is this,0,0,DL,park,room,beach,road,stage",                                # 8 not in the map
    "4882821564,2697,640,480,how many presents are there,5,4,DC,one,two,three,four,five",                    # 9 answer 5
    "4882821564,2697,640,480,how does the boy move,0,6,CH,crawl,walk",                                       # 10 short
    "4882821564,2697,640,480,why did the boy laugh,1,1,CW,tickled,happy,joke,game,toy",                      # 11 same id as 2
    "",                                                                                                         # blank
    "13884293626,5395,640,360,why does the lady smile,0,x,CW,happy,sad,tired,angry,bored",                   # 13 qid x
]
MAP = {"4882821564": "1104/4882821564", "13884293626": "1015/13884293626", "5256928210": "1160/5256928210"}
FRAMES = 8


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Two tiny H.264 clips (8 frames at 8 fps, 32x24), one per NExTVideo file the CSV has."""
    folder = tmp_path_factory.mktemp("nextqa-clips")
    for k, rel in enumerate(["1104/4882821564", "1015/13884293626"]):
        frames = [np.full((24, 32, 3), 16 * k + 8 * i, dtype=np.uint8) for i in range(FRAMES)]
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        encode_mp4(folder / f"{rel}.mp4", frames, fps=8)
    return folder


@pytest.fixture()
def nextqa(tmp_path, clips):
    """NExT-QA as its repository and NExTVideo.zip unpack: dataset/nextqa/{val.csv, map_vid_vidorID.json}
    and NExTVideo/<group>/<video>.mp4, under one root that is also the manifest's folder."""
    root = tmp_path / "nextqa"
    (root / "dataset/nextqa").mkdir(parents=True)
    shutil.copytree(clips, root / "NExTVideo")
    csv = root / "dataset/nextqa/val.csv"
    csv.write_text("\n".join(LINES) + "\n")
    (root / "dataset/nextqa/map_vid_vidorID.json").write_text(json.dumps(MAP))
    return root, csv


def _argv(root, csv, *more):
    return ["build", "video-mcq", "--from", "nextqa", "--annotations", str(csv), "--videos", str(root / "NExTVideo"),
            "--out", str(root), "--no-progress", *more]


GOOD = [
    {"id": "4882821564_1", "video": "NExTVideo/1104/4882821564.mp4",
     "question": "why did the boy pick up one present from the group of them and move to the sofa",
     "options": ["share with the girl", "approach lady sitting there", "unwrap it", "playing with toy train",
                 "gesture something"], "answer": 2, "benchmark": "nextqa", "video_id": "4882821564", "qtype": "CW"},
    {"id": "4882821564_3", "video": "NExTVideo/1104/4882821564.mp4",
     "question": "what does the boy do after sitting down, near the end",
     "options": ["unwrap the present", "cry", "stand up", "look at the lady", "jump"], "answer": 0,
     "benchmark": "nextqa", "video_id": "4882821564", "qtype": "TN"},
    {"id": "13884293626_2", "video": "NExTVideo/1015/13884293626.mp4",
     "question": "why is the lady in purple bending over the table",
     "options": ["stabilize food", "resting", "blow the candles", "writing"], "answer": 3, "benchmark": "nextqa",
     "video_id": "13884293626", "qtype": "CW", "repeated_options": [3]},
    {"id": "13884293626_5", "video": "NExTVideo/1015/13884293626.mp4", "question": "what happens\nnext",
     "options": ["a", "b", "c", "d", "e"], "answer": 1, "benchmark": "nextqa", "video_id": "13884293626", "qtype": "TC"},
]


def test_nextqa_converter_rows_and_skips(nextqa):
    root, csv = nextqa
    info = V.convert("nextqa", csv, root / "NExTVideo", root, progress=False)
    assert _rows(root / "manifest.jsonl") == GOOD
    questions = load_manifest(root / "manifest.jsonl")
    assert [q.video for q in questions] == [(root / r["video"]).resolve() for r in GOOD] and questions[0].video.is_file()
    assert [(s["line"], s["id"], s["reason"]) for s in info["skipped"]] == [
        (7, "5256928210_7", f"video not found: {root / 'NExTVideo/1160/5256928210.mp4'}"),
        (8, "9999999999_0", f"video '9999999999' is not in {root / 'dataset/nextqa/map_vid_vidorID.json'}; pass the "
                            "map_vid_vidorID.json of the same NExT-QA release (--video-map FILE)"),
        (9, "4882821564_4", "answer '5' is not an option index 0..4 (NExT-QA's answer is the 0-based index of the "
                            "correct one of a0..a4)"),
        (10, "4882821564_6", "10 fields, but the header has 13; quote a field that holds a comma (\"a, b\")"),
        (11, "4882821564_1", f"id '4882821564_1' is already used by {csv}:2"),
        (13, "13884293626_x", "qid 'x' is not a whole number (NExT-QA's qid numbers the questions of one video: 0, 1, 2, …)"),
    ]
    assert {s["path"] for s in info["skipped"]} == {str(csv)}
    assert info["counts"] == {"annotated": 10, "usable": 4, "questions": 4, "skipped": 6,
                              "skipped_by_reason": {"missing video": 1, "not in the video map": 1, "bad annotation": 2,
                                                    "bad line": 1, "duplicate id": 1},
                              "options": {"5": 3, "4": 1}, "answer_position": {"2": 1, "0": 1, "3": 1, "1": 1}}
    assert (info["source"], info["benchmark"]) == ("nextqa", "NExT-QA")
    mapping = root / "dataset/nextqa/map_vid_vidorID.json"
    assert info["sources"] == [{"path": str(csv), "bytes": csv.stat().st_size},
                               {"path": str(mapping), "bytes": mapping.stat().st_size}]
    with pytest.raises(BuildError, match=re.escape(f"{csv}:7 (id 5256928210_7): video not found")):
        V.convert("nextqa", csv, root / "NExTVideo", root, strict=True, progress=False)


def test_same_inputs_give_the_same_bytes_and_sample_is_seeded(nextqa, tmp_path):
    root, csv = nextqa
    V.convert("nextqa", csv, root / "NExTVideo", root, progress=False)
    first = (root / "manifest.jsonl").read_bytes()
    V.convert("nextqa", csv, root / "NExTVideo", root, progress=False)
    assert (root / "manifest.jsonl").read_bytes() == first
    info = V.convert("nextqa", csv, root / "NExTVideo", root, sample=2, seed=42, progress=False)
    assert [r["id"] for r in _rows(root / "manifest.jsonl")] == [r["id"] for r in random.Random(42).sample(GOOD, 2)]
    assert (info["counts"]["usable"], info["counts"]["questions"]) == (4, 2)


def test_missing_column_and_bad_map_fail_naming_the_file(nextqa):
    root, csv = nextqa
    videos = root / "NExTVideo"
    csv.write_text("video,frame_count,width,height,question,answer,qid,type\n4882821564,2697,640,480,why,open ended,1,CW\n")
    with pytest.raises(BuildError) as e:
        V.convert("nextqa", csv, videos, root, progress=False)
    assert str(e.value) == (f"{csv}:1: column(s) a0, a1, a2, a3, a4 missing from the header line; is this a NExT-QA "
                            "multiple-choice CSV (dataset/nextqa/train.csv, val.csv or test.csv)? (its header is "
                            "video,frame_count,width,height,question,answer,qid,type; expected "
                            f"{HEADER})")
    csv.write_text("")
    with pytest.raises(BuildError, match=re.escape(f"{csv}:1: column(s) video, question, answer, qid, type, a0, a1, a2, "
                                                   "a3, a4 missing from the header line") + ".*its header is empty"):
        V.convert("nextqa", csv, videos, root, progress=False)
    csv.write_text("\n".join(LINES[:3]) + "\n")
    mapping = csv.with_name("map_vid_vidorID.json")
    mapping.write_text(json.dumps(list(MAP.values())))
    with pytest.raises(BuildError, match=re.escape(f"{mapping}: expected NExT-QA's map_vid_vidorID.json (an object "
                                                   "video id -> NExTVideo path, e.g. {\"4882821564\": \"1104/4882821564\"}), "
                                                   "got an array")):
        V.convert("nextqa", csv, videos, root, progress=False)
    mapping.write_text('{"4882821564": "1104/4882821564",\n "13884293626": }')
    with pytest.raises(BuildError, match=re.escape(f"{mapping}:2: not valid JSON (Expecting value")):
        V.convert("nextqa", csv, videos, root, progress=False)
    mapping.write_text(json.dumps({"4882821564": 1025}))
    with pytest.raises(BuildError, match=re.escape(f"{csv}: no usable question (2 skipped; first: {csv}:2: video "
                                                   "'4882821564' maps to 1025, not a NExTVideo path '<group>/4882821564', in")):
        V.convert("nextqa", csv, videos, root, progress=False)


def test_bad_bytes_are_one_located_line(nextqa):
    root, csv = nextqa
    lines = [line.encode() for line in LINES[:4]]
    lines[2] = lines[2].replace(b"sitting down", b"sitting d\xf6wn")
    csv.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\r\n")  # BOM and CRLF, as saved on Windows
    info = V.convert("nextqa", csv, root / "NExTVideo", root, progress=False)
    assert [r["id"] for r in _rows(root / "manifest.jsonl")] == ["4882821564_1", "13884293626_2"]
    assert [(s["line"], s["id"], s["reason"]) for s in info["skipped"]] == [
        (3, "4882821564_3", "not valid UTF-8 (in column 'question'); save the file as UTF-8")]
    assert info["counts"]["skipped_by_reason"] == {"bad line": 1}


def test_config_problems_name_the_option_and_the_fix(nextqa, tmp_path):
    root, csv = nextqa
    videos = root / "NExTVideo"
    with pytest.raises(BuildError) as e:
        V.convert("nextqa", csv.parent, videos, root, progress=False)
    assert f"--annotations {csv.parent}: a folder; give one NExT-QA split, e.g. --annotations {csv}" in str(e.value)
    csv.with_name("map_vid_vidorID.json").unlink()
    with pytest.raises(BuildError) as e:
        V.convert("nextqa", csv, videos, root, progress=False)
    assert (f"--video-map {csv.with_name('map_vid_vidorID.json')}: no such file; NExT-QA's map_vid_vidorID.json lies "
            "beside train.csv, val.csv and test.csv in dataset/nextqa/ (or give its path with --video-map FILE)") in str(e.value)
    elsewhere = tmp_path / "maps" / "vid_map.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps(MAP))
    info = V.convert("nextqa", csv, videos, root, video_map=elsewhere, progress=False)
    assert info["counts"]["questions"] == 4 and info["sources"][1]["path"] == str(elsewhere)
    assert info["args"]["video_map"] == str(elsewhere)
    with pytest.raises(BuildError, match=re.escape("--video-map is for NExT-QA only (its map_vid_vidorID.json)")):
        V.convert("videomme", csv, videos, root, video_map=elsewhere, progress=False)


def test_cli_converts_end_to_end(nextqa, capsys, tmp_path):
    root, csv = nextqa
    with pytest.raises(SystemExit):
        cli.main(["build", "video-mcq", "--help"])
    assert "--video-map FILE" in capsys.readouterr().out
    assert cli.main(_argv(root, csv, "--probe")) == 0
    out = capsys.readouterr().out
    assert "NExT-QA: 10 annotated, 4 usable, 4 in the manifest" in out
    assert f"{csv}:8 (id 9999999999_0): video '9999999999' is not in" in out
    assert f"Manifest written to {root / 'manifest.jsonl'} (4 questions; build.json beside it)" in out
    rows = _rows(root / "manifest.jsonl")
    assert [{k: v for k, v in r.items() if k not in ("duration", "num_frames")} for r in rows] == GOOD
    assert [(r["num_frames"], r["duration"]) for r in rows] == [(FRAMES, FRAMES / 8)] * 4
    args = json.loads((root / "build.json").read_text())["args"]
    assert {k: args[k] for k in ("source", "annotations", "video_map", "videos", "sample", "probe")} == {
        "source": "nextqa", "annotations": str(csv), "video_map": None, "videos": str(root / "NExTVideo"), "sample": None,
        "probe": True}
    assert cli.main(_argv(root, csv, "--probe", "--strict")) == 2  # the same build (other settings are refused): --strict fails
    err = capsys.readouterr().err
    assert f"{csv}:7 (id 5256928210_7): video not found" in err and "--strict" in err and "Traceback" not in err
    assert cli.main(["build", "video-mcq", "--out", str(tmp_path / "s"), "--synthetic", "2", "--video-map", str(csv)]) == 2
    assert "--video-map only apply with --from" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
