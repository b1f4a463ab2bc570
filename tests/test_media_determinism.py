"""Same frames, same MP4 bytes (judgetrain.video.encode_mp4), whatever was encoded before
in the process, in which order, and in which process.

libx264's default macroblock-tree rate control read unwritten memory at some widths
(160 and 176 px among them), so the same clip encoded to different bytes depending on the
process's history. These tests encode clips at those widths interleaved with others, in
varied orders, and in a second interpreter, and compare sha256 digests.
"""

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

from judgetrain.data_builders import synthetic as S
from judgetrain.video import decode_frames, encode_mp4, rgb_to_yuv420p

# 160x120 and 176x120 are the sizes that varied; 128x96 and 320x240 sit in between as
# other "history" for the encoder.
SIZES = [(160, 120), (128, 96), (176, 120), (320, 240)]
CLIPS = 4
SECONDS = 4.0


def _frames(index, size):
    return list(S.simulate_clip(11, index, duration_s=SECONDS, fps=8, size=size)[1])


def _digests(tmp, order):
    out = {}
    for n, (index, size) in enumerate(order):
        path = encode_mp4(tmp / f"{n}.mp4", _frames(index, size), fps=8)
        out[(index, size)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


_CHILD = """
import hashlib, json, sys, tempfile
from pathlib import Path
from judgetrain.data_builders import synthetic as S
from judgetrain.video import encode_mp4
tmp = Path(tempfile.mkdtemp())
out = {}
for index, w, h in json.loads(sys.argv[1]):
    frames = list(S.simulate_clip(11, index, duration_s=%r, fps=8, size=(w, h))[1])
    out[f"{index}:{w}x{h}"] = hashlib.sha256(encode_mp4(tmp / "v.mp4", frames, fps=8).read_bytes()).hexdigest()
print(json.dumps(out))
""" % SECONDS


def test_same_frames_give_same_bytes_in_any_order_size_mix_and_process(tmp_path):
    jobs = [(i, s) for s in SIZES for i in range(CLIPS)]
    forward = _digests(tmp_path, jobs)
    backward = _digests(tmp_path, jobs[::-1])
    # Interleaved: each clip follows clips of other sizes.
    interleaved = _digests(tmp_path, [(i, s) for i in range(CLIPS) for s in SIZES[::-1]])
    repeated = _digests(tmp_path, [(i, (160, 120)) for i in range(CLIPS)] * 2)
    assert forward == backward == interleaved
    assert all(forward[k] == v for k, v in repeated.items())
    assert len(set(forward.values())) == len(jobs)  # different clips, different files

    child_jobs = [(i, w, h) for i in reversed(range(CLIPS)) for w, h in [(160, 120), (176, 120)]]
    child = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(child_jobs)], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "777", "PATH": ""})
    theirs = json.loads(child.stdout)
    assert theirs == {f"{i}:{w}x{h}": forward[(i, (w, h))] for i, w, h in child_jobs}


def test_encoded_video_decodes_to_its_frames(tmp_path):
    frames = _frames(0, (160, 120))
    path = encode_mp4(tmp_path / "v.mp4", frames, fps=8)
    decoded = decode_frames(path, range(len(frames)))
    assert len(decoded) == len(frames) == int(SECONDS * 8)
    err = np.abs(np.stack(decoded).astype(int) - np.stack(frames))
    assert err.mean() < 4.0  # lossy H.264 at CRF 20 plus 4:2:0 chroma
    assert not list(tmp_path.glob("*.part"))


def test_rgb_to_yuv420p_is_bt601_limited_range():
    rgb = np.zeros((2, 4, 3), np.uint8)
    rgb[:, :2] = (255, 255, 255)  # a white 2x2 block, then a red one
    rgb[:, 2:] = (255, 0, 0)
    yuv = rgb_to_yuv420p(rgb)
    assert yuv.shape == (3, 4)
    # Y: white 235, red ((66*255 + 128) >> 8) + 16 = 82; U, V: white 128/128, red 90/240.
    assert yuv[:2].tolist() == [[235, 235, 82, 82]] * 2
    u, v = yuv[2, :2], yuv[2, 2:]
    assert u.tolist() == [128, 90] and v.tolist() == [128, 240]
    with pytest.raises(ValueError, match="even"):
        rgb_to_yuv420p(np.zeros((3, 4, 3), np.uint8))


# --------------------------------------------------------------------------- LPIPS: the same values on any thread count
#
# LPIPS in float32 gave the synthetic frames build (8 clips, seed 7) 0.090764 on one thread and
# 0.090763 on two for clip frames-00006, so the train split's content hash depended on the CPU.


def _three_clips(tmp_path):
    """Synthetic frames (seed 7): frames-00006 is the clip whose float32 distance moved with the
    thread count; frames-00000 loses a frame to the filter and is then too short (a drop
    decision); frames-00001 keeps all five."""
    from judgetrain.data_builders.synthetic import write_frame_folders

    manifest = write_frame_folders(tmp_path / "frames", 8, 7, progress=False)
    small = tmp_path / "frames" / "three.jsonl"
    small.write_text("\n".join(line for line in manifest.read_text().splitlines()
                               if json.loads(line)["id"] in ("frames-00000", "frames-00001", "frames-00006")))
    return small


