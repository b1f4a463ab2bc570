"""Tiny, randomly initialised checkpoints of every model family, built offline in well under a second each.

Each one is a real checkpoint folder (``config.json``, ``model.safetensors``,
``generation_config.json``, tokenizer, image and video processor configs, chat
template) that loads back through ``judgetrain.models.load_model_and_processor``
and ``from_pretrained`` like a downloaded model. Tests, benchmarks and the
quickstart use them so every code path runs without network or GPU.

What is faithful to the real checkpoints (so code that works here works there):
the architecture and module names, the processor classes and their token
expansion rules (patch 16 / 14, spatial merge 2, temporal patch 2, SigLIP
``num_image_tokens``, anyres pinpoints), the tokenizer class (``Qwen2Tokenizer``,
which splits digits one by one as Qwen's pre-tokenizer does), the special tokens
and their relative order, eos ``<|im_end|>`` / pad ``<|endoftext|>`` / right
padding as stored by the real checkpoints, the chat templates, and an embedding
matrix with unused rows past ``len(tokenizer)`` up to a multiple of 64, as the
real ones have (so ``logits.shape[-1] > len(tokenizer)``).

What is not: every size (hidden 64, 2 layers), the vocabulary (a byte-level BPE of
a few hundred tokens trained here on a built-in English corpus), the image
resolutions (a 64x64 frame is 4 visual tokens for Qwen, 17 for LLaVA-OneVision in
a multi-image prompt), float32 weights (real ones are bfloat16), and greedy
decoding in ``generation_config.json``.

The tokenizer, chat templates and generation config are made in
``judgetrain.models.tiny.tokenizer``; this module builds each family's config,
processor and random weights around them (InternVL and Gemma-4 in
``judgetrain.models.tiny.families``). ``build_all`` builds the quickstart's three
families unless told otherwise; the command line builds every family. Docs: "reference/api/registry.md".

Usage::

    python -m judgetrain.models.tiny --out /tmp/tiny            # all families
    python -m judgetrain.models.tiny --out /tmp/tiny --family qwen3-vl
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..registry import FAMILIES, get_family
from . import families as tiny_families
from .folder import DEFAULT_SEED, TinyModelExistsError, build_folders
from .tokenizer import (
    LLAVA_SPECIAL,
    QWEN3_ADDED,
    QWEN25_ADDED,
    QWEN_SPECIAL,
    generation_config,
    make_tokenizer,
    padded_vocab,
    token_ids,
    trl_template,
)

__all__ = [
    "QUICKSTART_FAMILIES",
    "REAL_WIDTHS",
    "TEMPLATES_DIR",
    "VARIANTS",
    "build_all",
    "build_tiny",
    "main",
    "random_real_width",
]

TEMPLATES_DIR = Path(__file__).parent / "templates"

# Shared sizes. Text: head_dim 16 so M-RoPE sections sum to 8; two KV heads so
# grouped-query attention (as in every real checkpoint here) is exercised.
_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
}
_VISION_HIDDEN = 32


# --------------------------------------------------------------------------- families


def _text_config(tokenizer: Any, pad: int, eos: int, rope: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The decoder's ``text_config``: the shared tiny sizes, the padded vocabulary and the tokenizer's ids."""
    return {
        **_TEXT,
        "vocab_size": padded_vocab(tokenizer),
        **extra,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_parameters": rope,
        "bos_token_id": pad,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "tie_word_embeddings": False,
    }


