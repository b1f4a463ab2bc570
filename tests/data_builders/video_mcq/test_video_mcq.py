"""Tests for data_builders/video_mcq.py: synthetic physics questions whose answers are
re-derived here from the simulation, the manifest loader's checks, and the EgoSchema /
MVBench / Video-MME converters on tiny hand-written annotation files."""

import json
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import av
import numpy as np
import pytest

from judgetrain import cli, config
from judgetrain.data_builders import video_mcq as V
from judgetrain.data_builders.core import BuildError
from judgetrain.data_builders.synthetic import run_physics
from judgetrain.data_builders.video_mcq import SyntheticConfig
from judgetrain.mcq import ManifestError, load_manifest

FRAMES, SEED, GAP = 64, 5, 0.5


def _rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """15 questions: every question type with 3, 4 and 5 options."""
    out = tmp_path_factory.mktemp("vmcq") / "set"
    info = V.build_synthetic(SyntheticConfig(out=out, synthetic=15, seed=SEED, frames=FRAMES, progress=False))
    return out, info, _rows(out / "manifest.jsonl")


def _rerun(row):
    run, frames = run_physics(tuple(row["clip_seed"]), row["num_frames"], fps=8, size=(160, 120), n_objects=row["n_objects"])
    return run, frames


def _episodes(times):
    """How many separate touches a viewer sees: a touch within GAP of the previous is the same one."""
    count, last = 0, None
    for t in times:
        if last is None or t - last >= GAP:
            count += 1
        last = t
    return count


# --- answers follow the simulation ------------------------------------------

def test_physics_run_exposes_the_state_the_frames_show():
    run, frames = run_physics(("probe", 1), 24, fps=8, n_objects=4)
    assert len(run.names) == 4 and run.positions.shape == (24, 4, 2) and run.duration_s == 3.0
    assert run.substeps.shape == (1 + 23 * 15, 4, 2)          # 120 Hz physics, 15 substeps per frame
    np.testing.assert_array_equal(run.substeps[::15], run.positions)
    assert all(0 < e.time_s <= 23 / 8 for e in run.events) and len(list(frames)) == 24
    with pytest.raises(ValueError, match="n_objects=1"):
        run_physics(("probe", 1), 8, n_objects=1)


def test_every_answer_is_rederived_from_the_simulation(built):
    _, _, rows = built
    assert {r["qtype"] for r in rows} == set(V.QTYPES)
    for row in rows:
        run, _ = _rerun(row)
        gold = row["options"][row["answer"]]
        if row["qtype"] == "first_collision":
            first = {}
            for e in run.events:
                if e.kind == "collision":
                    first.setdefault((e.a, e.b), e.time_s)
            (a, b), t0 = min(first.items(), key=lambda kv: kv[1])
            assert gold == f"The {a} and the {b}"
            assert all(t - t0 >= GAP for pair, t in first.items() if pair != (a, b))
        elif row["qtype"] == "most_bounces":
            counts = {n: _episodes([e.time_s for e in run.events if e.kind == "bounce" and e.a == n]) for n in run.names}
            ranked = sorted(counts.values(), reverse=True)
            assert gold == f"The {max(counts, key=counts.get)}" and ranked[0] - ranked[1] >= 2
        elif row["qtype"] == "fastest":
            steps = np.diff(run.substeps, axis=0)
            travelled = np.hypot(steps[..., 0], steps[..., 1]).sum(axis=0)
            assert gold == f"The {run.names[int(travelled.argmax())]}"
            assert np.sort(travelled)[-1] >= 1.1 * np.sort(travelled)[-2]
        elif row["qtype"] == "leftmost_end":
            x = run.positions[-8:, :, 0]                   # the last second at 8 fps
            leftmost = {run.names[int(i)] for i in x.argmin(axis=1)}
            assert leftmost == {gold.removeprefix("The ")}
        else:
            a, b = re.fullmatch(r"How many times do the (.+) and the (.+) collide with each other\?", row["question"]).groups()
            times = [e.time_s for e in run.events if e.kind == "collision" and {e.a, e.b} == {a, b}]
            assert gold == str(_episodes(times))


