"""One vision-tower pass per distinct image within a scoring call, :class:`SharedImages`.

A TimeCatch source sequence gives several records over the same frames (the gold and the
swapped order under each prompt layout, the temporal-localization item, the frame-noise
pair: all but one frame shared), and a judge shows the same pair in both orders; scored
plainly, every record sends its frames through the vision tower again. Here each batch's
images are keyed by content (BLAKE2b of the pixels, with size and mode), the images not yet
seen in this call go through the model's own ``get_image_features`` together, and the
forward pass gets every image's features through transformers' ``mm_encoder_outputs``
argument (precomputed encoder outputs) instead of ``pixel_values``. The features of an
image do not depend on the other images of its batch (the Qwen-VL vision towers attend
within each image), so the scores are those of the plain pass up to float rounding.

Applies to models whose processor gives one ``image_grid_thw`` row per image and whose
forward takes ``mm_encoder_outputs`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, DeepStack features
included); other models take the plain path. The features kept between batches are bounded
(:data:`DEFAULT_CAPACITY_BYTES`, least recently used dropped first) and live only as long as
the call. Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_CAPACITY_BYTES", "SharedImages", "image_key"]

# Device memory the features kept between batches may take (an image of Qwen3-VL-8B at 448^2 with
# its DeepStack layers is ~8 MB in bf16, so ~60 images; at 360x202, ~240).
DEFAULT_CAPACITY_BYTES = 512 * 2**20


def image_key(image: Any) -> bytes:
    """A digest of an image's content (PIL image or array): equal pixels, size and mode give
    the same key, so the processor turns them into the same pixel values."""
    h = hashlib.blake2b(digest_size=16)
    if hasattr(image, "tobytes") and hasattr(image, "mode"):  # PIL
        h.update(f"pil:{image.mode}:{image.size}".encode())
    else:
        h.update(f"array:{getattr(image, 'dtype', '')}:{getattr(image, 'shape', '')}".encode())
    h.update(image.tobytes())
    return h.digest()


class SharedImages:
    """The image features of one scoring call, each distinct image encoded once.

    ``inputs(model_inputs, images)`` returns the forward pass's inputs: with ``pixel_values``
    replaced by ``mm_encoder_outputs`` when the model can take them, else unchanged.
    ``encoded`` / ``seen`` count the images sent through the vision tower / shown;
    ``capacity_bytes`` (default :data:`DEFAULT_CAPACITY_BYTES`) bounds the features kept."""

    def __init__(self, model: Any, enabled: bool = True, capacity_bytes: int | None = None):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.base = base
        import inspect

        takes = "mm_encoder_outputs" in inspect.signature(base.forward).parameters
        self.enabled = enabled and takes and callable(getattr(base, "get_image_features", None))
        self.capacity = DEFAULT_CAPACITY_BYTES if capacity_bytes is None else capacity_bytes
        self._type: Any = None  # the model's own output class for image features, from its first pass
        self.kept: OrderedDict[bytes, tuple[Any, list[Any]]] = OrderedDict()
        self.bytes = 0
        self.encoded = 0
        self.seen = 0

    def inputs(self, inputs: Mapping[str, Any], images: Sequence[Sequence[Any]]) -> dict[str, Any]:
        flat = [im for per_item in images for im in per_item]
        grid = inputs.get("image_grid_thw")
        if not self.enabled or "pixel_values" not in inputs or grid is None or grid.shape[0] != len(flat):
            return dict(inputs)
        keys = [image_key(im) for im in flat]
        self.seen += len(keys)
        new = list(dict.fromkeys(k for k in keys if k not in self.kept))
        feats = self._encode(inputs["pixel_values"], grid, keys, new)
        for k in keys:
            if k not in feats:
                feats[k] = self.kept[k]
                self.kept.move_to_end(k)
        pooled = tuple(feats[k][0] for k in keys)
        out: dict[str, Any] = {"pooler_output": pooled}
        if feats[keys[0]][1]:
            layers = len(feats[keys[0]][1])
            out["deepstack_features"] = [tuple(feats[k][1][layer] for k in keys) for layer in range(layers)]
        self._keep(feats, new)
        result = {k: v for k, v in inputs.items() if k != "pixel_values"}
        result["mm_encoder_outputs"] = {"image": self._output_type(out)}
        return result

    def _encode(self, pixel_values: Any, grid: Any, keys: list[bytes], new: list[bytes]) -> dict[bytes, tuple]:
        """Features of the ``new`` images (first occurrence of each), in one vision-tower pass."""
        import torch

        if not new:
            return {}
        rows = torch.split(pixel_values, grid.prod(-1).tolist())
        first = [keys.index(k) for k in new]
        out = self.base.get_image_features(
            pixel_values=torch.cat([rows[i] for i in first]), image_grid_thw=grid[first], return_dict=True
        )
        self._type = type(out)
        self.encoded += len(new)
        deep = getattr(out, "deepstack_features", None) or []
        return {k: (out.pooler_output[j], [layer[j] for layer in deep]) for j, k in enumerate(new)}

    def _output_type(self, fields: dict[str, Any]) -> Any:
        return self._type(**fields)

    def _keep(self, feats: dict[bytes, tuple], new: list[bytes]) -> None:
        for k in new:
            pooled, deep = feats[k]
            self.kept[k] = feats[k]
            self.bytes += sum(t.numel() * t.element_size() for t in [pooled, *deep])
        while self.bytes > self.capacity and len(self.kept) > 1:
            _, (pooled, deep) = self.kept.popitem(last=False)
            self.bytes -= sum(t.numel() * t.element_size() for t in [pooled, *deep])