def _qwen_vl(
    template: str,
    added: Sequence[str],
    classes: tuple[Any, Any, Any],
    *,
    rope: dict[str, Any],
    text: dict[str, Any],
    vision: dict[str, Any],
    patch: int,
    mean: list[float],
    std: list[float],
    max_video_tokens: int,
) -> tuple[Any, Any, Any]:
    """What Qwen3-VL and Qwen2.5-VL share: tokenizer, config and processors around their differences.

    ``template`` is the chat template's text; ``classes`` is (config, processor, video processor) class; ``text`` and
    ``vision`` are the family's own ``text_config`` / ``vision_config`` keys;
    ``patch`` is the vision patch in pixels, so ``2 * patch`` pixels make one
    merged visual token and the per-image cap is 4x4 of them.
    """
    from transformers import Qwen2VLImageProcessor

    config_cls, processor_cls, video_processor_cls = classes
    tokenizer = make_tokenizer(QWEN_SPECIAL, added, template)
    pad, start, end, image, video, eos = token_ids(
        tokenizer, "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|im_end|>"
    )
    config = config_cls(
        text_config=_text_config(tokenizer, pad, eos, rope, **text),
        vision_config={
            "depth": 2,
            "hidden_size": _VISION_HIDDEN,
            "intermediate_size": 2 * _VISION_HIDDEN,
            "num_heads": 2,
            "patch_size": patch,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": _TEXT["hidden_size"],
            **vision,
        },
        image_token_id=image,
        video_token_id=video,
        vision_start_token_id=start,
        vision_end_token_id=end,
        tie_word_embeddings=False,
    )
    token_px, cap_px = 2 * patch, 8 * patch  # one merged token; the per-image cap (4x4 tokens)
    shared = {"patch_size": patch, "temporal_patch_size": 2, "merge_size": 2, "image_mean": mean, "image_std": std}
    image_processor = Qwen2VLImageProcessor(
        size={"shortest_edge": token_px * token_px, "longest_edge": cap_px * cap_px}, **shared
    )
    video_processor = video_processor_cls(
        size={"shortest_edge": token_px * token_px, "longest_edge": 8 * cap_px * cap_px},
        **shared,
        fps=2,
        min_frames=2,
        max_frames=16,
        cap_pixels_per_frame=True,  # the reference (qwen-vl-utils) behaviour, and no warning per call
        max_video_tokens=max_video_tokens,
    )
    processor = processor_cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=template,
    )
    return config, processor, generation_config(tokenizer, bos_token_id=pad)


