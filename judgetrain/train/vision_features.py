"""The frozen vision tower's features, computed once per distinct image while training
(``vision_feature_cache``; :class:`~judgetrain.train.args.VisionFeatureArguments`).

LoRA on the language model leaves the vision tower and its merger frozen, and a TimeCatch
sequence shows the same frames in several records, epoch after epoch; plainly, every record
sends them through the tower again (~15% of a Qwen3-VL step). Here the data loader's collator
(:class:`KeyedCollator`, any collator: TRL's or :class:`~judgetrain.train.packing.PackingCollator`)
adds one content digest per image to each batch, on the CPU: BLAKE2b of that image's
``pixel_values`` rows and its ``image_grid_thw`` row, as two int64 under :data:`IMAGE_KEYS`. The
trainer's loss (:class:`~judgetrain.train.trainer.JudgeSFTTrainer`) hands the batch to
:class:`VisionFeatureCache`, which sends the images it does not hold through the model's own
``get_image_features`` together, without gradients, and gives the forward pass every image's
features as transformers' ``mm_encoder_outputs`` (DeepStack layers included) instead of
``pixel_values``; ``image_grid_thw`` stays (M-RoPE reads it). The Qwen-VL towers attend within
each image, so an image's features do not depend on its batch: loss and gradients are those of
the plain step up to float rounding. The features kept are bounded (``vision_cache_mb``, least
recently used dropped first; one entry may exceed it) and live as long as the trainer.

Only for a frozen tower (:func:`cache_problems` refuses a trainable one, naming the fix) and a
model whose forward takes ``mm_encoder_outputs`` with one ``image_grid_thw`` row per image
(Qwen2-VL, Qwen2.5-VL, Qwen3-VL; LLaVA-OneVision is refused, not run plainly). Training batches
only: an evaluation batch takes the plain path (its images would only push the training images
out). Scoring does the same within one call (:mod:`judgetrain.scoring.vision`).
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import hashlib
import inspect
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["IMAGE_KEYS", "KeyedCollator", "VisionFeatureCache", "cache_problems", "image_digests", "unwrapped"]

# the batch key of the images' digests: (images, 2) int64, one row per image_grid_thw row
IMAGE_KEYS = "judgetrain_image_keys"


def image_digests(pixel_values: Any, image_grid_thw: Any) -> Any:
    """One 128-bit BLAKE2b digest per image, as an ``(images, 2)`` int64 tensor: of the image's
    rows of ``pixel_values`` (``prod(grid)`` rows each, in order), their dtype and shape, and its
    grid row. Equal digests: equal inputs to the vision tower."""
    import numpy as np
    import torch

    grid = image_grid_thw.detach().cpu()
    rows = torch.split(pixel_values.detach().cpu(), grid.prod(-1).tolist())
    out = np.empty((len(rows), 2), dtype=np.int64)
    for i, (pixels, thw) in enumerate(zip(rows, grid, strict=True)):
        h = hashlib.blake2b(digest_size=16)
        h.update(f"{pixels.dtype}:{tuple(pixels.shape)}:{thw.tolist()}".encode())
        h.update(pixels.contiguous().view(torch.uint8).numpy().tobytes())
        out[i] = np.frombuffer(h.digest(), dtype="<i8")
    return torch.from_numpy(out)


class KeyedCollator:
    """``inner`` (any collator) whose batches with ``pixel_values`` and ``image_grid_thw`` also
    carry :data:`IMAGE_KEYS` (:func:`image_digests`). Runs in the data loader (its workers
    too); every other attribute is ``inner``'s."""

    def __init__(self, inner: Callable[[list[Any]], dict[str, Any]]):
        self.inner = inner

    def __call__(self, examples: list[Any]) -> dict[str, Any]:
        batch = self.inner(examples)
        if batch.get("pixel_values") is not None and batch.get("image_grid_thw") is not None:
            batch[IMAGE_KEYS] = image_digests(batch["pixel_values"], batch["image_grid_thw"])
        return batch

    def __getattr__(self, name: str) -> Any:
        if name == "inner" or name.startswith("__"):  # not set yet (unpickling in a worker)
            raise AttributeError(name)
        return getattr(self.inner, name)