def test_videos_show_the_simulated_clip(built):
    out, info, rows = built
    assert info["codec"] == "libx264"
    for row in rows[:3]:
        _, frames = _rerun(row)
        rendered = list(frames)
        with av.open(str(out / row["video"])) as container:
            stream = container.streams.video[0]
            assert stream.codec_context.name == "h264"
            decoded = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        assert len(decoded) == row["num_frames"] == FRAMES and row["duration"] == FRAMES / 8
        for i in (0, FRAMES // 2, FRAMES - 1):
            assert np.abs(decoded[i].astype(int) - rendered[i].astype(int)).mean() < 6


def test_options_hold_the_answer_once_and_distractors_come_from_the_clip(built):
    _, _, rows = built
    for row in rows:
        run, _ = _rerun(row)
        options = row["options"]
        assert 3 <= len(options) <= 5 and len(set(options)) == len(options)
        assert options.count(options[row["answer"]]) == 1
        objects = {f"The {n}" for n in run.names}
        pairs = {f"The {a} and the {b}" for i, a in enumerate(run.names) for b in run.names[i + 1:]}
        if row["qtype"] == "first_collision":
            assert set(options) <= pairs
        elif row["qtype"] == "collision_count":
            assert [int(o) for o in options] == list(range(int(options[0]), int(options[0]) + len(options)))
        else:
            assert set(options) <= objects


def test_gold_position_is_balanced_per_option_count(built):
    _, info, rows = built
    cfg = SyntheticConfig(out=Path("unused"), synthetic=120, seed=SEED, options=(3, 5))
    plan = V.plan(cfg)
    for k in (3, 4, 5):
        slots = Counter(pos for _, _, kk, pos in plan if kk == k)
        assert set(slots) == set(range(k)) and max(slots.values()) - min(slots.values()) <= 1
    assert Counter(q for _, q, _, _ in plan) == {q: 24 for q in V.QTYPES}
    # build.json's counts are the manifest's
    counted = {str(k): [0] * k for k in (3, 4, 5)}
    for row in rows:
        counted[str(len(row["options"]))][row["answer"]] += 1
    assert info["counts"]["answer_position"] == counted
    assert info["counts"]["qtype"] == dict(Counter(r["qtype"] for r in rows))
    assert info["counts"]["options"] == {"3": 5, "4": 5, "5": 5}


# --- determinism, extension, resume -----------------------------------------

def test_same_seed_gives_identical_bytes_and_a_larger_n_extends(built, tmp_path):
    out, _, _ = built
    small = tmp_path / "small"
    V.build_synthetic(SyntheticConfig(out=small, synthetic=3, seed=SEED, frames=FRAMES, progress=False))
    assert (small / "manifest.jsonl").read_bytes().splitlines() == (out / "manifest.jsonl").read_bytes().splitlines()[:3]
    for i in range(3):
        assert (small / f"videos/vmcq-{i:05d}.mp4").read_bytes() == (out / f"videos/vmcq-{i:05d}.mp4").read_bytes()
    other = tmp_path / "other"
    V.build_synthetic(SyntheticConfig(out=other, synthetic=1, seed=SEED + 1, frames=FRAMES, progress=False))
    assert (other / "manifest.jsonl").read_text().splitlines()[0] != (out / "manifest.jsonl").read_text().splitlines()[0]


def test_resume_keeps_finished_videos_and_refuses_other_parameters(built, tmp_path):
    out, _, _ = built
    work = tmp_path / "resume"
    shutil.copytree(out, work)
    first_four = (work / "manifest.jsonl").read_bytes().splitlines(keepends=True)[:4]
    (work / "videos/vmcq-00001.mp4").unlink()
    (work / "videos/vmcq-00001.mp4.part").write_bytes(b"killed mid-write")
    kept = (work / "videos/vmcq-00000.mp4").stat()
    info = V.build_synthetic(SyntheticConfig(out=work, synthetic=4, seed=SEED, frames=FRAMES, progress=False))
    assert (info["counts"]["videos_written"], info["counts"]["videos_kept"]) == (1, 3)
    assert (work / "videos/vmcq-00000.mp4").stat().st_mtime_ns == kept.st_mtime_ns
    assert (work / "videos/vmcq-00001.mp4").read_bytes() == (out / "videos/vmcq-00001.mp4").read_bytes()
    assert (work / "manifest.jsonl").read_bytes() == b"".join(first_four)
    with pytest.raises(BuildError, match="other parameters"):
        V.build_synthetic(SyntheticConfig(out=work, synthetic=4, seed=SEED + 1, frames=FRAMES, progress=False))


# --- manifest loader --------------------------------------------------------

def test_manifest_round_trips_through_load_manifest(built):
    out, _, rows = built
    questions = load_manifest(out / "manifest.jsonl")
    assert [q.id for q in questions] == [r["id"] for r in rows]
    for q, r in zip(questions, rows):
        assert q.video == (out / r["video"]).resolve() and q.video.is_file()
        assert (q.question, list(q.options), q.answer, q.benchmark) == (r["question"], r["options"], r["answer"], "synthetic-physics")
        assert (q.duration, q.num_frames) == (FRAMES / 8, FRAMES)
        assert q.extra["qtype"] == r["qtype"] and q.extra["clip_seed"] == r["clip_seed"]
    assert questions[2].line == 3


GOOD = {"id": "q1", "video": "v.mp4", "question": "Which?", "options": ["a", "b", "c"], "answer": 1, "benchmark": "toy"}


@pytest.mark.parametrize("change, field, message", [
    ({"answer": 3}, "answer", "not an index into the 3 options"),
    ({"answer": True}, "answer", "integer"),
    ({"options": "a,b"}, "options", "list of at least two"),
    ({"options": ["a", "a"]}, "options", "more than once"),
    ({"question": ""}, "question", "non-empty string"),
    ({"video": "../outside.mp4"}, "video", "outside the manifest's folder"),
    ({"video": "/etc/hosts"}, "video", "outside the manifest's folder"),
    ({"duration": -3}, "duration", "seconds"),
    ({"num_frames": 2.5}, "num_frames", "integer"),
    ({"benchmark": None}, "benchmark", "non-empty string"),
    ({"start": 2.0}, "start", "needs both start and end"),
    ({"end": 2.0}, "end", "needs both start and end"),
    ({"start": 5, "end": 3.5}, "start", "must be before end"),
    ({"start": -1, "end": 3}, "start", "number >= 0"),
    ({"start": "0:10", "end": 30}, "start", "number >= 0"),
])
def test_bad_manifest_lines_name_file_line_and_field(tmp_path, change, field, message):
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps(GOOD | {"id": "q0"}) + "\n" + json.dumps(GOOD | change) + "\n")
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    assert f"{path}:2: {field}: " in str(e.value) and message in str(e.value)


