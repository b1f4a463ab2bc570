"""TimeCatch's protocol constants, prompt texts and build options (:class:`TimeCatchConfig`).

The numbers of paper 000 §3 (lengths, LPIPS threshold, sampling intervals, noise), the
temporal-detection prompts A–E (Appendix A.2) and the localization / frame prompts, and
the typed options of ``judgetrain build timecatch`` with their cross-field checks.
Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import arg, comma_list, one_of
from judgetrain.perceptual import LPIPS_NETS

from ..core.args import WorkBuildArgs
from ..core.common import BuildError, Fractions

BUILDER = "timecatch"
VERSION = "1.1.0"  # 1.1: videos sampled by timestamp and shown upright, --interval always wins, copies in one split
TIMECATCH_TASKS = ("temporal_detect", "temporal_localize", "frame_detect", "frame_localize")
MIN_FRAMES, MAIN_MAX_FRAMES, MAX_FRAMES = 4, 8, 16
LPIPS_THRESHOLD = 0.05
DEFAULT_INTERVAL_S = 1.5
# The shortest --interval taken: 1000 samples a second is denser than any video's frames (and a
# value like 1e-300 would ask for more sampling times than a video could ever be walked through).
MIN_INTERVAL_S = 0.001
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


def subset_of(n_frames: int) -> str:
    """The length subset of a kept sequence: ``main`` (4–8 frames) or ``long`` (9–16)."""
    return "main" if n_frames <= MAIN_MAX_FRAMES else "long"


@dataclass(kw_only=True)
class TimeCatchConfig(WorkBuildArgs):
    """``judgetrain build timecatch``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(None, "generate N synthetic physics clips (the source when no manifest is given: 64)")
    videos: Path | None = arg(None, 'video manifest, JSON Lines: {"video", "source", "id"?, "description"?, "split"?}')
    frames: Path | None = arg(
        None, 'frame-folder manifest, JSON Lines: {"id", "frames": [...], "source", "description"?, "split"?}'
    )
    interval: list[str] = arg(
        [],
        "seconds between sampled video frames: S for every source, SOURCE=S for one (wins over S); "
        "several allowed; unset: 1.5 s, mtl-aqa 1.0 s (paper 000 §3.3)",
        action="extend",
        metavar="S|SOURCE=S",
    )
    lpips_threshold: float = arg(LPIPS_THRESHOLD, "drop a frame whose LPIPS distance to the last kept one is below this")
    lpips_net: str = arg("alex", f"LPIPS backbone: {one_of(LPIPS_NETS)}")
    lpips_random_backbone: bool = arg(
        False, "an untrained LPIPS backbone (offline tests only: distances are then not perceptual)"
    )
    device: str | None = arg(None, "device for LPIPS (default: cuda if available)")
    tasks: list[str] = arg(list(TIMECATCH_TASKS), "tasks to build (space- or comma-separated)")
    prompts: list[str] = arg(["A"], "temporal-detection prompt layouts from A,B,C,D,E")
    descriptions: bool = arg(True, "scene descriptions in the prompts (--no-descriptions for the ablation)")
    frame_labels: bool = arg(False, 'put "Frame k:" before the k-th image (default: images back to back, as in the paper)')
    adjacent_choices: bool = arg(False, "temporal localization choices: adjacent pairs only (default: every pair)")
    subsets: list[str] = arg(["main", "long"], "length subsets to keep: main (4–8 frames), long (9–16)")
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by source sequence, when the manifest gives none")
    synthetic_long_fraction: float = arg(
        0.25, "share of synthetic clips long enough for the 9–16 frame set", minimum=0, maximum=1
    )
    synthetic_kind: str = arg("videos", "synthetic source: videos (CLEVRER-like MP4) or frames (DriveLM-like PNG folders)")

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        for name in ("videos", "frames"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))
        if self.synthetic is None and self.videos is None and self.frames is None:
            self.synthetic = 64
        given = self.interval
        self.interval = [str(v) for v in (given if isinstance(given, (list, tuple)) else [given])]  # YAML: one value
        self.tasks, self.prompts, self.subsets = comma_list(self.tasks), comma_list(self.prompts), comma_list(self.subsets)
        self.splits = Fractions(self.splits)

    @property
    def lpips_pretrained(self) -> bool:
        return not self.lpips_random_backbone

    @property
    def default_interval(self) -> float:
        """A plain ``--interval S`` (every source), else :data:`DEFAULT_INTERVAL_S`."""
        given = _parse_intervals(self.interval)[0]
        return DEFAULT_INTERVAL_S if given is None else given

    @property
    def intervals(self) -> dict[str, float]:
        """The ``--interval SOURCE=S`` values, by source."""
        return _parse_intervals(self.interval)[1]

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = []
        given = [n for n in ("videos", "frames", "synthetic") if getattr(self, n) is not None]
        if len(given) > 1:
            problems.append(f"--{' / --'.join(given)}: give only one source")
        if self.synthetic_kind not in ("videos", "frames"):
            problems.append(
                f"--synthetic-kind {self.synthetic_kind!r}: choose 'videos' (CLEVRER-like MP4) or 'frames' (DriveLM-like PNG folders)"
            )
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
        if self.splits and (
            any(v < 0 for v in self.splits.values()) or not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6)
        ):
            problems.append(f"--splits {self.splits}: fractions must be non-negative and sum to 1")
        problems += _parse_intervals(self.interval)[2]
        if self.interval and (self.frames is not None or (self.synthetic is not None and self.synthetic_kind == "frames")):
            problems.append(
                f"--interval {' '.join(self.interval)}: frame folders (--frames, --synthetic-kind frames) keep every "
                "frame they list, only videos are subsampled; drop --interval"
            )
        if self.lpips_net not in LPIPS_NETS:
            problems.append(f"--lpips-net {self.lpips_net!r}: choose {one_of(LPIPS_NETS)}")
        if not 0 <= self.lpips_threshold < 1:
            problems.append(f"--lpips-threshold {self.lpips_threshold}: must be in [0, 1)")
        if problems:
            raise BuildError("invalid TimeCatch build options:\n" + "\n".join(f"  - {p}" for p in problems))

    def interval_for(self, source: str) -> float:
        """Seconds between the sampled frames of ``source``'s videos: what the user gave wins, ``--interval
        SOURCE=S`` over a plain ``--interval S``; without either, the paper's value for the source
        (:data:`SOURCE_INTERVALS_S`), else :data:`DEFAULT_INTERVAL_S`."""
        given, per_source, _ = _parse_intervals(self.interval)
        if source in per_source:
            return per_source[source]
        return given if given is not None else SOURCE_INTERVALS_S.get(source, DEFAULT_INTERVAL_S)


