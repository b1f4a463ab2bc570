"""Frame samplers of paper 001 (Fig. 2 conventions, the phase grid of Eq. 1) on hand-worked
(T, b, s, S, δ) cases, the polyphase identity, and one decoding pass per video."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from judgetrain import video as V

# --------------------------------------------------------------------------- the four deployed conventions


def test_left_endpoint_and_midpoint_hand_worked():
    # T = 10, b = 4: i·T/b = 0, 2.5, 5, 7.5 -> floor
    assert V.left_endpoint_indices(10, 4) == [0, 2, 5, 7]
    # (i + 1/2)·2.5 = 1.25, 3.75, 6.25, 8.75
    assert V.midpoint_indices(10, 4) == [1, 3, 6, 8]
    # T = 7, b = 3: 0, 2.33, 4.67 / 1.17, 3.5, 5.83
    assert V.left_endpoint_indices(7, 3) == [0, 2, 4]
    assert V.midpoint_indices(7, 3) == [1, 3, 5]
    # fewer frames than the budget: repeats, never an index past the end
    assert V.left_endpoint_indices(3, 6) == [0, 0, 1, 1, 2, 2]
    assert V.midpoint_indices(3, 6) == [0, 0, 1, 1, 2, 2]  # 0.25, 0.75, 1.25, ...
    assert V.left_endpoint_indices(1, 1) == V.midpoint_indices(1, 1) == [0]


def test_endpoint_inclusive_hand_worked_and_against_numpy():
    assert V.endpoint_inclusive_indices(10, 4) == [0, 3, 6, 9]       # i·9/3
    assert V.endpoint_inclusive_indices(8, 3) == [0, 4, 7]           # 0, 3.5 -> 4 (even), 7
    assert V.endpoint_inclusive_indices(6, 3) == [0, 2, 5]           # 0, 2.5 -> 2 (even), 5
    assert V.endpoint_inclusive_indices(100, 8) == [0, 14, 28, 42, 57, 71, 85, 99]  # i·99/7: 14.14, 28.29, 42.43, 56.57, ...
    assert V.endpoint_inclusive_indices(50, 1) == [0]
    # the deployed form np.linspace(0, T-1, b).round() (numpy rounds halves to even too)
    for t in range(1, 60):
        for b in range(2, 12):
            assert V.endpoint_inclusive_indices(t, b) == np.rint(np.linspace(0, t - 1, b)).astype(int).tolist()


def test_fps_decimation_then_linspace():
    # 10 s at 8 fps: 1-fps frames 0, 8, …, 72 (10 of them); linspace(0, 9, 4) = 0, 3, 6, 9
    assert V.fps_linspace_indices(80, 8, 4) == [0, 24, 48, 72]
    # 29.97 fps, 100 frames: 1-fps frames round(k·29.97) = 0, 30, 60 (59.94), 90 (89.91);
    # linspace(0, 3, 3) = 0, 1.5, 3 -> slots 0, 2, 3
    assert V.fps_linspace_indices(100, 29.97, 3) == [0, 60, 90]
    # 2.5 s at 8 fps: 1-fps frames 0, 8, 16; a budget of 5 repeats some (0, .5, 1, 1.5, 2 -> 0, 0, 1, 2, 2)
    assert V.fps_linspace_indices(20, 8, 5) == [0, 0, 8, 16, 16]
    # another decimation rate: 2 fps -> every 4th frame, 20 of them; linspace(0, 19, 4) = 0, 6.33, 12.67, 19
    assert V.fps_linspace_indices(80, 8, 4, target_fps=2) == [0, 24, 52, 76]
    assert V.sampler_indices("fps1", 80, 4, fps=8) == [0, 24, 48, 72]
    with pytest.raises(ValueError, match="frame rate"):
        V.sampler_indices("fps1", 80, 4)


def test_sampler_dispatch_and_errors():
    assert V.SAMPLERS == ("left", "midpoint", "inclusive", "fps1")
    assert V.sampler_indices("left", 10, 4) == [0, 2, 5, 7]
    assert V.sampler_indices("midpoint", 10, 4) == [1, 3, 6, 8]
    assert V.sampler_indices("inclusive", 10, 4) == [0, 3, 6, 9]
    with pytest.raises(ValueError, match="unknown sampler 'uniform'"):
        V.sampler_indices("uniform", 10, 4)
    for bad in ((0, 4), (10, 0), (10, -1), (2.5, 4)):
        with pytest.raises(ValueError, match="positive integer"):
            V.left_endpoint_indices(*bad)


# --------------------------------------------------------------------------- the phase grid (Eq. 1)


def test_phase_grid_hand_worked():
    # T = 12, b = 4, S = 3: step 3 frames, phases start 0, 1, 2 frames in
    assert [V.phase_indices(12, 4, s, 3) for s in range(3)] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    # T = 10, b = 4, S = 2, phase 1: (i + 1/2)·2.5 = the midpoint grid
    assert V.phase_indices(10, 4, 1, 2) == V.midpoint_indices(10, 4) == [1, 3, 6, 8]
    # T = 30, b = 10, S = 3, phase 1: (0 + 1/3)·3 = 1 exactly (a float computation gives 0.999… -> 0)
    assert V.phase_indices(30, 10, 1, 3)[:3] == [1, 4, 7]
    assert V.phase_indices(12, 4) == V.left_endpoint_indices(12, 4)


def test_origin_shift_and_clipping_at_the_last_frame():
    # δ = 1/6 of a step (T = 48, b = 8, step 6 frames): one frame later, the absolute shift T/48 of App. E
    assert V.phase_indices(48, 8, origin=Fraction(1, 6)) == [1, 7, 13, 19, 25, 31, 37, 43]
    assert V.phase_indices(48, 8, origin="1/6") == V.phase_indices(48, 8, origin=1 / 6)
    # T = 8, b = 4, S = 2, phase 1, δ = 3/4: (i + 1/2 + 3/4)·2 = 2.5, 4.5, 6.5, 8.5 -> 8 clipped to 7
    assert V.phase_indices(8, 4, 1, 2, origin="3/4") == [2, 4, 6, 7]
    # T = 10, b = 4, δ = 7/8: (3 + 7/8)·2.5 = 9.69 -> 9 (no clipping needed), the rest 2, 4, 7
    assert V.phase_indices(10, 4, origin="7/8") == [2, 4, 7, 9]
    assert max(V.phase_indices(5, 5, 4, 5, origin="0.99")) == 4
    with pytest.raises(ValueError, match="phase must be an integer in 0..2"):
        V.phase_indices(12, 4, 3, 3)
    with pytest.raises(ValueError, match="negative"):
        V.phase_indices(12, 4, origin=-0.1)
    with pytest.raises(ValueError, match="not a number"):
        V.phase_indices(12, 4, origin="a/b")


@pytest.mark.parametrize("phases", [2, 3, 5])
@pytest.mark.parametrize("origin", [Fraction(0), Fraction(1, 6), Fraction(1, 2)])
def test_phase_grids_interleave_into_the_dense_grid(phases, origin):
    """Eq. 1: sample i of phase s is sample i·S + s of the dense S·b grid (origin S·δ in its
    steps), so the S phase grids partition it; distinct whenever T >= S·b, but for the
    samples an origin shift pushes past the last frame."""
    for budget in (1, 2, 4, 8):
        for t in range(1, 160):
            dense = V.phase_indices(t, phases * budget, origin=phases * origin)
            grids = [V.phase_indices(t, budget, s, phases, origin) for s in range(phases)]
            for s, grid in enumerate(grids):
                assert grid == dense[s::phases], (t, budget, s)
            assert sorted(i for g in grids for i in g) == sorted(dense)
            if t >= phases * budget:
                repeats = len(dense) - len(set(dense))
                # only the ⌈S·δ⌉ dense samples shifted past the end are clipped onto T−1
                # (one for the half-step shift δ = 1/(2S))
                assert repeats <= math.ceil(phases * origin), (t, budget, repeats)


def test_parse_fraction():
    assert V.parse_fraction("1/6") == Fraction(1, 6)
    assert V.parse_fraction(0.1) == Fraction(1, 10)   # the shortest repr, not the binary double
    assert V.parse_fraction(" 0.5 ") == Fraction(1, 2) == V.parse_fraction(Fraction(2, 4))
    with pytest.raises(ValueError, match="origin '1/0' is not a number"):
        V.parse_fraction("1/0", "origin")


# --------------------------------------------------------------------------- decoding once per video


@pytest.fixture(scope="module")
def two_clips(tmp_path_factory):
    from judgetrain.data_builders.synthetic import write_physics_videos

    out = tmp_path_factory.mktemp("sampler-clips")
    write_physics_videos(out, 2, seed=5, duration_range_s=(3.0, 3.0), progress=False)
    return sorted((out / "videos").glob("*.mp4"))


def test_frame_cache_decodes_each_video_once(two_clips, tmp_path):
    path = two_clips[0]
    info = V.probe(path)
    assert info.n_frames == 24 and (info.width, info.height) == (160, 120)
    grids = [V.phase_indices(info.n_frames, 4, s, 3) for s in range(3)] + [V.phase_indices(info.n_frames, 12)]
    union = sorted({i for g in grids for i in g})
    cache = V.FrameCache(max_side=80)
    got = cache.get(path, union)
    assert cache.decodes == 1
    reference = V.decode_frames(path, union, max_side=80)
    assert all(np.array_equal(a, b) for a, b in zip(got, reference))
    assert got[0].shape == (60, 80, 3)  # longer side 160 -> 80
    for g in grids:  # every grid is served from the one decoding pass
        frames = cache.get(path, g)
        assert [f.shape for f in frames] == [(60, 80, 3)] * len(g)
        assert all(np.array_equal(f, reference[union.index(i)]) for f, i in zip(frames, g))
    assert cache.decodes == 1
    cache.get(path, [union[-1] + 1])  # a frame outside the union costs a new pass
    assert cache.decodes == 2

    # 360 px is the default bound (App. A); a 160x120 clip stays as it is
    assert V.FrameCache().get(path, [0])[0].shape == (120, 160, 3)


def test_frame_cache_on_disk_and_eviction(two_clips, tmp_path):
    a, b = two_clips
    first = V.FrameCache(max_side=None, cache_dir=tmp_path / "frames", max_videos=1)
    frames_a = first.get(a, [0, 5, 9])
    first.get(b, [1])
    first.get(a, [5])  # a was evicted from memory (max_videos=1) but is on disk
    assert first.decodes == 2
    again = V.FrameCache(max_side=None, cache_dir=tmp_path / "frames")
    assert all(np.array_equal(x, y) for x, y in zip(again.get(a, [9, 0, 5]), [frames_a[2], frames_a[0], frames_a[1]]))
    assert again.decodes == 0
    assert len(list((tmp_path / "frames").glob("*.npz"))) == 2
    with pytest.raises(V.VideoDecodeError, match="no such video file"):
        V.FrameCache().get(tmp_path / "missing.mp4", [0])


def test_segment_frames_hand_worked():
    from judgetrain.video import segment_frames

    # 96 frames at 8 fps (12 s): MVBench's bound rule, round(start·fps) .. min(T-1, round(end·fps))
    assert segment_frames(96, 8.0) == (0, 95)
    assert segment_frames(96, 8.0, 3.5, 12.0) == (28, 95)       # end past the last frame is clipped
    assert segment_frames(96, 8.0, 1.26, 2.0) == (10, 16)       # round(10.08), round(16.0)
    assert segment_frames(96, 8.0, 0.3125, 0.5625) == (2, 4)    # round(2.5) = 2, round(4.5) = 4 (half to even)
    assert segment_frames(30, 29.97, 0.0, 0.5) == (0, 15)       # round(14.985)
    with pytest.raises(ValueError, match="holds no frame of a 12 s video"):
        segment_frames(96, 8.0, 13.0, 20.0)
