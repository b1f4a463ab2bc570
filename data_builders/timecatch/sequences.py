"""TimeCatch's inputs: manifests of videos or frame folders, and the cached per-sequence work.

:func:`read_manifest` parses a ``videos`` or ``frames`` manifest into
:class:`SourceSequence` entries (bad lines become located skips); :func:`process_sequence`
decodes, subsamples and LPIPS-filters one sequence and caches its kept frames in
``OUT.work/`` so that a killed build resumes, keyed by everything the result depends on
(:func:`work_key`). Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from judgetrain import records
from judgetrain.identity import sha256_file
from judgetrain.io import atomic_folder, write_text
from judgetrain.jsonl import inside, optional_text, text
from judgetrain.perceptual import LPIPS_NUMERICS, filter_near_duplicates
from judgetrain.video import DECODE_RULES, VideoDecodeError, frames_every

from ..core.common import BuildError, Skip
from ..core.images import IMAGE_RULES, image_problem, to_rgb
from ..core.manifests import read_manifest_lines
from .config import MAX_FRAMES, MIN_FRAMES, SPLIT_NAMES, VERSION, TimeCatchConfig

# The smallest side each LPIPS backbone takes: below it a pooling layer's output is empty and
# torch raises "Output size is too small". Measured with lpips 0.1.4 (random and pretrained
# backbones alike): alex 31 px, vgg 16 px, squeeze 17 px, each side on its own.
LPIPS_MIN_SIDE = {"alex": 31, "vgg": 16, "squeeze": 17}
# What reading, decoding or measuring one sequence may raise: a located skip, never the build's end
# (RuntimeError: torch and PyAV; RecursionError and ValueError: decoders; MemoryError: a huge frame).
MEASURE_ERRORS = (
    OSError,
    ValueError,
    RuntimeError,
    RecursionError,
    MemoryError,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)


class SequenceProblem(ValueError):
    """A sequence that cannot be measured; the message says why and how to fix it."""


@dataclass
class SourceSequence:
    """One input sequence: a video, or an ordered list of frame files."""

    id: str
    source: str
    description: str
    split: str | None = None
    video: Path | None = None
    frames: list[Path] = field(default_factory=list)
    manifest: str = ""
    line: int | None = None


@dataclass
class SequenceSkip(Skip):
    """A skipped manifest line or sequence, with the source it names (None when it names none
    readable), so that ``build.json`` counts it under that source."""

    source: str | None = None


# --------------------------------------------------------------------------- manifests


def read_manifest(path: str | os.PathLike, kind: str) -> tuple[list[SourceSequence], list[SequenceSkip]]:
    """Parse a ``videos`` or ``frames`` manifest; every bad line becomes a :class:`SequenceSkip`
    naming ``MANIFEST:LINE``, the field, and the line's source when it names one, never an
    exception or a silent drop."""
    source_on: dict[int, str] = {}  # line -> the source it names, for the skips of lines that name one

    def parse(row: dict, _id: None, where: Path, line: int) -> SourceSequence:
        try:
            source_on[line] = text(row, "source", "")
        except ValueError:
            pass
        return _manifest_sequence(row, kind, where, line)

    sequences, skips = read_manifest_lines(path, parse, what="manifest", noun="sequence")
    return sequences, [SequenceSkip(s.path, s.line, s.reason, s.id, source_on.get(s.line or 0)) for s in skips]


def _manifest_sequence(row: dict, kind: str, path: Path, line: int) -> SourceSequence:
    """One manifest line as a sequence; ``ValueError("field: problem; fix")`` otherwise."""
    root = path.parent
    source = text(row, "source", 'name the dataset, e.g. "clevrer"')
    description = optional_text(row, "description", "a scene description, or leave it out")
    split = row.get("split")
    if split is not None and split not in SPLIT_NAMES:
        raise ValueError(f"split: {split!r}; use one of {list(SPLIT_NAMES)} or leave it out")
    if kind == "videos":
        video = inside(root, row.get("video"), "video")
        sid = text(
            row, "id", "a name for the sequence, or leave it out to use the video path", default=str(row.get("video")), ids=True
        )
        frames: list[Path] = []
    else:
        raw = row.get("frames")
        if not isinstance(raw, list) or not raw:
            raise ValueError("frames: give a non-empty list of image paths in temporal order")
        frames = [inside(root, p, "frames") for p in raw]
        video = None
        sid = text(row, "id", "a name for the sequence", ids=True)
    return SourceSequence(sid, source, description, split, video, frames, str(path), line)


# --------------------------------------------------------------------------- per-sequence work (cached)


def png_bytes(array: np.ndarray) -> bytes:
    """An RGB (H, W, 3) uint8 array as PNG bytes (how kept frames and noise frames are stored)."""
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def _load_image(path: Path) -> np.ndarray:
    problem = image_problem(path)  # a folder, a missing file, a header claiming more pixels than Pillow decodes
    if problem:
        raise SequenceProblem(f"{path}: {problem}")
    try:
        with Image.open(path) as im:
            return np.asarray(to_rgb(im))  # 16-bit, palette, CMYK: the same RGB as every builder
    except (OSError, UnidentifiedImageError, ValueError, Image.DecompressionBombError) as e:
        raise VideoDecodeError(f"{path}: unreadable image ({e})") from e


def check_lpips_size(frames: list[np.ndarray], net: str) -> None:
    """``SequenceProblem`` naming the first frame (1-based) smaller than LPIPS's ``net`` takes."""
    least = LPIPS_MIN_SIDE.get(net, 0)
    for k, frame in enumerate(frames, start=1):
        h, w = frame.shape[:2]
        if min(h, w) < least:
            raise SequenceProblem(
                f"frame {k} is {w}x{h} px; LPIPS ({net}) needs at least {least} px on each side; "
                f"give frames of at least {least}x{least} px, or drop the line"
            )


