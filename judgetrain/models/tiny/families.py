"""Tiny builds of the InternVL (3 and 3.5, transformers-native ``-hf``) and Gemma-4 families,
for ``judgetrain.models.tiny``: config, processor and generation config around the project's
tiny tokenizer, faithful in module names, processor classes and token expansion rules.

What differs from the real checkpoints (besides every size): InternVL tiles images into 32 px
crops of 4 visual tokens (real: 448 px, 256 tokens, up to 12 crops + thumbnail); Gemma-4 keeps
its smallest supported image budget, 70 soft tokens (real E4B prompts use 280), with 4 px patches
pooled 2x2, and its audio tower is one layer wide enough to build. Docs: "reference/api/registry.md".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .tokenizer import (
    GEMMA4_NAMED,
    GEMMA4_SPECIAL,
    INTERNVL_NAMED,
    INTERNVL_SPECIAL,
    QWEN3_ADDED,
    QWEN25_ADDED,
    QWEN_SPECIAL,
    generation_config,
    make_tokenizer,
    padded_vocab,
    token_ids,
    trl_template,
)

__all__ = ["GEMMA4_TEMPLATE", "INTERNVL_TEMPLATE", "gemma4", "internvl3", "internvl3_5"]

# The template transformers' InternVL conversion script writes into every -hf checkpoint
# (one <IMG_CONTEXT> per image, which InternVLProcessor expands to <img>…</img>).
INTERNVL_TEMPLATE = Path(__file__).parent / "templates" / "internvl.jinja"
# Gemma 4's own template, as google/gemma-4-E2B-it ships it now (TRL stores it byte for byte).
GEMMA4_TEMPLATE = "gemma4_v5"

_IMAGENET_MEAN = [0.485, 0.456, 0.406]
_IMAGENET_STD = [0.229, 0.224, 0.225]


def _decoder(tokenizer: Any, pad: int, eos: int, **extra: Any) -> dict[str, Any]:
    """A Qwen-style decoder's ``text_config``: hidden 64, 2 layers, 4 query / 2 KV heads (GQA, as the real ones)."""
    return {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "vocab_size": padded_vocab(tokenizer),
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
        "bos_token_id": pad,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "tie_word_embeddings": False,
        **extra,
    }


def _internvl(text_model_type: str, added: tuple[str, ...], text: dict[str, Any]) -> tuple[Any, Any, Any]:
    from transformers import GotOcr2ImageProcessor, InternVLConfig, InternVLProcessor, InternVLVideoProcessor

    template = INTERNVL_TEMPLATE.read_text(encoding="utf-8")
    tokenizer = make_tokenizer(QWEN_SPECIAL, added, template, extra_special=INTERNVL_SPECIAL, named=INTERNVL_NAMED)
    pad, eos, context = token_ids(tokenizer, "<|endoftext|>", "<|im_end|>", "<IMG_CONTEXT>")
    # InternViT on 32 px crops of 8 px patches: a 4x4 grid, pixel-shuffled by 0.5 to 2x2 = 4
    # tokens per crop (real: 448 / 14 = 32x32 -> 256).
    crop, patch, ratio = 32, 8, 0.5
    tokens_per_crop = int((crop // patch) ** 2 * ratio**2)
    config = InternVLConfig(
        text_config={"model_type": text_model_type, **_decoder(tokenizer, pad, eos, **text)},
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": crop,
            "patch_size": patch,
            "hidden_act": "gelu",
            "norm_type": "layer_norm",
            "use_qk_norm": False,
            "use_absolute_position_embeddings": True,
        },
        image_token_id=context,
        image_seq_length=tokens_per_crop,
        downsample_ratio=ratio,
        projector_hidden_act="gelu",
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        tie_word_embeddings=False,
    )
    size = {"height": crop, "width": crop}
    # Dynamic tiling as the real processor does it (crops plus a thumbnail), capped at 4 crops.
    image_processor = GotOcr2ImageProcessor(
        size=size, crop_to_patches=True, min_patches=1, max_patches=4, image_mean=_IMAGENET_MEAN, image_std=_IMAGENET_STD
    )
    video_processor = InternVLVideoProcessor(size=size, image_mean=_IMAGENET_MEAN, image_std=_IMAGENET_STD)
    processor = InternVLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        image_seq_length=tokens_per_crop,
        chat_template=template,
    )
    return config, processor, generation_config(tokenizer, bos_token_id=pad)


def internvl3() -> tuple[Any, Any, Any]:
    """InternVL3-style (OpenGVLab/InternVL3-*-hf): InternViT + MLP projector + a Qwen2 decoder."""
    return _internvl("qwen2", QWEN25_ADDED, {})


