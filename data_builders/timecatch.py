"""TimeCatch: temporal (swap) and frame-level (noise) anomaly sets (paper 000 §3).

Protocol, as built here:

1. **Sources.** A video manifest (JSON Lines ``{"video", "source", "id"?,
   "description"?, "split"?}``), a frame-folder manifest (``{"frames": [...],
   "source", "id"?, "description"?, "split"?}``, frames in temporal order), or
   the built-in synthetic physics clips (default). Paths are relative to the
   manifest's folder and must stay inside it.
2. **Subsampling** (videos only): the frames nearest times 0, Δ, 2Δ, … with Δ
   per source (1.5 s for CLEVRER/CRAFT-like and the synthetic clips, 1 s for
   MTL-AQA; ``--interval``).
3. **LPIPS filter**: walk the sequence and drop each frame whose LPIPS distance
   to the previously kept frame is below 0.05 (AlexNet LPIPS).
4. **Lengths**: sequences with fewer than 4 kept frames are discarded; 4–8
   frames form the *main* set, 9–16 the *long* set; a sequence with more than
   16 kept frames is cut to its first 16 (recorded in ``meta.truncated_from``).
5. **Anomalies**, drawn per sequence from a generator seeded by
   (seed, sequence id) through hashlib: a swap of frames ``i`` and ``i+1``
   with ``i ~ U{1, …, n−1}``, and a noise frame ``i ~ U{1, …, n}`` replaced by
   i.i.d. Gaussian pixels, ``round(N(127.5, 64²))`` clipped to 0…255 per
   channel, at the frame's size. ``position`` is 0-based: the earlier
   swapped frame, or the noise frame.
6. **Tasks** per sequence: ``temporal_detect`` and ``frame_detect`` get one
   intact and one anomalous record each (so detection is exactly balanced per
   source and split); ``temporal_localize`` and ``frame_localize`` always hold
   an anomaly. Answers: ``yes``/``no`` (per the prompt's polarity: prompt B
   asks whether the order is *correct*), the frame number ``1…n``, and the two
   swapped frame numbers ``"i and i+1"`` with choices every unordered pair
   (chance 1/C(n,2)) or adjacent pairs only (``--adjacent-choices``).
7. **Prompts**: images first, then the scene description (Appendix A.3; off
   with ``--no-descriptions``), then the instruction. Temporal detection has
   the base prompt A and the variants B–E of Appendix A.2 (``--prompts``).
   ``--frame-labels`` (off by default; the paper shows the images back to
   back) puts a text item ``"Frame k:"`` before the k-th image, so that a
   position can be read off the prompt instead of counted.
8. **Splits** by source sequence (all records of a sequence share a split):
   the manifest's ``split`` when given, else per source an exact 80/20
   train/validation partition of the sequences in a seeded hash order.

Per-sequence work (decode, subsample, filter) is cached in ``OUT.work/`` so a
killed build resumes; the dataset is written atomically with ``build.json``.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import sys
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from judgetrain import records
from judgetrain.perceptual import LpipsDistance, filter_near_duplicates
from judgetrain.seeding import derive_seed, rng_for
from judgetrain.video import VideoDecodeError, decode_frames, interval_indices, probe

from judgetrain.config import WorkBuildArgs, arg, comma_list
from judgetrain.jsonl import optional_text, read_jsonl, text

from .common import BuildError, Fractions, Skip, builder_parser, finish_summary, inside, save_build, split_table  # noqa: F401  (BuildError: raised from here)
from .procedures import to_rgb

BUILDER = "timecatch"
VERSION = "1.0.0"
TIMECATCH_TASKS = ("temporal_detect", "temporal_localize", "frame_detect", "frame_localize")
MIN_FRAMES, MAIN_MAX_FRAMES, MAX_FRAMES = 4, 8, 16
LPIPS_THRESHOLD = 0.05
DEFAULT_INTERVAL_S = 1.5
# Seconds between sampled frames per source (paper 000 §3.3); other sources use DEFAULT_INTERVAL_S.
SOURCE_INTERVALS_S = {"clevrer": 1.5, "craft": 1.5, "synthetic-physics": 1.5, "mtl-aqa": 1.0}
NOISE_MEAN, NOISE_STD = 127.5, 64.0
DEFAULT_SPLITS = {"train": 0.8, "validation": 0.2}
SPLIT_NAMES = ("train", "validation", "test")

# Temporal-detection prompts: (text, whether "yes" means "there is an anomaly").
# A is ours; B–E are Appendix A.2 of paper 000, verbatim.
DETECT_PROMPTS: dict[str, tuple[str, bool]] = {
    "A": (
        "You are given a sequence of images showing a scene unfolding over time, in the order they were "
        "captured. Two neighboring images may have been swapped. Has any pair of neighboring images been "
        "swapped? Reply with only 'yes' or 'no'.",
        True,
    ),
    "B": (
        "You are given a sequence of images showing a scene unfolding over time. Does the sequence appear to "
        "be in the correct temporal order, with no frames swapped? Reply with only ‘yes’ if the order is "
        "correct, or ‘no’ if something looks wrong.",
        False,
    ),
    "C": (
        "You are given a sequence of images showing a scene unfolding over time. Examine each consecutive pair "
        "of frames: does the transition from one image to the next always make physical sense? Two adjacent "
        "frames may have been swapped, causing one transition to look reversed or impossible. Reply with only "
        "‘yes’ if you find such a swap, or ‘no’ if all transitions look natural.",
        True,
    ),
    "D": ("Look at these images in order. Have any two neighboring images been swapped? Reply with only ‘yes’ or ‘no’.", True),
    "E": (
        "You are given a sequence of images. Go through them one by one from the first to the last. For each "
        "consecutive pair, ask yourself: could this transition happen naturally - does the second image "
        "physically follow from the first? If any single transition looks reversed or impossible, two adjacent "
        "frames have been swapped. Reply with only ‘yes’ if you find such a transition, or ‘no’ if every step "
        "forward in the sequence looks natural.",
        True,
    ),
}
TEMPORAL_LOCALIZE_PROMPT = (
    "You are given a sequence of {n} images, numbered 1 to {n} in the order shown, showing a scene unfolding "
    "over time. Two neighboring images have been swapped, so the sequence is not in its correct temporal order. "
    "Which two images were swapped? Reply with only the two image numbers in increasing order, in the form "
    "'i and j'."
)
FRAME_DETECT_PROMPT = (
    "You are given a sequence of images showing a scene unfolding over time. One of the images may have been "
    "replaced by random noise that does not belong to the scene. Does the sequence contain such a frame? "
    "Reply with only 'yes' or 'no'."
)
FRAME_LOCALIZE_PROMPT = (
    "You are given a sequence of {n} images, numbered 1 to {n} in the order shown, showing a scene unfolding "
    "over time. One of the images has been replaced by random noise. Which image is it? Reply with only its number."
)


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


@dataclass(kw_only=True)
class TimeCatchConfig(WorkBuildArgs):
    """``judgetrain build timecatch``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(None, "generate N synthetic physics clips (the source when no manifest is given: 64)")
    videos: Path | None = arg(None, 'video manifest, JSON Lines: {"video", "source", "id"?, "description"?, "split"?}')
    frames: Path | None = arg(None, 'frame-folder manifest, JSON Lines: {"id", "frames": [...], "source", "description"?, "split"?}')
    interval: list[str] = arg([], "seconds between sampled video frames, for all sources (1.5) or one (mtl-aqa=1.0); "
                                  "several allowed; defaults: 1.5 s, mtl-aqa 1.0 s", action="extend", metavar="S|SOURCE=S")
    lpips_threshold: float = arg(LPIPS_THRESHOLD, "drop a frame whose LPIPS distance to the last kept one is below this")
    lpips_net: str = arg("alex", "LPIPS backbone: alex, vgg or squeeze")
    lpips_random_backbone: bool = arg(False, "an untrained LPIPS backbone (offline tests only: distances are then not perceptual)")
    device: str | None = arg(None, "device for LPIPS (default: cuda if available)")
    tasks: list[str] = arg(list(TIMECATCH_TASKS), "tasks to build (space- or comma-separated)")
    prompts: list[str] = arg(["A"], "temporal-detection prompt layouts from A,B,C,D,E")
    descriptions: bool = arg(True, "scene descriptions in the prompts (--no-descriptions for the ablation)")
    frame_labels: bool = arg(False, 'put "Frame k:" before the k-th image (default: images back to back, as in the paper)')
    adjacent_choices: bool = arg(False, "temporal localization choices: adjacent pairs only (default: every pair)")
    subsets: list[str] = arg(["main", "long"], "length subsets to keep: main (4–8 frames), long (9–16)")
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by source sequence, when the manifest gives none")
    synthetic_long_fraction: float = arg(0.25, "share of synthetic clips long enough for the 9–16 frame set")
    synthetic_kind: str = arg("videos", "synthetic source: videos (CLEVRER-like MP4) or frames (DriveLM-like PNG folders)")

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        for name in ("videos", "frames"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))
        if self.synthetic is None and self.videos is None and self.frames is None:
            self.synthetic = 64
        self.interval = [str(v) for v in self.interval]
        self.tasks, self.prompts, self.subsets = comma_list(self.tasks), comma_list(self.prompts), comma_list(self.subsets)
        self.splits = Fractions(self.splits)

    @property
    def lpips_pretrained(self) -> bool:
        return not self.lpips_random_backbone

    @property
    def default_interval(self) -> float:
        return _parse_intervals(self.interval)[0] or DEFAULT_INTERVAL_S

    @property
    def intervals(self) -> dict[str, float]:
        return _parse_intervals(self.interval)[1]

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = []
        given = [n for n in ("videos", "frames", "synthetic") if getattr(self, n) is not None]
        if len(given) > 1:
            problems.append(f"--{' / --'.join(given)}: give only one source")
        if self.synthetic_kind not in ("videos", "frames"):
            problems.append(f"--synthetic-kind {self.synthetic_kind!r}: choose 'videos' (CLEVRER-like MP4) or 'frames' (DriveLM-like PNG folders)")
        if self.synthetic is not None and self.synthetic < 1:
            problems.append(f"--synthetic {self.synthetic}: give the number of clips to generate (at least 1)")
        bad = [t for t in self.tasks if t not in TIMECATCH_TASKS]
        if bad:
            problems.append(f"--tasks: unknown {bad}; choose from {list(TIMECATCH_TASKS)}")
        bad = [p for p in self.prompts if p not in DETECT_PROMPTS]
        if bad:
            problems.append(f"--prompts: unknown {bad}; choose from {sorted(DETECT_PROMPTS)}")
        bad = [s for s in self.subsets if s not in ("main", "long")]
        if bad:
            problems.append(f"--subsets: unknown {bad}; choose from ['main', 'long']")
        bad = [s for s in self.splits if s not in SPLIT_NAMES]
        if bad:
            problems.append(f"--splits: unknown split {bad}; use names from {list(SPLIT_NAMES)}")
        if self.splits and (any(v < 0 for v in self.splits.values()) or not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6)):
            problems.append(f"--splits {self.splits}: fractions must be non-negative and sum to 1")
        if any(v <= 0 for v in [self.default_interval, *self.intervals.values()]):
            problems.append("--interval: seconds between sampled frames must be positive")
        if self.lpips_net not in ("alex", "vgg", "squeeze"):
            problems.append(f"--lpips-net {self.lpips_net!r}: choose alex, vgg or squeeze")
        if not 0 <= self.lpips_threshold < 1:
            problems.append(f"--lpips-threshold {self.lpips_threshold}: must be in [0, 1)")
        if problems:
            raise BuildError("invalid TimeCatch build options:\n" + "\n".join(f"  - {p}" for p in problems))

    def interval_for(self, source: str) -> float:
        return self.intervals.get(source, SOURCE_INTERVALS_S.get(source, self.default_interval))


