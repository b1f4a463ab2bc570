"""Video decoding (PyAV) and frame samplers.

Samplers are pure functions from (frame count, fps or budget, …) to 0-based
frame indices, so grids are testable without any video. Decoding reads a file
once for the union of the indices asked for and keeps only those frames, so
memory is bounded by the frames returned, not by the video's length. Every
decoded frame is shown upright (:func:`upright`: the display matrix a phone
writes for a rotated video is applied), and :func:`frames_every` samples by
presentation timestamps, so a variable-frame-rate video is sampled by time.

Uniform samplers (paper 001 §2, Fig. 2, Eq. 1). A uniform grid has a rate (the
budget ``b``) and a phase; :func:`phase_indices` is the polyphase family
``⌊(i + s/S + δ)·T/b⌋`` (phase ``s`` of ``S``, origin ``δ`` in grid steps,
clipped to ``T − 1``), computed in exact rational arithmetic so that Eq. 1
holds exactly: the ``S`` phase grids are the polyphase components of the dense
``S·b`` grid. The four deployed conventions of Fig. 2 are
:func:`left_endpoint_indices`, :func:`midpoint_indices`,
:func:`endpoint_inclusive_indices` and :func:`fps_linspace_indices`.
:class:`FrameCache` decodes each video once for the union of every grid asked
of it and keeps the frames, resized so the longer side is at most 360 px
(paper 001 App. A).
Docs: "concepts/timecatch.md", "concepts/phasefusion.md".
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from judgetrain.io import atomic_path, write_bytes

__all__ = [
    "MAX_SIDE",
    "SAMPLERS",
    "FrameCache",
    "VideoDecodeError",
    "DECODE_RULES",
    "TimedFrames",
    "VideoInfo",
    "decode_frames",
    "frames_every",
    "encode_mp4",
    "endpoint_inclusive_indices",
    "fps_linspace_indices",
    "interval_indices",
    "left_endpoint_indices",
    "midpoint_indices",
    "parse_fraction",
    "phase_indices",
    "mp4_codec",
    "probe",
    "rgb_to_yuv420p",
    "sampler_indices",
    "segment_frames",
    "upright",
]

# Paper 001 App. A: every frame is resized so its longer side is at most 360 px.
MAX_SIDE = 360
# The four deployed "uniform" conventions of paper 001 Fig. 2, by the names the CLI uses.
SAMPLERS = ("left", "midpoint", "inclusive", "fps1")


# libx264 options that make an encode depend only on its frames. Macroblock-tree rate
# control (x264's default) reads memory it has not written when the lookahead's
# low-resolution plane is 10 or 11 macroblocks wide (160- and 176-pixel videos, for
# example), so the same frames gave different bitstreams depending on what the process
# had encoded before (decoded pixels differed by up to 53 levels). With it off, output is
# a function of the frames alone; one thread keeps slice and lookahead decisions fixed.
# Measured: identical bytes with x264's CPU dispatch limited to anything from SSSE3 up to
# AVX-512, so any x86-64 machine of the last 15 years writes the same files.
X264_OPTIONS = {"crf": "20", "preset": "medium", "x264-params": "mbtree=0:threads=1"}
# How decoded frames are made, beyond the file and the frames asked for: part of every cache
# key over decoded frames (FrameCache's files, TimeCatch's OUT.work/), so that frames an earlier
# rule decoded (sideways, before the display matrix was applied) are decoded again, not reused.
DECODE_RULES = "pyav rgb24; display matrix applied; times from presentation timestamps"


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
    if path.is_dir():
        raise VideoDecodeError(f"{path}: a folder, not a video file")
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


def segment_frames(n_frames: int, fps: float, start_s: float | None = None, end_s: float | None = None) -> tuple[int, int]:
    """The first and last frame (inclusive) of the segment ``[start_s, end_s]`` seconds of a
    video of ``n_frames`` frames at ``fps``, as MVBench bounds its questions:
    ``max(0, round(start·fps))`` to ``min(T − 1, round(end·fps))``; ``None`` bounds mean the
    video's ends. Samplers then run over the segment's frames and are shifted by its first.

    Raises ``ValueError`` when the segment holds no frame of the video (it starts after
    the video ends, or ends before it starts after rounding).
    """
    if n_frames <= 0 or fps <= 0:
        raise ValueError(f"need n_frames > 0 and fps > 0; got {n_frames}, {fps}")
    lo = 0 if start_s is None else max(0, round(start_s * fps))
    hi = n_frames - 1 if end_s is None else min(n_frames - 1, round(end_s * fps))
    if lo > hi:
        raise ValueError(
            f"the segment {start_s}–{end_s} s holds no frame of a {n_frames / fps:g} s video "
            f"({n_frames} frames at {fps:g} fps); fix its start/end"
        )
    return lo, hi


def parse_fraction(value: str | float | int | Fraction, name: str = "value") -> Fraction:
    """An exact non-negative rational from ``"1/6"``, ``"0.5"``, ``0``, ``0.25`` or a
    :class:`~fractions.Fraction`. Strings are read exactly as written; a float is taken
    as the simplest fraction within 1e-6 of it (``1 / 6`` is 1/6 and ``0.1`` is 1/10,
    not the binary doubles, whose grids could land a frame early)."""
    try:
        if isinstance(value, float):
            frac = Fraction(value).limit_denominator(1_000_000)
        else:
            frac = value if isinstance(value, Fraction) else Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{name} {value!r} is not a number or fraction; write e.g. 0, 0.5 or 1/6") from None
    if frac < 0:
        raise ValueError(f"{name} {value!r} is negative; it must be >= 0")
    return frac


def _check_grid(n_frames: int, budget: int) -> None:
    if isinstance(n_frames, bool) or int(n_frames) != n_frames or n_frames < 1:
        raise ValueError(f"frame count must be a positive integer, got {n_frames!r}")
    if isinstance(budget, bool) or int(budget) != budget or budget < 1:
        raise ValueError(f"frame budget must be a positive integer, got {budget!r}")


def phase_indices(n_frames: int, budget: int, phase: int = 0, phases: int = 1, origin: str | float | Fraction = 0) -> list[int]:
    """Phase ``phase`` of ``phases`` of the uniform ``budget``-frame grid over ``n_frames``
    frames, with the grid origin moved by ``origin`` grid steps (paper 001 Eq. 1):
    ``min(T − 1, ⌊(i + s/S + δ)·T/b⌋)`` for ``i = 0..b−1``.

    Exact rational arithmetic, so sample ``i`` of phase ``s`` is sample ``i·S + s`` of
    the dense grid ``phase_indices(T, S·b, origin=S·δ)`` with no float rounding:
    the ``S`` phase grids interleave into the dense one. ``phase=0, phases=1,
    origin=0`` is the left-endpoint sampler; ``origin=1/2`` the midpoint one.
    """
    _check_grid(n_frames, budget)
    if isinstance(phases, bool) or int(phases) != phases or phases < 1:
        raise ValueError(f"phases must be a positive integer, got {phases!r}")
    if isinstance(phase, bool) or int(phase) != phase or not 0 <= phase < phases:
        raise ValueError(f"phase must be an integer in 0..{phases - 1}, got {phase!r}")
    shift = Fraction(int(phase), int(phases)) + parse_fraction(origin, "origin")
    return [min(n_frames - 1, math.floor((i + shift) * n_frames / budget)) for i in range(budget)]


def left_endpoint_indices(n_frames: int, budget: int) -> list[int]:
    """``⌊i·T/b⌋`` (torchvision-style uniform sampling; paper 001 Fig. 2)."""
    return phase_indices(n_frames, budget)


def midpoint_indices(n_frames: int, budget: int) -> list[int]:
    """``⌊(i + ½)·T/b⌋`` (TSN-style segment centres): the left-endpoint grid moved by half a step."""
    return phase_indices(n_frames, budget, origin=Fraction(1, 2))


def endpoint_inclusive_indices(n_frames: int, budget: int) -> list[int]:
    """``round(i·(T − 1)/(b − 1))``: first and last frame always in (``np.linspace(0, T−1, b)``
    rounded). Exact halves round to even, as numpy's ``rint`` does; ``b = 1`` gives ``[0]``."""
    _check_grid(n_frames, budget)
    if budget == 1:
        return [0]
    return [round(Fraction(i * (n_frames - 1), budget - 1)) for i in range(budget)]


