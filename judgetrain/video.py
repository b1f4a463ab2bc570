"""Video decoding (PyAV) and frame samplers.

Samplers are pure functions from (frame count, fps or budget, …) to 0-based
frame indices, so grids are testable without any video. Decoding reads a file
once for the union of the indices asked for and keeps only those frames, so
memory is bounded by the frames returned, not by the video's length.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["VideoInfo", "VideoDecodeError", "probe", "interval_indices", "decode_frames"]


class VideoDecodeError(RuntimeError):
    """A video that cannot be opened or decoded; the message names the file."""


@dataclass(frozen=True)
class VideoInfo:
    path: str
    n_frames: int
    fps: float
    width: int
    height: int

    @property
    def duration_s(self) -> float:
        return self.n_frames / self.fps if self.fps else 0.0


def _open(path: str | os.PathLike):
    import av

    path = Path(path)
    if not path.is_file():
        raise VideoDecodeError(f"{path}: no such video file")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError, ValueError) as e:
        raise VideoDecodeError(f"{path}: cannot open as a video ({e.__class__.__name__}: {e})") from e
    if not container.streams.video:
        container.close()
        raise VideoDecodeError(f"{path}: the file holds no video stream")
    return container


def probe(path: str | os.PathLike) -> VideoInfo:
    """Frame count, fps and size. Counts frames by decoding when the container
    does not state them (some MP4/WebM writers leave ``stream.frames`` at 0)."""
    import av

    container = _open(path)
    try:
        stream = container.streams.video[0]
        fps = float(stream.average_rate or stream.guessed_rate or 0)
        n = int(stream.frames or 0)
        width, height = stream.codec_context.width, stream.codec_context.height
        if n <= 0:
            try:
                n = sum(1 for _ in container.decode(stream))
            except av.error.FFmpegError as e:
                raise VideoDecodeError(f"{path}: corrupt video stream ({e})") from e
    finally:
        container.close()
    if n <= 0:
        raise VideoDecodeError(f"{path}: the video has no frames")
    if fps <= 0:
        raise VideoDecodeError(f"{path}: the video states no frame rate")
    return VideoInfo(str(path), n, fps, width, height)


def interval_indices(n_frames: int, fps: float, interval_s: float) -> list[int]:
    """Indices of the frames at times 0, Δ, 2Δ, … (Δ = ``interval_s``) that lie
    inside a video of ``n_frames`` frames at ``fps``: ``round(k·Δ·fps)``, the
    frame nearest each sampling time (paper 000 §3.3 temporal subsampling)."""
    if n_frames <= 0 or fps <= 0 or interval_s <= 0:
        raise ValueError(f"need n_frames > 0, fps > 0, interval_s > 0; got {n_frames}, {fps}, {interval_s}")
    step = interval_s * fps
    count = math.floor((n_frames - 1) / step + 1e-9) + 1
    return [min(n_frames - 1, round(k * step)) for k in range(count)]


def decode_frames(path: str | os.PathLike, indices: Sequence[int], *, max_side: int | None = None) -> list[np.ndarray]:
    """Decode the frames at ``indices`` (0-based, any order, repeats allowed) in
    one pass; returns RGB uint8 arrays of shape (H, W, 3) in the order asked.
    ``max_side`` downsizes so the longer side is at most that many pixels."""
    import av

    wanted = sorted(set(int(i) for i in indices))
    if not wanted:
        return []
    if wanted[0] < 0:
        raise ValueError(f"negative frame index {wanted[0]}")
    found: dict[int, np.ndarray] = {}
    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        last = wanted[-1]
        wanted_set = set(wanted)
        try:
            for i, frame in enumerate(container.decode(stream)):
                if i in wanted_set:
                    if max_side and max(frame.width, frame.height) > max_side:
                        scale = max_side / max(frame.width, frame.height)
                        frame = frame.reformat(width=round(frame.width * scale), height=round(frame.height * scale))
                    found[i] = frame.to_ndarray(format="rgb24")
                if i >= last:
                    break
        except av.error.FFmpegError as e:
            raise VideoDecodeError(f"{path}: corrupt video stream near frame {len(found)} ({e})") from e
    finally:
        container.close()
    missing = [i for i in wanted if i not in found]
    if missing:
        raise VideoDecodeError(f"{path}: the video ended before frame(s) {missing[:5]} (it has fewer frames than stated)")
    return [found[int(i)] for i in indices]
