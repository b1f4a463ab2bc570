"""Offline stand-ins for CLEVRER / CRAFT: simulated 2-D physics clips.

Every job (tests, quickstart, benchmarks) must run with no downloads, so this
module simulates a few coloured objects bouncing under gravity in a box,
renders them with PIL and writes either H.264 MP4 files (``SOURCE_VIDEO``,
CLEVRER-like) or folders of PNG frames (``SOURCE_FRAMES``, DriveLM-like), each
with a CLEVRER-style scene description derived from the simulated collisions.

World units: the box is ``WORLD_WIDTH`` wide, y points up, the floor is y=0.
Physics runs at a fixed ``SUBSTEP_HZ`` whatever the output fps, so a clip's
motion depends only on its seed and index. Everything random comes from numpy
generators seeded by :func:`derive_seed` (sha256), never from Python's salted
salted built-in ``hash``, so outputs are byte-identical across processes and machines.
Docs: "concepts/timecatch.md", "concepts/phasefusion.md".
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from tqdm.auto import tqdm

from judgetrain.io import atomic_folder, write_rows, write_text
from judgetrain.seeding import derive_seed
from judgetrain.video import encode_mp4, mp4_codec

SOURCE_VIDEO = "synthetic-physics"
SOURCE_FRAMES = "synthetic-frames"

# CLEVRER's palette and shape names, so descriptions read like the papers'.
COLORS = {
    "gray": (87, 87, 87),
    "red": (173, 35, 35),
    "blue": (42, 75, 215),
    "green": (29, 105, 20),
    "brown": (129, 74, 25),
    "purple": (129, 38, 192),
    "cyan": (41, 208, 208),
    "yellow": (235, 215, 40),
}
SHAPES = ("ball", "cube", "cylinder")

WORLD_WIDTH = 4.0
SUBSTEP_HZ = 120  # physics rate; 15 substeps per frame at 8 fps
GRAVITY = 6.0  # units/s^2: a drop from the top takes ~1 s
RESTITUTION_WALL = 0.98
RESTITUTION_PAIR = 0.96
# Floor "kicks": a rebound never leaves slower than these, so objects never
# settle and frames 1.5 s apart always differ (energy lost to restitution is
# paid back at the floor, like a slightly bouncy trampoline).
MIN_REBOUND_VY = float(np.sqrt(2 * GRAVITY * 0.9))  # rebounds to >= 0.9 units
MIN_FLOOR_VX = 0.8
MAX_SPEED = 8.0  # keeps a light object hit by a heavy one from tunnelling
CONTACT_SLACK = 0.05  # a contact episode ends once the gap exceeds this
MAX_DESCRIBED_EVENTS = 3  # CLEVRER descriptions name two or three events
DEFAULT_DURATION_RANGE_S = (7.0, 13.0)
_BORDER_PX = 3
_FLOOR_RGB = (226, 222, 212)


@dataclass(frozen=True)
class Event:
    """One simulated event, ``time_s`` seconds after the clip starts.

    ``kind`` is ``"collision"`` (``a`` and ``b``, in scene order, first touch in
    a contact episode) or ``"bounce"`` (``a`` lands on the floor; ``b`` is None).
    Names are ``"<colour> <shape>"``, distinct within a clip.
    """

    time_s: float
    kind: str
    a: str
    b: str | None = None


@dataclass(frozen=True)
class PhysicsClip:
    """Metadata of one clip. ``id`` is ``physics-<index:05d>`` (unique within one
    output folder). ``events`` holds every :class:`Event` up to the last frame,
    in time order; ``duration_s`` = frames / ``fps`` exactly."""

    id: str
    description: str
    events: tuple[Event, ...]
    n_objects: int
    duration_s: float
    fps: int


@dataclass(frozen=True)
class Scene:
    names: tuple[str, ...]  # "<colour> <shape>", distinct within a clip
    shapes: tuple[str, ...]
    colors: tuple[tuple[int, int, int], ...]
    radius: np.ndarray  # (n,) world units; collision circles
    pos: np.ndarray  # (n, 2) initial centres
    vel: np.ndarray  # (n, 2) initial velocities
    height: float  # box height in world units


def make_scene(rng: np.random.Generator, size: tuple[int, int], n_objects: int | None = None) -> Scene:
    """A random scene of 2..5 objects (or ``n_objects``) for a ``size`` (width, height) frame, drawn from ``rng``."""
    w, h = size
    height = WORLD_WIDTH * (h - 2 * _BORDER_PX) / (w - 2 * _BORDER_PX)
    combos = [(c, s) for c in COLORS for s in SHAPES]
    if n_objects is not None and not 2 <= n_objects <= len(combos):
        raise ValueError(f"n_objects={n_objects}: a scene holds 2..{len(combos)} objects (distinct colour-shape names)")
    n = int(rng.integers(2, 6)) if n_objects is None else n_objects
    picked = [combos[i] for i in rng.choice(len(combos), size=n, replace=False)]
    radius = rng.uniform(0.26, 0.38, size=n)
    pos = np.zeros((n, 2))
    for i in range(n):  # rejection sampling: start apart, in the upper part of the box
        for _ in range(1000):
            p = np.array([rng.uniform(radius[i], WORLD_WIDTH - radius[i]), rng.uniform(0.35 * height, height - radius[i])])
            if all(np.hypot(*(p - pos[j])) > radius[i] + radius[j] + 0.05 for j in range(i)):
                break
        pos[i] = p
    vel = np.stack([rng.choice([-1.0, 1.0], size=n) * rng.uniform(1.2, 3.0, size=n), rng.uniform(-1.0, 2.0, size=n)], axis=1)
    return Scene(
        tuple(f"{c} {s}" for c, s in picked),
        tuple(s for _, s in picked),
        tuple(COLORS[c] for c, _ in picked),
        radius,
        pos,
        vel,
        height,
    )


def simulate(scene: Scene, times: Sequence[float] | np.ndarray, trace: list | None = None):
    """Run the physics up to ``times[-1]`` (ascending seconds); return (positions at ``times``, events).

    Positions are (len(times), n, 2); each time is rounded to the nearest substep.
    If ``trace`` is a list, ``(substep, positions)`` is appended after every
    substep; an event at ``time_s`` happened at substep ``round(time_s * SUBSTEP_HZ)``.
    """
    dt = 1.0 / SUBSTEP_HZ
    r, mass = scene.radius, scene.radius**2
    pos, vel = scene.pos.copy(), scene.vel.copy()
    rsum = r[:, None] + r[None, :]
    upper = np.triu(np.ones_like(rsum, dtype=bool), 1)
    lo_bound = np.stack([r, r], axis=1)
    hi_bound = np.array([WORLD_WIDTH, scene.height]) - lo_bound
    in_contact = np.zeros_like(upper)
    on_floor = np.zeros(len(r), dtype=bool)
    steps = [int(round(t * SUBSTEP_HZ)) for t in times]
    out, events = np.empty((len(times), len(r), 2)), []
    k, nxt = 0, 0
    while nxt < len(steps) and steps[nxt] == 0:
        out[nxt], nxt = pos, nxt + 1
    # The `.any()` guards skip numpy calls on tiny arrays; they dominate the cost.
    while nxt < len(steps):
        k += 1
        vel[:, 1] -= GRAVITY * dt
        pos += vel * dt
        diff = pos[:, None, :] - pos[None, :, :]
        dist = np.sqrt((diff**2).sum(-1))
        touching = (dist < rsum) & upper
        if touching.any() or in_contact.any():
            for i, j in zip(*np.nonzero(touching & ~in_contact), strict=True):
                events.append(Event(k / SUBSTEP_HZ, "collision", scene.names[i], scene.names[j]))
            in_contact = touching | (in_contact & (dist <= rsum + CONTACT_SLACK))
        for i, j in zip(*np.nonzero(touching), strict=True):
            normal = diff[i, j] / max(dist[i, j], 1e-9)
            inv_i, inv_j = 1 / mass[i], 1 / mass[j]
            push = (rsum[i, j] - dist[i, j]) / (inv_i + inv_j)
            pos[i] += normal * push * inv_i
            pos[j] -= normal * push * inv_j
            approach = (vel[i] - vel[j]) @ normal
            if approach < 0:
                impulse = -(1 + RESTITUTION_PAIR) * approach / (inv_i + inv_j)
                vel[i] += impulse * inv_i * normal
                vel[j] -= impulse * inv_j * normal
        # Walls last, so every recorded position is inside the box.
        low, high = pos < lo_bound, pos > hi_bound
        if low.any() or high.any():
            np.maximum(pos, lo_bound, out=pos)
            np.minimum(pos, hi_bound, out=pos)
            vel[low] = RESTITUTION_WALL * np.abs(vel[low])
            vel[high] = -RESTITUTION_WALL * np.abs(vel[high])
            for i in np.nonzero(low[:, 1])[0]:  # the floor kicks (see MIN_REBOUND_VY)
                if not on_floor[i]:
                    events.append(Event(k / SUBSTEP_HZ, "bounce", scene.names[i]))
                vel[i, 1] = max(vel[i, 1], MIN_REBOUND_VY)
                if abs(vel[i, 0]) < MIN_FLOOR_VX:
                    vel[i, 0] = np.copysign(MIN_FLOOR_VX, vel[i, 0])
        if low[:, 1].any() or on_floor.any():
            on_floor = low[:, 1] | (on_floor & (pos[:, 1] - r <= CONTACT_SLACK))
        speed2 = (vel**2).sum(1)
        if (speed2 > MAX_SPEED**2).any():
            vel *= np.minimum(1.0, MAX_SPEED / np.sqrt(speed2))[:, None]
        if trace is not None:
            trace.append((k, pos.copy()))
        while nxt < len(steps) and steps[nxt] == k:
            out[nxt], nxt = pos, nxt + 1
    return out, tuple(sorted(events, key=lambda e: e.time_s))


def describe_events(events: Sequence[Event]) -> str:
    """CLEVRER-style sentence: "A will collide with B, C will collide with D, and …".

    Names the first collision of each distinct pair, in time order, at most
    ``MAX_DESCRIBED_EVENTS``. Fallback when there is no collision: the first
    floor bounce of each object ("Red ball will bounce off the floor, …"), same
    order and cap; with no event at all: "No objects will collide."
    """

    def first_per(kind, key):
        seen, picked = set(), []
        for e in sorted(events, key=lambda e: e.time_s):
            if e.kind == kind and key(e) not in seen:
                seen.add(key(e))
                picked.append(e)
        return picked[:MAX_DESCRIBED_EVENTS]

    clauses = [f"{e.a} will collide with {e.b}" for e in first_per("collision", lambda e: frozenset((e.a, e.b)))]
    if not clauses:
        clauses = [f"{e.a} will bounce off the floor" for e in first_per("bounce", lambda e: e.a)]
    if not clauses:
        return "No objects will collide."
    text = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + ", and " + clauses[-1]
    return text[0].upper() + text[1:] + "."


def _background(rng: np.random.Generator, size: tuple[int, int]) -> Image.Image:
    w, h = size
    # Subtle static blotches (upsampled low-res noise) so the floor is not flat.
    small = Image.fromarray(rng.integers(0, 256, (h // 8 + 1, w // 8 + 1), dtype=np.uint8))
    noise = np.asarray(small.resize((w, h), Image.Resampling.BILINEAR), dtype=np.float32) / 255 - 0.5
    arr = np.clip(np.array(_FLOOR_RGB, np.float32) + 10 * noise[..., None], 0, 255).astype(np.uint8)
    img = Image.fromarray(arr)
    ImageDraw.Draw(img).rectangle([0, 0, w - 1, h - 1], outline=(120, 115, 105), width=_BORDER_PX)
    return img


def _draw(img: Image.Image, scene: Scene, pos: np.ndarray) -> np.ndarray:
    draw = ImageDraw.Draw(img)
    scale = (img.width - 2 * _BORDER_PX) / WORLD_WIDTH
    for shape, rgb, r, (x, y) in zip(scene.shapes, scene.colors, scene.radius, pos, strict=True):
        cx, cy, rp = _BORDER_PX + x * scale, img.height - _BORDER_PX - y * scale, r * scale
        dark = tuple(int(c * 0.55) for c in rgb)
        light = tuple(int(c + (255 - c) * 0.45) for c in rgb)
        if shape == "ball":
            draw.ellipse([cx - rp, cy - rp, cx + rp, cy + rp], fill=rgb, outline=dark, width=2)
            hl = rp * 0.35
            draw.ellipse([cx - rp * 0.5 - hl, cy - rp * 0.5 - hl, cx - rp * 0.5 + hl, cy - rp * 0.5 + hl], fill=light)
        elif shape == "cube":
            s = rp * 0.88
            draw.rectangle([cx - s, cy - s, cx + s, cy + s], fill=rgb, outline=dark, width=2)
            draw.rectangle([cx - s * 0.65, cy - s * 0.65, cx - s * 0.2, cy - s * 0.2], fill=light)
        else:  # cylinder, side view: body plus a lighter elliptical top
            hw, cap = rp * 0.8, rp * 0.35
            draw.rectangle([cx - hw, cy - rp + cap, cx + hw, cy + rp - cap], fill=rgb, outline=dark, width=2)
            draw.ellipse([cx - hw, cy + rp - 2 * cap, cx + hw, cy + rp], fill=rgb, outline=dark, width=2)
            draw.rectangle([cx - hw * 0.75, cy - rp + cap, cx + hw * 0.75, cy + rp - cap], fill=rgb)
            draw.ellipse([cx - hw, cy - rp, cx + hw, cy - rp + 2 * cap], fill=light, outline=dark, width=2)
    return np.asarray(img)


def _scene_clip(
    seed_parts: tuple, times: np.ndarray, size: tuple[int, int], n_objects: int | None = None, trace: list | None = None
):
    """Simulate now, render lazily: returns (scene, positions at ``times``, events, iterator of HxWx3 uint8 frames)."""
    if min(size) < 48:
        raise ValueError(f"size={size}: width and height must be at least 48 pixels, e.g. (160, 120).")
    scene = make_scene(np.random.default_rng(derive_seed(*seed_parts, "scene")), size, n_objects)
    positions, events = simulate(scene, times, trace)
    background = _background(np.random.default_rng(derive_seed(*seed_parts, "texture")), size)
    return scene, positions, events, (_draw(background.copy(), scene, p) for p in positions)


@dataclass(frozen=True)
class PhysicsRun:
    """The full simulated state of one clip, so that questions about it can be answered from it.

    ``names[i]`` is object ``i`` ("<colour> <shape>", distinct); ``radius`` (n,)
    and positions are in world units (x to the right, y up, floor at y=0, the box
    ``box`` = (width, height)). ``positions`` (n_frames, n, 2) holds the centres
    drawn in frame ``f`` (time ``f / fps``); ``substeps`` (K+1, n, 2) the centres
    after every physics substep ``k = 0..K`` (time ``k / SUBSTEP_HZ``; row 0 is the
    start), up to the last frame. ``events`` as in :class:`PhysicsClip`.
    """

    names: tuple[str, ...]
    radius: np.ndarray
    fps: int
    positions: np.ndarray
    substeps: np.ndarray
    events: tuple[Event, ...]
    box: tuple[float, float]

    @property
    def n_frames(self) -> int:
        return len(self.positions)

    @property
    def duration_s(self) -> float:
        return self.n_frames / self.fps


def run_physics(
    seed_parts: tuple, n_frames: int, *, fps: int = 8, size=(160, 120), n_objects: int | None = None
) -> tuple[PhysicsRun, Iterator[np.ndarray]]:
    """Simulate the scene seeded by ``seed_parts`` (hashed with :func:`derive_seed`) for
    ``n_frames`` frames at ``fps``; return its :class:`PhysicsRun` and a lazy iterator
    of the rendered HxWx3 uint8 frames. ``n_objects`` None draws 2..5 objects."""
    if n_frames < 1:
        raise ValueError(f"n_frames={n_frames}: need at least one frame")
    trace: list = []
    scene, positions, events, frames = _scene_clip(seed_parts, np.arange(n_frames) / fps, tuple(size), n_objects, trace)
    substeps = np.stack([scene.pos] + [p for _, p in trace])
    run = PhysicsRun(scene.names, scene.radius.copy(), fps, positions, substeps, events, (WORLD_WIDTH, scene.height))
    return run, frames


def _clip_duration(seed: int, index: int, duration_range_s, long_fraction=0.0, long_range_s=(15.0, 25.0)) -> float:
    rng = np.random.default_rng(derive_seed("duration", seed, index))
    is_long, u = rng.random() < long_fraction, rng.random()
    lo, hi = long_range_s if is_long else duration_range_s
    return float(lo + u * (hi - lo))


def simulate_clip(
    seed: int, index: int, *, duration_s: float | None = None, fps: int = 8, size=(160, 120)
) -> tuple[PhysicsClip, Iterator[np.ndarray]]:
    """Simulate clip ``index`` of ``seed``; return its metadata and a lazy frame iterator.

    ``duration_s`` None draws it from ``DEFAULT_DURATION_RANGE_S`` (deterministic
    in (seed, index)); it is rounded to whole frames (at least one). Frames are
    HxWx3 uint8 RGB at times 0, 1/fps, …; ``size`` is (width, height) in pixels.
    The physics does not depend on ``fps``, ``size`` only changes the box height.
    """
    if duration_s is None:
        duration_s = _clip_duration(seed, index, DEFAULT_DURATION_RANGE_S)
    n_frames = max(1, int(round(duration_s * fps)))
    scene, _, events, frames = _scene_clip(("physics", seed, index), np.arange(n_frames) / fps, tuple(size))
    clip = PhysicsClip(
        id=f"physics-{index:05d}",
        description=describe_events(events),
        events=events,
        n_objects=len(scene.names),
        duration_s=n_frames / fps,
        fps=fps,
    )
    return clip, frames


def _write_manifest(path: Path, rows: list[dict]) -> Path:
    write_rows(path, rows)
    return path


# Bump when the simulation, drawing or encoding changes what a clip of given parameters holds.
CLIPS_VERSION = 1


def _clear_other_clips(out_dir: Path, params: dict, stale: list[Path]) -> None:
    """Clips already in ``out_dir`` are kept (a killed build resumes) only when made with the same
    parameters (``out_dir/clips.json``): their names say neither seed nor size, so ``stale`` (the
    clip files and folders an earlier call may have left) are removed otherwise, before any is written."""
    marker = out_dir / "clips.json"
    params = {**params, "version": CLIPS_VERSION}
    try:
        if json.loads(marker.read_text()) == params:
            return
    except (OSError, ValueError):
        pass
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    write_text(marker, json.dumps(params, sort_keys=True) + "\n")


def write_physics_videos(
    out_dir,
    n: int,
    seed: int = 0,
    *,
    fps: int = 8,
    size=(160, 120),
    duration_range_s=(7.0, 13.0),
    long_fraction: float = 0.0,
    long_duration_range_s=(15.0, 25.0),
    progress: bool = True,
) -> Path:
    """Write ``n`` clips to ``out_dir/videos/<id>.mp4`` and ``out_dir/manifest.jsonl``.

    Manifest lines: ``id``, ``video`` (relative to the manifest's folder),
    ``source`` (= ``SOURCE_VIDEO``), ``description``, ``fps``, ``duration`` (s).
    Each clip's duration is drawn from ``duration_range_s``, or with probability
    ``long_fraction`` from ``long_duration_range_s``. An existing non-empty mp4
    made with the same parameters is kept (resume after a kill), one of other parameters
    (another seed, say) replaced; videos and manifest are written atomically.
    Returns the manifest path.
    """
    size = tuple(size)
    if size[0] % 2 or size[1] % 2:
        raise ValueError(f"size={size}: width and height must be even for yuv420p video; use e.g. (160, 120).")
    if not 0.0 <= long_fraction <= 1.0:
        raise ValueError(f"long_fraction={long_fraction}: must be in [0, 1].")
    out_dir = Path(out_dir)
    (out_dir / "videos").mkdir(parents=True, exist_ok=True)
    codec, rows = mp4_codec(), []
    params = {"kind": "videos", "seed": seed, "fps": fps, "size": list(size), "codec": codec}
    params |= {
        "durations_s": list(duration_range_s),
        "long_fraction": long_fraction,
        "long_durations_s": list(long_duration_range_s),
    }
    _clear_other_clips(out_dir, params, sorted((out_dir / "videos").glob("physics-*.mp4")))
    for index in tqdm(range(n), desc=SOURCE_VIDEO, unit="clip", disable=not progress):
        duration = _clip_duration(seed, index, duration_range_s, long_fraction, long_duration_range_s)
        clip, frames = simulate_clip(seed, index, duration_s=duration, fps=fps, size=size)
        path = out_dir / "videos" / f"{clip.id}.mp4"
        if not (path.is_file() and path.stat().st_size > 0):
            encode_mp4(path, frames, fps, codec)
        rows.append(
            {
                "id": clip.id,
                "video": f"videos/{path.name}",
                "source": SOURCE_VIDEO,
                "description": clip.description,
                "fps": fps,
                "duration": clip.duration_s,
            }
        )
    return _write_manifest(out_dir / "manifest.jsonl", rows)


def write_frame_folders(
    out_dir, n: int, seed: int = 0, *, size=(160, 120), frames_range=(4, 8), frame_interval_s: float = 1.5, progress: bool = True
) -> Path:
    """Write ``n`` PNG sequences to ``out_dir/frames/<id>/000.png…`` and ``out_dir/manifest.jsonl``.

    Each sequence has between ``frames_range[0]`` and ``frames_range[1]`` frames
    (inclusive, deterministic per (seed, index)) taken every ``frame_interval_s``
    seconds of simulation. Scenes differ from ``write_physics_videos``' for the
    same seed; ids are ``frames-<index>``. Manifest lines: ``id``, ``frames``
    (relative paths, in order), ``source`` (= ``SOURCE_FRAMES``), ``description``.
    A complete existing folder made with the same parameters is kept (resume), one of other
    parameters replaced. Returns the manifest path.
    """
    lo, hi = frames_range
    if not 1 <= lo <= hi:
        raise ValueError(f"frames_range={frames_range}: need 1 <= min <= max.")
    if frame_interval_s <= 0:
        raise ValueError(f"frame_interval_s={frame_interval_s}: must be > 0 seconds.")
    out_dir = Path(out_dir)
    (out_dir / "frames").mkdir(parents=True, exist_ok=True)
    params = {"kind": "frames", "seed": seed, "size": list(size), "frames": list(frames_range), "interval_s": frame_interval_s}
    _clear_other_clips(out_dir, params, sorted((out_dir / "frames").glob("frames-*")))
    rows = []
    for index in tqdm(range(n), desc=SOURCE_FRAMES, unit="clip", disable=not progress):
        k = int(np.random.default_rng(derive_seed("n_frames", seed, index)).integers(lo, hi + 1))
        _, _, events, frames = _scene_clip(("frames", seed, index), np.arange(k) * frame_interval_s, tuple(size))
        clip_id = f"frames-{index:05d}"
        folder = out_dir / "frames" / clip_id
        names = [f"{i:03d}.png" for i in range(k)]
        if not all((folder / name).is_file() for name in names):
            with atomic_folder(folder) as tmp:
                for name, arr in zip(names, frames, strict=True):
                    Image.fromarray(arr).save(tmp / name)
        rows.append(
            {
                "id": clip_id,
                "frames": [f"frames/{clip_id}/{name}" for name in names],
                "source": SOURCE_FRAMES,
                "description": describe_events(events),
            }
        )
    return _write_manifest(out_dir / "manifest.jsonl", rows)
