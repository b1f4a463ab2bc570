"""Perceptual distance (LPIPS) and the TimeCatch near-duplicate filter.

Wraps the ``lpips`` package (Zhang et al., 2018) as its authors intend:
``lpips.LPIPS(net=...)`` on inputs scaled to [-1, 1], many pairs per forward
pass; for the filter, lpips' own modules in two steps (the backbone once per
frame, the head per pair: :meth:`LpipsDistance.features`,
:meth:`LpipsDistance.distance_from_features`), equal to the forward pass to
float64 rounding with half the backbone passes for consecutive pairs. The
AlexNet backbone needs torchvision's ImageNet weights, which the package
downloads on first use; offline they must already be in torch's hub cache (see
:func:`backbone_weights_path`). Tests use the same code path with
``pretrained_backbone=False`` (``pnet_rand=True``: a random backbone).

The same frames give the same stored distances and the same keep/drop decisions
whatever the thread count or device: the network runs in float64 (its float32
reductions differ in the last bits with the thread count and the device), and the
filter decides on the distance rounded to :data:`LPIPS_DECIMALS` places, which is
also the value stored (see :func:`quantize`). The one exception is a distance within
~1e-12 of a rounding midpoint, which a few float64 ulps could still tip.
Docs: "how-to/real-checkpoints.md", "concepts/timecatch.md" (what is guaranteed).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

if TYPE_CHECKING:  # torch loads on first use: a builder's --help and manifest checks do not pay for it
    import torch

from judgetrain.errors import UserError

__all__ = [
    "CPU_BATCH_PIXELS",
    "CUDA_BATCH_PIXELS",
    "LPIPS_DECIMALS",
    "LPIPS_NETS",
    "LPIPS_NUMERICS",
    "BackboneWeightsMissing",
    "LpipsDeviceError",
    "LpipsDistance",
    "backbone_weights_path",
    "filter_near_duplicates",
    "quantize",
]

_BACKBONE_URLS = {
    "alex": "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
    "vgg": "https://download.pytorch.org/models/vgg16-397923af.pth",
    "squeeze": "https://download.pytorch.org/models/squeezenet1_1-b8a52dc0.pth",
}
LPIPS_NETS = tuple(_BACKBONE_URLS)  # the backbones lpips.LPIPS(net=...) takes
# Decimal places of a stored LPIPS distance, and of the value the filter compares with its
# threshold. float64 results on 1, 2 and 4 CPU threads differ by at most a few 1e-17 (measured
# on the synthetic frames), so rounding to 6 places makes them equal unless the exact value
# lies within ~1e-12 of a rounding midpoint (k + ½)·1e-6.
LPIPS_DECIMALS = 6
# How distances are computed and rounded: part of a cached result's key, so that results of
# other numerics (the float32 network of earlier versions) are recomputed, not reused.
LPIPS_NUMERICS = f"float64, {LPIPS_DECIMALS} places"
# Pixels per backbone batch by default (frames per batch = max(1, budget // (H·W))): a batch of a few
# large frames is as fast per frame as a batch of many small ones, while many large frames per batch
# run slower per frame (their float64 activations outgrow the caches). CPU: measured with the random
# AlexNet, one thread, the features path, ms per frame at batch 1/2/4/8/16/32: 64² 6.1/4.8/3.8/3.6/2.9/2.8,
# 128² 14.1/11.4/10.7/9.8/11.9/12.2, 224² 33.2/32.2/36.9/37.6/40.9/41.0, 448² 135/136/157/170/163 (to 16):
# the best batch holds ~65k-200k pixels, so 2^17 (64² → 32 frames, 128² → 8, 224² → 2, 448² → 1). CUDA: 2^22 (448² → 20
# frames, 64² → 1024), enough to fill a GPU's float64 units; not yet measured on a GPU
# (benchmarks/bench_eval.py's LPIPS batch rows on --device cuda measure it).
CPU_BATCH_PIXELS = 2**17
CUDA_BATCH_PIXELS = 2**22


def quantize(d: float) -> float:
    """An LPIPS distance as stored and as the filter compares it: ``round(d, LPIPS_DECIMALS)``."""
    return round(float(d), LPIPS_DECIMALS)


class BackboneWeightsMissing(UserError, FileNotFoundError):
    """The LPIPS backbone's ImageNet weights are not cached and cannot be fetched."""


class LpipsDeviceError(UserError, ValueError):
    """A device LPIPS cannot run on in float64."""


def backbone_weights_path(net: str = "alex") -> Path:
    """Where torchvision looks for the backbone weights (``$TORCH_HOME/hub/checkpoints``)."""
    import torch

    return Path(torch.hub.get_dir()) / "checkpoints" / _BACKBONE_URLS[net].rsplit("/", 1)[1]