def _qwen3_vl(template: str | None = None) -> tuple[Any, Any, Any]:
    from transformers import Qwen3VLConfig, Qwen3VLProcessor, Qwen3VLVideoProcessor

    # 32 px per visual token: 32x32 is 1 token, a 64x64 frame 4, the cap 128x128 is 16.
    return _qwen_vl(
        trl_template("qwen3_vl") if template is None else template,
        QWEN3_ADDED,
        (Qwen3VLConfig, Qwen3VLProcessor, Qwen3VLVideoProcessor),
        # Real: mrope_section [24, 20, 20] for head_dim 128; sections (t, h, w)
        # must sum to head_dim / 2.
        rope={"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [4, 2, 2], "mrope_interleaved": True},
        text={"head_dim": 16},
        vision={
            "hidden_act": "gelu_pytorch_tanh",
            # Learned position grid, interpolated to each image: must be a square (8x8 here, 48x48 real).
            "num_position_embeddings": 64,
            # Real: layers 8, 16, 24 of 27 feed the first three decoder layers; one
            # intermediate layer here (needs <= num_hidden_layers entries).
            "deepstack_visual_indexes": [0],
        },
        patch=16,
        mean=[0.5, 0.5, 0.5],
        std=[0.5, 0.5, 0.5],
        max_video_tokens=16,
    )


def _qwen2_5_vl() -> tuple[Any, Any, Any]:
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

    # 28 px per visual token: a 64x64 frame becomes 56x56, 4 tokens; the cap 112x112 is 16.
    return _qwen_vl(
        trl_template("qwen2_5_vl"),
        QWEN25_ADDED,
        (Qwen2_5_VLConfig, Qwen2_5_VLProcessor, Qwen2VLVideoProcessor),
        # head_dim = 64 / 4 = 16; real mrope_section [16, 24, 24] for head_dim 128.
        rope={"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [2, 3, 3]},
        text={},
        vision={
            "hidden_act": "silu",
            # Qwen2.5-VL's real patch is 14 (28 px per merged token); the
            # processor uses the same so grids agree.
            # Window attention over 56 px = 2x2 merged tokens (real: 112 px,
            # 4x4); must be a multiple of patch_size * spatial_merge_size.
            "window_size": 56,
            "fullatt_block_indexes": [1],  # the last block attends globally, as in the real 7/15/23/31 of 32
            "tokens_per_second": 2,
        },
        patch=14,
        mean=[0.48145466, 0.4578275, 0.40821073],  # CLIP's
        std=[0.26862954, 0.26130258, 0.27577711],
        max_video_tokens=128,
    )


def _qwen3_vl_thinking() -> tuple[Any, Any, Any]:
    """Qwen3-VL with a Thinking-style chat template (``templates/qwen3_vl_thinking.jinja``): the
    generation prompt opens ``<think>``, as Qwen3-VL-*-Thinking's does; the weights are built as
    the instruct tiny's (same seed, same weights)."""
    return _qwen3_vl((TEMPLATES_DIR / "qwen3_vl_thinking.jinja").read_text(encoding="utf-8"))


def _llava_onevision() -> tuple[Any, Any, Any]:
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    template = (TEMPLATES_DIR / "llava_onevision.jinja").read_text(encoding="utf-8")
    tokenizer = make_tokenizer(LLAVA_SPECIAL, (), template)
    pad, eos, image, video = token_ids(tokenizer, "<|endoftext|>", "<|im_end|>", "<image>", "<video>")
    # SigLIP at 32 px with 8 px patches: a 4x4 feature grid, 16 tokens per crop
    # (real: 384 px / 14 px = 27x27 = 729).
    image_size, patch = 32, 8
    num_image_tokens = (image_size // patch) ** 2
    # anyres tiles: every (h, w) multiple of the crop size up to 6x6 crops, as the real 384..2304 grid.
    pinpoints = [[image_size * i, image_size * j] for i in range(1, 7) for j in range(1, 7)]
    config = LlavaOnevisionConfig(
        text_config={
            "model_type": "qwen2",
            **_text_config(tokenizer, pad, eos, {"rope_type": "default", "rope_theta": 1_000_000.0}),
        },
        vision_config={
            "model_type": "siglip_vision_model",
            "hidden_size": _VISION_HIDDEN,
            "intermediate_size": 2 * _VISION_HIDDEN,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": image_size,
            "patch_size": patch,
            "hidden_act": "gelu_pytorch_tanh",
            "layer_norm_eps": 1e-6,
            "vision_use_head": False,
        },
        image_token_index=image,
        video_token_index=video,
        # "full": SigLIP has no CLS token, every patch is a feature (the real setting).
        vision_feature_select_strategy="full",
        vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints,
        vision_aspect_ratio="anyres_max_9",
        projector_hidden_act="gelu",
        tie_word_embeddings=False,
    )
    mean = std = [0.5, 0.5, 0.5]
    image_processor = LlavaOnevisionImageProcessor(
        size={"height": image_size, "width": image_size},
        image_grid_pinpoints=pinpoints,
        image_mean=mean,
        image_std=std,
        do_pad=True,
    )
    video_processor = LlavaOnevisionVideoProcessor(
        size={"height": image_size, "width": image_size}, image_mean=mean, image_std=std
    )
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        num_image_tokens=num_image_tokens,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=template,
    )
    return config, processor, generation_config(tokenizer, bos_token_id=pad)


_BUILDERS: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
    "qwen3-vl": _qwen3_vl,
    "qwen2.5-vl": _qwen2_5_vl,
    "llava-onevision": _llava_onevision,
    "internvl": tiny_families.internvl3,
    "gemma-4": tiny_families.gemma4,
}
# Other checkpoints of a family whose build differs (InternVL3.5's Qwen3 decoder, a reasoning
# checkpoint's chat template); built by name (build_tiny("internvl3.5", ...)), loaded as their family.
VARIANTS: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
    "internvl3.5": tiny_families.internvl3_5,
    "qwen3-vl-thinking": _qwen3_vl_thinking,
}
# What build_all makes by default, so the quickstart (which builds every default) stays as
# fast as it was; the other families are built by name or with the CLI's default.
QUICKSTART_FAMILIES = ("qwen3-vl", "qwen2.5-vl", "llava-onevision")
if set(_BUILDERS) != set(FAMILIES):  # a family added to the registry without a tiny builder
    raise RuntimeError(f"judgetrain.models.tiny has builders for {sorted(_BUILDERS)}, registry has {sorted(FAMILIES)}")


