"""LPIPS from features computed once per frame (issue #27): the distances equal lpips' own
``LPIPS.forward``, the near-duplicate filter keeps exactly what the pair-by-pair walk keeps, and
the backbone sees each frame once. Random backbones (``pnet_rand``), nothing downloaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from judgetrain.perceptual import CPU_BATCH_PIXELS, LpipsDistance, filter_near_duplicates, quantize

H, W = 32, 48
THRESHOLD = 0.002  # random AlexNet, 32x48: a drift step (noise sd 6) is ~0.0007, a new scene ~0.1


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Frames this small gain nothing from a second thread, and its synchronisation stalls
    # badly (10x here) when another process holds a core.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def distance() -> LpipsDistance:
    return LpipsDistance("alex", pretrained_backbone=False, device="cpu", seed=3)


def random_frames(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(n)]


def scenes(n: int, seed: int) -> list[np.ndarray]:
    """Scenes of 1-6 frames, each a drifting copy of the one before (small noise), so that
    distances to the last kept frame grow until one is kept: drops, keeps after drops, and
    keeps decided against a frame several steps back."""
    rng = np.random.default_rng(seed)
    frames: list[np.ndarray] = []
    while len(frames) < n:
        cur = rng.integers(0, 256, (H, W, 3)).astype(float)
        for _ in range(int(rng.integers(1, 7))):
            frames.append(np.clip(cur, 0, 255).astype(np.uint8))
            cur = cur + rng.normal(0, 6, cur.shape)
    return frames[:n]


def reference_walk(frames, distance, threshold):
    """The rule as written in paper 000 §3.3, one pair per network call."""
    kept, dists = [0], []
    for j in range(1, len(frames)):
        d = quantize(distance([frames[kept[-1]]], [frames[j]])[0])
        if d >= threshold:
            kept.append(j)
            dists.append(d)
    return kept, dists


def lpips_forward(distance, a, b) -> np.ndarray:
    with torch.inference_mode():
        return distance.model(distance.to_tensor(a), distance.to_tensor(b)).flatten().numpy()


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_features_path_equals_lpips_forward(batch_size):
    distance = LpipsDistance("alex", pretrained_backbone=False, device="cpu", seed=3, batch_size=batch_size)
    a, b = random_frames(7, 1), random_frames(7, 2)
    fa, fb = distance.features(a), distance.features(b)
    assert len(fa) == distance.model.L and all(t.dtype == torch.float64 and len(t) == 7 for t in fa)
    want = lpips_forward(distance, a, b)
    assert np.abs(distance.distance_from_features(fa, fb) - want).max() <= 1e-12
    assert np.abs(distance(a, b) - want).max() <= 1e-12
    # one row against many broadcasts: a[0] against every frame of b
    one = [t[:1] for t in fa]
    assert np.abs(distance.distance_from_features(one, fb) - lpips_forward(distance, [a[0]] * 7, b)).max() <= 1e-12
    seq = a + b
    cons = distance.consecutive_distances(seq, chunk_size=batch_size)
    assert cons.shape == (13,) and np.abs(cons - lpips_forward(distance, seq[:-1], seq[1:])).max() <= 1e-12


@pytest.mark.parametrize("net", ["squeeze"])
def test_features_path_equals_lpips_forward_other_nets(net):
    distance = LpipsDistance(net, pretrained_backbone=False, device="cpu", seed=3, batch_size=4)
    a, b = random_frames(5, 3), random_frames(5, 4)
    got = distance.distance_from_features(distance.features(a), distance.features(b))
    assert np.abs(got - lpips_forward(distance, a, b)).max() <= 1e-12


def test_settings_not_mirrored_are_refused():
    distance = LpipsDistance("alex", pretrained_backbone=False, device="cpu")
    assert distance.supports_features
    distance.model.spatial = True
    assert not distance.supports_features
    with pytest.raises(ValueError, match="pair call"):
        distance.features(random_frames(1, 0))


CHUNKS = [1, 2, 3, 4, 5, 7, 32]


def test_filter_equals_the_pair_by_pair_walk_at_every_chunk_size(distance):
    frames = scenes(40, 5)
    want = reference_walk(frames, distance, THRESHOLD)
    kept = set(want[0])
    dropped = [j for j in range(len(frames)) if j not in kept]
    # the sequence exercises the rule: drops, and keeps decided against a frame further back
    assert 8 <= len(dropped) <= 32
    assert any(j - 1 not in kept for j in want[0][1:])
    after_drop = after_keep = 0
    for chunk in CHUNKS:
        assert filter_near_duplicates(frames, distance, THRESHOLD, chunk_size=chunk) == want, chunk
        starts = range(chunk, len(frames), chunk)
        after_drop += sum(s - 1 not in kept for s in starts)
        after_keep += sum(s - 1 in kept for s in starts)
    assert after_drop >= 10 and after_keep >= 10  # chunk boundaries right after a drop and after a keep
    assert filter_near_duplicates(frames, distance, THRESHOLD) == want  # default chunk: batch_size


def test_filter_edge_sequences(distance):
    assert filter_near_duplicates([], distance, THRESHOLD) == ([], [])
    one = random_frames(1, 6)
    assert filter_near_duplicates(one, distance, THRESHOLD) == ([0], [])
    same = one * 5  # all exact duplicates: only the first kept
    for chunk in (1, 2, 32):
        assert filter_near_duplicates(same, distance, THRESHOLD, chunk_size=chunk) == ([0], [])
    frames = random_frames(6, 7)  # all distinct: everything kept
    want = reference_walk(frames, distance, THRESHOLD)
    assert want[0] == list(range(6))
    for chunk in (1, 4, 32):
        assert filter_near_duplicates(frames, distance, THRESHOLD, chunk_size=chunk) == want


@pytest.mark.parametrize("chunk", [1, 6, 32])
def test_backbone_runs_once_per_frame(distance, chunk):
    frames = scenes(20, 8)
    rows: list[int] = []
    hook = distance.model.net.register_forward_hook(lambda module, inputs, output, rows=rows: rows.append(inputs[0].shape[0]))
    try:
        filter_near_duplicates(frames, distance, THRESHOLD, chunk_size=chunk)
        assert sum(rows) == len(frames)
        assert max(rows) <= min(chunk, distance.frames_per_batch(frames))  # streamed: never more than a chunk of features
        rows.clear()
        distance.consecutive_distances(frames, chunk_size=chunk)
        assert sum(rows) == len(frames)
    finally:
        hook.remove()


# --------------------------------------------------------------------------- batch size by frame pixels


def test_default_batch_follows_the_frame_pixels():
    distance = LpipsDistance("alex", pretrained_backbone=False, device="cpu")
    big, small = [np.zeros((448, 448, 3), np.uint8)], [np.zeros((64, 64, 3), np.uint8)]
    assert distance.batch_size is None and distance.batch_pixels == CPU_BATCH_PIXELS
    assert distance.frames_per_batch(big) == 1 and distance.frames_per_batch(small) == 32  # 2^17 pixels
    assert distance.frames_per_batch(small, per_item=2) == 16  # a pair: two frames through the backbone
    assert distance.frames_per_batch([]) == 1
    cuda = LpipsDistance("alex", pretrained_backbone=False, device="cpu", batch_pixels=2**22)
    assert cuda.frames_per_batch(big) == 20 and cuda.frames_per_batch(small) == 1024
    fixed = LpipsDistance("alex", pretrained_backbone=False, device="cpu", batch_size=32)
    assert fixed.frames_per_batch(big) == fixed.frames_per_batch(small) == 32  # an explicit batch wins
    for bad in ({"batch_size": 0}, {"batch_pixels": -1}):
        with pytest.raises(ValueError, match="at least 1"):
            LpipsDistance("alex", pretrained_backbone=False, device="cpu", **bad)


@pytest.mark.parametrize("side", [64, 448])
def test_distances_do_not_depend_on_the_batch(side):
    """Pair call, features path, consecutive distances and the filter: the same float64 values (to
    1e-12) whether frames go one at a time, a few, all at once, or by the pixel budget, and the
    default batches of 448² frames hold one frame while 64² frames go together."""
    rng = np.random.default_rng(side)
    n = 9 if side == 64 else 2
    frames = [rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(n)]
    settings = [{"batch_size": 1}, {"batch_size": 32}, {}]  # one frame a batch, all at once, by pixels
    if side == 64:
        settings += [{"batch_size": 2}, {"batch_pixels": 3 * side * side}]
    results, batches = [], []
    for kw in settings:
        distance = LpipsDistance("alex", pretrained_backbone=False, device="cpu", seed=3, **kw)
        rows: list[int] = []
        hook = distance.model.net.register_forward_hook(lambda module, inputs, output, rows=rows: rows.append(inputs[0].shape[0]))
        try:
            pairs = distance(frames[:-1], frames[1:])
            feats = distance.distance_from_features(distance.features(frames[:-1]), distance.features(frames[1:]))
            cons = distance.consecutive_distances(frames)
            kept = filter_near_duplicates(frames, distance, 0.0)
        finally:
            hook.remove()
        results.append((pairs, feats, cons, kept))
        batches.append(max(rows))
    want = results[0]
    for got in results[1:]:
        for g, w in zip(got[:3], want[:3], strict=True):
            assert g.shape == (n - 1,) and np.abs(g - w).max() <= 1e-12
        assert got[3] == want[3]
    assert np.abs(want[0] - want[1]).max() <= 1e-12  # pair call and features path agree too
    # the settings did batch differently (the hook sees the features path; lpips' forward calls net.forward)
    assert batches[:3] == [1, n, 1 if side == 448 else n]  # by pixels: 448² one frame a batch, 64² all of them
    assert batches[3:] == ([2, 3] if side == 64 else [])