# --------------------------------------------------------------------------- manifests


def read_manifest(path: str | os.PathLike, kind: str) -> tuple[list[SourceSequence], list[Skip]]:
    """Parse a ``videos`` or ``frames`` manifest; every bad line becomes a :class:`Skip`
    naming ``MANIFEST:LINE`` and the field, never an exception or a silent drop."""
    path = Path(path)
    if not path.is_file():
        raise BuildError(f"{path}: manifest not found")
    sequences: list[SourceSequence] = []
    skips: list[Skip] = []
    seen: dict[str, int] = {}
    for item in read_jsonl(path):
        try:
            if item.problem:
                raise ValueError(item.problem)
            seq = _manifest_sequence(item.row, kind, path, item.line)
            if seq.id in seen:
                raise ValueError(f"id: {seq.id!r} is also on line {seen[seq.id]}; give every sequence its own id")
        except ValueError as e:
            skips.append(Skip(str(path), item.line, str(e)))
            continue
        seen[seq.id] = item.line
        sequences.append(seq)
    return sequences, skips


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
        sid = text(row, "id", "a name for the sequence, or leave it out to use the video path",
                   default=str(row.get("video")), ids=True)
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


def _png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def _load_image(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(to_rgb(im))  # 16-bit, palette, CMYK: the same RGB as every builder
    except (OSError, UnidentifiedImageError) as e:
        raise VideoDecodeError(f"{path}: unreadable image ({e})") from e


def _fingerprint(seq: SourceSequence, cfg: TimeCatchConfig) -> dict:
    files = [seq.video] if seq.video else seq.frames
    stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (str(p), -1, -1) for p in files]
    # JSON round trip so that a key read back from seq.json compares equal
    return json.loads(json.dumps({
        "id": seq.id,
        "files": stats,
        "interval": cfg.interval_for(seq.source) if seq.video else None,
        "lpips": [cfg.lpips_net, cfg.lpips_pretrained, cfg.lpips_threshold],
        "version": VERSION,
    }))