def _instantiate(config: Any, generation_config: Any, seed: int, dtype: Any, device: Any = None) -> Any:
    """Random weights for ``config`` from ``seed`` (on ``device``, default CPU, in ``dtype``),
    leaving the caller's random stream as it was."""
    import torch
    from transformers import AutoModelForImageTextToText

    config.dtype = dtype
    with torch.random.fork_rng(devices=[]), torch.device(device or "cpu"):
        torch.manual_seed(seed)
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype)
    model.generation_config = generation_config
    return model


def _save(name: str, folder: Path, seed: int) -> None:
    """Build the tiny ``name`` (a family or variant name) of ``seed`` into the empty ``folder``."""
    import torch
    from transformers.utils import logging as hf_logging

    config, processor, generation_config = (VARIANTS.get(name) or _BUILDERS[name])()
    # CPU tests run in float32; real checkpoints store bfloat16
    model = _instantiate(config, generation_config, seed, torch.float32)
    # A progress bar per sub-megabyte shard is noise; restore the caller's setting after.
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(folder)  # safetensors by default
        processor.save_pretrained(folder)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


def build_tiny(family: str, out_dir: str | Path, seed: int = 0, *, overwrite: bool = False) -> Path:
    """Build a tiny random checkpoint of ``family`` (a registry name or alias, or a key of
    ``VARIANTS``) into ``out_dir`` and return the folder.

    ``out_dir`` is created if needed. One that holds this build already (byte for byte) is left
    untouched; one that holds anything else raises ``TinyModelExistsError`` unless ``overwrite``,
    which replaces it whole (``judgetrain.models.tiny.folder``). The same ``family`` and ``seed``
    give byte-identical files. The global torch RNG state is left as it was. Loads back with
    ``load_model_and_processor(out_dir)``.
    """
    name = _build_name(family)
    return build_folders({name: Path(out_dir)}, seed, _save, overwrite=overwrite)[name]