def fps_linspace_indices(n_frames: int, fps: float, budget: int, target_fps: float = 1.0) -> list[int]:
    """Decimate to ``target_fps`` (the frames nearest 0 s, 1 s, 2 s, … by default, see
    :func:`interval_indices`), then take ``budget`` of those endpoint-inclusively
    (``round(linspace(0, m − 1, b))`` over the ``m`` decimated frames; paper 001 Fig. 2).
    When fewer than ``budget`` frames survive decimation some repeat, so the budget
    (and the prompt length) stays ``b`` as in the other conventions."""
    _check_grid(n_frames, budget)
    if fps <= 0 or target_fps <= 0:
        raise ValueError(f"need fps > 0 and target_fps > 0, got fps={fps}, target_fps={target_fps}")
    kept = interval_indices(n_frames, fps, 1.0 / target_fps)
    return [kept[k] for k in endpoint_inclusive_indices(len(kept), budget)]


def sampler_indices(name: str, n_frames: int, budget: int, fps: float | None = None) -> list[int]:
    """One of the four deployed conventions of :data:`SAMPLERS` by name (``fps1`` needs ``fps``)."""
    if name == "left":
        return left_endpoint_indices(n_frames, budget)
    if name == "midpoint":
        return midpoint_indices(n_frames, budget)
    if name == "inclusive":
        return endpoint_inclusive_indices(n_frames, budget)
    if name == "fps1":
        if fps is None:
            raise ValueError("the fps1 sampler needs the video's frame rate (fps)")
        return fps_linspace_indices(n_frames, fps, budget)
    raise ValueError(f"unknown sampler {name!r}; samplers are {', '.join(SAMPLERS)}")