def _missing_message(net: str, cause: Exception | None) -> str:
    path = backbone_weights_path(net)
    why = f" ({cause.__class__.__name__}: {cause})" if cause else ""
    return (
        f"LPIPS needs the ImageNet weights of its '{net}' backbone at {path}, and they could not be "
        f"loaded{why}. On a machine with internet run `python -c \"import lpips; lpips.LPIPS(net='{net}')\"` "
        f"once (or download {_BACKBONE_URLS[net]}) and copy the file to {path} "
        f"(set TORCH_HOME to use another cache folder)."
    )


class LpipsDistance:
    """Batched LPIPS distances between pairs of RGB uint8 frames.

    ``__call__(a, b)`` returns a float64 array of ``len(a)`` distances, pair
    ``k`` being ``LPIPS(a[k], b[k])``, on ``device`` (CUDA when available). Frames go
    through the network in batches of :meth:`frames_per_batch`: ``batch_size`` when given (pairs
    per batch in ``__call__``, frames in :meth:`features`), else as many as fit ``batch_pixels``
    (default :data:`CPU_BATCH_PIXELS` or :data:`CUDA_BATCH_PIXELS` by device), so large frames go
    a few at a time and small ones many; the batch never changes a distance. The network's
    weights, inputs and arithmetic are float64 on every device: on 1, 2 and 4
    CPU threads the results agree to a few ulps (float32's differed by ~1e-8,
    enough to change a 6-place value), and :func:`quantize` removes the rest.
    MPS has no float64 and is refused (:class:`LpipsDeviceError`).

    :meth:`features` runs the backbone once per frame and :meth:`distance_from_features`
    applies lpips' head to two frames' features: what :func:`filter_near_duplicates` uses,
    so that a frame in several pairs goes through the backbone once.
    """

    def __init__(
        self,
        net: str = "alex",
        *,
        pretrained_backbone: bool = True,
        device: str | None = None,
        batch_size: int | None = None,
        batch_pixels: int | None = None,
        seed: int = 0,
    ):
        import lpips
        import torch

        if net not in _BACKBONE_URLS:
            raise ValueError(f"unknown LPIPS network {net!r}; choose one of {sorted(_BACKBONE_URLS)}")
        self.net_name = net
        self.pretrained_backbone = pretrained_backbone
        for name, value in (("batch_size", batch_size), ("batch_pixels", batch_pixels)):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 (or None: chosen by frame size), got {value}")
        self.batch_size = batch_size  # an explicit batch, else None: batch_pixels decides
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        cuda = self.device.type == "cuda"
        self.batch_pixels = batch_pixels or (CUDA_BATCH_PIXELS if cuda else CPU_BATCH_PIXELS)
        if self.device.type == "mps":
            raise LpipsDeviceError(
                f"--device {device}: LPIPS runs in float64 so that distances do not depend on the "
                "device or thread count, and MPS has no float64; use --device cpu"
            )
        with warnings.catch_warnings():
            # lpips 0.1.4 passes torchvision's deprecated `pretrained=` flag.
            warnings.simplefilter("ignore", UserWarning)
            try:
                # A random backbone is drawn from torch's global RNG: seed it
                # locally so that the same build seed gives the same filter.
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(seed)
                    self.model = lpips.LPIPS(net=net, pnet_rand=not pretrained_backbone, verbose=False)
            except (OSError, RuntimeError) as e:  # URLError is an OSError
                if pretrained_backbone:
                    raise BackboneWeightsMissing(_missing_message(net, e)) from e
                raise
        self.model.eval().to(self.device, torch.float64)

    def frames_per_batch(self, frames: Sequence[np.ndarray], per_item: int = 1) -> int:
        """Items per backbone batch for frames the size of ``frames[0]``: ``batch_size`` when
        given, else ``max(1, batch_pixels // (per_item·H·W))``; ``per_item`` frames go through the
        backbone per item (2 for a pair). 1 when ``frames`` is empty."""
        if self.batch_size is not None:
            return self.batch_size
        if len(frames) == 0:
            return 1
        h, w = frames[0].shape[:2]
        return max(1, self.batch_pixels // (per_item * h * w))

    @staticmethod
    def to_tensor(frames: Sequence[np.ndarray]) -> torch.Tensor:
        """(N, H, W, 3) uint8 → (N, 3, H, W) float64 in [-1, 1], as lpips expects."""
        import torch

        x = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).double()
        return x / 127.5 - 1.0

    def __call__(self, a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> np.ndarray:
        """Distances of the pairs ``(a[k], b[k])`` by ``lpips.LPIPS.forward``: float64, shape ``(len(a),)``."""
        import torch

        if len(a) != len(b):
            raise ValueError(f"need as many frames in a ({len(a)}) as in b ({len(b)})")
        out = []
        step = self.frames_per_batch(a, per_item=2)
        with torch.inference_mode():
            for start in range(0, len(a), step):
                x = self.to_tensor(a[start : start + step]).to(self.device)
                y = self.to_tensor(b[start : start + step]).to(self.device)
                out.append(self.model(x, y).flatten().cpu())
        return torch.cat(out).numpy() if out else np.zeros(0)

    @property
    def supports_features(self) -> bool:
        """Whether :meth:`features` + :meth:`distance_from_features` reproduce ``forward``: the
        settings judgetrain builds (``version='0.1'``, ``lpips=True``, ``spatial=False``), any net."""
        m = self.model
        return m.version == "0.1" and m.lpips and not m.spatial

    def features(self, frames: Sequence[np.ndarray]) -> list[torch.Tensor]:
        """The normalised backbone features of ``frames``, each frame through the network once.

        Returns one float64 tensor per backbone layer (5 for alex and vgg, 7 for squeeze), of shape
        ``(len(frames), C_l, H_l, W_l)`` on :attr:`device`: ``lpips.normalize_tensor`` of
        ``model.net(model.scaling_layer(x))``, exactly the tensors ``LPIPS.forward`` compares. Frames go
        :meth:`frames_per_batch` at a time; at least one frame. Requires :attr:`supports_features`.
        """
        import lpips
        import torch

        if not self.supports_features:
            raise ValueError("features() mirrors LPIPS version 0.1 with lpips=True, spatial=False; use the pair call")
        if len(frames) == 0:
            raise ValueError("features() needs at least one frame")
        per_layer: list[list[torch.Tensor]] = [[] for _ in range(self.model.L)]
        step = self.frames_per_batch(frames)
        with torch.inference_mode():
            for start in range(0, len(frames), step):
                x = self.to_tensor(frames[start : start + step]).to(self.device)
                # Called as a module, not .forward(), so that hooks on model.net see every pass.
                outs = self.model.net(self.model.scaling_layer(x))
                for kk in range(self.model.L):
                    per_layer[kk].append(lpips.normalize_tensor(outs[kk]))
        return [torch.cat(chunks) if len(chunks) > 1 else chunks[0] for chunks in per_layer]

    def distance_from_features(self, fa: Sequence[torch.Tensor], fb: Sequence[torch.Tensor]) -> np.ndarray:
        """LPIPS distances from two frames' :meth:`features`: row ``k`` of ``fa`` against row ``k`` of ``fb``.

        Either side may have one row, which is then compared with every row of the other
        (broadcasting). Returns float64 ``(rows,)``: lpips' own head, ``sum_l spatial_average(lins[l]((fa_l -
        fb_l) ** 2))`` as in ``LPIPS.forward``, so ``distance_from_features(features(a), features(b))`` equals
        ``self(a, b)`` to float64 rounding (~1e-16).
        """
        import lpips
        import torch

        m = self.model
        with torch.inference_mode():
            # lpips is untyped: its per-layer averages are tensors, summed in layer order as LPIPS.forward does
            val = cast(
                "torch.Tensor", sum(lpips.spatial_average(m.lins[kk]((fa[kk] - fb[kk]) ** 2), keepdim=True) for kk in range(m.L))
            )
        return val.flatten().cpu().numpy()

    def consecutive_distances(self, frames: Sequence[np.ndarray], chunk_size: int | None = None) -> np.ndarray:
        """``d(frames[k], frames[k + 1])`` for every ``k``: float64 ``(len(frames) - 1,)``, each frame through
        the backbone once, ``chunk_size`` frames (default :meth:`frames_per_batch`) of features held at a time."""
        chunk = chunk_size or self.frames_per_batch(frames)
        out, prev = [], None  # prev: the features of the frame before the chunk
        for start in range(0, len(frames), chunk):
            f = self.features(frames[start : start + chunk])
            if prev is not None:
                out.append(self.distance_from_features(prev, _rows(f, 0, 1)))
            if len(f[0]) > 1:
                out.append(self.distance_from_features(_rows(f, 0, -1), _rows(f, 1, None)))
            prev = _rows(f, -1, None, copy=True)
        return np.concatenate(out) if out else np.zeros(0)


def _rows(f: list[torch.Tensor], start: int, stop: int | None, *, copy: bool = False) -> list[torch.Tensor]:
    """Rows ``start:stop`` of every layer of features; ``copy`` so that a kept slice does not hold
    the whole chunk's storage alive."""
    return [t[start:stop].clone() if copy else t[start:stop] for t in f]


def _same_size(frames: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Frames of a sequence resized to the first frame's size when they differ
    (image folders may mix sizes; LPIPS compares equal-sized images)."""
    h, w = frames[0].shape[:2]
    if all(f.shape[:2] == (h, w) for f in frames):
        return list(frames)
    from PIL import Image

    return [
        f if f.shape[:2] == (h, w) else np.asarray(Image.fromarray(f).resize((w, h), Image.Resampling.BILINEAR)) for f in frames
    ]


def filter_near_duplicates(
    frames: Sequence[np.ndarray], distance: LpipsDistance, threshold: float = 0.05, *, chunk_size: int | None = None
) -> tuple[list[int], list[float]]:
    """Walk the sequence and drop each frame whose LPIPS distance to the
    previously *kept* frame is below ``threshold`` (paper 000 §3.3).

    Returns ``(kept, dists)``: 0-based indices of the kept frames (the first is
    always kept) and, for each kept frame after the first, its distance to the
    kept frame before it (so ``len(dists) == len(kept) - 1``). Each distance is
    rounded by :func:`quantize` first, and that value is both compared with ``threshold``
    and returned, so a kept frame's stored distance is never below the threshold
    and the decisions are as reproducible as the stored values.

    Exactly the sequential rule. With an :class:`LpipsDistance` (``supports_features``) each frame
    goes through the backbone once: frames are read in chunks of ``chunk_size`` (default the
    distance's :meth:`~LpipsDistance.frames_per_batch` for these frames), and only the current chunk's features and the last kept frame's are
    held, so memory does not grow with the sequence. Any other callable ``distance(a, b)`` is asked
    for pairs of frames (all consecutive pairs in one call, then, after a drop, the remaining frames
    against the last kept one).
    """
    if len(frames) == 0:
        return [], []
    frames = _same_size(frames)
    if getattr(distance, "supports_features", False):
        return _filter_by_features(frames, distance, threshold, chunk_size or distance.frames_per_batch(frames))
    return _filter_by_pairs(frames, distance, threshold)


def _filter_by_features(
    frames: list[np.ndarray], distance: LpipsDistance, threshold: float, chunk: int
) -> tuple[list[int], list[float]]:
    kept, dists = [0], []
    anchor = None  # features of frame kept[-1], one row, a copy
    for start in range(0, len(frames), chunk):
        f = distance.features(frames[start : start + chunk])
        if anchor is None:  # the first chunk: frame 0 is kept
            anchor, first = _rows(f, 0, 1, copy=True), 1
        else:
            first = 0
        # Consecutive pairs in one head pass; a frame after a drop is compared with the anchor,
        # and then so are the rest of the chunk (one pass, reused while the anchor stays).
        # consecutive[j - start - offset] = d(j - 1, j); the pair across the chunk boundary only
        # when frame start - 1 was kept (the anchor then is that frame; if it was dropped, frame
        # start is compared with an earlier one).
        consecutive = distance.distance_from_features(_rows(f, 0, -1), _rows(f, 1, None)) if len(f[0]) > 1 else np.zeros(0)
        offset = 1
        if kept[-1] == start - 1:
            consecutive, offset = np.concatenate([distance.distance_from_features(anchor, _rows(f, 0, 1)), consecutive]), 0
        against: tuple[int, int, np.ndarray] | None = None  # (anchor index, first row, distances to it)
        for j in range(start + first, start + len(f[0])):
            last = kept[-1]
            if last == j - 1:
                d = consecutive[j - start - offset]
            else:
                if against is None or against[0] != last:
                    against = (last, j, distance.distance_from_features(anchor, _rows(f, j - start, None)))
                d = against[2][j - against[1]]
            d = quantize(d)
            if d >= threshold:
                kept.append(j)
                dists.append(d)
                anchor = _rows(f, j - start, j - start + 1, copy=True)
    return kept, dists


def _filter_by_pairs(frames: list[np.ndarray], distance, threshold: float) -> tuple[list[int], list[float]]:
    n = len(frames)
    consecutive = distance(frames[:-1], frames[1:]) if n > 1 else np.zeros(0)
    kept, dists = [0], []
    against: tuple[int, np.ndarray] | None = None  # (anchor, distances of frames anchor+1.. to it)
    for j in range(1, n):
        last = kept[-1]
        if last == j - 1:
            d = consecutive[j - 1]
        else:
            if against is None or against[0] != last:
                rest = frames[j:]
                against = (last, np.concatenate([np.full(j - last - 1, np.nan), distance([frames[last]] * len(rest), rest)]))
            d = against[1][j - last - 1]
        d = quantize(d)
        if d >= threshold:
            kept.append(j)
            dists.append(d)
    return kept, dists