def process_sequence(seq: SourceSequence, cfg: TimeCatchConfig, distance, work: Path) -> dict:
    """Decode, subsample and LPIPS-filter one sequence; cache the kept frames as
    PNG files and a ``seq.json`` under ``work``. A cached result with the same
    fingerprint is reused. Raises VideoDecodeError for unreadable input."""
    folder = work / "sequences" / records.make_id(seq.source, seq.id)
    meta_path = folder / "seq.json"
    key = _fingerprint(seq, cfg)
    if meta_path.is_file():
        cached = json.loads(meta_path.read_text())
        if cached.get("key") == key:
            return cached
    if seq.video:
        info = probe(seq.video)
        indices = interval_indices(info.n_frames, info.fps, cfg.interval_for(seq.source))
        frames = decode_frames(seq.video, indices)
        times = [round(i / info.fps, 4) for i in indices]
        sizes = {"video": str(seq.video), "bytes": seq.video.stat().st_size, "n_frames": info.n_frames, "fps": info.fps}
    else:
        frames = [_load_image(p) for p in seq.frames]
        indices, times = list(range(len(frames))), [None] * len(frames)
        sizes = {"frames": len(seq.frames), "bytes": sum(p.stat().st_size for p in seq.frames)}
    if not frames:
        raise VideoDecodeError(f"{seq.video or seq.manifest}: no frames")
    kept, dists = filter_near_duplicates(frames, distance, cfg.lpips_threshold)
    result: dict[str, Any] = {"key": key, "n_sampled": len(frames), "input": sizes}
    if len(kept) < MIN_FRAMES:
        result.update(status="short", reason=f"{len(kept)} frame(s) left after LPIPS filtering (< {MIN_FRAMES})", n_kept=len(kept))
    else:
        truncated_from = len(kept) if len(kept) > MAX_FRAMES else None
        kept, dists = kept[:MAX_FRAMES], dists[: MAX_FRAMES - 1]
        tmp = folder.with_name(folder.name + f".tmp-{uuid.uuid4().hex[:6]}")
        tmp.mkdir(parents=True)
        names = []
        for k, idx in enumerate(kept):
            names.append(f"{k:03d}.png")
            (tmp / names[-1]).write_bytes(_png(frames[idx]))
        result.update(
            status="ok",
            n_kept=len(kept),
            frames=names,
            source_indices=[indices[i] for i in kept],
            times_s=[times[i] for i in kept],
            lpips_consecutive=[round(d, 6) for d in dists],
            truncated_from=truncated_from,
        )
        (tmp / "seq.json").write_text(json.dumps(result, sort_keys=True))
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)  # the folder appears complete or not at all
        return result
    folder.mkdir(parents=True, exist_ok=True)
    tmp_meta = folder / f".seq.{uuid.uuid4().hex[:6]}.json"
    tmp_meta.write_text(json.dumps(result, sort_keys=True))
    os.replace(tmp_meta, meta_path)
    return result