def test_segment_bounds_are_fields_not_extra(tmp_path):
    path = tmp_path / "manifest.jsonl"
    path.write_text(json.dumps(GOOD | {"start": 3, "end": 12.5, "task": "action_sequence"}) + "\n"
                    + json.dumps(GOOD | {"id": "q2"}) + "\n")
    bounded, whole = load_manifest(path)
    assert (bounded.start, bounded.end, bounded.extra) == (3.0, 12.5, {"task": "action_sequence"})
    assert (whole.start, whole.end) == (None, None)


def test_manifest_structure_errors(tmp_path):
    path = tmp_path / "manifest.jsonl"
    lines = [json.dumps(GOOD), "{not json", json.dumps({k: v for k, v in GOOD.items() if k != "video"} | {"id": "q2"}),
             json.dumps(GOOD), "", json.dumps([1, 2])]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    text = str(e.value)
    assert "4 problem(s)" in text
    # the shared reader's wording (was "(line): not valid JSON" and "(line): expected a JSON object")
    assert f"{path}:2: not JSON (" in text
    assert f"{path}:3: video: missing" in text
    assert f"{path}:4: id: 'q1' is already used on line 1" in text
    assert f"{path}:6: not a JSON object (an array)" in text
    with pytest.raises(ManifestError, match="no such manifest"):
        load_manifest(tmp_path / "absent.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ManifestError, match="no questions"):
        load_manifest(tmp_path / "empty.jsonl")


def test_symlink_leaving_the_folder_is_refused(tmp_path):
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(b"x")
    root = tmp_path / "set"
    root.mkdir()
    (root / "link.mp4").symlink_to(outside)
    (root / "manifest.jsonl").write_text(json.dumps(GOOD | {"video": "link.mp4"}) + "\n")
    with pytest.raises(ManifestError, match=r"manifest.jsonl:1: video: .*outside"):
        load_manifest(root / "manifest.jsonl")


# --- command line -----------------------------------------------------------

def test_cli_builds_and_checks_flags(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["build", "video-mcq", "--help"])
    assert "judgetrain build video-mcq --out data/vmcq --synthetic" in capsys.readouterr().out
    out = tmp_path / "cli"
    assert cli.main(["build", "video-mcq", "--out", str(out), "--synthetic", "2", "--frames", "32", "--options", "3",
                     "--no-progress"]) == 0
    assert f"Manifest written to {out / 'manifest.jsonl'}" in capsys.readouterr().out
    assert [len(r["options"]) for r in _rows(out / "manifest.jsonl")] == [3, 3]
    assert json.loads((out / "build.json").read_text())["complete"] is True
    assert cli.main(["build", "video-mcq", "--out", str(out), "--synthetic", "2", "--videos", str(tmp_path)]) == 2
    assert "--videos only apply with --from" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--from", "egoschema", "--annotations", "q.json", "--videos", "v", "--frames", "10"], "--frames only apply with --synthetic"),
    (["--synthetic", "2", "--options", "2-6"], "--options 2-6: need 2 <= min <= max <= 5"),
    (["--synthetic", "2", "--qtypes", "first_collision,teleport"], "unknown ['teleport']"),
    (["--from", "mvbench", "--videos", "v"], "needs --annotations FILE and --videos DIR"),
    (["--from", "mvbench", "--annotations", "a.json", "--videos", "v", "--answers", "x.json"], "EgoSchema only"),
    (["--synthetic", "2", "--from", "mvbench"], "--synthetic and --from: give one of them, not both"),
    ([], "give --synthetic N (synthetic physics questions) or --from egoschema|mvbench|videomme"),
    (["--synthetic", "2", "--sample", "3", "--probe", "--strict"], "--sample, --probe, --strict only apply with --from"),
])
def test_conflicting_or_bad_flags_are_refused(tmp_path, argv, message):
    (tmp_path / "v").mkdir()
    (tmp_path / "a.json").write_text("[]")
    argv = [str(tmp_path / a) if a in ("v", "a.json") else a for a in argv]
    (cfg,) = config.parse(V.make_parser(), ["--out", str(tmp_path), *argv])
    with pytest.raises(BuildError) as e:
        V.main(cfg)
    assert message in str(e.value)