def check_sources(cfg: TimeCatchConfig) -> None:
    """A ``--videos`` / ``--frames`` manifest that is not a file fails here, before any model loads."""
    for flag, given in (("--videos", cfg.videos), ("--frames", cfg.frames)):
        if given is not None and not Path(given).is_file():
            what = "a folder, not a manifest file" if Path(given).is_dir() else "no such manifest"
            raise BuildError(f"{flag} {given}: {what}; give the JSON Lines manifest's path")


def sequence_skip(seq: SourceSequence, error: BaseException) -> SequenceSkip:
    """The located skip of a sequence whose reading or measuring raised ``error``: the manifest's
    path and line, the field, and what went wrong in words (the exception's type when it is not ours)."""
    field_name = "video" if seq.video else "frames"
    if isinstance(error, SequenceProblem):
        return SequenceSkip(seq.manifest, seq.line, f"{field_name}: {error}", seq.id, seq.source)
    what = (
        str(error)
        if isinstance(error, (VideoDecodeError, OSError))
        else f"{seq.video or 'a frame'}: {type(error).__name__}: {error}"
    )
    return SequenceSkip(
        seq.manifest, seq.line, f"{field_name}: {what}; fix or replace the file, or drop the line", seq.id, seq.source
    )


_NETWORK_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def network_digest(distance) -> str | None:
    """sha256 of an LPIPS network's weights as loaded (backbone and heads: pretrained weights, or a
    random backbone drawn from ``--seed``), once per distance object; None for a distance that is
    not a torch network (a test's hand-made matrix)."""
    model = getattr(distance, "model", None)
    if model is None:
        return None
    if distance not in _NETWORK_DIGESTS:
        h = hashlib.sha256()
        for name, tensor in sorted(model.state_dict().items()):
            h.update(name.encode())
            h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        _NETWORK_DIGESTS[distance] = h.hexdigest()
    return _NETWORK_DIGESTS[distance]