def _display_matrix(frame) -> np.ndarray | None:
    """The 3x3 display matrix FFmpeg attaches to a decoded frame (9 int32 in host order), or None."""
    from av.sidedata.sidedata import Type

    side = frame.side_data.get(Type.DISPLAYMATRIX)
    return None if side is None else np.frombuffer(bytes(side), dtype="=i4")


def upright(rgb: np.ndarray, matrix: Sequence[int] | np.ndarray | None, where: str = "the video") -> np.ndarray:
    """``rgb`` (H, W, 3) as a player shows it: turned and mirrored by its display matrix (FFmpeg's
    ``DISPLAYMATRIX``, 9 integers ``a b u c d v x y w``; a stored pixel (x, y) is shown at
    (a·x + c·y, b·x + d·y) up to a shift, a b c d in 16.16 fixed point, as a phone's
    "rotate 90" tag writes it). Quarter and half turns and mirrors are exact; ``None`` or the
    identity returns ``rgb`` itself; any other angle raises :class:`VideoDecodeError` naming ``where``."""
    if matrix is None:
        return rgb
    a, b, c, d = (int(matrix[k]) for k in (0, 1, 3, 4))
    big = max(abs(a), abs(b), abs(c), abs(d))
    small = big // 64  # fixed-point noise around 0 (a few units of 2^-16)
    if big and abs(b) <= small and abs(c) <= small and min(abs(a), abs(d)) > small:
        out = rgb[::-1] if d < 0 else rgb
        out = out[:, ::-1] if a < 0 else out
    elif big and abs(a) <= small and abs(d) <= small and min(abs(b), abs(c)) > small:
        out = rgb.transpose(1, 0, 2)
        out = out[::-1] if b < 0 else out
        out = out[:, ::-1] if c < 0 else out
    else:
        angle = -math.degrees(math.atan2(b, a)) if big else float("nan")
        raise VideoDecodeError(
            f"{where}: its display matrix turns the picture by {angle:.1f}° (not a multiple of 90°, "
            f"matrix {[int(m) for m in matrix]}); re-encode it upright (ffmpeg -i IN OUT applies it)"
        )
    return out if out is rgb else np.ascontiguousarray(out)


def _shown(frame, where: str, max_side: int | None = None) -> np.ndarray:
    """A decoded frame as RGB uint8, downsized to ``max_side`` when larger, then turned upright."""
    if max_side and max(frame.width, frame.height) > max_side:
        scale = max_side / max(frame.width, frame.height)
        frame = frame.reformat(width=round(frame.width * scale), height=round(frame.height * scale))
    return upright(frame.to_ndarray(format="rgb24"), _display_matrix(frame), where)


def decode_frames(path: str | os.PathLike, indices: Sequence[int], *, max_side: int | None = None) -> list[np.ndarray]:
    """Decode the frames at ``indices`` (0-based, in presentation order; any order, repeats
    allowed) in one pass; returns RGB uint8 arrays of shape (H, W, 3) in the order asked, upright
    (:func:`upright`). ``max_side`` downsizes so the longer side is at most that many pixels."""
    import av

    wanted = sorted({int(i) for i in indices})
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
                    found[i] = _shown(frame, str(path), max_side)
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


@dataclass(frozen=True)
class TimedFrames:
    """Frames sampled by time (:func:`frames_every`): ``frames`` RGB uint8 (H, W, 3), upright;
    ``indices`` their 0-based positions in presentation order; ``times_s`` their presentation
    times in seconds after the first frame's; ``n_frames`` the frames the video holds; ``fps`` its
    average rate as the container states it (0.0 when it states none; informative only)."""

    frames: list[np.ndarray]
    indices: list[int]
    times_s: list[float]
    n_frames: int
    fps: float


