"""One vision-tower pass per distinct image (judgetrain.scoring.vision): TimeCatch-like records
over the same frames are scored as with every item encoding its own images, while the vision
tower (a forward pre-hook on the model's own module) sees each distinct image once per call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judgetrain.models import load_model_and_processor
from judgetrain.scoring import PrefixGroup, score, score_shared_prefix
from judgetrain.scoring.vision import SharedImages, image_key

ATOL = 1e-5


@pytest.fixture(scope="module")
def loaded(tiny_root: Path) -> dict[str, tuple]:
    return {name: load_model_and_processor(tiny_root / name, dtype="float32")
            for name in ("qwen3-vl", "qwen2.5-vl", "llava-onevision")}


def _frame(seed: int, hw: tuple[int, int] = (64, 48)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (*hw, 3), dtype=np.uint8), "RGB")


def _sequence_records(seq: int, n: int = 4) -> list[tuple]:
    """What a TimeCatch build makes of one sequence: gold and swapped order (temporal detection),
    the swapped order again (localization), gold and one noise frame (frame detection). Every image
    is a fresh object (as decoded from a dataset row), equal in content to its frame."""
    frames = lambda order: [_frame(100 * seq + i) for i in order]  # noqa: E731
    swapped = [0, 2, 1, *range(3, n)]
    noisy = [_frame(100 * seq + i) for i in range(n - 1)] + [_frame(10_000 + seq)]

    def rec(images, text, choices):
        return [{"role": "user", "content": [{"type": "image"}] * len(images) + [{"type": "text", "text": text}]}], \
            images, choices

    return [rec(frames(range(n)), "Are these frames in order?", ["yes", "no"]),
            rec(frames(swapped), "Are these frames in order?", ["yes", "no"]),
            rec(frames(swapped), "Which two frames were swapped?", ["1 and 2", "2 and 3", "3 and 4"]),
            rec(frames(range(n)), "Is one frame noise?", ["yes", "no"]),
            rec(noisy, "Is one frame noise?", ["yes", "no"])]


class _VisionCalls:
    """Images per call of the vision tower, from a forward pre-hook on ``model.model.visual``."""

    def __init__(self, model):
        self.images: list[int] = []
        self.handle = model.model.visual.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module, args, kwargs):
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        self.images.append(int(grid.shape[0]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _max_diff(a, b) -> float:
    return max(abs(x - y) for p, q in zip(a, b, strict=True)
               for x, y in zip(p.raw_logprobs + p.logprobs, q.raw_logprobs + q.logprobs, strict=True))


def test_image_key_is_the_content():
    a = _frame(1)
    assert image_key(a) == image_key(_frame(1)) and image_key(a) != image_key(_frame(2))
    changed = np.asarray(a).copy()
    changed[0, 0, 0] ^= 1
    assert image_key(Image.fromarray(changed)) != image_key(a)
    assert image_key(a.convert("L")) != image_key(a) and image_key(a.resize((64, 48))) != image_key(a)
    assert image_key(np.asarray(a)) == image_key(np.asarray(_frame(1))) != image_key(a)


@pytest.mark.parametrize("name", ["qwen3-vl", "qwen2.5-vl"])
def test_each_distinct_frame_is_encoded_once_per_call(name, loaded):
    model, processor = loaded[name]
    items = _sequence_records(0) + _sequence_records(1)  # 10 records of 4 frames: 2 x (4 + 1 noise) distinct
    with _VisionCalls(model) as plain:
        want = score(model, processor, items, batch_size=3, progress=False, share_images=False)
    with _VisionCalls(model) as shared:
        got = score(model, processor, items, batch_size=3, progress=False)
    assert sum(plain.images) == 40 and sum(shared.images) == 10  # kept across the call's batches too
    assert _max_diff(want, got) < ATOL
    one = score(model, processor, items, batch_size=1, progress=False, share_images=False)
    assert _max_diff(one, got) < ATOL


def test_shared_prefix_groups_share_frames(loaded):
    """A judge's pair shown in both orders: two groups, the same two images."""
    model, processor = loaded["qwen3-vl"]
    x, y = _frame(7), _frame(8)
    prompts = lambda n: [[{"role": "user", "content": [{"type": "image"}] * n + [{"type": "text", "text": t}]}]  # noqa: E731
                         for t in ("Which came first? A or B", "Which came later? A or B")]
    groups = [PrefixGroup([x, y], prompts(2), ["A", "B"]), PrefixGroup([_frame(8), _frame(7)], prompts(2), ["A", "B"])]
    with _VisionCalls(model) as plain:
        want = score_shared_prefix(model, processor, groups, batch_size=2, progress=False, share_images=False)
    with _VisionCalls(model) as shared:
        got = score_shared_prefix(model, processor, groups, batch_size=2, progress=False)
    assert plain.images == [4] and shared.images == [2]
    for a, b in zip(want, got, strict=True):
        assert _max_diff(a, b) < ATOL


def test_the_kept_features_are_bounded(loaded, monkeypatch):
    """With room for one image's features only, later batches encode their frames again, and
    the scores do not change."""
    from judgetrain.scoring import vision

    model, processor = loaded["qwen3-vl"]
    items = _sequence_records(2)
    ref = score(model, processor, items, batch_size=2, progress=False, share_images=False)
    monkeypatch.setattr(vision, "DEFAULT_CAPACITY_BYTES", 1)
    with _VisionCalls(model) as bounded:
        got = score(model, processor, items, batch_size=2, progress=False)
    assert len(bounded.images) == 3 and 5 < sum(bounded.images) < 20  # each batch its own distinct frames
    assert _max_diff(ref, got) < ATOL
    shared = SharedImages(model)
    assert shared.capacity == 1


def test_models_without_per_image_grids_take_the_plain_path(loaded):
    model, processor = loaded["llava-onevision"]
    items = _sequence_records(3)
    shared = SharedImages(model)
    inputs = processor(text=["<image> x"], images=[[_frame(1)]], return_tensors="pt")
    assert "pixel_values" in shared.inputs(inputs, [[_frame(1)]]) and shared.seen == 0
    got = score(model, processor, items, batch_size=5, progress=False)
    assert _max_diff(score(model, processor, items, batch_size=5, progress=False, share_images=False), got) < ATOL