# --------------------------------------------------------------------------- records


def assign_splits(sequences: list[SourceSequence], fractions: dict[str, float], seed: int) -> dict[str, str]:
    """Split by source sequence. The manifest's split wins; the rest, per
    source, are ordered by a seeded hash of their id and cut at the cumulative
    fractions (exact counts: round(cumulative fraction × N))."""
    out: dict[str, str] = {}
    by_source: dict[str, list[SourceSequence]] = defaultdict(list)
    for s in sequences:
        if s.split:
            out[s.id] = s.split
        else:
            by_source[s.source].append(s)
    names = list(fractions)
    for group in by_source.values():
        group.sort(key=lambda s: derive_seed(seed, "split", s.source, s.id))
        n, start, cum = len(group), 0, 0.0
        for name in names:
            cum += fractions[name]
            end = n if name == names[-1] else round(cum * n)
            for s in group[start:end]:
                out[s.id] = name
            start = end
    return out


def temporal_choices(n: int, adjacent_only: bool) -> list[str]:
    """Answer strings for temporal localization: every unordered pair of frame
    numbers (C(n, 2) choices), or the n−1 adjacent pairs; 1-based, ``"i and j"``, i < j."""
    pairs = [(i, i + 1) for i in range(1, n)] if adjacent_only else list(combinations(range(1, n + 1), 2))
    return [f"{a} and {b}" for a, b in pairs]