def _frame_time(frame, before: Fraction | None, rate: Fraction | None, where: str, i: int) -> Fraction:
    """A frame's presentation time in seconds, exact: ``pts × time_base``; a frame without a
    timestamp comes one average frame duration after the one ``before`` it."""
    if frame.pts is not None and frame.time_base is not None:
        t = frame.pts * Fraction(frame.time_base)
    elif before is None:
        t = Fraction(0)
    elif rate:
        t = before + 1 / rate
    else:
        raise VideoDecodeError(f"{where}: frame {i} has no timestamp and the video states no frame rate; re-encode it")
    if before is not None and t < before:
        raise VideoDecodeError(
            f"{where}: frame {i} is stamped {float(t):g} s, before the frame shown before it ({float(before):g} s); "
            "re-encode the video (ffmpeg -i IN OUT)"
        )
    return t


def frames_every(path: str | os.PathLike, interval_s: float) -> TimedFrames:
    """The frames nearest the times 0, Δ, 2Δ, … s after the first frame (Δ = ``interval_s``), up
    to the last frame's time, found by presentation timestamps (``frame.pts × time_base``): a
    variable-frame-rate video is sampled where its frames really are, not at index × average fps
    (paper 000 §3.3 temporal subsampling). Times are compared exactly (rationals); a tie goes to
    the earlier frame, and a frame can be the nearest to several times. One decoding pass; only
    the frames returned are converted. Raises :class:`VideoDecodeError` naming the file."""
    import av

    if not (math.isfinite(interval_s) and interval_s > 0):
        raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s}")
    step, where = Fraction(interval_s), str(path)
    shown: dict[int, np.ndarray] = {}
    picks: list[tuple[int, Fraction]] = []
    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        rate = Fraction(stream.average_rate or stream.guessed_rate or 0)
        n, t0, prev = 0, Fraction(0), None  # prev: (index, time after t0, frame) of the frame before
        try:
            for n, frame in enumerate(container.decode(stream), start=1):
                t = _frame_time(frame, None if prev is None else t0 + prev[1], rate, where, n - 1)
                t0 = t if prev is None else t0
                here = (n - 1, t - t0, frame)
                while len(picks) * step <= here[1]:  # the next sampling time lies between prev and here
                    target = len(picks) * step
                    i, when, chosen = prev if prev is not None and target - prev[1] <= here[1] - target else here
                    if i not in shown:
                        shown[i] = _shown(chosen, where)
                    picks.append((i, when))
                prev = here
        except av.error.FFmpegError as e:
            raise VideoDecodeError(f"{path}: corrupt video stream near frame {n} ({e})") from e
    finally:
        container.close()
    if not picks:
        raise VideoDecodeError(f"{path}: the video has no frames")
    return TimedFrames([shown[i] for i, _ in picks], [i for i, _ in picks], [float(w) for _, w in picks], n, float(rate))


def mp4_codec() -> str:
    """``libx264`` when this PyAV build has it, else MPEG-4 Part 2 (with a warning)."""
    import av

    if "libx264" in av.codecs_available:
        return "libx264"
    import warnings

    warnings.warn(
        "This PyAV build has no libx264 encoder; videos fall back to MPEG-4 Part 2 ('mpeg4'). "
        "Install a PyAV wheel built with libx264 for H.264 output.",
        stacklevel=3,
    )
    return "mpeg4"