# The widths of released checkpoints, for cost benchmarks with random weights (no
# download): every value below is the checkpoint's config.json, except that the
# vocabulary stays the tiny tokenizer's (embedding lookups and a head applied at the
# scored positions only; the compute of a forward pass does not depend on it).
# "config" holds top-level keys (set on the model config itself).
REAL_WIDTHS: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {
    # Qwen/Qwen3-VL-8B-Instruct: 36 decoder layers at 4096 (32 query / 8 KV heads of
    # 128), SiLU MLP 12288; SigLIP2-so400m-style ViT, 27 layers at 1152, 16 heads,
    # MLP 4304, 48x48 position grid, DeepStack taps after ViT layers 8, 16 and 24.
    "qwen3-vl-8b": (
        "qwen3-vl",
        {
            "text_config": {
                "hidden_size": 4096,
                "intermediate_size": 12288,
                "num_hidden_layers": 36,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "max_position_embeddings": 262144,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 5_000_000.0,
                    "mrope_section": [24, 20, 20],
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 27,
                "hidden_size": 1152,
                "intermediate_size": 4304,
                "num_heads": 16,
                "out_hidden_size": 4096,
                "num_position_embeddings": 2304,
                "deepstack_visual_indexes": [8, 16, 24],
            },
        },
    ),
    # Qwen/Qwen3-VL-2B-Instruct: 28 decoder layers at 2048 (16 query / 8 KV heads of
    # 128), SiLU MLP 6144, embedding and head tied; ViT 24 layers at 1024, 16 heads,
    # MLP 4096, patch 16, 48x48 position grid, DeepStack taps after ViT layers 5, 11, 17.
    "qwen3-vl-2b": (
        "qwen3-vl",
        {
            "config": {"tie_word_embeddings": True},
            "text_config": {
                "hidden_size": 2048,
                "intermediate_size": 6144,
                "num_hidden_layers": 28,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "max_position_embeddings": 262144,
                "tie_word_embeddings": True,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 5_000_000.0,
                    "mrope_section": [24, 20, 20],
                    "mrope_interleaved": True,
                },
            },
            "vision_config": {
                "depth": 24,
                "hidden_size": 1024,
                "intermediate_size": 4096,
                "num_heads": 16,
                "patch_size": 16,
                "out_hidden_size": 2048,
                "num_position_embeddings": 2304,
                "deepstack_visual_indexes": [5, 11, 17],
            },
        },
    ),
    # Qwen/Qwen2.5-VL-7B-Instruct: 28 decoder layers at 3584 (28 query / 4 KV heads of
    # 128), SiLU MLP 18944, untied head; ViT 32 layers at 1280, 16 heads, SiLU MLP 3420,
    # patch 14, window attention over 112 px with full attention in blocks 7, 15, 23, 31.
    "qwen2.5-vl-7b": (
        "qwen2.5-vl",
        {
            "text_config": {
                "hidden_size": 3584,
                "intermediate_size": 18944,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "max_position_embeddings": 128000,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [16, 24, 24]},
            },
            "vision_config": {
                "depth": 32,
                "hidden_size": 1280,
                "intermediate_size": 3420,
                "num_heads": 16,
                "patch_size": 14,
                "out_hidden_size": 3584,
                "window_size": 112,
                "fullatt_block_indexes": [7, 15, 23, 31],
                "tokens_per_second": 2,
            },
        },
    ),
}


def _scaled_fullatt(blocks: list[int], depth: int, n: int) -> list[int]:
    """Full-attention ViT blocks for a tower cut from ``depth`` to ``n`` layers: the same
    share of them (at least one), each the last of an equal group, as the real
    7, 15, 23, 31 of 32 are (so window and full attention keep their cost proportion)."""
    k = max(1, round(len(blocks) * n / depth))
    return sorted({max(0, round((j + 1) * n / k) - 1) for j in range(k)})


