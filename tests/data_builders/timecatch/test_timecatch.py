"""TimeCatch builder: paper 000 §3 protocol details, determinism, bad input, resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from itertools import combinations
from math import comb
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.stats import chisquare

from judgetrain import records
from judgetrain.data_builders import timecatch
from judgetrain.data_builders.core import BuildError
from judgetrain.perceptual import LpipsDistance, filter_near_duplicates
from judgetrain.video import interval_indices

# --------------------------------------------------------------------------- pure parts


def test_interval_indices_sample_every_interval():
    assert interval_indices(100, 8, 1.5) == [0, 12, 24, 36, 48, 60, 72, 84, 96]
    assert interval_indices(60, 25, 1.0) == [0, 25, 50]
    assert interval_indices(46, 10, 1.5) == [0, 15, 30, 45]
    assert interval_indices(45, 10, 1.5) == [0, 15, 30]  # t = 4.5 s is frame 45, past the end
    assert interval_indices(31, 29.97, 1.0) == [0, 30]
    with pytest.raises(ValueError):
        interval_indices(10, 0, 1.5)


class MatrixDistance:
    """A distance given by a hand-made matrix; records every pair asked for."""

    def __init__(self, d):
        self.d = np.asarray(d, dtype=float)
        self.calls = []

    def __call__(self, a, b):
        self.calls.append(len(a))
        return np.array([self.d[int(x[0, 0, 0]), int(y[0, 0, 0])] for x, y in zip(a, b)])


def frames_tagged(n):
    return [np.full((4, 4, 3), i, dtype=np.uint8) for i in range(n)]


def test_filter_is_the_sequential_walk_against_the_last_kept_frame():
    # frame 1 is a near-duplicate of 0 (dropped); frame 2 is then compared with
    # frame 0, not 1: d(0,2)=0.30 keeps it although d(1,2)=0.01; frame 3 is a
    # near-duplicate of 2; frame 4 is compared with 2 (0.049 < 0.05: dropped);
    # frame 5 is compared with 2 again (0.06: kept).
    d = np.full((6, 6), 0.5)
    d[0, 1], d[1, 2], d[0, 2] = 0.01, 0.01, 0.30
    d[2, 3], d[3, 4], d[2, 4] = 0.02, 0.50, 0.049
    d[4, 5], d[2, 5] = 0.50, 0.06
    dist = MatrixDistance(d)
    kept, dists = filter_near_duplicates(frames_tagged(6), dist, 0.05)
    assert kept == [0, 2, 5]
    assert dists == pytest.approx([0.30, 0.06])
    assert dist.calls[0] == 5  # all consecutive pairs in one batch


def test_filter_keeps_everything_when_all_steps_are_large():
    dist = MatrixDistance(np.full((5, 5), 0.2))
    assert filter_near_duplicates(frames_tagged(5), dist, 0.05) == ([0, 1, 2, 3, 4], [0.2] * 4)
    assert dist.calls == [4]


def test_filter_with_real_lpips_drops_exactly_the_near_duplicates():
    rng = np.random.default_rng(0)
    a, b, c = (rng.integers(0, 256, (64, 64, 3), dtype=np.uint8) for _ in range(3))
    b_nudged = b.copy()
    b_nudged[0, 0] ^= 1  # one pixel's lowest bit: perceptually identical
    seq = [a, a.copy(), b, b_nudged, c]
    dist = LpipsDistance(pretrained_backbone=False, device="cpu")
    kept, dists = filter_near_duplicates(seq, dist, 0.05)
    assert kept == [0, 2, 4]
    # the distances reported are the ones LPIPS gives pair by pair
    assert dists == pytest.approx([float(dist([a], [b])[0]), float(dist([b], [c])[0])], abs=1e-5)
    assert all(d >= 0.05 for d in dists)
    assert float(dist([b], [b_nudged])[0]) < 0.05 and float(dist([a], [a])[0]) == 0.0


def test_swap_and_noise_positions_are_uniform():
    n, draws = 6, 6000
    swaps, noises = Counter(), Counter()
    for k in range(draws):
        i_swap, i_noise = timecatch.draw_anomalies(1, "clevrer", f"seq-{k}", n)
        swaps[i_swap] += 1
        noises[i_noise] += 1
    assert sorted(swaps) == [1, 2, 3, 4, 5]  # i ~ U{1, …, n−1}
    assert sorted(noises) == [1, 2, 3, 4, 5, 6]  # i ~ U{1, …, n}
    assert chisquare([swaps[i] for i in range(1, n)]).pvalue > 1e-3
    assert chisquare([noises[i] for i in range(1, n + 1)]).pvalue > 1e-3
    assert timecatch.draw_anomalies(1, "clevrer", "seq-0", n) == timecatch.draw_anomalies(1, "clevrer", "seq-0", n)


def test_noise_frame_is_clipped_gaussian_at_the_frame_size():
    x = timecatch.noise_frame(0, "s", "q", (120, 160, 3))
    assert x.shape == (120, 160, 3) and x.dtype == np.uint8
    assert abs(x.mean() - 127.5) < 1.0
    assert 58 < x.std() < 64  # N(127.5, 64²) loses a little spread to clipping at 0 and 255
    assert np.array_equal(x, timecatch.noise_frame(0, "s", "q", (120, 160, 3)))


def test_temporal_choices():
    assert timecatch.temporal_choices(4, adjacent_only=False) == ["1 and 2", "1 and 3", "1 and 4", "2 and 3", "2 and 4", "3 and 4"]
    assert timecatch.temporal_choices(4, adjacent_only=True) == ["1 and 2", "2 and 3", "3 and 4"]
    assert len(timecatch.temporal_choices(8, adjacent_only=False)) == comb(8, 2)


def test_splits_are_exact_per_source_and_respect_the_manifest():
    seqs = [timecatch.SourceSequence(f"a{i}", "clevrer", "") for i in range(10)]
    seqs += [timecatch.SourceSequence(f"b{i}", "craft", "") for i in range(5)]
    seqs += [timecatch.SourceSequence("fixed", "craft", "", split="test")]
    split = timecatch.assign_splits(seqs, {"train": 0.8, "validation": 0.2}, seed=1)
    per = Counter((s.source, split[s.id]) for s in seqs)
    assert per == {("clevrer", "train"): 8, ("clevrer", "validation"): 2, ("craft", "train"): 4,
                   ("craft", "validation"): 1, ("craft", "test"): 1}
    assert split["fixed"] == "test"
    assert timecatch.assign_splits(seqs, {"train": 0.8, "validation": 0.2}, seed=1) == split
    assert timecatch.assign_splits(seqs, {"train": 0.8, "validation": 0.2}, seed=2) != split


# --------------------------------------------------------------------------- a whole build


def _rows(out):
    ds = records.load(out, verify=True)
    return {split: list(d) for split, d in ds.items()}


def test_build_protocol(timecatch_build):
    out, info, cfg = timecatch_build
    rows = _rows(out)
    by_seq = defaultdict(list)
    seq_split = {}
    for split, rs in rows.items():
        for r in rs:
            meta = json.loads(r["meta"])
            sid = meta["sequence_id"]
            assert seq_split.setdefault(sid, split) == split, "all records of a sequence share a split"
            by_seq[sid].append((r, meta))
            assert 4 <= r["n_frames"] <= 16 and len(r["images"]) == r["n_frames"]
            assert meta["subset"] == ("main" if r["n_frames"] <= 8 else "long")
    assert {m["subset"] for recs in by_seq.values() for _, m in recs} == {"main", "long"}

    for sid, recs in by_seq.items():
        gold = next(r for r, m in recs if r["task"] == "frame_detect" and r["perturbation"] == "none")
        gold_px = [np.asarray(im) for im in gold["images"]]
        n = gold["n_frames"]
        for r, meta in recs:
            px = [np.asarray(im) for im in r["images"]]
            p = r["position"]
            if r["perturbation"] == "swap":
                expected = list(gold_px)
                expected[p], expected[p + 1] = gold_px[p + 1], gold_px[p]
                assert all(np.array_equal(x, y) for x, y in zip(px, expected))
                assert meta["swapped_frames"] == [p + 1, p + 2]
                assert meta["lpips_swapped"] == meta["lpips_consecutive"][p]
            elif r["perturbation"] == "noise":
                assert [i for i in range(n) if not np.array_equal(px[i], gold_px[i])] == [p]
            else:
                assert p == -1 and all(np.array_equal(x, y) for x, y in zip(px, gold_px))
            if r["task"] == "temporal_localize":
                assert r["label"] == f"{p + 1} and {p + 2}"
                assert r["choices"] == [f"{a} and {b}" for a, b in combinations(range(1, n + 1), 2)]
            if r["task"] == "frame_localize":
                assert r["label"] == str(p + 1) and r["choices"] == [str(k) for k in range(1, n + 1)]
            if r["task"].endswith("detect"):
                anomaly = r["perturbation"] != "none"
                yes_is_anomaly = r["layout"] != "B"  # prompt B asks whether the order is correct
                assert meta["yes_means_anomaly"] == yes_is_anomaly
                assert r["label"] == ("yes" if anomaly == yes_is_anomaly else "no")
            text = r["prompt"][0]["content"][-1]["text"]
            assert text.startswith(f"Scene description: {meta['description']}\n\n") and meta["description"]
            assert r["completion"][0]["content"][0]["text"] == r["label"]
        tasks = Counter((r["task"], r["layout"], r["perturbation"]) for r, _ in recs)
        assert tasks == {("temporal_detect", "A", "none"): 1, ("temporal_detect", "A", "swap"): 1,
                         ("temporal_detect", "B", "none"): 1, ("temporal_detect", "B", "swap"): 1,
                         ("temporal_localize", "A", "swap"): 1, ("frame_detect", "A", "none"): 1,
                         ("frame_detect", "A", "noise"): 1, ("frame_localize", "A", "noise"): 1}

    # detection exactly balanced per source, split and prompt
    for split, rs in rows.items():
        for task in ("temporal_detect", "frame_detect"):
            labels = Counter((r["source"], r["layout"], r["label"]) for r in rs if r["task"] == task)
            for (source, layout, _), _count in labels.items():
                assert labels[(source, layout, "yes")] == labels[(source, layout, "no")]

    # build.json says what is there
    assert info["counts"]["records"]["train"]["total"] == len(rows["train"])
    kept = sum(c.get("kept", 0) for c in info["counts"]["sequences"].values())
    assert kept == len(by_seq) and sum(info["counts"]["length_histogram"].values()) == kept
    n_train = sum(1 for s in seq_split.values() if s == "train")
    assert n_train == round(0.8 * kept)
    assert info["protocol"]["lpips"]["threshold"] == 0.05
    assert not (out.parent / (out.name + ".work")).exists()


def test_same_seed_same_hashes_other_seed_differs(tmp_path, timecatch_build, synthetic_manifest):
    out, info, cfg = timecatch_build
    again = timecatch.build(timecatch.TimeCatchConfig(**{**cfg.__dict__, "out": tmp_path / "again"}))
    assert again["splits"] == info["splits"]
    other = timecatch.build(timecatch.TimeCatchConfig(**{**cfg.__dict__, "out": tmp_path / "other", "seed": 8,
                                                         "descriptions": False, "adjacent_choices": True,
                                                         "frame_labels": True}))
    assert other["splits"] != info["splits"]
    for r in records.load(tmp_path / "other")["train"]:
        content = r["prompt"][0]["content"]
        assert "Scene description" not in content[-1]["text"]
        # --frame-labels: "Frame k:" right before the k-th image, then the instruction
        expected = [item for k in range(1, r["n_frames"] + 1) for item in (("text", f"Frame {k}:"), ("image", None))]
        assert [(c["type"], c["text"]) for c in content[:-1]] == expected
        assert json.loads(r["meta"])["frame_labels"] is True
        if r["task"] == "temporal_localize":
            assert r["choices"] == timecatch.temporal_choices(r["n_frames"], adjacent_only=True)


# --------------------------------------------------------------------------- bad input


def _bad_manifest(tmp_path: Path, synthetic_manifest: Path) -> Path:
    root = tmp_path / "data"
    (root / "v").mkdir(parents=True)
    good = [json.loads(line) for line in synthetic_manifest.read_text().splitlines()][:4]
    lines = []
    for row in good:
        shutil.copy(synthetic_manifest.parent / row["video"], root / "v" / Path(row["video"]).name)
        lines.append(json.dumps({"id": row["id"], "video": f"v/{Path(row['video']).name}", "source": "clevrer", "description": row["description"]}))
    (root / "v" / "corrupt.mp4").write_bytes(os.urandom(4096))
    (root / "v" / "empty.mp4").write_bytes(b"")
    (tmp_path / "outside.mp4").write_bytes(b"x")
    lines += [
        json.dumps({"id": "corrupt", "video": "v/corrupt.mp4", "source": "clevrer"}),  # line 5
        json.dumps({"id": "empty", "video": "v/empty.mp4", "source": "clevrer"}),  # line 6
        '{"id": "broken", "video": ',  # line 7
        json.dumps({"id": "nosource", "video": "v/empty.mp4"}),  # line 8
        json.dumps({"id": good[0]["id"], "video": "v/corrupt.mp4", "source": "clevrer"}),  # line 9: duplicate
        json.dumps({"id": "escape", "video": "../outside.mp4", "source": "clevrer"}),  # line 10
        json.dumps({"id": "missing", "video": "v/missing.mp4", "source": "clevrer"}),  # line 11
    ]
    manifest = root / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def test_bad_input_is_reported_with_path_and_line_and_skipped(tmp_path, synthetic_manifest, capsys):
    manifest = _bad_manifest(tmp_path, synthetic_manifest)
    cfg = timecatch.TimeCatchConfig(out=tmp_path / "out", videos=manifest, lpips_random_backbone=True, progress=False,
                                    tasks=("temporal_detect",))
    info = timecatch.build(cfg)
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [5, 6, 7, 8, 9, 10, 11]
    # every entry names the manifest and its line; the reason names the field and the video
    assert all(s["path"] == str(manifest) for s in info["skipped"])
    assert skipped[5]["reason"].startswith("video: ") and "corrupt.mp4" in skipped[5]["reason"] and "cannot open" in skipped[5]["reason"]
    assert "empty.mp4" in skipped[6]["reason"]
    assert skipped[7]["reason"].startswith("not JSON (")
    assert skipped[8]["reason"].startswith("source: missing;")
    assert skipped[9]["reason"].startswith("id: ") and "also on line 1" in skipped[9]["reason"]
    assert "outside the manifest's folder" in skipped[10]["reason"]
    assert "no such video file" in skipped[11]["reason"]
    err = capsys.readouterr().err
    assert f"{manifest}:7: not JSON (" in err and f"{manifest}:5: video: " in err
    kept_ids = {json.loads(r["meta"])["sequence_id"] for split in records.load(cfg.out).values() for r in split}
    assert kept_ids <= {json.loads(line)["id"] for line in synthetic_manifest.read_text().splitlines()[:4]}

    strict = timecatch.TimeCatchConfig(**{**cfg.__dict__, "out": tmp_path / "strict", "strict": True})
    with pytest.raises(BuildError, match="7 bad input"):
        timecatch.build(strict)
    assert not (tmp_path / "strict").exists()


def test_frame_folder_manifest_with_an_unreadable_image(tmp_path):
    root = tmp_path / "frames"
    rng = np.random.default_rng(0)
    rows = []
    for s in range(3):
        (root / f"s{s}").mkdir(parents=True)
        paths = []
        for k in range(5):
            Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(root / f"s{s}" / f"{k}.png")
            paths.append(f"s{s}/{k}.png")
        rows.append({"id": f"s{s}", "frames": paths, "source": "drivelm", "description": "The ego vehicle drives on."})
    (root / "s2" / "3.png").write_bytes(b"not a png")
    (root / "manifest.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = timecatch.TimeCatchConfig(out=tmp_path / "out", frames=root / "manifest.jsonl", lpips_random_backbone=True,
                                    progress=False, splits={"train": 1.0})
    info = timecatch.build(cfg)
    assert [(s["id"], s["line"]) for s in info["skipped"]] == [("s2", 3)]
    assert "3.png: unreadable image" in info["skipped"][0]["reason"]
    ds = records.load(cfg.out)
    assert {json.loads(r["meta"])["sequence_id"] for r in ds["train"]} == {"s0", "s1"}
    assert {r["n_frames"] for r in ds["train"]} == {5}


def test_options_are_checked_together():
    cfg = timecatch.TimeCatchConfig(out=Path("x"), tasks=("temporal_detect", "nope"), prompts=("Z",), splits={"train": 0.5})
    with pytest.raises(BuildError) as exc:
        cfg.check()
    text = str(exc.value)
    assert "--tasks" in text and "--prompts" in text and "--splits" in text


# --------------------------------------------------------------------------- resume after SIGKILL


def test_killed_build_resumes_with_identical_hashes(tmp_path, timecatch_build, synthetic_manifest):
    _, info, cfg = timecatch_build
    out = tmp_path / "ds"
    cmd = [sys.executable, "-m", "judgetrain", "build", "timecatch", "--videos", str(synthetic_manifest), "--out", str(out),
           "--seed", str(cfg.seed), "--lpips-random-backbone", "--prompts", "A,B", "--keep-work", "--no-progress"]
    work = tmp_path / "ds.work" / "sequences"
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if work.is_dir() and len([p for p in work.iterdir() if (p / "seq.json").exists()]) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the build finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    with pytest.raises(records.IncompleteDatasetError):
        records.load(out)
    done_before = {p.name: (p / "seq.json").stat().st_mtime_ns for p in work.iterdir() if (p / "seq.json").exists()}
    assert len(done_before) >= 3

    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    resumed = records.read_build_info(out)
    assert resumed["splits"] == info["splits"]
    for name, mtime in done_before.items():  # per-video work done before the kill was reused, not redone
        assert (work / name / "seq.json").stat().st_mtime_ns == mtime


def test_missing_lpips_weights_offline_say_where_to_put_them(tmp_path, synthetic_manifest):
    # An empty torch hub cache and a proxy that refuses every connection: the
    # download lpips attempts fails at once, as on an offline machine.
    env = {**os.environ, "TORCH_HOME": str(tmp_path / "torch"), "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-m", "judgetrain", "build", "timecatch", "--videos", str(synthetic_manifest),
                           "--out", str(tmp_path / "ds"), "--no-progress"], capture_output=True, text=True, env=env)
    assert done.returncode == 2
    expected = tmp_path / "torch" / "hub" / "checkpoints" / "alexnet-owt-7be5be79.pth"
    assert f"error: LPIPS needs the ImageNet weights of its 'alex' backbone at {expected}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "ds").exists()


def test_manifest_bytes_and_field_types_are_located_not_fatal(tmp_path, synthetic_manifest):
    root = tmp_path / "data"
    (root / "v").mkdir(parents=True)
    good = [json.loads(line) for line in synthetic_manifest.read_text().splitlines()][:4]
    for row in good:
        shutil.copy(synthetic_manifest.parent / row["video"], root / "v" / Path(row["video"]).name)
    lines = [json.dumps({"id": 100 + i, "video": f"v/{Path(r['video']).name}", "source": "clevrer",  # integer ids
                         "description": None if i == 0 else r["description"] + " \u2028 more"}, ensure_ascii=False).encode()
             for i, r in enumerate(good)]
    lines += [b'{"id": "bad-bytes", "video": "v/x.mp4", "source": "clevr\xe9"}', b'"a string"',
              json.dumps({"id": "typed", "video": "v/x.mp4", "source": 5}).encode()]
    manifest = root / "manifest.jsonl"
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    cfg = timecatch.TimeCatchConfig(out=tmp_path / "out", videos=manifest, lpips_random_backbone=True, progress=False,
                                    tasks=["temporal_detect"])
    info = timecatch.build(cfg)
    skipped = {s["line"]: s["reason"] for s in info["skipped"]}
    assert sorted(skipped) == [5, 6, 7]
    assert skipped[5].startswith("not valid UTF-8 at byte ")
    assert skipped[6].startswith("not a JSON object (a string)")
    assert skipped[7].startswith("source: a number, not a string;")
    kept = {json.loads(r["meta"])["sequence_id"] for split in records.load(cfg.out).values() for r in split}
    assert kept <= {"100", "101", "102", "103"} and "100" in {s["id"] for s in info["sources"][1:]}