def rgb_to_yuv420p(rgb: np.ndarray) -> np.ndarray:
    """RGB uint8 (H, W, 3), H and W even, to planar YUV 4:2:0 in PyAV's layout: a
    (3H/2, W) uint8 array holding Y, then U, then V. BT.601 limited range in integer
    arithmetic (chroma from the 2x2 mean of each channel), so the result is the same
    on every machine, unlike swscale, whose SIMD paths vary with the CPU."""
    h, w, _ = rgb.shape
    if h % 2 or w % 2:
        raise ValueError(f"frame of {w}x{h}: width and height must be even for 4:2:0 video")
    r, g, b = (rgb[..., c].astype(np.int32) for c in range(3))
    y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16
    # 2x2 channel sums (0..1020), rounded to the mean inside the chroma formulas.
    r2, g2, b2 = (x.reshape(h // 2, 2, w // 2, 2).sum(axis=(1, 3)) for x in (r, g, b))
    u = ((-38 * r2 - 74 * g2 + 112 * b2 + 512) >> 10) + 128
    v = ((112 * r2 - 94 * g2 - 18 * b2 + 512) >> 10) + 128
    planes = [y.reshape(-1), u.reshape(-1), v.reshape(-1)]
    return np.concatenate(planes).astype(np.uint8).reshape(h * 3 // 2, w)


def encode_mp4(path: str | os.PathLike, frames: Iterable[np.ndarray], fps: int, codec: str | None = None) -> Path:
    """Write RGB uint8 frames (H, W, 3; even sides) as an MP4 at ``fps``, atomically (a
    temp file beside it, then a rename). The same frames give the same bytes in any process
    and in any order of calls (see ``X264_OPTIONS``). ``codec`` defaults to
    :func:`mp4_codec`. Returns ``path``."""
    import av

    path = Path(path)
    codec = codec or mp4_codec()
    with atomic_path(path, ".part.mp4") as tmp, av.open(str(tmp), "w", format="mp4") as container:
        stream = None
        for i, rgb in enumerate(frames):
            if stream is None:
                stream = container.add_stream(codec, rate=fps)
                stream.height, stream.width = rgb.shape[:2]
                stream.pix_fmt = "yuv420p"
                stream.codec_context.thread_count = 1
                if codec == "libx264":
                    stream.options = dict(X264_OPTIONS)
            frame = av.VideoFrame.from_ndarray(rgb_to_yuv420p(rgb), format="yuv420p")
            frame.pts = i
            container.mux(stream.encode(frame))
        if stream is None:
            raise ValueError(f"{path}: no frames to encode")
        container.mux(stream.encode(None))
    return path


class FrameCache:
    """Decoded, resized frames of recently used videos: a video is decoded once for the
    union of the indices asked of it, and later requests it can serve cost no decoding.

    Ask for the union of every grid a question needs in one :meth:`get`; grids are then
    read from that. ``decodes`` counts decoding passes (one per video whose frames were
    not all held). Frames are RGB uint8, resized so the longer side is at most
    ``max_side`` (``None``: as decoded). The newest ``max_videos`` videos stay in
    memory; with ``cache_dir`` the frames also go to ``<cache_dir>/<key>.npz``
    (written atomically, keyed by the file's resolved path and sha256, ``max_side`` and
    :data:`DECODE_RULES`) so another run over the same videos decodes nothing.
    """

    def __init__(self, max_side: int | None = MAX_SIDE, *, cache_dir: str | os.PathLike | None = None, max_videos: int = 4):
        if max_videos < 1:
            raise ValueError(f"max_videos must be at least 1, got {max_videos}")
        self.max_side = max_side
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_videos = max_videos
        self.decodes = 0
        self._held: OrderedDict[str, dict[int, np.ndarray]] = OrderedDict()

    def _key(self, path: Path) -> str:
        from judgetrain.identity import sha256_file  # content: a video replaced in place is decoded again

        raw = "\x00".join(map(str, (path.resolve(), sha256_file(path), self.max_side, DECODE_RULES)))
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def _disk(self, path: Path) -> Path | None:
        return self.cache_dir / f"{self._key(path)}.npz" if self.cache_dir is not None else None

    def get(self, path: str | os.PathLike, indices: Iterable[int]) -> list[np.ndarray]:
        """The frames at ``indices`` (any order, repeats allowed), in the order asked."""
        path = Path(path)
        indices = [int(i) for i in indices]
        key = str(path.resolve())
        held = self._held.pop(key, None) or {}
        self._held[key] = held  # most recently used last
        missing = sorted(set(indices) - set(held))
        disk = self._disk(path) if missing and path.is_file() else None
        if disk is not None and disk.is_file():
            with np.load(disk) as z:
                held.update((int(i), f) for i, f in zip(z["indices"], z["frames"], strict=True))
            missing = sorted(set(indices) - set(held))
        if missing:
            for i, frame in zip(missing, decode_frames(path, missing, max_side=self.max_side), strict=True):
                held[i] = frame
            self.decodes += 1
            if disk is not None:
                self._save(disk, held)
        while len(self._held) > self.max_videos:
            self._held.popitem(last=False)
        return [held[i] for i in indices]

    @staticmethod
    def _save(disk: Path, held: dict[int, np.ndarray]) -> None:
        disk.parent.mkdir(parents=True, exist_ok=True)
        order = sorted(held)
        buffer = io.BytesIO()
        np.savez(buffer, indices=np.array(order, dtype=np.int64), frames=np.stack([held[i] for i in order]))
        write_bytes(disk, buffer.getvalue())