def draw_anomalies(seed: int, source: str, seq_id: str, n: int) -> tuple[int, int]:
    """(i_swap, i_noise), 1-based: i_swap ~ U{1…n−1} (frames i, i+1 swapped), i_noise ~ U{1…n}."""
    rng = rng_for(seed, "timecatch-anomaly", source, seq_id)
    return int(rng.integers(1, n)), int(rng.integers(1, n + 1))


def noise_frame(seed: int, source: str, seq_id: str, shape: tuple[int, ...]) -> np.ndarray:
    """I.i.d. Gaussian pixels, round(N(127.5, 64²)) clipped to 0…255, at ``shape``."""
    rng = rng_for(seed, "timecatch-noise", source, seq_id)
    return np.clip(np.rint(rng.normal(NOISE_MEAN, NOISE_STD, size=shape)), 0, 255).astype(np.uint8)


def sequence_records(seq: SourceSequence, done: dict, folder: Path, cfg: TimeCatchConfig) -> list[dict]:
    """All records of one kept sequence, in a fixed order."""
    png = [(folder / name).read_bytes() for name in done["frames"]]
    n = len(png)
    subset = "main" if n <= MAIN_MAX_FRAMES else "long"
    i_swap, i_noise = draw_anomalies(cfg.seed, seq.source, seq.id, n)
    swapped = list(range(n))
    swapped[i_swap - 1], swapped[i_swap] = swapped[i_swap], swapped[i_swap - 1]
    with Image.open(io.BytesIO(png[i_noise - 1])) as im:
        shape = (im.height, im.width, 3)
    noisy = list(png)
    noisy[i_noise - 1] = _png(noise_frame(cfg.seed, seq.source, seq.id, shape))
    show_description = cfg.descriptions and bool(seq.description)
    prefix = f"Scene description: {seq.description}\n\n" if show_description else ""
    base_meta = {
        "sequence_id": seq.id,
        "subset": subset,
        "description": seq.description,
        "description_shown": show_description,
        "frame_labels": cfg.frame_labels,
        "times_s": done["times_s"],
        "source_frame_indices": done["source_indices"],
        "lpips_consecutive": done["lpips_consecutive"],
        "truncated_from": done.get("truncated_from"),
    }
    swap_meta = {"swapped_frames": [i_swap, i_swap + 1], "lpips_swapped": done["lpips_consecutive"][i_swap - 1]}
    noise_meta = {"noise_frame": i_noise, "noise": {"distribution": "normal", "mean": NOISE_MEAN, "std": NOISE_STD, "clip": [0, 255]}}
    out = []

    def add(task, order, images, instruction, choices, label, perturbation, position, layout, extra):
        meta = {**base_meta, **extra, "presented_order": order}
        rid = records.make_id(BUILDER, cfg.seed, seq.source, seq.id, task, perturbation, layout, prefix="tc-")
        out.append(
            records.make_record(
                id=rid, task=task, images=[{"bytes": b, "path": None} for b in images], instruction=prefix + instruction,
                answer=label, choices=choices, label=label, source=seq.source, perturbation=perturbation,
                position=position, n_frames=n, layout=layout, meta=meta,
                image_labels=[f"Frame {k}:" for k in range(1, n + 1)] if cfg.frame_labels else None,
            )
        )

    gold = list(range(n))
    if "temporal_detect" in cfg.tasks:
        for layout in cfg.prompts:
            text, yes_is_anomaly = DETECT_PROMPTS[layout]
            polarity = {"yes_means_anomaly": yes_is_anomaly}
            add("temporal_detect", gold, png, text, ["yes", "no"], "no" if yes_is_anomaly else "yes", "none", -1, layout, polarity)
            add("temporal_detect", swapped, [png[i] for i in swapped], text, ["yes", "no"], "yes" if yes_is_anomaly else "no",
                "swap", i_swap - 1, layout, {**swap_meta, **polarity})
    if "temporal_localize" in cfg.tasks:
        add("temporal_localize", swapped, [png[i] for i in swapped], TEMPORAL_LOCALIZE_PROMPT.format(n=n),
            temporal_choices(n, cfg.adjacent_choices), f"{i_swap} and {i_swap + 1}", "swap", i_swap - 1, "A",
            {**swap_meta, "adjacent_choices": cfg.adjacent_choices})
    if "frame_detect" in cfg.tasks:
        add("frame_detect", gold, png, FRAME_DETECT_PROMPT, ["yes", "no"], "no", "none", -1, "A", {"yes_means_anomaly": True})
        add("frame_detect", gold, noisy, FRAME_DETECT_PROMPT, ["yes", "no"], "yes", "noise", i_noise - 1, "A",
            {**noise_meta, "yes_means_anomaly": True})
    if "frame_localize" in cfg.tasks:
        add("frame_localize", gold, noisy, FRAME_LOCALIZE_PROMPT.format(n=n), [str(k) for k in range(1, n + 1)],
            str(i_noise), "noise", i_noise - 1, "A", noise_meta)
    return out