def internvl3_5() -> tuple[Any, Any, Any]:
    """InternVL3.5-style (OpenGVLab/InternVL3_5-*-HF): the same, with a Qwen3 decoder (q/k norms, head_dim 16)."""
    return _internvl("qwen3", QWEN3_ADDED, {"head_dim": 16})


def _gemma4_text(tokenizer: Any) -> dict[str, Any]:
    """Gemma-4's ``text_config`` for ``tokenizer`` (the tiny Gemma tokenizer): hidden 64, 4 decoder
    layers alternating sliding and full attention, the last two sharing KV, per-layer embeddings of
    width 8 over the padded vocabulary, tied input and output embeddings."""
    pad, eos, bos = token_ids(tokenizer, "<pad>", "<eos>", "<bos>")
    vocab = padded_vocab(tokenizer)
    # Real E4B: 42 layers, sliding window 512 with a full-attention layer every 6th, the last
    # 18 layers reusing earlier layers' KV, PLE width 256. Here 4 layers (sliding, full,
    # sliding, full), the last two sharing KV, a window of 24 tokens so prompts outrun it.
    layer_types = ["sliding_attention", "full_attention"] * 2
    return {
        "vocab_size": vocab,
        "vocab_size_per_layer_input": vocab,
        "hidden_size_per_layer_input": 8,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": len(layer_types),
        "layer_types": layer_types,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 32,
        "sliding_window": 24,
        "num_kv_shared_layers": 2,
        "final_logit_softcapping": 30.0,
        "max_position_embeddings": 32768,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
        },
        "pad_token_id": pad,
        "eos_token_id": eos,
        "bos_token_id": bos,
        "tie_word_embeddings": True,
    }


def _gemma4_config(tokenizer: Any, patch: int, pool: int) -> Any:
    """The tiny ``Gemma4Config``: :func:`_gemma4_text`'s decoder, a 2-layer vision encoder of
    ``patch`` px patches pooled ``pool`` x ``pool``, a one-layer audio tower, and the ids of
    ``tokenizer``'s image, video and audio tokens."""
    from transformers import Gemma4Config

    boi, eoi, image, video, boa, eoa, audio = token_ids(
        tokenizer, "<|image>", "<image|>", "<|image|>", "<|video|>", "<|audio>", "<audio|>", "<|audio|>"
    )
    return Gemma4Config(
        text_config=_gemma4_text(tokenizer),
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "patch_size": patch,
            "pooling_kernel_size": pool,
            # 2D position table: one row per patch index along a side (max 560 px / 4).
            "position_embedding_size": 160,
        },
        audio_config={
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "subsampling_conv_channels": [8, 4],
            "output_proj_dims": 32,
        },
        boi_token_id=boi,
        eoi_token_id=eoi,
        image_token_id=image,
        video_token_id=video,
        boa_token_id=boa,
        eoa_token_index=eoa,
        audio_token_id=audio,
        tie_word_embeddings=True,
    )


def gemma4() -> tuple[Any, Any, Any]:
    """Gemma-4 E-series style (google/gemma-4-E4B-it): SigLIP-like vision encoder with 2D RoPE and
    pooling, per-layer embeddings (PLE), sliding/full attention layers, shared KV in the last layers,
    a conformer audio tower, and Gemma's own tokenizer conventions (``<bos>`` prepended)."""
    from transformers import Gemma4AudioFeatureExtractor, Gemma4ImageProcessor, Gemma4Processor, Gemma4VideoProcessor

    template = trl_template(GEMMA4_TEMPLATE)
    tokenizer = make_tokenizer(GEMMA4_SPECIAL, (), template, named=GEMMA4_NAMED, eos="<eos>", pad="<pad>", bos="<bos>")
    (bos,) = token_ids(tokenizer, "<bos>")
    patch, pool, soft_tokens = 4, 2, 70  # 70: the smallest budget Gemma4ImageProcessor accepts
    config = _gemma4_config(tokenizer, patch, pool)
    image_processor = Gemma4ImageProcessor(patch_size=patch, pooling_kernel_size=pool, max_soft_tokens=soft_tokens)
    video_processor = Gemma4VideoProcessor(patch_size=patch, pooling_kernel_size=pool, max_soft_tokens=soft_tokens)
    processor = Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=template,
        image_seq_length=soft_tokens,
    )
    # Gemma 4 ends a turn with <turn|> and a sequence with <eos>; generation stops on either.
    return config, processor, generation_config(tokenizer, stop=("<turn|>", "<eos>"), pad="<pad>", bos_token_id=bos)