def random_real_width(
    name: str,
    *,
    text_layers: int | None = None,
    vision_layers: int | None = None,
    seed: int = 0,
    dtype: Any = None,
    device: Any = None,
) -> tuple[Any, Any]:
    """A randomly initialised model at the widths of a released checkpoint (``REAL_WIDTHS``:
    ``qwen3-vl-8b``, ``qwen3-vl-2b``, ``qwen2.5-vl-7b``) and the tiny processor of its
    family, in memory: ``(model, processor)``.

    For measuring cost offline, never accuracy. ``text_layers`` / ``vision_layers`` cut the
    depth (default: the real one); a forward pass costs the same per layer at any depth, so
    a few layers on a CPU keep the real proportions of vision encoder, decoder and
    attention. DeepStack taps (Qwen3-VL) are moved to the same relative depths, and
    Qwen2.5-VL's full-attention ViT blocks keep their share of the tower. The weights are
    created on ``device`` (default CPU) in ``dtype`` (default float32), so a full model
    can be built straight onto a GPU. The processor keeps the tiny 128x128 image
    cap; for real frame sizes save it and reload its image processor with ``max_pixels``
    (``AutoImageProcessor.from_pretrained(folder, max_pixels=...)``, as
    ``benchmarks/bench_phasefusion.py`` does).
    """
    import torch

    if name not in REAL_WIDTHS:
        raise ValueError(f"unknown real width {name!r}; known: {', '.join(REAL_WIDTHS)}")
    family, widths = REAL_WIDTHS[name]
    config, processor, generation_config = _BUILDERS[family]()
    text = dict(widths["text_config"])
    vision = dict(widths["vision_config"])
    n_text = text["num_hidden_layers"] if text_layers is None else int(text_layers)
    n_vision = vision["depth"] if vision_layers is None else int(vision_layers)
    if n_text < 1 or n_vision < 1:
        raise ValueError(f"text_layers and vision_layers must be >= 1 (got {n_text}, {n_vision})")
    taps = vision.get("deepstack_visual_indexes")
    if taps is not None:
        # Same relative depths; DeepStack feeds the first len(taps) decoder layers.
        scaled = sorted({min(n_vision - 1, t * n_vision // vision["depth"]) for t in taps})
        vision["deepstack_visual_indexes"] = scaled[:n_text]
    if "fullatt_block_indexes" in vision:
        vision["fullatt_block_indexes"] = _scaled_fullatt(vision["fullatt_block_indexes"], vision["depth"], n_vision)
    text["num_hidden_layers"], vision["depth"] = n_text, n_vision
    for k, v in widths.get("config", {}).items():
        setattr(config, k, v)
    for key, values in (("text_config", text), ("vision_config", vision)):
        sub = getattr(config, key)
        for k, v in values.items():
            setattr(sub, k, v)
    if getattr(config.text_config, "layer_types", None) is not None:
        # Derived from the depth when the config was made (Qwen2.5-VL): every layer of these
        # checkpoints attends fully (use_sliding_window is false in their configs).
        config.text_config.layer_types = ["full_attention"] * n_text
    dtype = torch.float32 if dtype is None else (getattr(torch, dtype) if isinstance(dtype, str) else dtype)
    model = _instantiate(config, generation_config, seed, dtype, device)
    return model.eval(), processor


def _build_name(name: str) -> str:
    key = name.strip().lower()
    return key if key in VARIANTS else get_family(name).name


def build_all(
    out_root: str | Path, seed: int = 0, families: Iterable[str] | None = None, *, overwrite: bool = False
) -> dict[str, Path]:
    """Build ``families`` (default: ``QUICKSTART_FAMILIES``) into ``out_root/<name>``; return name -> folder.

    A family alias builds the family (``"llava-critic"`` -> ``llava-onevision``); a ``VARIANTS``
    key builds that variant under its own name. Folders are kept or replaced as by :func:`build_tiny`,
    all of them or, when one is refused, none."""
    root = Path(out_root)
    names = [_build_name(f) for f in families] if families is not None else list(QUICKSTART_FAMILIES)
    return build_folders({name: root / name for name in names}, seed, _save, overwrite=overwrite)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: build tiny checkpoints and print where they went."""
    parser = argparse.ArgumentParser(
        prog="python -m judgetrain.models.tiny",
        description="Build tiny, randomly initialised checkpoints (model + processor) of judgetrain's model\n"
        "families, offline, for tests, benchmarks and dry runs. Each lands in OUT/<family> and loads\n"
        "with judgetrain.models.load_model_and_processor(OUT/<family>).",
        epilog="examples:\n"
        "  python -m judgetrain.models.tiny --out tiny\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family qwen3-vl --family llava-onevision"
        "   # where the tiny recipes look\n"
        "  python -m judgetrain.models.tiny --out tiny-seed7 --family qwen3-vl --seed 7"
        "   # other weights in a folder of their own (--overwrite replaces a folder's)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", required=True, type=Path, help="folder to write OUT/<family> into (created)")
    parser.add_argument(
        "--family",
        action="append",
        metavar="NAME",
        help=f"family (or variant: {', '.join(VARIANTS)}) to build, repeatable; default: every family ({', '.join(FAMILIES)})",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"weight initialisation seed (default: {DEFAULT_SEED})")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an OUT/<family> that holds other weights (another seed or version) or files that are no tiny "
        "model; without it such a folder is refused and nothing is written (one holding this very build is kept)",
    )
    args = parser.parse_args(argv)
    try:
        built = build_all(args.out, seed=args.seed, families=args.family or list(FAMILIES), overwrite=args.overwrite)
    except TinyModelExistsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # unknown family: the message already says what exists
        parser.error(str(err))
    for name, path in built.items():
        print(f"{name}: {path.resolve()}")
    return 0
