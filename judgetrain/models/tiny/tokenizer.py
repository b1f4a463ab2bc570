"""The tokenizer, chat templates and generation config of the tiny checkpoints (``judgetrain.models.tiny``).

A byte-level BPE of a few hundred tokens is trained here, offline and
deterministically, on a built-in English corpus with Qwen2's own pre-tokenizer,
and wrapped in a ``Qwen2Tokenizer`` carrying each family's special tokens in their
real order; chat templates are the ones TRL ships for the real checkpoints.
Docs: "reference/api/registry.md".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "GEMMA4_NAMED",
    "GEMMA4_SPECIAL",
    "INTERNVL_NAMED",
    "INTERNVL_SPECIAL",
    "LLAVA_SPECIAL",
    "QWEN25_ADDED",
    "QWEN3_ADDED",
    "QWEN_SPECIAL",
    "VOCAB_MULTIPLE",
    "generation_config",
    "make_tokenizer",
    "padded_vocab",
    "tiny_corpus",
    "token_ids",
    "train_bpe",
    "trl_template",
]

# Embedding rows are padded past len(tokenizer) to a multiple of this (see padded_vocab).
VOCAB_MULTIPLE = 64

# Qwen2 / Qwen2.5 / Qwen3 special tokens in their real id order (151643 onward
# in the real vocabularies). The first group is `special=True` (skipped when
# decoding with skip_special_tokens); the tool/FIM/think markers are plain added tokens.
QWEN_SPECIAL = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
QWEN25_ADDED = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
QWEN3_ADDED = (*QWEN25_ADDED, "<tool_response>", "</tool_response>", "<think>", "</think>")
# LLaVA-OneVision: Qwen2-Instruct's three specials, then the two tokens the
# llava-hf conversion adds (ids 151646 and 151647 in the real checkpoint).
LLAVA_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>", "<video>")
# InternVL3 / 3.5 (-hf): the Qwen2.5-VL vocabulary, then the special tokens transformers'
# conversion script (models/internvl/convert_internvl_weights_to_hf.py) appends in this
# order, so <IMG_CONTEXT> is 151667 in the real InternVL3 checkpoints; <video> is the
# tokenizer's named video token (InternVLProcessor reads tokenizer.video_token).
INTERNVL_SPECIAL = ("<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>", "<video>")
INTERNVL_NAMED = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}
# Gemma 4: <pad> <eos> <bos> first (ids 0, 1, 2 in the real vocabulary), the turn and
# channel markers of its chat template, then the multimodal markers in the relative order
# of Gemma4Config's ids (boi 255999 < boa 256000 < image 258880 < audio 258881 < eoi 258882
# < eoa 258883 < video 258884). Gemma4Processor reads the image/audio ones by name.
GEMMA4_SPECIAL = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<mask>",
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|think|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    '<|"|>',
    "<|image>",
    "<|audio>",
    "<|image|>",
    "<|audio|>",
    "<image|>",
    "<audio|>",
    "<|video|>",
)
GEMMA4_NAMED = {
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
}


def tiny_corpus() -> list[str]:
    """Return the built-in English training text for the tiny tokenizers (deterministic, no files).

    It covers the words of the project's prompts and the chat templates, and it
    repeats the closed answers ("yes", "no", "A", "B", frame numbers) at the start
    of a line, as they follow ``<|im_start|>assistant\\n``, so each of "yes", "no",
    "Yes", "No" becomes one token there. Letters and single digits are one byte
    each, hence one token anyway; numbers of two digits are two tokens, as in
    every Qwen tokenizer.
    """
    sentences = [
        "You are a helpful assistant.",
        "You are a careful judge of temporal order in image sequences.",
        "Here are the frames of a short video, shown in the order given.",
        "Are these frames in the correct temporal order? Answer yes or no.",
        "Is the sequence of frames in chronological order? Answer with yes or no.",
        "Which frame is out of place? Answer with the frame number.",
        "Which two frames were swapped? Answer with the two frame numbers.",
        "Does any frame not belong to this sequence? Answer yes or no.",
        "Which sequence is in the correct order, A or B? Answer with A or B.",
        "Sequence A and sequence B show the same scene.",
        "Rate how well the frames follow the physics of the scene from 1 to 5.",
        "Put the frames in the order in which the events happened.",
        "The ball falls, hits the ground and bounces up again.",
        "The cup is filled with water and then it overflows.",
        "A person opens the door, walks in and closes the door.",
        "The ice melts and the water spreads across the table.",
        "Two cubes collide and the red cube moves to the left.",
        "First the sun rises, then the shadows get shorter.",
        "The answer is yes because the motion is continuous.",
        "The answer is no because frame 3 comes before frame 2.",
        "Picture 1: Picture 2: Picture 3: Picture 4:",
        "Video 1: at 0.5 seconds, 1.0 seconds and 1.5 seconds.",
        "Let me think about the order of the events step by step.",
        "The first frame shows the start and the last frame shows the end.",
        "The object moves from the left side of the image to the right side.",
        "Cause comes before effect, so this order is not possible.",
        "system user assistant tool image video frame frames order answer",
    ]
    answers = ["yes", "no", "Yes", "No", "A", "B", *[str(i) for i in range(1, 17)]]
    numbers = " ".join(f"frame {i}" for i in range(1, 17))
    pairs = " ".join(f"{i} and {i + 1}" for i in range(1, 16))
    lines: list[str] = []
    for _ in range(4):
        lines.extend(sentences)
        lines.extend(answers)  # each answer alone on a line: the position after "assistant\n"
        lines.append(numbers)
        lines.append(pairs)
    return lines


def train_bpe(vocab_size: int = 640) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Train a byte-level BPE with Qwen2's exact pre-tokenizer; return (vocab, merges)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    # Qwen2Tokenizer's own normalizer and pre-tokenizer (it rebuilds its pipeline from vocab
    # and merges on every load): training with another split would give merges the loaded
    # tokenizer never applies. An empty Qwen2Tokenizer holds them (backend_tokenizer).
    qwen2 = Qwen2Tokenizer(vocab={"<|endoftext|>": 0}, merges=[]).backend_tokenizer
    tok = Tokenizer(models.BPE())
    tok.normalizer = qwen2.normalizer
    tok.pre_tokenizer = qwen2.pre_tokenizer
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable
        show_progress=False,
        special_tokens=[],
    )
    tok.train_from_iterator(tiny_corpus(), trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return dict(model["vocab"]), merges


def make_tokenizer(
    special: Sequence[str],
    added: Sequence[str],
    chat_template: str,
    *,
    extra_special: Sequence[str] = (),
    named: dict[str, str] | None = None,
    eos: str = "<|im_end|>",
    pad: str = "<|endoftext|>",
    bos: str | None = None,
) -> Any:
    """A ``Qwen2Tokenizer`` over the tiny BPE with ``special``, then ``added``, then
    ``extra_special`` tokens appended in order.

    ``named`` gives tokens an attribute name (``tokenizer.image_token``…) as a checkpoint's
    ``extra_special_tokens`` does; ``bos`` makes the tokenizer prepend that token to every
    encoding, as Gemma's does.
    """
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    vocab, merges = train_bpe()
    # transformers annotates merges as str | list[str] and the special tokens as str, but its BPE takes
    # (a, b) pairs and None means "no such token", which is what the tiny tokenizer needs
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,  # type: ignore[arg-type]
        unk_token=None,  # type: ignore[arg-type]
        bos_token=None,
        eos_token=None,  # type: ignore[arg-type]
        pad_token=None,  # type: ignore[arg-type]
        errors="replace",
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        model_max_length=32768,
        padding_side="right",  # what the real checkpoints store; batched scoring asks for "left" per call
    )
    # One at a time so ids follow the real order exactly.
    for tok in special:
        tokenizer.add_tokens([AddedToken(tok, special=True, normalized=False)], special_tokens=True)
    for tok in added:
        tokenizer.add_tokens([AddedToken(tok, special=False, normalized=False)])
    for tok in extra_special:
        tokenizer.add_tokens([AddedToken(tok, special=True, normalized=False)], special_tokens=True)
    tokenizer.eos_token = eos
    tokenizer.pad_token = pad
    if bos is not None:
        tokenizer.bos_token = bos
        # rewrites the post-processor, which tokenizer.json keeps; the setter is real, but mypy misses it
        # because transformers defines it after another property's (TokenizersBackend.add_bos_token)
        tokenizer.add_bos_token = True  # type: ignore[misc]
    tokenizer.chat_template = chat_template
    if named:
        tokenizer = _with_named_tokens(tokenizer, named)
    return tokenizer


def _with_named_tokens(tokenizer: Any, named: dict[str, str]) -> Any:
    """``tokenizer`` reloaded with ``extra_special_tokens=named``: the public way to name
    tokens. Passing the names to the constructor would add those tokens first and shift
    every id after them out of the real order."""
    import tempfile

    from transformers import Qwen2Tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        return Qwen2Tokenizer.from_pretrained(tmp, extra_special_tokens=dict(named))


def trl_template(name: str) -> str:
    """Read one of TRL's shipped chat templates (``trl/chat_templates/<name>.jinja``) byte for byte.

    These are the templates the real checkpoints ship (TRL stores them to recognise
    a model by its template), so the tiny processor carries the real one.
    """
    from importlib import metadata, util

    # Locate the package without importing it (importing TRL costs half a second).
    spec = util.find_spec("trl")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("judgetrain needs TRL for the Qwen-VL chat templates: `pip install 'trl>=1.0,<2'`.")
    path = Path(spec.origin).parent / "chat_templates" / f"{name}.jinja"
    if not path.is_file():
        raise FileNotFoundError(
            f"TRL {metadata.version('trl')} does not ship {path.name} (looked in {path.parent}); judgetrain needs "
            "a TRL whose chat_templates/ holds the Qwen-VL templates: `pip install 'trl>=1.0,<2'`."
        )
    return path.read_text(encoding="utf-8")


def padded_vocab(tokenizer: Any) -> int:
    """Embedding rows for ``tokenizer``: the next multiple of ``VOCAB_MULTIPLE`` strictly above ``len(tokenizer)``."""
    # Strictly more rows than tokens, as every real checkpoint here has (Qwen2.5-VL:
    # 152064 for 151665), so code that assumes logits.shape[-1] == len(tokenizer) fails here too.
    return (len(tokenizer) // VOCAB_MULTIPLE + 1) * VOCAB_MULTIPLE


def token_ids(tokenizer: Any, *tokens: str) -> list[int]:
    """The ids of ``tokens`` in order; ``RuntimeError`` when the tiny tokenizer lacks one."""
    ids = tokenizer.convert_tokens_to_ids(list(tokens))
    missing = [t for t, i in zip(tokens, ids, strict=True) if i is None or i == tokenizer.unk_token_id]
    if missing:  # a bug in judgetrain.models.tiny, not a user error
        raise RuntimeError(f"tiny tokenizer lacks {missing}")
    return ids


def generation_config(
    tokenizer: Any, stop: Sequence[str] = ("<|im_end|>", "<|endoftext|>"), pad: str = "<|endoftext|>", **extra: Any
) -> Any:
    """Greedy ``GenerationConfig`` stopping on any of ``stop`` and padding with ``pad``, plus ``extra``.

    The defaults are Qwen's: ``<|im_end|>`` or ``<|endoftext|>`` (the pad)."""
    from transformers import GenerationConfig

    eos = token_ids(tokenizer, *stop)
    [pad_id] = token_ids(tokenizer, pad)
    # Real checkpoints stop on either token; greedy so tests are exact.
    return GenerationConfig(eos_token_id=eos, pad_token_id=pad_id, do_sample=False, **extra)
