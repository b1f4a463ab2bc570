"""Length-sorted batches (judgetrain.scoring.lengths): the estimate orders items as the processor's
encoding of them does, the order is longest first, and sorting changes only the padding: every
score, shared-prefix score and generation equals the input-order run's, in input order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from judgetrain.models import load_model_and_processor
from judgetrain.scoring import PrefixGroup, generate, render_prompt, score, score_shared_prefix
from judgetrain.scoring.batching import Batcher, run_batched
from judgetrain.scoring.lengths import estimated_tokens, item_order, longest_first

ATOL = 1e-5
FAMILIES = ["qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "gemma-4"]


@pytest.fixture(scope="module")
def loaded(tiny_root: Path) -> dict[str, tuple]:
    return {name: load_model_and_processor(tiny_root / name, dtype="float32") for name in FAMILIES}


def _image(seed: int, hw: tuple[int, int] = (64, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (*hw, 3), dtype=np.uint8), "RGB")


def _prompt(n_images: int, text: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image"}] * n_images + [{"type": "text", "text": text}]}]


def _long_short(n: int) -> list[tuple]:
    """Alternating long (3 images) and short (no image) items, each kind of one length."""
    return [(_prompt(3, "Are these in order?"), [_image(10 * i + k) for k in range(3)], ["A", "B"]) if i % 2 == 0
            else (_prompt(0, "Are these in order?"), [], ["A", "B"]) for i in range(n)]


class _Padding:
    """Pad slots (attention-mask zeros) and input widths of every forward pass of ``model``,
    read by a forward pre-hook on the model itself."""

    def __init__(self, model):
        self.pads: list[int] = []
        self.widths: list[int] = []
        self.handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, _module, _args, kwargs):
        mask = kwargs["attention_mask"]
        self.pads.append(int(mask.numel() - mask.sum()))
        self.widths.append(int(kwargs["input_ids"].shape[1]))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _max_diff(a, b) -> float:
    assert [x.choices for x in a] == [y.choices for y in b]
    return max(abs(x - y) for p, q in zip(a, b, strict=True)
               for x, y in zip(p.raw_logprobs + p.logprobs, q.raw_logprobs + q.logprobs, strict=True))


@pytest.mark.parametrize("name", FAMILIES)
def test_the_estimate_orders_items_as_the_processor_encodes_them(name, loaded):
    """The estimate serves the order only: it ranks items as their encoded lengths do (Spearman
    ρ ≥ 0.95) and is within 5 % of each. The items mix prompts of one image and of several, of
    several sizes, which LLaVA-OneVision encodes differently (an image among several: its base
    patch alone), and longer texts."""
    from scipy.stats import spearmanr

    _, processor = loaded[name]
    cases = [[], [(64, 64)], [(48, 80), (64, 64), (120, 160)], [(300, 200)], [(64, 64)] * 5, [(32, 32)] * 8,
             [(224, 224)] * 2, [(500, 120)]]
    texts, images, real = [], [], []
    for k, sizes in enumerate(cases):
        imgs = [_image(k * 10 + j, hw) for j, hw in enumerate(sizes)]
        text = render_prompt(processor, _prompt(len(imgs), "Is this sequence in chronological order?" * (k + 1)))
        kwargs = {"text": [text], "return_tensors": "pt"}
        if imgs:
            kwargs["images"] = [imgs]
        real.append(processor(**kwargs)["input_ids"].shape[1])
        texts.append(text)
        images.append(imgs)
    est = estimated_tokens(processor, texts, images)
    assert all(abs(e - r) <= 0.05 * r for e, r in zip(est, real, strict=True)), (est, real)
    assert spearmanr(est, real).statistic >= 0.95, (est, real)


def test_longest_first_and_the_loop_put_results_back_in_input_order():
    assert longest_first([3, 5, 5, 1, 0, 5]) == [1, 2, 5, 0, 3, 4]  # ties keep input order
    seen = []

    def fn(idx, _batcher):
        seen.append(list(idx))
        return [f"r{i}" for i in idx]

    order = [4, 2, 0, 1, 3]
    assert run_batched(5, fn, Batcher(2, torch.device("cpu"), 5), False, "t", order) == [f"r{i}" for i in range(5)]
    assert seen == [[4, 2], [0, 1], [3]]
    with pytest.raises(ValueError, match="permutation"):
        run_batched(3, fn, Batcher(2, torch.device("cpu"), 3), False, "t", [0, 0, 1])


@pytest.mark.parametrize("name", ["qwen3-vl", "llava-onevision", "internvl"])
def test_sorted_batches_score_the_same_with_no_padding(name, loaded):
    """Long and short items alternate: input-order batches of 2 each pad a short item to a
    long one; sorted, the batches hold one length each and pad nothing."""
    model, processor = loaded[name]
    items = _long_short(8)
    with _Padding(model) as unsorted:
        plain = score(model, processor, items, batch_size=2, progress=False, sort_by_length=False)
    with _Padding(model) as ordered:
        got = score(model, processor, items, batch_size=2, progress=False)
    assert len(unsorted.pads) == len(ordered.pads) == 4  # one pass a batch: the choices are one token
    gap = unsorted.widths[0] - min(ordered.widths)
    assert gap > 0 and unsorted.pads == [gap] * 4
    assert ordered.pads == [0] * 4
    assert ordered.widths == sorted(ordered.widths, reverse=True) and ordered.widths[0] == unsorted.widths[0]
    assert _max_diff(plain, got) < ATOL
    one = score(model, processor, items, batch_size=1, progress=False)
    assert _max_diff(one, got) < ATOL
    assert item_order(processor, items, None) == [0, 2, 4, 6, 1, 3, 5, 7]


def test_sorted_shared_prefix_groups_score_the_same(loaded):
    model, processor = loaded["qwen3-vl"]
    letters = ["A", "B", "C"]
    groups = [PrefixGroup([_image(100 * g + k) for k in range(n)],
                          [_prompt(n, f"Which came first? Options {'ABC'[p:] + 'ABC'[:p]}") for p in range(3)], letters)
              for g, n in enumerate([1, 4, 2, 4, 1])]
    with _Padding(model) as unsorted:
        plain = score_shared_prefix(model, processor, groups, batch_size=2, progress=False, sort_by_length=False)
    with _Padding(model) as ordered:
        got = score_shared_prefix(model, processor, groups, batch_size=2, progress=False)
    prefix_pads = lambda p: sum(p.pads[::2])  # noqa: E731 - each batch: the prefix pass, then the rest pass
    assert prefix_pads(ordered) < prefix_pads(unsorted)
    assert ordered.widths[0] == max(unsorted.widths)  # the two 4-frame groups first
    for a, b in zip(plain, got, strict=True):
        assert _max_diff(a, b) < ATOL


def test_sorted_generation_is_the_input_order_generation(loaded):
    model, processor = loaded["qwen2.5-vl"]
    items = _long_short(6)
    args = dict(max_new_tokens=5, parser=lambda t: t, batch_size=2, progress=False)
    plain = generate(model, processor, items, sort_by_length=False, **args)
    got = generate(model, processor, items, **args)
    assert [g.text for g in got] == [g.text for g in plain]
    assert [g.num_tokens for g in got] == [g.num_tokens for g in plain]