def _same_builds(results):
    assert sorted(results[0]["lpips"]) == ["frames-00001", "frames-00006"]
    assert results[0]["lpips"]["frames-00006"][-1] == 0.090763  # float32 gave 0.090764 on one thread
    assert [f["id"] for f in results[0]["filtered"]] == ["frames-00000"]
    for r in results[1:]:
        assert r["splits"] == results[0]["splits"] and r["filtered"] == results[0]["filtered"]
        assert r["lpips"] == results[0]["lpips"]  # every stored distance, to the last bit


def _build_result(out, frames):
    import datasets

    from judgetrain.data_builders.timecatch import TimeCatchConfig, build

    info = build(TimeCatchConfig(out=out, frames=frames, seed=7, lpips_random_backbone=True, device="cpu", progress=False))
    lpips = {}
    for name in info["splits"]:
        for meta in datasets.load_from_disk(out)[name]["meta"]:
            m = json.loads(meta)
            lpips[m["sequence_id"]] = m["lpips_consecutive"]
    return {"splits": {k: v["content_hash"] for k, v in info["splits"].items()}, "lpips": lpips, "filtered": info["filtered"]}


def test_timecatch_build_is_the_same_at_1_2_and_4_torch_threads(tmp_path):
    import torch

    frames = _three_clips(tmp_path)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 4):
            torch.set_num_threads(threads)
            results.append(_build_result(tmp_path / f"out{threads}", frames))
    finally:
        torch.set_num_threads(before)
    _same_builds(results)


_TC_CHILD = """
import json, sys
import torch
torch.set_num_threads(int(sys.argv[1]))
sys.path.insert(0, sys.argv[4])
from test_media_determinism import _build_result
print(json.dumps({"threads": torch.get_num_threads(), **_build_result(sys.argv[2], sys.argv[3])}))
"""


@pytest.mark.slow  # three fresh interpreters, each importing torch and datasets (~30 s on 2 busy cores)
def test_timecatch_build_is_the_same_in_processes_of_1_2_and_4_threads(tmp_path):
    import os
    from pathlib import Path

    frames = _three_clips(tmp_path)
    results = []
    for t in (1, 2, 4):
        done = subprocess.run([sys.executable, "-c", _TC_CHILD, str(t), str(tmp_path / f"out{t}"), str(frames), str(Path(__file__).parent)],
                              capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(t), "MKL_NUM_THREADS": str(t)})
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["threads"] for r in results] == [1, 2, 4]
    _same_builds(results)


class _Listed:
    """A distance that answers from a list, pair by pair in call order (a stand-in for LPIPS)."""

    def __init__(self, values):
        self.values = list(values)

    def __call__(self, a, b):
        out, self.values = self.values[: len(a)], self.values[len(a):]
        return np.array(out)


def test_filter_decides_on_the_stored_six_place_value():
    from judgetrain.perceptual import LPIPS_DECIMALS, filter_near_duplicates, quantize

    assert LPIPS_DECIMALS == 6
    assert quantize(0.0499996) == 0.05 and quantize(0.0499994) == 0.049999 and quantize(np.float64(0.1234565001)) == 0.123457
    frames = [np.full((4, 4, 3), i, np.uint8) for i in range(4)]
    # consecutive distances: 0.0499996 rounds to 0.05 and is kept at threshold 0.05, stored as 0.05;
    # 0.0499994 rounds to 0.049999 and is dropped, so frame 3 is compared with frame 1: 0.0700004 → 0.07.
    kept, dists = filter_near_duplicates(frames, _Listed([0.0499996, 0.0499994, 0.3, 0.0700004]), 0.05)
    assert kept == [0, 1, 3]
    assert dists == [0.05, 0.07]
    assert all(type(d) is float for d in dists)


def test_lpips_runs_in_float64():
    import torch

    from judgetrain.perceptual import LpipsDistance

    dist = LpipsDistance(pretrained_backbone=False, device="cpu", seed=7)
    assert {p.dtype for p in dist.model.parameters()} == {torch.float64}
    assert {b.dtype for b in dist.model.buffers() if b.is_floating_point()} == {torch.float64}
    frames = list(S.simulate_clip(7, 0, duration_s=1.0, fps=2, size=(64, 48))[1])[:2]
    x = dist.to_tensor(frames)
    assert x.dtype == torch.float64 and x.min() >= -1 and x.max() <= 1
    d = dist(frames[:1], frames[1:])
    assert d.dtype == np.float64 and d[0] > 0
    assert dist(frames, frames).tolist() == [0.0, 0.0]


def test_lpips_refuses_a_device_without_float64():
    from judgetrain.errors import UserError
    from judgetrain.perceptual import LpipsDeviceError, LpipsDistance

    with pytest.raises(LpipsDeviceError, match=r"--device mps: .*no float64; use --device cpu") as e:
        LpipsDistance(pretrained_backbone=False, device="mps")
    assert isinstance(e.value, UserError)
