"""The scoring engine on tiny offline models (fp32): batching, the cached-prefix multi-token path
against full forward passes (M-RoPE included), renormalisation, prefill, generation and its
parsers, and loading base / base + adapter / merged checkpoints."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from judgetrain import records
from judgetrain.models import get_family, load_model_and_processor
from judgetrain.scoring import (
    FAMILY_PREFILL,
    ChoiceScores,
    Scorer,
    choice_letter,
    frame_pair,
    generate,
    integer_in_range,
    likert_1_5,
    one_of,
    ordering,
    parser_for_record,
    render_prompt,
    score,
    yes_no,
)

FAMILIES = ["qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "internvl3.5", "gemma-4"]
ATOL = 1e-5
THINK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def loaded(tiny_root: Path) -> dict[str, tuple]:
    return {name: load_model_and_processor(tiny_root / name, dtype="float32") for name in FAMILIES}


def _image(seed: int, size: tuple[int, int] = (64, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8), "RGB")


def _record(i: int, task: str, n_images: int, choices: list[str], text: str) -> dict:
    return records.make_record(
        id=f"r{i}", task=task, images=[_image(100 * i + k) for k in range(n_images)], instruction=text,
        answer=choices[0], choices=choices, label=choices[0], source="test", perturbation="none", position=-1,
        n_frames=max(n_images, 4), layout="A", meta={},
    )


PAIRS = ["1 and 2", "1 and 3", "2 and 3", "2 and 4", "3 and 4"]
NUMBERS = [str(i) for i in range(1, 13)]  # 1..9 one token, 10..12 two tokens


@pytest.fixture(scope="module")
def items() -> list[dict]:
    """Different image counts (0..3) and text lengths, so batches are padded; single-,
    multi- and mixed-length choice sets."""
    return [
        _record(0, "temporal_detect", 2, ["yes", "no"], "Are these frames in order? Answer yes or no."),
        _record(1, "temporal_localize", 3, PAIRS, "Which two frames were swapped? Answer with the two frame numbers."),
        _record(2, "frame_localize", 0, NUMBERS, "Which frame is out of place? Answer with the frame number. " * 3),
        _record(3, "frame_localize", 1, ["1", "2", "3", "4"], "Which frame?"),
        _record(4, "temporal_localize", 0, PAIRS[:3], "Two frames were swapped."),
        _record(5, "temporal_detect", 3, ["no", "yes"], "Is the sequence in chronological order? " * 2),
    ]


def _full_forward_logprobs(model, processor, item: dict, prefill: str | None = None) -> list[float]:
    """Reference: each choice scored from scratch, prompt + choice in one forward pass and
    positions computed by the model itself; the sum of the choice tokens' log-probs. The
    template's text is encoded as transformers' own ``apply_chat_template(tokenize=True)``
    encodes it: no special tokens added when the text already starts with BOS (Gemma)."""
    text = processor.apply_chat_template(item["prompt"], tokenize=False, add_generation_prompt=True) + (prefill or "")
    tok = processor.tokenizer
    n_prompt = len(tok(text, add_special_tokens=False)["input_ids"])
    out = []
    for choice in item["choices"]:
        n = len(tok(text + choice, add_special_tokens=False)["input_ids"]) - n_prompt
        kwargs = {"text": [text + choice], "return_tensors": "pt",
                  "add_special_tokens": not (tok.bos_token and text.startswith(tok.bos_token))}
        if item["images"]:
            kwargs["images"] = [item["images"]]
        inputs = processor(**kwargs)
        with torch.no_grad():
            logp = model(**inputs).logits[0].float().log_softmax(-1)
        ids = inputs["input_ids"][0]
        length = ids.shape[0]
        out.append(sum(float(logp[length - n - 1 + k, ids[length - n + k]]) for k in range(n)))
    return out


def _max_diff(a: list[ChoiceScores], b: list[ChoiceScores]) -> float:
    assert [x.choices for x in a] == [y.choices for y in b]
    return max(abs(x - y) for sa, sb in zip(a, b) for x, y in zip(sa.raw_logprobs + sa.logprobs, sb.raw_logprobs + sb.logprobs))


class _ForwardCounter:
    def __init__(self, model):
        self.calls = 0
        self.handle = model.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1


# --------------------------------------------------------------------------- constrained scoring


@pytest.mark.parametrize("name", FAMILIES)
def test_batched_equals_one_at_a_time(name, loaded, items):
    model, processor = loaded[name]
    batched = score(model, processor, items, batch_size=4, progress=False)
    single = score(model, processor, items, batch_size=1, progress=False)
    assert _max_diff(batched, single) < ATOL
    assert [s.choices for s in batched] == [it["choices"] for it in items]  # input order


@pytest.mark.parametrize("name", FAMILIES)
def test_cached_prefix_equals_full_forward(name, loaded, items):
    model, processor = loaded[name]
    multi = [it for it in items if any(len(c) > 1 for c in it["choices"])]
    got = score(model, processor, multi, batch_size=len(multi), progress=False)
    for it, s in zip(multi, got):
        np.testing.assert_allclose(s.raw_logprobs, _full_forward_logprobs(model, processor, it), atol=ATOL, rtol=0)
    assert {n for s in got for n in s.num_tokens} >= {1, 2, 4}  # "3", "12", "3 and 4"


@pytest.mark.parametrize("name", ["qwen3-vl", "llava-onevision"])
def test_single_token_fast_path(name, loaded, items):
    model, processor = loaded[name]
    single = [it for it in items if all(len(c) == 1 for c in it["choices"]) or it["choices"] == ["yes", "no"]]
    counter = _ForwardCounter(model)
    try:
        got = score(model, processor, single, batch_size=len(single), progress=False)
        assert counter.calls == 1  # one forward pass for the whole batch, no continuation pass
        counter.calls = 0
        score(model, processor, items[:2], batch_size=2, progress=False)
        assert counter.calls == 2  # multi-token choices: prompt pass + one pass over every continuation
    finally:
        counter.handle.remove()
    for it, s in zip(single, got):
        assert set(s.num_tokens) == {1}
        np.testing.assert_allclose(s.raw_logprobs, _full_forward_logprobs(model, processor, it), atol=ATOL, rtol=0)


def test_renormalised_probabilities_and_prediction(loaded, items):
    model, processor = loaded["qwen3-vl"]
    for s in score(model, processor, items, progress=False):
        assert math.isclose(sum(math.exp(x) for x in s.logprobs), 1.0, abs_tol=1e-9)
        assert math.isclose(sum(s.probs), 1.0, abs_tol=1e-9)
        best = max(range(len(s.choices)), key=lambda i: s.raw_logprobs[i])
        assert s.prediction_index == best and s.prediction == s.choices[best]
        diffs = np.diff(s.logprobs) - np.diff(s.raw_logprobs)  # renormalising shifts all by one constant
        assert np.abs(diffs).max() < 1e-9

    mean = score(model, processor, items[1:3], reduction="mean", progress=False)
    for s in mean:
        per_token = np.array(s.raw_logprobs) / np.array(s.num_tokens)
        np.testing.assert_allclose(s.logprobs, per_token - np.logaddexp.reduce(per_token), atol=1e-9)
    # ties go to the lowest index: a tuple item may repeat a choice
    prompt = items[0]["prompt"]
    tie = score(model, processor, [(prompt, items[0]["images"], ["no", "no"])], progress=False)[0]
    assert tie.prediction_index == 0 and tie.logprobs[0] == tie.logprobs[1] == pytest.approx(math.log(0.5))


def test_items_as_tuples_and_dataset(loaded, items):
    import datasets

    model, processor = loaded["llava-onevision"]
    ds = datasets.Dataset.from_list(items, features=records.FEATURES)
    from_ds = score(model, processor, ds, batch_size=3, progress=False)
    tuples = [(it["prompt"], it["images"], it["choices"]) for it in items]
    assert _max_diff(from_ds, score(model, processor, tuples, batch_size=3, progress=False)) < ATOL


def test_prefill(loaded, items):
    model, processor = loaded["qwen3-vl"]
    family = dataclasses.replace(get_family("qwen3-vl"), think_prefill=THINK)
    text = render_prompt(processor, items[0]["prompt"], THINK)
    assert text.endswith("<|im_start|>assistant\n" + THINK)
    assert Scorer(model, processor, family, progress=False).render(items[0]["prompt"]).endswith(THINK)

    subset = items[:3]
    by_family = score(model, processor, subset, family=family, progress=False)  # FAMILY_PREFILL -> THINK
    explicit = score(model, processor, subset, prefill=THINK, progress=False)
    assert _max_diff(by_family, explicit) < ATOL
    for it, s in zip(subset, by_family):  # the prefill baked into the prompt text by hand
        np.testing.assert_allclose(s.raw_logprobs, _full_forward_logprobs(model, processor, it, prefill=THINK), atol=ATOL, rtol=0)
    plain = score(model, processor, subset, family=family, prefill=None, progress=False)
    assert _max_diff(plain, by_family) > 1e-3
    assert _max_diff(plain, score(model, processor, subset, prefill=FAMILY_PREFILL, progress=False)) < ATOL


def test_scoring_errors(loaded, items):
    model, processor = loaded["qwen3-vl"]
    free = dict(items[0], id="free", choices=[])
    with pytest.raises(ValueError, match=r"item 0 \(id 'free'\) has no choices.*generate"):
        score(model, processor, [free], progress=False)
    with pytest.raises(ValueError, match="merges with the end of the prompt"):  # "ye" + "s" tokenises as "yes"
        score(model, processor, [(items[0]["prompt"], items[0]["images"], ["s", "t"])], prefill="ye", progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        score(model, processor, items, batch_size=0, progress=False)
    with pytest.raises(TypeError, match="sequence of items"):
        score(model, processor, items[0], progress=False)


# --------------------------------------------------------------------------- generation and parsers


def test_generate_counts_invalid_and_batches_deterministically(loaded, items):
    model, processor = loaded["qwen3-vl"]
    batched = generate(model, processor, items, max_new_tokens=6, batch_size=4, progress=False)
    single = generate(model, processor, items, max_new_tokens=6, batch_size=1, progress=False)
    assert [g.text for g in batched] == [g.text for g in single]
    # a random model writes garbage: every record's own parser rejects it, nothing is guessed
    assert batched.n_invalid == len(items) and batched.n_valid == 0
    assert all(g.answer is None and not g.valid for g in batched)
    assert batched.counts() == {"n": 6, "valid": 0, "invalid": 6, "invalid_rate": 1.0, "truncated": batched.n_truncated}
    assert all(1 <= g.num_tokens <= 6 for g in batched)
    # the same texts through a parser that accepts anything are all valid
    anything = generate(model, processor, items, max_new_tokens=6, parser=lambda t: t or "empty", batch_size=4, progress=False)
    assert anything.n_invalid == 0 and [g.answer for g in anything] == [g.text or "empty" for g in batched]


def test_generate_is_greedy_whatever_the_checkpoint_ships(loaded, items):
    model, processor = loaded["qwen2.5-vl"]
    plain = generate(model, processor, items[:3], 6, parser=yes_no(), progress=False)
    saved = copy.deepcopy(model.generation_config)
    try:  # a checkpoint that samples hot and penalises repeats: scoring still decodes greedily
        model.generation_config.update(do_sample=True, temperature=5.0, top_p=0.9, top_k=0, repetition_penalty=1.5)
        again = [generate(model, processor, items[:3], 6, parser=yes_no(), progress=False) for _ in range(2)]
    finally:
        model.generation_config = saved
    assert [g.text for g in again[0]] == [g.text for g in again[1]] == [g.text for g in plain]


def test_out_of_memory_halves_the_batch():
    from judgetrain.scoring.batching import Batcher, run_batched

    seen = []

    def fn(idx, batcher):
        seen.append(len(idx))
        if len(idx) > 2:
            raise torch.OutOfMemoryError("fake")
        return [10 * i for i in idx]

    assert run_batched(10, fn, Batcher(8, torch.device("cpu"), 10), False, "t") == [10 * i for i in range(10)]
    assert seen[:3] == [8, 4, 2] and set(seen[3:]) == {2}

    def never(idx, batcher):
        raise torch.OutOfMemoryError("fake")

    with pytest.raises(torch.OutOfMemoryError, match="one item per batch"):
        run_batched(3, never, Batcher(2, torch.device("cpu"), 3), False, "t")


def test_out_of_memory_in_a_continuation_pass_halves_the_batch_then_the_rows_per_pass():
    from judgetrain.scoring.batching import Batcher, ContinuationOutOfMemory, continuation_pass, run_batched

    passes = []

    def fn(idx, batcher):  # a step as score() runs it: 12 continuation rows an item, in passes of batcher.rows
        rows = 12 * len(idx)
        cap = batcher.rows or rows
        for start in range(0, rows, cap):
            with continuation_pass(min(cap, rows - start)):
                passes.append(min(cap, rows - start))
                if passes[-1] > 3:
                    raise torch.OutOfMemoryError("fake")
        return [10 * i for i in idx]

    batcher = Batcher(2, torch.device("cpu"), 3)
    assert run_batched(3, fn, batcher, False, "t") == [0, 10, 20]
    # two items, then one, then that item's 12 rows in passes of 6, then of 3: every item in four passes
    assert passes == [24, 12, 6] + [3] * 12 and (batcher.size, batcher.rows) == (1, 3)
    with pytest.raises(ContinuationOutOfMemory) as caught, continuation_pass(5):
        raise torch.OutOfMemoryError("fake")
    assert caught.value.rows == 5 and isinstance(caught.value.__cause__, torch.OutOfMemoryError)
    with pytest.raises(ValueError, match="not memory"), continuation_pass(5):  # other errors pass through as they are
        raise ValueError("not memory")


def test_generate_tuple_needs_parser(loaded, items):
    model, processor = loaded["llava-onevision"]
    with pytest.raises(ValueError, match="pass parser="):
        generate(model, processor, [(items[0]["prompt"], items[0]["images"])], max_new_tokens=2, progress=False)
    out = generate(model, processor, [(items[0]["prompt"], items[0]["images"])], max_new_tokens=2, parser=yes_no(), progress=False)
    assert len(out) == 1 and out[0].num_tokens <= 2


@pytest.mark.parametrize(
    ("parser", "text", "expected"),
    [
        (yes_no(), "yes", "yes"),
        (yes_no(), "yes.", "yes"),
        (yes_no(), "Yes", "yes"),
        (yes_no(), " No, frame 3 comes first.", "no"),
        (yes_no(), "**Answer:** no", "no"),
        (yes_no(), "<think>\nhmm\n</think>\n\nYes", "yes"),
        (yes_no(), "<think>\nstill thinking", None),
        (yes_no(), "maybe", None),
        (yes_no(), "yes or no", None),
        (yes_no(), "Yesterday", None),
        (yes_no(), "", None),
        (choice_letter("AB"), "A", "A"),
        (choice_letter("AB"), "(B).", "B"),
        (choice_letter("AB"), "Sequence B, because the ball falls.", "B"),
        (choice_letter("AB"), "b", "B"),
        (choice_letter("AB"), "C", None),
        (choice_letter("AB"), "a ball", None),
        (integer_in_range(1, 8), "3", "3"),
        (integer_in_range(1, 8), "Frame 3.", "3"),
        (integer_in_range(1, 8), "03", "3"),
        (integer_in_range(1, 8), "The answer is 7", "7"),
        (integer_in_range(1, 8), "9", None),
        (integer_in_range(1, 8), "3 and 4", None),
        (integer_in_range(1, 8), "3, 4", None),
        (integer_in_range(1, 16), "12", "12"),
        (frame_pair(1, 8), "3 and 4", "3 and 4"),
        (frame_pair(1, 8), "4 and 3", "3 and 4"),
        (frame_pair(1, 8), "3, 4", "3 and 4"),
        (frame_pair(1, 8), "frames 3 and 4.", "3 and 4"),
        (frame_pair(1, 8), "Frames 5 and frame 6", "5 and 6"),
        (frame_pair(1, 8), "(2, 7)", "2 and 7"),
        (frame_pair(1, 8, ordered=True), "4 and 3", "4 and 3"),
        (frame_pair(1, 8), "3 and 9", None),
        (frame_pair(1, 8), "3 and 3", None),
        (frame_pair(1, 8), "3", None),
        (likert_1_5(), "4", "4"),
        (likert_1_5(), "Rating: 5.", "5"),
        (likert_1_5(), "6", None),
        (likert_1_5(), "four", None),
        (ordering(4), "3, 1, 2, 4", "3, 1, 2, 4"),
        (ordering(4), "3 1 2 4", "3, 1, 2, 4"),
        (ordering(4), "Order: 2 > 1 > 4 > 3", "2, 1, 4, 3"),
        (ordering(4), "3, 1, 2", None),
        (ordering(4), "3, 1, 1, 4", None),
        (ordering(4), "3, 1, 2, 5", None),
        (one_of(["left", "right"]), "Right.", "right"),
        (one_of(["left", "right"]), "up", None),
    ],
)
def test_parsers(parser, text, expected):
    assert parser(text) == expected


def test_parser_for_record(items):
    assert parser_for_record(items[0])("Yes.") == "yes"
    assert parser_for_record(items[3])("4") == "4"
    assert parser_for_record(items[3])("5") is None  # in 1..n_frames but not one of the choices
    assert parser_for_record(items[1])("4 and 3") == "3 and 4"
    assert parser_for_record(items[1])("1 and 4") is None  # a pair the item does not offer
    assert parser_for_record({"task": "ordering", "choices": [], "n_frames": 3})("2, 3, 1") == "2, 3, 1"
    assert parser_for_record({"task": "pairwise", "choices": ["A", "B"], "n_frames": 4})("Sequence A") == "A"


# --------------------------------------------------------------------------- loading checkpoints


def test_scorer_base_adapter_and_merged(tiny_root, items, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    base_dir = tiny_root / "qwen3-vl"
    family = get_family("qwen3-vl")
    subset = items[:3]
    base = Scorer.from_pretrained(base_dir, batch_size=2, progress=False)
    assert base.device.type == "cpu" and base.dtype == torch.float32 and base.family.name == "qwen3-vl"
    base_scores = base.score(subset)

    model, processor = load_model_and_processor(base_dir, dtype="float32")
    config = LoraConfig(r=4, lora_alpha=8, target_modules=family.lora_target_regex, init_lora_weights=False)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        peft_model = get_peft_model(model, config)
    adapter_dir = tmp_path / "adapter"
    peft_model.save_pretrained(adapter_dir)
    in_memory = score(peft_model, processor, subset, progress=False)
    assert isinstance(peft_model, PeftModel) and _max_diff(in_memory, base_scores) > 1e-3

    loaded_adapter = Scorer.from_pretrained(base_dir, adapter=adapter_dir, progress=False)
    assert isinstance(loaded_adapter.model, PeftModel)
    assert _max_diff(loaded_adapter.score(subset), in_memory) < ATOL
    adapter_text = [g.text for g in loaded_adapter.generate(subset, max_new_tokens=4)]
    assert adapter_text == [g.text for g in generate(peft_model, processor, subset, 4, progress=False)]
    # an adapter folder alone: the base comes from adapter_config.json
    assert _max_diff(Scorer.from_pretrained(adapter_dir, progress=False).score(subset), in_memory) < ATOL

    merged_dir = tmp_path / "merged"
    peft_model.merge_and_unload().save_pretrained(merged_dir)
    processor.save_pretrained(merged_dir)
    merged = Scorer.from_pretrained(merged_dir, progress=False)
    assert _max_diff(merged.score(subset), in_memory) < 1e-4


def test_scorer_rejects_non_adapter_folder(tiny_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        Scorer.from_pretrained(tiny_root / "llava-onevision", adapter=tmp_path, progress=False)