def _parse_intervals(values: list[str]) -> tuple[float | None, dict[str, float], list[str]]:
    """``--interval`` values as (the plain S for every source or None, {source: S}, problems): each
    problem names the value and why (not a number, not finite, not positive, '=' with no source);
    a refused value is left out of the first two; of two values for the same sources the later wins."""
    given: float | None = None
    per_source: dict[str, float] = {}
    problems: list[str] = []
    for v in values:
        name, _, number = v.rpartition("=")
        name = name.strip()
        try:
            seconds = float(number)
        except ValueError:
            problems.append(f"--interval {v!r}: give seconds (1.5) or SOURCE=seconds (mtl-aqa=1.0)")
            continue
        if "=" in v and not name:
            problems.append(f"--interval {v!r}: name the source before '=' (mtl-aqa=1.0), or give seconds alone for every source")
        elif not math.isfinite(seconds):
            problems.append(f"--interval {v!r}: {number.strip()} is not a finite number of seconds; give e.g. 1.5")
        elif seconds <= 0:
            problems.append(f"--interval {v!r}: videos are sampled every S seconds, so S must be positive; give e.g. 1.5")
        elif seconds < MIN_INTERVAL_S:
            problems.append(f"--interval {v!r}: below {MIN_INTERVAL_S:g} s, denser than any video's frames; give e.g. 1.5")
        elif name:  # a later value wins, as for any repeated flag (and a flag over the --config file's)
            per_source[name] = seconds
        else:
            given = seconds
    return given, per_source, problems