def test_every_problem_is_listed_at_once(tmp_path):
    (cfg,) = config.parse(V.make_parser(), ["--out", str(tmp_path), "--synthetic", "0", "--options", "2-6", "--min-gap", "0",
                                            "--size", "161x120", "--qtypes", "fastest", "teleport", "--videos", str(tmp_path)])
    with pytest.raises(BuildError) as e:
        V.main(cfg)
    for message in ("--videos only apply with --from", "--synthetic 0: need at least one question",
                    "--options 2-6: need 2 <= min", "--min-gap 0.0: must be > 0", "--size 161x120: width and height must be even",
                    "--qtypes: unknown ['teleport']"):
        assert message in str(e.value)
    with pytest.raises(BuildError, match="--options '3-x': write MIN-MAX or N"):
        config.parse(V.make_parser(), ["--out", str(tmp_path), "--synthetic", "2", "--options", "3-x"])
    with pytest.raises(BuildError, match="--size '160': write WIDTHxHEIGHT"):
        V.SyntheticConfig(out=tmp_path, synthetic=2, size="160")


def test_cli_takes_a_yaml_config_and_flags_win(tmp_path, capsys, clip):
    """`--config vmcq.yaml` sets the fields, flags override them, an unknown key fails with a did-you-mean."""
    yaml_file = tmp_path / "vmcq.yaml"
    yaml_file.write_text("synthetic: 2\nframes: 32\nseed: 9\noptions: 4\nsize: [128, 96]\nmin_gap: 0.25\n"
                         "qtypes: [most_bounces, leftmost_end]\n")
    out = tmp_path / "set"
    assert cli.main(["build", "video-mcq", "--config", str(yaml_file), "--out", str(out), "--seed", "4",
                     "--qtypes", "fastest,collision_count", "--no-progress"]) == 0
    info = json.loads((out / "build.json").read_text())
    rows = _rows(out / "manifest.jsonl")
    # from the YAML file
    assert info["params"] | {"seed": None, "qtypes": None} == {"seed": None, "frames": 32, "fps": 8, "options": [4, 4],
                                                              "size": [128, 96], "min_gap_s": 0.25, "qtypes": None,
                                                              "version": V.VERSION}
    assert info["args"]["synthetic"] == 2 and len(rows) == 2
    assert all(len(r["options"]) == 4 and r["num_frames"] == 32 for r in rows)
    with av.open(str(out / rows[0]["video"])) as container:
        stream = container.streams.video[0]
        assert (stream.codec_context.width, stream.codec_context.height) == (128, 96)
    # from the flags, over the YAML file
    assert info["seed"] == 4 and info["params"]["qtypes"] == ["fastest", "collision_count"] and info["args"]["progress"] is False
    assert [r["qtype"] for r in rows] == ["fastest", "collision_count"]
    assert all(r["clip_seed"][1] == 4 for r in rows)

    # a conversion: YAML `source` (the field --from sets), overridden by --from
    root = tmp_path / "videomme"
    (root / "data").mkdir(parents=True)
    shutil.copy(clip, root / "data/fFjv93ACGo8.mp4")
    many = [_videomme_rows()[0] | {"question_id": f"001-{i}", "question": f"Q{i}?"} for i in range(12)]
    (root / "ann.json").write_text(json.dumps(many))
    yaml_file.write_text(f"source: mvbench\nannotations: {root / 'ann.json'}\nvideos: {root / 'data'}\nsample: 5\nprobe: true\n")
    assert cli.main(["build", "video-mcq", "--config", str(yaml_file), "--from", "videomme", "--out", str(root),
                     "--sample", "3", "--no-progress"]) == 0
    info = json.loads((root / "build.json").read_text())
    assert info["source"] == "videomme" and info["args"]["sample"] == 3 and info["args"]["probe"] is True
    converted = _rows(root / "manifest.jsonl")
    assert [r["id"] for r in converted] == random.Random(42).sample([f"001-{i}" for i in range(12)], 3)
    assert all(r["num_frames"] == FRAMES for r in converted)  # probe: true, from the YAML file

    capsys.readouterr()
    yaml_file.write_text("synthetic: 2\nframe: 32\n")
    assert cli.main(["build", "video-mcq", "--config", str(yaml_file), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown key 'frame'; did you mean 'frames'?" in err
    assert not (tmp_path / "bad").exists()


# --- converters -------------------------------------------------------------

@pytest.fixture()
def clip(built):
    """A real H.264 clip of FRAMES frames at 8 fps to stand in for a benchmark video."""
    return built[0] / "videos" / "vmcq-00000.mp4"


def test_egoschema_converter(tmp_path, clip):
    root = tmp_path / "egoschema"
    (root / "videos").mkdir(parents=True)
    questions = [
        {"q_uid": f"uid-{i}", "google_drive_id": f"g{i}", "question": f"What is c in video {i}?",
         **{f"option {j}": f"answer {i}.{j}" for j in range(5)}}
        for i in range(3)
    ]
    (root / "questions.json").write_text(json.dumps(questions))
    (root / "subset_answers.json").write_text(json.dumps({"uid-0": 3, "uid-1": 0}))
    shutil.copy(clip, root / "videos" / "uid-0.mp4")
    shutil.copy(clip, root / "videos" / "uid-2.mp4")
    info = V.convert("egoschema", root / "questions.json", root / "videos", root, progress=False)
    rows = _rows(root / "manifest.jsonl")
    assert rows == [{"id": "uid-0", "video": "videos/uid-0.mp4", "question": "What is c in video 0?",
                     "options": [f"answer 0.{j}" for j in range(5)], "answer": 3, "benchmark": "egoschema",
                     "google_drive_id": "g0"}]
    # uid-1 has an answer but no video; uid-2 a video but no public answer: both reported, none dropped silently
    skipped = {s["id"]: s for s in info["skipped"]}
    assert set(skipped) == {"uid-1", "uid-2"}
    assert skipped["uid-1"]["path"] == f"{root / 'questions.json'}[1]"
    assert skipped["uid-1"]["reason"] == f"video not found: {root / 'videos' / 'uid-1.mp4'}"
    assert "no answer in subset_answers.json" in skipped["uid-2"]["reason"]
    assert info["counts"]["skipped_by_reason"] == {"missing video": 1, "no public answer": 1}
    assert info["counts"]["skipped"] == 2 and info["counts"]["questions"] == 1
    assert load_manifest(root / "manifest.jsonl")[0].answer == 3
    with pytest.raises(BuildError, match=r"questions.json\[1\] \(id uid-1\): video not found"):
        V.convert("egoschema", root / "questions.json", root / "videos", root, strict=True, progress=False)


def test_mvbench_converter(tmp_path, clip):
    root = tmp_path / "mvbench"
    (root / "json").mkdir(parents=True)
    (root / "video/star/Charades_v1_480").mkdir(parents=True)
    shutil.copy(clip, root / "video/star/Charades_v1_480/A1B2C.mp4")
    (root / "json/action_sequence.json").write_text(json.dumps([
        {"video": "A1B2C.mp4", "question": "What happened after the person took the box?",
         "candidates": ["Put down the cup.", "Took the towel.", "Opened the door."], "answer": "Took the towel.",
         "start": 3.5, "end": 12.0},
        {"video": "ZZZ.mp4", "question": "Q?", "candidates": ["x", "y"], "answer": "y", "start": 0, "end": 1},
        {"video": "A1B2C.mp4", "question": "Bad key?", "candidates": ["x", "y"], "answer": "z"},
    ]))
    (root / "json/episodic_reasoning.json").write_text(json.dumps([
        {"video": "s01e01_seg01", "question": "Why?", "candidates": ["a", "b", "c", "d"], "answer": "b"}]))
    info = V.convert("mvbench", root / "json", root / "video", root, progress=False, probe=True)
    rows = _rows(root / "manifest.jsonl")
    assert rows == [{"id": "action_sequence-0000", "video": "video/star/Charades_v1_480/A1B2C.mp4",
                     "question": "What happened after the person took the box?",
                     "options": ["Put down the cup.", "Took the towel.", "Opened the door."], "answer": 1,
                     "benchmark": "mvbench", "duration": FRAMES / 8, "num_frames": FRAMES,
                     "task": "action_sequence", "start": 3.5, "end": 12.0}]
    reasons = {s["id"]: s["reason"] for s in info["skipped"]}
    assert "video not found" in reasons["action_sequence-0001"]
    assert "'z' is not exactly one of the candidates" in reasons["action_sequence-0002"]
    assert "frame folders" in reasons["episodic_reasoning-0000"]
    assert info["counts"]["annotated"] == 4
    assert info["counts"]["skipped_by_reason"] == {"missing video": 1, "bad annotation": 1, "frame folders": 1}


def _videomme_rows():
    return [
        {"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
         "url": "https://www.youtube.com/watch?v=fFjv93ACGo8", "videoID": "fFjv93ACGo8", "question_id": "001-1",
         "task_type": "Counting Problem", "question": "How many planets are shown?",
         "options": ["A. 5.", "B. 6.", "C. 7.", "D. 8."], "answer": "C"},
        {"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
         "url": "https://www.youtube.com/watch?v=fFjv93ACGo8", "videoID": "fFjv93ACGo8", "question_id": "001-2",
         "task_type": "Object Recognition", "question": "Which planet appears first?",
         "options": ["A. Mars.", "B. Venus.", "C. Earth.", "D. Jupiter."], "answer": "A"},
        {"video_id": "002", "duration": "long", "domain": "Film & Television", "sub_category": "Animation",
         "url": "https://www.youtube.com/watch?v=missing0000", "videoID": "missing0000", "question_id": "002-1",
         "task_type": "Action Reasoning", "question": "Why?", "options": ["A. a", "B. b", "C. c", "D. d"], "answer": "B"},
        {"video_id": "001", "duration": "short", "domain": "Knowledge", "sub_category": "Astronomy",
         "url": "https://www.youtube.com/watch?v=fFjv93ACGo8", "videoID": "fFjv93ACGo8", "question_id": "001-3",
         "task_type": "Counting Problem", "question": "Bad?", "options": ["A. 1", "B. 2", "C. 3", "D. 4"], "answer": "E"},
    ]


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_videomme_converter(tmp_path, clip, fmt):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "videomme"
    (root / "data").mkdir(parents=True)
    (root / "videomme").mkdir()
    shutil.copy(clip, root / "data/fFjv93ACGo8.mp4")
    if fmt == "parquet":
        annotations = root / "videomme/test-00000-of-00001.parquet"
        pq.write_table(pa.Table.from_pylist(_videomme_rows()), annotations)
    else:
        annotations = root / "videomme/test.json"
        annotations.write_text(json.dumps(_videomme_rows()))
    info = V.convert("videomme", annotations, root / "data", root, progress=False)
    rows = _rows(root / "manifest.jsonl")
    assert [r["id"] for r in rows] == ["001-1", "001-2"]
    assert rows[0]["options"] == ["5.", "6.", "7.", "8."] and rows[0]["answer"] == 2
    assert rows[1]["answer"] == 0 and rows[1]["video"] == "data/fFjv93ACGo8.mp4"
    # Video-MME's duration is a category, not seconds: kept aside, never coerced into `duration`
    assert "duration" not in rows[0] and rows[0]["duration_category"] == "short"
    assert rows[0]["task_type"] == "Counting Problem" and rows[0]["video_id"] == "001"
    reasons = {s["id"]: s["reason"] for s in info["skipped"]}
    assert "video not found" in reasons["002-1"]
    assert "answer 'E' is not one of the option letters ABCD" in reasons["001-3"]


def test_converter_sample_and_input_checks(tmp_path, clip):
    root = tmp_path / "videomme"
    (root / "data").mkdir(parents=True)
    shutil.copy(clip, root / "data/fFjv93ACGo8.mp4")
    many = [_videomme_rows()[0] | {"question_id": f"001-{i}", "question": f"Q{i}?"} for i in range(12)]
    (root / "ann.json").write_text(json.dumps(many))
    V.convert("videomme", root / "ann.json", root / "data", root, sample=5, seed=42, progress=False)
    expected = random.Random(42).sample([f"001-{i}" for i in range(12)], 5)
    assert [r["id"] for r in _rows(root / "manifest.jsonl")] == expected
    with pytest.raises(BuildError, match="not inside --out"):
        V.convert("videomme", root / "ann.json", root / "data", tmp_path / "elsewhere", progress=False)
    (root / "wrong.json").write_text(json.dumps([{"video": "x.mp4", "question": "q"}]))
    with pytest.raises(BuildError, match=r"wrong.json\[0\]: field\(s\) 'videoID', 'question_id'.* missing"):
        V.convert("videomme", root / "wrong.json", root / "data", root, progress=False)
    with pytest.raises(BuildError, match="--sample 50: 12 usable"):
        V.convert("videomme", root / "ann.json", root / "data", root, sample=50, progress=False)


# --- bad bytes, odd line breaks and field types: located, never fatal ---------

def _jsonl(path, lines):
    """Write JSON Lines from objects (U+2028 / U+0085 kept raw, not escaped) and raw byte lines."""
    path.write_bytes(b"".join((x if isinstance(x, bytes) else json.dumps(x, ensure_ascii=False).encode()) + b"\n" for x in lines))
    return path


def test_manifest_bytes_and_field_types_are_located(tmp_path, capsys):
    """load_manifest, and PhaseFusion through the command line, on a manifest with a bad byte, a
    non-object row and a mistyped question among good lines (integer id, U+2028 / U+0085 in texts)."""
    path = _jsonl(tmp_path / "manifest.jsonl", [
        GOOD | {"id": 7, "question": "Which\u2028one?"},                                # 1 integer id
        b'{"id": "q2", "video": "v.mp4", "question": "caf\xe9?"}',                     # 2 not UTF-8
        ["a", "list"],                                                                 # 3 not an object
        GOOD | {"id": "q4", "question": 5},                                            # 4 question an int
        GOOD | {"id": "q5", "options": ["a\u0085b", "c", "d"]},                        # 5
    ])
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    text = str(e.value)
    assert "3 problem(s)" in text
    assert f"{path}:2: not valid UTF-8 at byte " in text
    assert f"{path}:3: not a JSON object (an array)" in text
    assert f"{path}:4: question: a number, not a string; " in text
    assert f"{path}:1:" not in text and f"{path}:5:" not in text
    # PhaseFusion reads the manifest before any model: the same problems, file:line each, and no traceback
    assert cli.main(["eval", "phasefusion", "--manifest", str(path), "--model", "no-such-model", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: not valid UTF-8" in err and f"{path}:4: question: a number" in err and "Traceback" not in err
    good = _jsonl(tmp_path / "good.jsonl", [json.loads(path.read_bytes().splitlines()[0]), GOOD | {"id": "q5", "question": "a\u0085b"}])
    first, second = load_manifest(good)
    assert (first.id, first.question, first.line) == ("7", "Which\u2028one?", 1)
    assert (second.question, second.line) == ("a\u0085b", 2)


def _egoschema_question(uid, k):
    return {"q_uid": uid, "question": f"What\u2028happens in {k}?", **{f"option {j}": f"answer {k}.{j}" for j in range(5)}}


def test_egoschema_json_lines_bad_lines_are_located_and_skipped(tmp_path, clip, capsys):
    root = tmp_path / "egoschema"
    (root / "videos").mkdir(parents=True)
    for name in ("uid-0", "7", "uid-9"):
        shutil.copy(clip, root / "videos" / f"{name}.mp4")
    questions = _jsonl(root / "questions.jsonl", [
        _egoschema_question("uid-0", 0),                                               # 1
        b'{"q_uid": "uid-1", "question": "\xff"}',                                     # 2 not UTF-8
        "just a string",                                                               # 3 not an object
        _egoschema_question(7, 7),                                                     # 4 integer q_uid
        {k: v for k, v in _egoschema_question("uid-5", 5).items() if k != "option 4"},  # 5 a field missing
        _egoschema_question("uid-9", 9),                                               # 6
    ])
    (root / "subset_answers.json").write_text(json.dumps({"uid-0": 3, "7": 1, "uid-5": 0, "uid-9": 0}))
    argv = ["build", "video-mcq", "--from", "egoschema", "--annotations", str(questions), "--videos", str(root / "videos"),
            "--out", str(root), "--no-progress"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr()
    info = json.loads((root / "build.json").read_text())
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [2, 3, 5] and {s["path"] for s in info["skipped"]} == {str(questions)}
    assert skipped[2]["reason"].startswith("not valid UTF-8 at byte ") and skipped[2]["id"] is None
    assert skipped[3]["reason"].startswith("not a JSON object (a string)")
    assert skipped[5]["reason"].startswith("field(s) 'option 4' missing") and skipped[5]["id"] == "uid-5"
    assert info["counts"]["skipped_by_reason"] == {"bad line": 2, "bad annotation": 1}
    assert f"{questions}:2: not valid UTF-8" in printed.out and "(id None)" not in printed.out
    assert "Traceback" not in printed.err
    rows = _rows(root / "manifest.jsonl")
    assert [(r["id"], r["answer"]) for r in rows] == [("uid-0", 3), ("7", 1), ("uid-9", 0)]
    assert rows[0]["question"] == "What\u2028happens in 0?" and load_manifest(root / "manifest.jsonl")[1].id == "7"
    assert cli.main([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{questions}:2: not valid UTF-8 at byte " in err and "--strict" in err and "Traceback" not in err


def test_plain_json_annotations_errors_name_the_file(tmp_path, clip, capsys):
    root = tmp_path / "egoschema"
    (root / "videos").mkdir(parents=True)
    (root / "subset_answers.json").write_text("{}")
    argv = ["build", "video-mcq", "--from", "egoschema", "--annotations", str(root / "questions.json"),
            "--videos", str(root / "videos"), "--out", str(root), "--no-progress"]
    (root / "questions.json").write_bytes(b'[{"q_uid": "caf\xe9"}]')
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{root / 'questions.json'}: not valid UTF-8 at byte 15; save the file as UTF-8" in err and "Traceback" not in err
    (root / "questions.json").write_text('[{"q_uid": "a"},\n {"q_uid": }]')
    assert cli.main(argv) == 2
    assert f"{root / 'questions.json'}:2: not valid JSON (Expecting value" in capsys.readouterr().err
    (root / "questions.json").write_text(json.dumps([_egoschema_question("a", 0), ["not", "an", "object"]]))
    (root / "subset_answers.json").write_bytes(b'{"a": 1, "\xff": 2}')
    assert cli.main(argv) == 2
    assert f"{root / 'subset_answers.json'}: not valid UTF-8 at byte 10" in capsys.readouterr().err
    # a non-object item of a JSON list is one skipped item, not the end of the conversion
    (root / "subset_answers.json").write_text(json.dumps({"a": 1}))
    shutil.copy(clip, root / "videos" / "a.mp4")
    assert cli.main(argv) == 0
    info = json.loads((root / "build.json").read_text())
    assert [(s["path"], s["line"], s["reason"][:40]) for s in info["skipped"]] == [
        (f"{root / 'questions.json'}[1]", None, "not an object (an array); each item is a")]
    assert [r["id"] for r in _rows(root / "manifest.jsonl")] == ["a"]


def test_mvbench_json_lines_bad_lines_are_located_and_skipped(tmp_path, clip):
    root = tmp_path / "mvbench"
    (root / "json").mkdir(parents=True)
    (root / "video/star/Charades_v1_480").mkdir(parents=True)
    shutil.copy(clip, root / "video/star/Charades_v1_480/A1B2C.mp4")
    good = {"video": "A1B2C.mp4", "question": "What\u2028next?", "candidates": ["Sit\u0085down.", "Stand."], "answer": "Stand."}
    task = _jsonl(root / "json/action_sequence.jsonl", [
        good, b'{"video": "\xc3(", "question": "q"}', [good], good | {"question": "Again?"}, {"video": "A1B2C.mp4"}])
    info = V.convert("mvbench", root / "json", root / "video", root, progress=False)
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [2, 3, 5] and {s["path"] for s in info["skipped"]} == {str(task)}
    assert [skipped[n]["id"] for n in (2, 3, 5)] == ["action_sequence-0001", "action_sequence-0002", "action_sequence-0004"]
    assert skipped[2]["reason"].startswith("not valid UTF-8 at byte ")
    assert skipped[3]["reason"].startswith("not a JSON object (an array)")
    assert skipped[5]["reason"].startswith("field(s) 'question', 'candidates', 'answer' missing")
    rows = _rows(root / "manifest.jsonl")
    assert [r["id"] for r in rows] == ["action_sequence-0000", "action_sequence-0003"]
    assert rows[0]["options"] == ["Sit\u0085down.", "Stand."] and rows[0]["answer"] == 1
    assert info["sources"] == [{"path": str(task), "bytes": task.stat().st_size}]
    with pytest.raises(BuildError, match=re.escape(f"{task}:2 (id action_sequence-0001): not valid UTF-8")):
        V.convert("mvbench", root / "json", root / "video", root, strict=True, progress=False)


def test_videomme_json_lines_bad_lines_are_located_and_skipped(tmp_path, clip, capsys):
    root = tmp_path / "videomme"
    (root / "data").mkdir(parents=True)
    shutil.copy(clip, root / "data/fFjv93ACGo8.mp4")
    first, second = _videomme_rows()[:2]
    annotations = _jsonl(root / "test.jsonl", [
        first | {"question": "How\u2028many?"},
        b'{"videoID": "fFjv93ACGo8", "question_id": "001-x", "question": "\x80"}',
        17,
        second | {"question_id": 12, "question": "Which\u0085first?"},
        first | {"question_id": "001-5", "options": "A. 5."},
    ])
    argv = ["build", "video-mcq", "--from", "videomme", "--annotations", str(annotations), "--videos", str(root / "data"),
            "--out", str(root), "--no-progress"]
    assert cli.main(argv) == 0
    info = json.loads((root / "build.json").read_text())
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [2, 3, 5]
    assert skipped[2]["reason"].startswith("not valid UTF-8 at byte ")
    assert skipped[3]["reason"].startswith("not a JSON object (a number)")
    assert skipped[5]["reason"].startswith("options must be a list") and skipped[5]["id"] == "001-5"
    rows = _rows(root / "manifest.jsonl")
    assert [(r["id"], r["question"]) for r in rows] == [("001-1", "How\u2028many?"), ("12", "Which\u0085first?")]
    capsys.readouterr()
    assert cli.main([*argv, "--strict"]) == 2
    err = capsys.readouterr().err
    assert f"{annotations}:2: not valid UTF-8" in err and "Traceback" not in err