def _generate(items: list[tuple[SourceSequence, dict, str]], cfg_json: str):
    cfg = TimeCatchConfig(**json.loads(cfg_json))
    for seq, done, folder in items:
        yield from sequence_records(seq, done, Path(folder), cfg)


# --------------------------------------------------------------------------- the build


def _synthetic_manifest(cfg: TimeCatchConfig, work: Path) -> tuple[str, Path]:
    from .synthetic import write_frame_folders, write_physics_videos

    if cfg.synthetic_kind == "frames":
        return "frames", write_frame_folders(work / "synthetic-frames", cfg.synthetic, seed=cfg.seed, progress=cfg.progress)
    return "videos", write_physics_videos(work / "synthetic", cfg.synthetic, seed=cfg.seed,
                                          long_fraction=cfg.synthetic_long_fraction, progress=cfg.progress)


def build(cfg: TimeCatchConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    import datasets
    from tqdm.auto import tqdm

    cfg.check()
    # first, so that missing LPIPS weights fail the build before any other work
    distance = LpipsDistance(cfg.lpips_net, pretrained_backbone=cfg.lpips_pretrained, device=cfg.device, seed=cfg.seed)
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    if cfg.videos is not None:
        kind, manifest = "videos", Path(cfg.videos)
    elif cfg.frames is not None:
        kind, manifest = "frames", Path(cfg.frames)
    else:
        kind, manifest = _synthetic_manifest(cfg, work)
    sequences, skips = read_manifest(manifest, kind)

    kept: list[tuple[SourceSequence, dict]] = []
    short: list[tuple[SourceSequence, dict]] = []
    for seq in tqdm(sequences, desc="sequences", unit="seq", disable=not cfg.progress):
        try:
            done = process_sequence(seq, cfg, distance, work)
        except (VideoDecodeError, OSError) as e:
            # the manifest's path with its line; the message names the video or image
            field = "video" if seq.video else "frames"
            skips.append(Skip(seq.manifest, seq.line, f"{field}: {e}; fix or replace the file, or drop the line", seq.id))
            continue
        (kept if done["status"] == "ok" else short).append((seq, done))
    kept = [(s, d) for s, d in kept if ("main" if d["n_kept"] <= MAIN_MAX_FRAMES else "long") in cfg.subsets]
    if skips:
        for s in skips:
            print(f"warning: skipped {s}", file=sys.stderr)
        if cfg.strict:
            raise BuildError(f"{len(skips)} bad input(s) (listed above); fix them or rerun without --strict to skip them")
    if not kept:
        raise BuildError(f"no sequence of {MIN_FRAMES}+ frames survived ({len(short)} too short, {len(skips)} skipped); see the warnings above")

    split_of = assign_splits([s for s, _ in kept], cfg.splits, cfg.seed)
    arrow_cache = work / "arrow"
    shutil.rmtree(arrow_cache, ignore_errors=True)
    cfg_json = json.dumps({**asdict(cfg), "out": str(cfg.out), "videos": None, "frames": None})
    splits = {}
    for name in [*cfg.splits, *sorted({v for v in split_of.values()} - set(cfg.splits))]:
        items = sorted(
            [(s, d, str(work / "sequences" / records.make_id(s.source, s.id))) for s, d in kept if split_of[s.id] == name],
            key=lambda x: (x[0].source, x[0].id),
        )
        if items:
            splits[name] = datasets.Dataset.from_generator(
                _generate, features=records.FEATURES, cache_dir=str(arrow_cache), gen_kwargs={"items": items, "cfg_json": cfg_json},
                fingerprint=records.make_id(name, cfg_json, [(s.id, d["key"]) for s, d, _ in items]),
            )
    dataset = datasets.DatasetDict(splits)

    counts: dict[str, Any] = {"records": {}, "sequences": {}}
    for name, ds in dataset.items():
        cols = ds.select_columns(["task", "perturbation", "source"])
        counts["records"][name] = {
            "total": len(ds),
            "task": dict(sorted(Counter(cols["task"]).items())),
            "perturbation": dict(sorted(Counter(cols["perturbation"]).items())),
            "task_perturbation": dict(sorted(Counter(f"{t}/{p}" for t, p in zip(cols["task"], cols["perturbation"])).items())),
        }
    per_source: dict[str, Counter] = defaultdict(Counter)
    lengths: Counter = Counter()
    for s, d in kept:
        per_source[s.source]["kept"] += 1
        per_source[s.source][split_of[s.id]] += 1
        per_source[s.source]["main" if d["n_kept"] <= MAIN_MAX_FRAMES else "long"] += 1
        lengths[d["n_kept"]] += 1
    for s, d in short:
        per_source[s.source]["too_short"] += 1
    source_of = {q.id: q.source for q in sequences}
    for s in skips:
        per_source[source_of.get(s.id, "unknown (malformed line)")]["skipped"] += 1
    counts["sequences"] = {src: dict(sorted(c.items())) for src, c in sorted(per_source.items())}
    counts["length_histogram"] = {str(k): v for k, v in sorted(lengths.items())}
    sources = [{"path": str(manifest), "bytes": manifest.stat().st_size}]
    sources += [{"id": s.id, "source": s.source, **d["input"]} for s, d in sorted(kept + short, key=lambda x: (x[0].source, x[0].id))]
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "seed": cfg.seed,
        "args": json.loads(cfg_json) | {"videos": str(cfg.videos) if cfg.videos else None, "frames": str(cfg.frames) if cfg.frames else None},
        "protocol": {
            "intervals_s": {src: cfg.interval_for(src) for src in sorted(per_source)},
            "lpips": {"net": cfg.lpips_net, "pretrained_backbone": cfg.lpips_pretrained, "threshold": cfg.lpips_threshold},
            "lengths": {"min": MIN_FRAMES, "main_max": MAIN_MAX_FRAMES, "max": MAX_FRAMES, "longer": "cut to the first 16 kept frames"},
            "noise": {"distribution": "normal", "mean": NOISE_MEAN, "std": NOISE_STD, "clip": [0, 255]},
        },
        "sources": sources,
        "counts": counts,
        "filtered": [{"id": s.id, "source": s.source, "reason": d["reason"]} for s, d in short],
        "skipped": [asdict(s) for s in skips],
    }
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def _parse_intervals(values: list[str]) -> tuple[float | None, dict[str, float]]:
    default, per_source = None, {}
    for v in values:
        try:
            if "=" in v:
                k, x = v.split("=", 1)
                per_source[k.strip()] = float(x)
            else:
                default = float(v)
        except ValueError:
            raise BuildError(f"--interval {v!r}: give seconds (1.5) or SOURCE=seconds (mtl-aqa=1.0)") from None
    return default, per_source