def unwrapped(model: Any, accelerator: Any = None) -> Any:
    """The transformers model under DDP / DeepSpeed (``accelerator``'s wrapping) and PEFT."""
    inner = accelerator.unwrap_model(model) if accelerator is not None else model
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def cache_problems(model: Any) -> list[str]:
    """Why ``vision_feature_cache`` cannot serve ``model`` (PEFT-wrapped or not), each with the
    fix: a forward without ``mm_encoder_outputs`` or an image tower without ``image_grid_thw``,
    or a vision tower or projector parameter that trains."""
    base = unwrapped(model)
    features = getattr(base, "get_image_features", None)
    kind = getattr(base.config, "model_type", type(base).__name__)
    if (
        "mm_encoder_outputs" not in inspect.signature(base.forward).parameters
        or features is None
        or ("image_grid_thw" not in inspect.signature(features).parameters)
    ):
        return [
            f"vision_feature_cache: {kind}'s forward does not take precomputed image features (mm_encoder_outputs) "
            "with one image_grid_thw row per image, as Qwen2-VL, Qwen2.5-VL and Qwen3-VL do; set vision_feature_cache: false"
        ]
    from judgetrain.models import detect_family

    family = detect_family(base.config)
    trained = [
        n for n, p in model.named_parameters() if p.requires_grad and (family.is_vision_tower(n) or family.is_projector(n))
    ]
    if trained:
        return [
            f"vision_feature_cache: the vision tower or projector trains ({len(trained)} parameters, e.g. {trained[0]}), so "
            "its features change every step and cannot be kept; set vision_feature_cache: false, or keep freeze_vision_tower "
            "and freeze_projector true with lora_target_modules and lora_modules_to_save off the vision tower"
        ]
    return []


class VisionFeatureCache:
    """The image features of a training run, each distinct image encoded once while it stays
    kept. ``inputs(model, batch, keys)``: the batch with ``pixel_values`` replaced by
    ``mm_encoder_outputs``. ``seen`` / ``encoded`` count the images shown / sent through the
    tower, ``hits`` those reused (kept from an earlier batch or repeated within one); ``kept`` holds features by digest, ``bytes`` their
    size, bounded by ``capacity`` (bytes; least recently used dropped first, one entry always
    kept)."""

    def __init__(self, capacity_bytes: int):
        self.capacity = capacity_bytes
        self.kept: OrderedDict[tuple[int, int], tuple[Any, list[Any]]] = OrderedDict()
        self.bytes = 0
        self.seen = 0
        self.encoded = 0
        self.output_type: Any = None  # the model's own class of image features, from its first pass

    @property
    def hits(self) -> int:
        return self.seen - self.encoded

    def inputs(self, base: Any, batch: Mapping[str, Any], keys: Any) -> dict[str, Any]:
        """``batch`` for ``base`` (the unwrapped model, :func:`unwrapped`) with the features of its
        images (``keys``: their :data:`IMAGE_KEYS`) as ``mm_encoder_outputs``; unchanged without
        ``pixel_values``, or with videos (the forward takes features or pixels, not both)."""
        if batch.get("pixel_values") is None or batch.get("pixel_values_videos") is not None:
            return dict(batch)
        order = [(int(a), int(b)) for a, b in keys.tolist()]
        self.seen += len(order)
        feats = {k: self.kept[k] for k in dict.fromkeys(order) if k in self.kept}  # before any is dropped
        for k in feats:
            self.kept.move_to_end(k)
        feats.update(self._encode(base, batch["pixel_values"], batch["image_grid_thw"], order))
        fields: dict[str, Any] = {"pooler_output": tuple(feats[k][0] for k in order)}
        layers = len(feats[order[0]][1])
        if layers:
            fields["deepstack_features"] = [tuple(feats[k][1][layer] for k in order) for layer in range(layers)]
        out = {k: v for k, v in batch.items() if k != "pixel_values"}
        out["mm_encoder_outputs"] = {"image": self.output_type(**fields)}
        return out

    def _encode(self, base: Any, pixel_values: Any, grid: Any, order: list[tuple[int, int]]) -> dict[tuple[int, int], tuple]:
        """The features of the images not kept (first occurrence of each), in one tower pass
        without gradients; kept at once (the bound applied)."""
        import torch

        new = [k for k in dict.fromkeys(order) if k not in self.kept]
        if not new:
            return {}
        rows = torch.split(pixel_values, grid.prod(-1).tolist())
        first = [order.index(k) for k in new]
        with torch.no_grad():
            out = base.get_image_features(
                pixel_values=torch.cat([rows[i] for i in first]), image_grid_thw=grid[first], return_dict=True
            )
        self.output_type = type(out)
        self.encoded += len(new)
        deep = getattr(out, "deepstack_features", None) or []
        feats = {k: (out.pooler_output[j].detach(), [layer[j].detach() for layer in deep]) for j, k in enumerate(new)}
        for k in new:
            self.kept[k] = feats[k]
            self.bytes += _size(feats[k])
        while self.bytes > self.capacity and len(self.kept) > 1:
            _, dropped = self.kept.popitem(last=False)
            self.bytes -= _size(dropped)
        return feats

    def summary(self) -> str:
        """One line of counts, for the log."""
        share = f" ({100 * self.hits / self.seen:.1f}%)" if self.seen else ""
        return (
            f"vision_feature_cache: {self.seen} images shown, {self.encoded} sent through the vision tower, "
            f"{self.hits} reused{share}; {len(self.kept)} kept in {self.bytes / 2**20:.1f} MiB of {self.capacity / 2**20:.0f}"
        )


def _size(entry: tuple[Any, list[Any]]) -> int:
    pooled, deep = entry
    return sum(t.numel() * t.element_size() for t in [pooled, *deep])