def work_key(seq: SourceSequence, cfg: TimeCatchConfig, distance) -> dict:
    """What one sequence's cached work (``OUT.work/sequences/…``) depends on, every input that can
    change it: the media by content (each file's sha256; None when missing), how files are read
    (``DECODE_RULES`` / ``IMAGE_RULES``), the sampling interval (videos), the LPIPS backbone, its
    seed when random, the threshold, numerics and the network's weights themselves, the length
    limits and the builder's version. A cached result is reused only when its key is equal."""
    files = [seq.video] if seq.video else seq.frames
    lpips = {
        "net": cfg.lpips_net,
        "pretrained_backbone": cfg.lpips_pretrained,
        "backbone_seed": None if cfg.lpips_pretrained else cfg.seed,  # the random backbone is drawn from it
        "threshold": cfg.lpips_threshold,
        "numerics": LPIPS_NUMERICS,
        "weights_sha256": network_digest(distance),
    }
    key = {
        "id": seq.id,
        "source": seq.source,
        "files": [[str(p), sha256_file(p) if p.is_file() else None] for p in files],
        "read": DECODE_RULES if seq.video else IMAGE_RULES,
        "interval_s": cfg.interval_for(seq.source) if seq.video else None,
        "lpips": lpips,
        "lengths": [MIN_FRAMES, MAX_FRAMES],
        "version": VERSION,
    }
    return json.loads(json.dumps(key))  # a JSON round trip, so that a key read back from seq.json compares equal


def process_sequence(seq: SourceSequence, cfg: TimeCatchConfig, distance, work: Path) -> dict:
    """Decode, subsample and LPIPS-filter one sequence; cache the kept frames as
    PNG files and a ``seq.json`` under ``work``. A cached result with the same
    :func:`work_key` is reused. Raises VideoDecodeError for unreadable input."""
    folder = work / "sequences" / records.make_id(seq.source, seq.id)
    meta_path = folder / "seq.json"
    key = work_key(seq, cfg, distance)
    if meta_path.is_file():
        cached = json.loads(meta_path.read_text())
        if cached.get("key") == key:
            return cached
    if seq.video:
        timed = frames_every(seq.video, cfg.interval_for(seq.source))  # by presentation time, upright
        frames, indices = timed.frames, timed.indices
        times: list[float | None] = [round(t, 4) for t in timed.times_s]
        sizes = {"video": str(seq.video), "bytes": seq.video.stat().st_size, "n_frames": timed.n_frames, "fps": timed.fps}
    else:
        frames = [_load_image(p) for p in seq.frames]
        indices, times = list(range(len(frames))), [None] * len(frames)
        sizes = {"frames": len(seq.frames), "bytes": sum(p.stat().st_size for p in seq.frames)}
    if not frames:
        raise VideoDecodeError(f"{seq.video or seq.manifest}: no frames")
    check_lpips_size(frames, cfg.lpips_net)
    kept, dists = filter_near_duplicates(frames, distance, cfg.lpips_threshold)
    result: dict[str, Any] = {"key": key, "n_sampled": len(frames), "input": sizes}
    if len(kept) < MIN_FRAMES:
        result.update(
            status="short", reason=f"{len(kept)} frame(s) left after LPIPS filtering (< {MIN_FRAMES})", n_kept=len(kept)
        )
    else:
        truncated_from = len(kept) if len(kept) > MAX_FRAMES else None
        kept, dists = kept[:MAX_FRAMES], dists[: MAX_FRAMES - 1]
        names = [f"{k:03d}.png" for k in range(len(kept))]
        result.update(
            status="ok",
            n_kept=len(kept),
            frames=names,
            source_indices=[indices[i] for i in kept],
            times_s=[times[i] for i in kept],
            lpips_consecutive=dists,  # already quantized: the values the filter compared with the threshold
            truncated_from=truncated_from,
        )
        with atomic_folder(folder) as tmp:  # the folder appears complete or not at all
            for name, idx in zip(names, kept, strict=True):
                (tmp / name).write_bytes(png_bytes(frames[idx]))
            (tmp / "seq.json").write_text(json.dumps(result, sort_keys=True))
        return result
    folder.mkdir(parents=True, exist_ok=True)
    write_text(meta_path, json.dumps(result, sort_keys=True))
    return result