def make_parser():
    return builder_parser(TimeCatchConfig, "timecatch",
                          "Build the TimeCatch swap / noise anomaly sets (paper 000 §3) as task records.",
                          ["--out data/timecatch --synthetic 200 --lpips-random-backbone",
                           "--out data/clevrer-tc --videos clevrer/manifest.jsonl --interval 1.5",
                           "--out data/drivelm-tc --frames drivelm/manifest.jsonl --no-descriptions"])


def print_summary(info: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title="Sequences per source")
    order = ["kept", "main", "long", *SPLIT_NAMES, "too_short", "skipped"]
    present = {k for c in info["counts"]["sequences"].values() for k in c}
    keys = [k for k in order if k in present] + sorted(present - set(order))
    t.add_column("source")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for src, c in info["counts"]["sequences"].items():
        t.add_row(src, *[str(c.get(k, 0)) for k in keys])
    console.print(t)
    hist = info["counts"]["length_histogram"]
    width = max(hist.values(), default=1)
    console.print("Kept sequence lengths (frames: count)")
    for k, v in hist.items():
        console.print(f"  {int(k):>2}: {'█' * max(1, round(30 * v / width))} {v}")
    console.print(split_table("Records per task and split", "task / perturbation", info["counts"]["records"], "task_perturbation", total=True))
    finish_summary(console, info, out)


def main(cfg: TimeCatchConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
