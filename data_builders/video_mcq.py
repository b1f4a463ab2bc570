"""Video multiple-choice manifests for PhaseFusion: synthetic physics questions and benchmark converters.

Video MCQ items are not task records: PhaseFusion samples frames at evaluation
time, because the sampler is what it studies (paper 001 §2–3). A **manifest** is
JSON Lines, one question per line (DESIGN.md):

    {"id": "vmcq-00000", "video": "videos/vmcq-00000.mp4", "question": "Which object touches the floor first?",
     "options": ["The red ball", "The gray cube", "The cyan cylinder"], "answer": 1,
     "benchmark": "synthetic-physics", "duration": 12.0, "num_frames": 96}

``video`` is relative to the manifest's folder and must stay inside it;
``options`` are in gold (canonical) order and ``answer`` indexes them (0-based);
``duration`` (seconds) and ``num_frames`` are optional; so are ``start`` and
``end`` (seconds, both or neither): the segment the question is about, as in
MVBench's bounded tasks, inside which PhaseFusion samples. Further keys (``qtype``,
``evidence_s``, ``clip_seed``, a benchmark's own metadata) are kept in
:attr:`VideoQuestion.extra`. :func:`load_manifest` validates every line and
names ``file:line: field`` for each problem.

**Synthetic questions** (``judgetrain build video-mcq --synthetic N``) need no
download. Each question gets its own physics clip (data_builders/synthetic.py:
3–5 coloured objects bouncing in a box, ``--frames`` frames at ``--fps``,
H.264), and its answer is computed from the simulation itself
(:class:`~judgetrain.data_builders.synthetic.PhysicsRun`: event log and
positions):

| qtype | question | options |
| --- | --- | --- |
| ``first_collision`` | Which two objects collide with each other first? | object pairs of the clip |
| ``most_bounces`` | Which object bounces off the floor the most times? | objects of the clip |
| ``fastest`` | Which object moves fastest on average over the whole video? | objects of the clip |
| ``leftmost_end`` | Which object is farthest to the left at the end of the video? | objects of the clip |
| ``collision_count`` | How many times do the <a> and the <b> collide with each other? | consecutive counts, ascending |

Touches of one pair (or one object and the floor) less than ``--min-gap``
seconds (default 0.5 s) after the previous one belong to the same contact
episode: that is one collision (bounce) to a viewer. A clip is used for a
question only when its answer is unambiguous in the simulation: the first
collision comes at least ``--min-gap`` before any other pair's, the
most-bouncing object has at least two more bounce episodes than the next, the
fastest object travels at least 10 % farther than the next (path length over
every physics substep), and the leftmost object leads by at least 0.3 world
units in every frame of the last second; otherwise the next clip of the same
(seed, question) is simulated (counted in ``build.json``). Clips have 3–4
objects, 5 only when five object options are asked for (with five, something
collides every few frames and few answers stay unambiguous). ``evidence_s``
lists the times of the deciding events (first collision and runner-up, the
bounces or collisions counted, the last second); ``clip_seed`` the seed parts
of the clip (``run_physics(clip_seed, num_frames, fps=…, n_objects=…)``
re-simulates it). Collisions and bounces are instants, so with the default 96 frames an 8-frame grid (one sample per 1.5 s)
misses most of them and which ones depends on its phase, while the 24-frame
union of three phases (one per 0.5 s) brackets them: the phase can matter, as
PhaseFusion needs.

Distractors are other objects (or pairs) of the same clip, those taking part
in later events first. Types cycle in the order of ``--qtypes``, option counts
cycle through ``--options`` per round of types, and the gold position is
balanced per option count (each block of k questions with k options puts gold
once in each slot, in a seeded order; count options stay ascending, so the
window of counts is chosen to put gold there); ``build.json`` records the
counts. Seeds come from hashlib (judgetrain.seeding); the same arguments give
byte-identical videos and manifest. Videos are written atomically one by one,
and an existing one is kept, so a killed build resumes where it stopped.

**Converters** (``--from egoschema|mvbench|videomme --annotations FILE
--videos DIR``) turn the benchmarks' published annotation files into a
manifest written to ``--out``, which must contain ``--videos`` (manifest paths
stay inside the manifest's folder, e.g. ``--out`` the benchmark's root):

- **EgoSchema** (github.com/egoschema/EgoSchema): ``questions.json``, a list of
  ``{"q_uid", "google_drive_id", "question", "option 0", …, "option 4"}``, and
  ``subset_answers.json`` (``--answers``; default: beside the questions), a
  mapping ``q_uid → correct option index`` for the public 500-question subset.
  Video: ``DIR/<q_uid>.mp4``. Questions without a public answer are skipped
  and counted. ``id`` = ``q_uid``.
- **MVBench** (OpenGVLab/MVBench): one JSON list per task (``json/<task>.json``;
  ``--annotations`` a file or the folder), items ``{"video", "question",
  "candidates": [...], "answer": <text of the correct candidate>}``, plus
  ``"start"``/``"end"`` (seconds) for the bounded tasks, kept in ``extra``.
  ``--videos`` is MVBench's ``video/`` folder; each task's videos lie in the
  sub-folder of :data:`MVBENCH_TASKS` (the benchmark's own ``data_list``); a task
  not listed there reads ``DIR/<video>``. ``episodic_reasoning`` is stored as
  frame folders, not videos, and is skipped with that reason. ``id`` =
  ``<task>-<index in the file>``; ``answer`` = the candidate's index.
- **Video-MME** (lmms-lab/Video-MME): ``videomme/test-00000-of-00001.parquet``
  (or the same rows as JSON / JSON Lines) with ``video_id``, ``duration``
  (the category ``short``/``medium``/``long``, not seconds: kept as
  ``extra.duration_category``), ``domain``, ``sub_category``, ``url``,
  ``videoID`` (the YouTube id; video ``DIR/<videoID>.mp4``), ``question_id``,
  ``task_type``, ``question``, ``options`` (``["A. …", "B. …", "C. …", "D. …"]``,
  letter prefixes removed) and ``answer`` (a letter). ``id`` = ``question_id``.

Every annotation file may also be JSON Lines (``.jsonl``, one item per line),
read with :func:`judgetrain.jsonl.read_jsonl`; a plain JSON file is parsed
whole, and an error in it (not UTF-8, not JSON) names the file. A question whose
video is missing (or, with ``--probe``, unreadable), whose annotation is
inconsistent (answer not among the options) or lacks a field, or whose JSON
Lines line is not UTF-8, not JSON or not an object, is reported with its file
and item (``file[index]``, or ``file:line`` for JSON Lines) and id, counted in
``build.json`` and left out of the manifest; ``--strict`` makes it an error.
``--probe`` reads every video's frame count and fps (PyAV) into ``num_frames``
and ``duration``. ``--sample N`` keeps
``random.Random(seed).sample(items, N)`` of the usable items, the subsets of
paper 001 App. A (seed 42).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from judgetrain.config import BuildArgs, arg, comma_list, jsonable
from judgetrain.config import make_parser as make_config_parser
from judgetrain.jsonl import json_kind, read_jsonl
from judgetrain.mcq_manifest import ManifestError, VideoQuestion, check_line, load_manifest  # noqa: F401  (re-exported)

from .common import BuildError, Skip

__all__ = [
    "BENCHMARK_SYNTHETIC",
    "CONVERTERS",
    "MANIFEST",
    "MVBENCH_TASKS",
    "QTYPES",
    "ConvertConfig",
    "FrameSize",
    "ManifestError",
    "OptionCounts",
    "SyntheticConfig",
    "VideoMcqConfig",
    "VideoQuestion",
    "build",
    "build_converted",
    "build_synthetic",
    "convert",
    "load_manifest",
    "main",
    "make_parser",
]

BUILDER = "video-mcq"
VERSION = "1.0.0"
MANIFEST = "manifest.jsonl"
BUILD_INFO = "build.json"
BENCHMARK_SYNTHETIC = "synthetic-physics"
QTYPES = ("first_collision", "most_bounces", "fastest", "leftmost_end", "collision_count")
QUESTIONS = {
    "first_collision": "Which two objects collide with each other first?",
    "most_bounces": "Which object bounces off the floor the most times?",
    "fastest": "Which object moves fastest on average over the whole video?",
    "leftmost_end": "Which object is farthest to the left at the end of the video?",
    "collision_count": "How many times do the {a} and the {b} collide with each other?",
}
DEFAULT_FRAMES, DEFAULT_FPS, DEFAULT_SIZE = 96, 8, (160, 120)
DEFAULT_OPTIONS = (3, 5)
DEFAULT_MIN_GAP_S = 0.5
FASTEST_RATIO = 1.1        # the fastest object travels >= 10 % farther than the next
MOST_BOUNCES_LEAD = 2      # the most-bouncing object bounces at least twice more than the next
LEFTMOST_GAP = 0.3         # world units (~ one object radius) in every frame of the last second
MAX_ATTEMPTS = 500

def _manifest_row(qid: str, video: str, question: str, options: Sequence[str], answer: int, benchmark: str,
                  duration: float | None = None, num_frames: int | None = None, **extra: Any) -> dict[str, Any]:
    row = {"id": qid, "video": video, "question": question, "options": list(options), "answer": answer,
           "benchmark": benchmark}
    if duration is not None:
        row["duration"] = duration
    if num_frames is not None:
        row["num_frames"] = num_frames
    return row | extra


def _write_manifest(out: Path, rows: list[dict[str, Any]]) -> Path:
    from judgetrain.io import write_rows

    path = out / MANIFEST
    write_rows(path, rows)
    load_manifest(path)  # what was written must read back
    return path


# ---------------------------------------------------------------- synthetic questions

class OptionCounts(tuple):
    """Options per question, ``(min, max)``: from ``"3-5"``, ``"4"`` (one count), ``4`` or a pair
    (YAML ``[3, 5]``); the type of the ``--options`` field, so a flag and a YAML value give the same."""

    def __new__(cls, value: Any = DEFAULT_OPTIONS):
        try:
            if isinstance(value, str):
                lo, _, hi = value.partition("-")
                pair = (int(lo), int(hi or lo))
            elif isinstance(value, int) and not isinstance(value, bool):
                pair = (value, value)
            else:
                pair = tuple(int(v) for v in value)
                pair = pair * 2 if len(pair) == 1 else pair
                if len(pair) != 2:
                    raise ValueError(value)
        except (TypeError, ValueError):
            raise BuildError(f"--options {value!r}: write MIN-MAX or N, e.g. 3-5 or 4") from None
        return super().__new__(cls, pair)

    def __str__(self) -> str:
        return f"{self[0]}-{self[1]}" if self[0] != self[1] else str(self[0])


class FrameSize(tuple):
    """Video ``(width, height)`` in pixels: from ``"160x120"`` or a pair (YAML ``[160, 120]``);
    the type of the ``--size`` field."""

    def __new__(cls, value: Any = DEFAULT_SIZE):
        try:
            pair = tuple(int(v) for v in (value.lower().split("x") if isinstance(value, str) else value))
            if len(pair) != 2:
                raise ValueError(value)
        except (TypeError, ValueError):
            raise BuildError(f"--size {value!r}: write WIDTHxHEIGHT, e.g. 160x120") from None
        return super().__new__(cls, pair)

    def __str__(self) -> str:
        return f"{self[0]}x{self[1]}"


def _raise_problems(problems: list[str]) -> None:
    if problems:
        raise BuildError("invalid video-mcq build options:\n" + "\n".join(f"  - {p}" for p in problems))


def _post_init_base(cfg: Any, cls: type) -> None:
    """The next ``__post_init__`` up the MRO, if any (the command config joins both modes' configs)."""
    parent = getattr(super(cls, cfg), "__post_init__", None)
    if parent is not None:
        parent()


@dataclass(kw_only=True)
class SyntheticConfig(BuildArgs):
    """``judgetrain build video-mcq --synthetic N``: the synthetic questions' settings, each a flag
    (``--field-name``) and a ``--config`` key of the command (:class:`VideoMcqConfig`)."""

    synthetic: int | None = arg(None, "write N synthetic physics questions, one clip each", metavar="N")
    frames: int = arg(DEFAULT_FRAMES, "frames per clip (synthetic questions)")
    fps: int = arg(DEFAULT_FPS, "frames per second (synthetic questions)")
    options: OptionCounts = arg(OptionCounts(DEFAULT_OPTIONS), "options per question, MIN-MAX or N, e.g. 3-5 or 4 "
                                "(synthetic questions)", metavar="MIN-MAX")
    size: FrameSize = arg(FrameSize(DEFAULT_SIZE), "video WIDTHxHEIGHT in pixels (synthetic questions)", metavar="WxH")
    min_gap: float = arg(DEFAULT_MIN_GAP_S, "seconds between a deciding event and the runner-up; touches closer than "
                         "this are one contact episode (synthetic questions)", metavar="S")
    qtypes: list[str] = arg(list(QTYPES), "question types, space- or comma-separated, cycled in this order "
                            "(synthetic questions)")

    def __post_init__(self) -> None:
        _post_init_base(self, SyntheticConfig)
        self.out = Path(self.out) if self.out is not None else None
        self.options, self.size = OptionCounts(self.options), FrameSize(self.size)
        self.qtypes = comma_list(self.qtypes)

    @property
    def n(self) -> int | None:
        """The number of questions (old name of ``synthetic``)."""
        return self.synthetic

    @property
    def min_gap_s(self) -> float:
        return self.min_gap

    def synthetic_problems(self) -> list[str]:
        lo, hi = self.options
        problems = []
        if self.synthetic is None:
            problems.append("--synthetic: give the number of questions to write (at least 1)")
        elif self.synthetic < 1:
            problems.append(f"--synthetic {self.synthetic}: need at least one question")
        if not 2 <= lo <= hi <= 5:
            problems.append(f"--options {lo}-{hi}: need 2 <= min <= max <= 5 (a clip has at most 5 objects), e.g. 3-5")
        if self.fps < 1 or self.frames < 2 * self.fps:
            problems.append(f"--frames {self.frames} --fps {self.fps}: need fps >= 1 and a clip of at least 2 s")
        if self.min_gap <= 0:
            problems.append(f"--min-gap {self.min_gap}: must be > 0 seconds")
        unknown = [q for q in self.qtypes if q not in QTYPES]
        if unknown or not self.qtypes:
            problems.append(f"--qtypes: unknown {unknown}; choose from {','.join(QTYPES)}")
        if self.size[0] % 2 or self.size[1] % 2 or min(self.size) < 48:
            problems.append(f"--size {self.size[0]}x{self.size[1]}: width and height must be even and >= 48, e.g. 160x120")
        return problems

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        _raise_problems(self.synthetic_problems())

    def params(self) -> dict[str, Any]:
        """Everything a video depends on: a resumed build must match it."""
        return {"seed": self.seed, "frames": self.frames, "fps": self.fps, "options": list(self.options),
                "size": list(self.size), "min_gap_s": self.min_gap, "qtypes": list(self.qtypes), "version": VERSION}


@dataclass(frozen=True)
class _Draft:
    options: tuple[str, ...]
    answer: int
    evidence_s: tuple[float, ...]
    question: str | None = None   # None: the type's fixed question


def _obj(name: str) -> str:
    return f"The {name}"


def _pair(a: str, b: str) -> str:
    return f"The {a} and the {b}"


def _place(gold: str, primary: Sequence[str], secondary: Sequence[str], k: int, pos: int,
           rng: np.random.Generator) -> tuple[str, ...] | None:
    """Gold at ``pos`` among ``k`` options; distractors drawn from ``primary`` first, then ``secondary``."""
    pool = [primary[i] for i in rng.permutation(len(primary))] + [secondary[i] for i in rng.permutation(len(secondary))]
    if len(pool) < k - 1:
        return None
    picked = pool[:k - 1]
    picked = [picked[i] for i in rng.permutation(len(picked))]
    return tuple(picked[:pos] + [gold] + picked[pos:])


def _event_times(run, kind: str) -> dict[tuple[str, ...], list[float]]:
    """Times of every ``kind`` event per object (bounce) or per pair (collision), in time order."""
    times: dict[tuple[str, ...], list[float]] = {}
    for e in run.events:
        if e.kind == kind:
            times.setdefault((e.a, e.b) if kind == "collision" else (e.a,), []).append(e.time_s)
    return times


def _episodes(times: Sequence[float], min_gap: float) -> list[float]:
    """Start times of contact episodes: a pair touching again within ``min_gap`` of its
    previous touch is still in the same collision as far as a viewer can tell."""
    starts: list[float] = []
    for prev, t in zip([-math.inf, *times], times):
        if t - prev >= min_gap:
            starts.append(t)
    return starts


def _pairs(run) -> list[tuple[str, str]]:
    return list(combinations(run.names, 2))  # scene order, as the simulator names collisions


def _first_collision(run, k, pos, rng, min_gap):
    """Gold: the pair that touches first, at least ``min_gap`` ahead of any other pair's first
    touch; distractors: pairs colliding later first, then pairs that never collide."""
    first = {pair: ts[0] for pair, ts in _event_times(run, "collision").items()}
    if not first:
        return None
    ranked = sorted(first, key=first.get)
    if len(ranked) > 1 and first[ranked[1]] - first[ranked[0]] < min_gap:
        return None
    never = [_pair(*p) for p in _pairs(run) if p not in first]
    options = _place(_pair(*ranked[0]), [_pair(*p) for p in ranked[1:]], never, k, pos, rng)
    if options is None:
        return None
    return _Draft(options, pos, tuple(round(first[p], 4) for p in ranked[:2]))


def _most_bounces(run, k, pos, rng, min_gap):
    per_object = _event_times(run, "bounce")
    starts = {name: _episodes(per_object.get((name,), []), min_gap) for name in run.names}
    ranked = sorted(run.names, key=lambda name: -len(starts[name]))
    if len(starts[ranked[0]]) - len(starts[ranked[1]]) < MOST_BOUNCES_LEAD:
        return None
    options = _place(_obj(ranked[0]), [_obj(name) for name in ranked[1:]], [], k, pos, rng)
    return None if options is None else _Draft(options, pos, tuple(round(t, 4) for t in starts[ranked[0]]))


def _fastest(run, k, pos, rng, min_gap):
    path = np.linalg.norm(np.diff(run.substeps, axis=0), axis=-1).sum(axis=0)
    order = np.argsort(-path, kind="stable")
    if path[order[0]] < FASTEST_RATIO * path[order[1]]:
        return None
    options = _place(_obj(run.names[order[0]]), [_obj(run.names[i]) for i in order[1:]], [], k, pos, rng)
    return None if options is None else _Draft(options, pos, ())


def _leftmost_end(run, k, pos, rng, min_gap):
    last = run.positions[max(0, run.n_frames - run.fps):, :, 0]     # x of every object, last second
    order = np.argsort(last, axis=1, kind="stable")
    leader = order[:, 0]
    gaps = np.take_along_axis(last, order[:, 1:2], 1)[:, 0] - np.take_along_axis(last, order[:, :1], 1)[:, 0]
    if (leader != leader[-1]).any() or gaps.min() < LEFTMOST_GAP:
        return None
    i = int(leader[-1])
    rest = [_obj(n) for j, n in enumerate(run.names) if j != i]
    options = _place(_obj(run.names[i]), rest, [], k, pos, rng)
    t_end = run.duration_s
    return None if options is None else _Draft(options, pos, (round(t_end - 1.0, 4), round(t_end, 4)))


def _collision_count(run, k, pos, rng, min_gap):
    per_pair = _event_times(run, "collision")
    counts = {pair: _episodes(per_pair.get(pair, []), min_gap) for pair in _pairs(run)}
    eligible = [pair for pair, starts in counts.items() if len(starts) >= pos]  # the options start at count - pos >= 0
    if not eligible:
        return None
    a, b = eligible[int(rng.integers(len(eligible)))]
    starts = counts[(a, b)]
    low = len(starts) - pos
    return _Draft(tuple(str(low + i) for i in range(k)), pos, tuple(round(t, 4) for t in starts),
                  QUESTIONS["collision_count"].format(a=a, b=b))


_GENERATORS: dict[str, Callable[..., _Draft | None]] = {
    "first_collision": _first_collision, "most_bounces": _most_bounces, "fastest": _fastest,
    "leftmost_end": _leftmost_end, "collision_count": _collision_count,
}
_PAIR_TYPES = ("first_collision",)   # options are pairs of objects: 3 objects give 3 pairs, 4 give 6


def _plan(cfg: SyntheticConfig) -> list[tuple[int, str, int, int]]:
    """(index, qtype, option count, gold position) per question; a question's plan depends
    only on its index and the parameters, so a larger N extends a build without changing it."""
    from judgetrain.seeding import rng_for

    ks = list(range(cfg.options[0], cfg.options[1] + 1))
    used: Counter = Counter()
    plan = []
    for i in range(cfg.synthetic):
        qtype = cfg.qtypes[i % len(cfg.qtypes)]
        k = ks[(i // len(cfg.qtypes)) % len(ks)]
        j = used[k]
        used[k] += 1
        block = rng_for(BUILDER, cfg.seed, "positions", k, j // k).permutation(k)
        plan.append((i, qtype, k, int(block[j % k])))
    return plan


def _n_objects(qtype: str, k: int, rng: np.random.Generator) -> int:
    """3..4 objects, more only when the options need them: the box is small, and with five
    objects something collides every few frames, which leaves few unambiguous answers."""
    if qtype == "collision_count":
        least = 3
    elif qtype in _PAIR_TYPES:
        least = 3 if k <= 3 else 4
    else:
        least = max(3, k)   # one object per option
    return int(rng.integers(least, max(least, 4) + 1))


def _synthetic_question(cfg: SyntheticConfig, index: int, qtype: str, k: int, pos: int):
    """Simulate clips of (seed, index, attempt = 0, 1, …) until one answers ``qtype``
    unambiguously; returns (draft, physics run, frame iterator, attempt). The clip is
    ``run_physics(("video-mcq", seed, index, attempt), …)``, recorded as ``clip_seed``."""
    from judgetrain.seeding import rng_for

    from .synthetic import run_physics

    for attempt in range(MAX_ATTEMPTS):
        parts = (BUILDER, cfg.seed, index, attempt)
        n_objects = _n_objects(qtype, k, rng_for(*parts, "n_objects"))
        run, frames = run_physics(parts, cfg.frames, fps=cfg.fps, size=cfg.size, n_objects=n_objects)
        draft = _GENERATORS[qtype](run, k, pos, rng_for(*parts, "options"), cfg.min_gap)
        if draft is not None:
            return draft, run, frames, attempt
    raise BuildError(f"question {index} ({qtype}, {k} options, gold at {pos}): no clip among {MAX_ATTEMPTS} simulated "
                     f"answers it unambiguously; lower --min-gap (now {cfg.min_gap} s) or lengthen --frames")


def _read_info(out: Path) -> dict[str, Any] | None:
    path = out / BUILD_INFO
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise BuildError(f"{path}: unreadable ({e.msg}); delete it (and the folder's videos) to rebuild") from None


def build_synthetic(cfg: SyntheticConfig) -> dict[str, Any]:
    """Write ``cfg.synthetic`` synthetic physics questions: ``out/videos/*.mp4``, ``out/manifest.jsonl``
    and ``out/build.json``; returns build.json's content. Resumes a killed build with the same
    parameters (finished videos are kept); a folder built with other parameters is refused."""
    from tqdm.auto import tqdm

    from judgetrain.io import write_json

    from judgetrain.video import encode_mp4, mp4_codec

    cfg.check()
    out = Path(cfg.out)
    previous = _read_info(out)
    if previous is not None and (previous.get("builder"), "params" in previous) != (BUILDER, True):
        raise BuildError(f"{out} holds another build ({previous.get('builder')}, {previous.get('source', 'not synthetic')}); "
                         "use a new --out folder for synthetic questions")
    if previous is not None and previous["params"] != cfg.params():
        raise BuildError(f"{out} holds a video-mcq build with other parameters ({previous['params']}); "
                         "use a new --out folder, or delete that one to rebuild")
    (out / "videos").mkdir(parents=True, exist_ok=True)
    write_json(out / BUILD_INFO, {"builder": BUILDER, "version": VERSION, "params": cfg.params(), "complete": False})
    codec = mp4_codec()
    rows, written, rejected = [], 0, 0
    counts: dict[str, Counter] = {"qtype": Counter(), "options": Counter()}
    positions: dict[int, list[int]] = {k: [0] * k for k in range(cfg.options[0], cfg.options[1] + 1)}
    for index, qtype, k, pos in tqdm(_plan(cfg), desc="video-mcq", unit="question", disable=not cfg.progress):
        draft, run, frames, attempt = _synthetic_question(cfg, index, qtype, k, pos)
        qid = f"vmcq-{index:05d}"
        path = out / "videos" / f"{qid}.mp4"
        if not (path.is_file() and path.stat().st_size > 0):
            encode_mp4(path, frames, cfg.fps, codec)
            written += 1
        rows.append(_manifest_row(qid, f"videos/{path.name}", draft.question or QUESTIONS[qtype], draft.options, draft.answer,
                                  BENCHMARK_SYNTHETIC, run.duration_s, run.n_frames, qtype=qtype,
                                  evidence_s=list(draft.evidence_s), n_objects=len(run.names),
                                  clip_seed=[BUILDER, cfg.seed, index, attempt]))
        rejected += attempt
        counts["qtype"][qtype] += 1
        counts["options"][str(k)] += 1
        positions[k][pos] += 1
    manifest = _write_manifest(out, rows)
    info = {"builder": BUILDER, "version": VERSION, "params": cfg.params(), "complete": True,
            "args": {f.name: jsonable(getattr(cfg, f.name)) for f in fields(SyntheticConfig)},
            "seed": cfg.seed, "manifest": manifest.name, "codec": codec,
            "counts": {"questions": len(rows), "qtype": dict(counts["qtype"]), "options": dict(counts["options"]),
                       "answer_position": {str(k): v for k, v in positions.items()},
                       "answer_position_all": [sum(v[p] for v in positions.values() if p < len(v))
                                               for p in range(cfg.options[1])],
                       "videos_written": written, "videos_kept": len(rows) - written, "clips_rejected": rejected},
            "skipped": []}
    write_json(out / BUILD_INFO, info)
    return info


# ---------------------------------------------------------------- converters

# MVBench's data_list: task file -> video sub-folder of MVBench's video/ folder, and whether the items are frame folders.
MVBENCH_TASKS: dict[str, tuple[str, bool]] = {
    "action_sequence": ("star/Charades_v1_480", False), "action_prediction": ("star/Charades_v1_480", False),
    "action_antonym": ("ssv2_video", False), "fine_grained_action": ("Moments_in_Time_Raw/videos", False),
    "unexpected_action": ("FunQA_test/test", False), "object_existence": ("clevrer/video_validation", False),
    "object_interaction": ("star/Charades_v1_480", False), "object_shuffle": ("perception/videos", False),
    "moving_direction": ("clevrer/video_validation", False), "action_localization": ("sta/sta_video", False),
    "scene_transition": ("scene_qa/video", False), "action_count": ("perception/videos", False),
    "moving_count": ("clevrer/video_validation", False), "moving_attribute": ("clevrer/video_validation", False),
    "state_change": ("perception/videos", False), "fine_grained_pose": ("nturgbd", False),
    "character_order": ("perception/videos", False), "egocentric_navigation": ("vlnqa", False),
    "episodic_reasoning": ("tvqa/frames_fps3_hq", True), "counterfactual_inference": ("clevrer/video_validation", False),
}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass
class _Item:
    """One converted question before its video is checked: where it came from, and its manifest fields."""

    path: str             # the annotation file (JSON Lines), or "file[index]" (an item of a JSON list, a parquet row)
    line: int | None      # the line of a JSON Lines file
    id: str | None        # None when the item is too broken to name
    video: Path | None = None   # absolute
    question: Any = None
    options: Any = None
    answer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: tuple[str, str] | None = None   # (kind, what is wrong) when the annotation itself is unusable

    @property
    def where(self) -> str:
        """``file:line`` or ``file[index]``, for messages."""
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class _Row:
    """One item of an annotation file, as read: the object, or what is wrong with its line."""

    path: str
    line: int | None
    index: int            # 0-based position among the file's items
    row: Any
    problem: str | None = None

    def check(self, keys: Sequence[str], fmt: str, id_key: str | None) -> _Item | None:
        """None when the row is an object with ``keys``; else the item that reports why not."""
        problem = self.problem
        if problem is None and not isinstance(self.row, dict):
            problem = f"not an object ({json_kind(self.row)}); each item is an object with {', '.join(keys)} ({fmt})"
        missing = [k for k in keys if k not in self.row] if problem is None else []
        if missing:
            problem = (f"field(s) {', '.join(repr(m) for m in missing)} missing; is this {fmt}? "
                       f"(the item has {sorted(self.row)})")
        if problem is None:
            return None
        rid = self.row.get(id_key) if id_key and isinstance(self.row, dict) else None
        kind = "bad line" if self.problem else "bad annotation"
        return _Item(self.path, self.line, None if rid is None else str(rid), problem=(kind, problem))


def _read_json(path: Path) -> Any:
    """A plain JSON file, parsed whole; an error names the file (and the line, for bad JSON)."""
    if not path.is_file():
        raise BuildError(f"{path}: no such annotation file")
    data = path.read_bytes()
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise BuildError(f"{path}: not valid UTF-8 at byte {e.start}; save the file as UTF-8") from None
    except json.JSONDecodeError as e:
        raise BuildError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None


def _annotation_rows(path: Path, what: str) -> list[_Row]:
    """The items of an annotation file: JSON Lines (``.jsonl``) through
    :func:`judgetrain.jsonl.read_jsonl`, so that a line that is not UTF-8, not JSON or not
    an object is one located bad item and the others are read; any other file is one JSON
    list (``what`` names it in the error when it is not a list)."""
    if path.suffix == ".jsonl":
        if not path.is_file():
            raise BuildError(f"{path}: no such annotation file")
        return [_Row(str(path), it.line, i, it.row, it.problem) for i, it in enumerate(read_jsonl(path))]
    rows = _read_json(path)
    if not isinstance(rows, list):
        raise BuildError(f"{path}: expected {what} (a JSON list of questions, or JSON Lines with one per line)")
    return [_Row(f"{path}[{i}]", None, i, row) for i, row in enumerate(rows)]


def _egoschema(annotations: Path, videos: Path, answers: Path | None) -> list[_Item]:
    rows = _annotation_rows(annotations, "EgoSchema's questions.json")
    answers = answers or annotations.with_name("subset_answers.json")
    key = _read_json(answers)
    if not isinstance(key, dict):
        raise BuildError(f"{answers}: expected EgoSchema's subset_answers.json (an object q_uid -> option index)")
    fields = ["q_uid", "question"] + [f"option {i}" for i in range(5)]
    items = []
    for r in rows:
        bad = r.check(fields, "EgoSchema questions.json", "q_uid")
        if bad is not None:
            items.append(bad)
            continue
        row = r.row
        uid = str(row["q_uid"])
        item = _Item(r.path, r.line, uid, videos / f"{uid}.mp4", row["question"], [row[f"option {j}"] for j in range(5)],
                     key.get(uid), {k: row[k] for k in ("google_drive_id",) if k in row})
        if uid not in key:
            item.problem = ("no public answer", f"no answer in {answers.name} (only the public subset has answers)")
        items.append(item)
    return items


def _mvbench_files(annotations: Path) -> list[Path]:
    if not annotations.is_dir():
        return [annotations]
    return sorted(p for p in annotations.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())


def _mvbench(annotations: Path, videos: Path) -> list[_Item]:
    files = _mvbench_files(annotations)
    if not files:
        raise BuildError(f"{annotations}: no MVBench task files (*.json, *.jsonl) in this folder")
    items = []
    for path in files:
        task = path.stem
        folder, frames = MVBENCH_TASKS.get(task, ("", False))
        for r in _annotation_rows(path, "an MVBench task file"):
            bad = r.check(["video", "question", "candidates", "answer"], "an MVBench task file", None)
            if bad is not None:
                items.append(replace(bad, id=f"{task}-{r.index:04d}"))
                continue
            row = r.row
            extra = {"task": task} | {k: row[k] for k in ("start", "end") if k in row}
            cands, gold = row["candidates"], row["answer"]
            answer = cands.index(gold) if isinstance(cands, list) and cands.count(gold) == 1 else None
            item = _Item(r.path, r.line, f"{task}-{r.index:04d}", videos / folder / str(row["video"]), row["question"], cands,
                         answer, extra)
            if frames:
                item.problem = ("frame folders", f"task {task} is stored as frame folders, not videos; PhaseFusion needs video files")
            elif answer is None:
                item.problem = ("bad annotation", f"answer {gold!r} is not exactly one of the candidates {cands!r}")
            items.append(item)
    return items


def _videomme_rows(path: Path) -> list[_Row]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [_Row(f"{path}[{i}]", None, i, row) for i, row in enumerate(pq.read_table(path).to_pylist())]
    return _annotation_rows(path, "Video-MME rows (a parquet file, a JSON list, or JSON Lines)")


def _videomme_options(raw: Any) -> tuple[list[str], str | None]:
    """Options without their ``"A. "`` prefixes, and what is wrong with them (or None)."""
    options, problem = [], None
    for j, option in enumerate(raw if isinstance(raw, list) else []):
        letter, sep, body = str(option).partition(". ")
        if j >= len(_LETTERS) or letter != _LETTERS[j] or not sep:
            problem = f"option {j} {option!r} does not start with '{_LETTERS[j % len(_LETTERS)]}. '"
        options.append(body.strip() if sep else str(option))
    if not options:
        problem = f"options must be a list like ['A. …', 'B. …'], got {raw!r}"
    return options, problem


def _videomme(annotations: Path, videos: Path) -> list[_Item]:
    items = []
    for r in _videomme_rows(annotations):
        bad = r.check(["videoID", "question_id", "question", "options", "answer"], "Video-MME (test parquet)", "question_id")
        if bad is not None:
            items.append(bad)
            continue
        row = r.row
        options, problem = _videomme_options(row["options"])
        letter = row["answer"]
        answer = _LETTERS.index(letter) if isinstance(letter, str) and len(letter) == 1 and letter in _LETTERS[:len(options)] else None
        if answer is None and problem is None:
            problem = f"answer {letter!r} is not one of the option letters {_LETTERS[:len(options)]}"
        extra = {"video_id": row.get("video_id"), "duration_category": row.get("duration"), "domain": row.get("domain"),
                 "sub_category": row.get("sub_category"), "task_type": row.get("task_type")}
        item = _Item(r.path, r.line, str(row["question_id"]), videos / f"{row['videoID']}.mp4", row["question"], options, answer,
                     {k: v for k, v in extra.items() if v is not None})
        item.problem = None if problem is None else ("bad annotation", problem)
        items.append(item)
    return items


CONVERTERS = {"egoschema": "EgoSchema", "mvbench": "MVBench", "videomme": "Video-MME"}
Benchmark = Literal[tuple(CONVERTERS)]


@dataclass(kw_only=True)
class ConvertConfig(BuildArgs):
    """``judgetrain build video-mcq --from BENCHMARK``: a benchmark conversion's settings, each a flag
    (``--field-name``) and a ``--config`` key of the command (:class:`VideoMcqConfig`)."""

    source: Benchmark | None = arg(None, "convert a benchmark's published annotations (YAML key: source)",
                                   aliases=["--from"])
    annotations: Path | None = arg(None, "EgoSchema questions.json, an MVBench task JSON (or its json/ folder), "
                                   "Video-MME parquet/JSON (benchmark conversion)", metavar="FILE")
    answers: Path | None = arg(None, "EgoSchema subset_answers.json; unset: the one beside --annotations", metavar="FILE")
    videos: Path | None = arg(None, "the benchmark's video folder, inside --out (benchmark conversion)", metavar="DIR")
    sample: int | None = arg(None, "keep random.Random(seed).sample(usable, N) (paper 001 App. A: 500, seed 42; "
                             "benchmark conversion)", metavar="N")
    probe: bool = arg(False, "read every video's frame count and fps into num_frames / duration (benchmark conversion)")

    def __post_init__(self) -> None:
        _post_init_base(self, ConvertConfig)
        self.out = Path(self.out) if self.out is not None else None
        for name in ("annotations", "answers", "videos"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))

    def convert_problems(self) -> list[str]:
        problems = []
        if self.source not in CONVERTERS:
            problems.append(f"--from {self.source!r}: choose one of {', '.join(CONVERTERS)}" if self.source is not None
                            else f"--from: give the benchmark to convert, one of {', '.join(CONVERTERS)}")
        if self.annotations is None or self.videos is None:
            problems.append(f"--from {self.source or 'BENCHMARK'} needs --annotations FILE and --videos DIR")
        if self.annotations is not None and not self.annotations.exists():
            problems.append(f"--annotations {self.annotations}: no such file or folder")
        if self.videos is not None and not self.videos.is_dir():
            problems.append(f"--videos {self.videos}: no such folder")
        elif self.videos is not None and not self.videos.resolve().is_relative_to(Path(self.out).resolve()):
            problems.append(f"--videos {self.videos} is not inside --out {self.out}: manifest paths stay inside the manifest's "
                            f"folder; write the manifest above the videos, e.g. --out {self.videos.parent}")
        if self.answers is not None and self.source != "egoschema":
            problems.append("--answers is for EgoSchema only (its answers come in a separate file)")
        if self.sample is not None and self.sample < 1:
            problems.append(f"--sample {self.sample}: keep at least one question")
        return problems

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        _raise_problems(self.convert_problems())


def convert(source: str, annotations: str | os.PathLike, videos: str | os.PathLike, out: str | os.PathLike,
            **options: Any) -> dict[str, Any]:
    """Convert a benchmark's annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``):
    :func:`build_converted` of ``ConvertConfig(source=…, annotations=…, videos=…, out=…, **options)``
    (options: ``answers``, ``sample``, ``seed``, ``probe``, ``strict``, ``progress``)."""
    return build_converted(ConvertConfig(source=source, annotations=annotations, videos=videos, out=out, **options))


def build_converted(cfg: ConvertConfig) -> dict[str, Any]:
    """Convert ``cfg.source``'s annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``).

    ``cfg.source`` is a key of :data:`CONVERTERS`; ``cfg.videos`` must lie inside ``cfg.out``.
    Questions with a missing (or, with ``probe``, unreadable) video or an
    inconsistent annotation are listed in build.json's ``skipped`` (file[item],
    id, reason) and counted; ``strict`` raises instead. Returns build.json's content.
    """
    from tqdm.auto import tqdm

    from judgetrain.io import write_json

    cfg.check()
    source, annotations, videos, out, answers = cfg.source, cfg.annotations, cfg.videos, cfg.out, cfg.answers
    out.mkdir(parents=True, exist_ok=True)
    if source == "egoschema":
        items = _egoschema(annotations, videos, answers)
    else:
        items = _mvbench(annotations, videos) if source == "mvbench" else _videomme(annotations, videos)

    skipped: list[Skip] = []
    kinds: Counter = Counter()
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for item in tqdm(items, desc=f"{source} videos", unit="question", disable=not cfg.progress):
        row, problem = _converted_row(item, source, out, cfg.probe, seen)
        if problem is not None:
            kind, reason = problem
            if cfg.strict:
                named = f" (id {item.id})" if item.id is not None else ""
                raise BuildError(f"{item.where}{named}: {reason} (--strict makes this an error)")
            skipped.append(Skip(item.path, item.line, reason, item.id))
            kinds[kind] += 1
            continue
        seen[item.id] = item.where
        rows.append(row)
    usable = len(rows)
    if cfg.sample is not None:
        if not 1 <= cfg.sample <= len(rows):
            raise BuildError(f"--sample {cfg.sample}: {len(rows)} usable questions; choose 1..{len(rows)}")
        rows = random.Random(cfg.seed).sample(rows, cfg.sample)  # paper 001 App. A: random.Random(42).sample
    if not rows:
        raise BuildError(f"{annotations}: no usable question ({len(skipped)} skipped; first: {skipped[0] if skipped else '-'})")
    manifest = _write_manifest(out, rows)
    info = {"builder": BUILDER, "version": VERSION, "source": source, "benchmark": CONVERTERS[source],
            "args": {f.name: jsonable(getattr(cfg, f.name)) for f in fields(ConvertConfig)},
            "seed": cfg.seed, "manifest": manifest.name,
            "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in _annotation_files(annotations, answers, source)],
            "counts": {"annotated": len(items), "usable": usable, "questions": len(rows), "skipped": len(skipped),
                       "skipped_by_reason": dict(kinds), "options": dict(Counter(str(len(r["options"])) for r in rows)),
                       "answer_position": dict(Counter(str(r["answer"]) for r in rows))},
            "skipped": [asdict(s) for s in skipped]}
    write_json(out / BUILD_INFO, info)
    return info


def _converted_row(item: _Item, source: str, out: Path, probe: bool,
                   seen: Mapping[str, str]) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The manifest row of one converted question, or (kind, reason) why it cannot be used."""
    from judgetrain.video import VideoDecodeError, probe as probe_video

    if item.problem is not None:
        return None, item.problem
    if item.id in seen:
        return None, ("duplicate id", f"id {item.id!r} is already used by {seen[item.id]}")
    if not item.video.is_file():
        return None, ("missing video", f"video not found: {item.video}")
    duration = num_frames = None
    if probe:
        try:
            info = probe_video(item.video)
        except VideoDecodeError as e:
            return None, ("unreadable video", f"unreadable video: {e}")
        duration, num_frames = info.duration_s, info.n_frames
    rel = Path(os.path.relpath(item.video.absolute(), out.absolute())).as_posix()
    row = _manifest_row(item.id, rel, item.question, item.options, item.answer, source, duration, num_frames, **item.extra)
    _, bad = check_line(row, out)  # the loader's own checks, so that the manifest always loads
    return (None, ("bad annotation", "; ".join(bad))) if bad else (row, None)


def _annotation_files(annotations: Path, answers: Any, source: str) -> list[Path]:
    files = _mvbench_files(annotations)
    if source == "egoschema":
        files.append(Path(answers) if answers else annotations.with_name("subset_answers.json"))
    return files


# ---------------------------------------------------------------- command line

@dataclass(kw_only=True)
class VideoMcqConfig(ConvertConfig, SyntheticConfig):
    """``judgetrain build video-mcq``: both modes' settings, each a flag (``--field-name``) and a
    ``--config`` key; ``--synthetic N`` or ``--from BENCHMARK`` picks the mode, and the other
    mode's options must stay unset."""

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        problems = []
        if self.synthetic is None and self.source is None:
            problems.append(f"give --synthetic N (synthetic physics questions) or --from {'|'.join(CONVERTERS)} "
                            "(a benchmark's annotations)")
        elif self.synthetic is not None and self.source is not None:
            problems.append("--synthetic and --from: give one of them, not both")
        elif self.synthetic is not None:
            problems += _given(self, _CONVERTER_ONLY, "with --from (benchmark conversion)") + self.synthetic_problems()
        else:
            problems += _given(self, _SYNTHETIC_ONLY, "with --synthetic") + self.convert_problems()
        _raise_problems(problems)


def _mode_fields(cls: type, mode: str) -> list:
    """The fields ``cls`` adds to :class:`BuildArgs`, but the one that picks the mode."""
    shared = {f.name for f in fields(BuildArgs)}
    return [f for f in fields(cls) if f.name not in shared | {mode}]


# options of one mode, refused in the other unless left at their defaults (--strict is BuildArgs' but converter-only)
_SYNTHETIC_ONLY = _mode_fields(SyntheticConfig, "synthetic")
_CONVERTER_ONLY = _mode_fields(ConvertConfig, "source") + [f for f in fields(BuildArgs) if f.name == "strict"]


def _given(cfg: Any, options: list, mode: str) -> list[str]:
    def default(f):
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default

    given = [f"--{f.name.replace('_', '-')}" for f in options if getattr(cfg, f.name) != default(f)]
    return [f"{', '.join(given)} only apply {mode}"] if given else []


def build(cfg: VideoMcqConfig) -> dict[str, Any]:
    """The synthetic questions or the benchmark conversion ``cfg`` asks for; returns build.json's content."""
    return (build_synthetic if cfg.synthetic is not None else build_converted)(cfg)


def make_parser():
    return make_config_parser(
        VideoMcqConfig, "judgetrain build video-mcq",
        "Build a video multiple-choice manifest for PhaseFusion (paper 001): synthetic physics questions whose answers "
        "follow from the simulation, or a conversion of EgoSchema / MVBench / Video-MME annotations.",
        "examples:\n"
        "  judgetrain build video-mcq --out data/vmcq --synthetic 60\n"
        "  judgetrain build video-mcq --out data/vmcq --synthetic 300 --seed 1 --frames 128 --options 4-5\n"
        "  judgetrain build video-mcq --from egoschema --annotations egoschema/questions.json --videos egoschema/videos --out egoschema\n"
        "  judgetrain build video-mcq --from mvbench --annotations mvbench/json --videos mvbench/video --out mvbench --sample 500\n"
        "  judgetrain build video-mcq --from videomme --annotations videomme/videomme/test-00000-of-00001.parquet "
        "--videos videomme/data --out videomme --sample 500 --probe\n"
        "  judgetrain build video-mcq --config vmcq.yaml --seed 3   # YAML keys are the fields below (--from's is source)\n")


def main(cfg: VideoMcqConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0


def print_summary(info: dict[str, Any], out: Path) -> None:
    """Counts per question type, the gold-position balance, skipped questions, and where the manifest went."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = info["counts"]
    if "source" in info:
        console.print(f"{info['benchmark']}: {counts['annotated']} annotated, {counts['usable']} usable, "
                      f"{counts['questions']} in the manifest")
        by_k = {"all": [counts["answer_position"].get(str(p), 0) for p in range(1 + max(map(int, counts["answer_position"])))]}
    else:
        t = Table(title="Questions per type")
        t.add_column("question type")
        t.add_column("questions", justify="right")
        for qtype, n in counts["qtype"].items():
            t.add_row(qtype, str(n))
        console.print(t)
        console.print(f"{counts['clips_rejected']} simulated clip(s) rejected as ambiguous; videos written "
                      f"{counts['videos_written']}, kept from an earlier run {counts['videos_kept']}")
        by_k = counts["answer_position"]
    b = Table(title="Gold position (0-based)")
    b.add_column("options")
    width = max(len(v) for v in by_k.values())
    for p in range(width):
        b.add_column(str(p), justify="right")
    for k, v in by_k.items():
        b.add_row(k, *[str(x) for x in v], *[""] * (width - len(v)))
    console.print(b)
    if info["skipped"]:
        console.print(f"[yellow]{len(info['skipped'])} question(s) skipped "
                      f"({', '.join(f'{k}: {n}' for k, n in counts['skipped_by_reason'].items())}):[/yellow]")
        for s in info["skipped"][:10]:
            where = f"{s['path']}:{s['line']}" if s.get("line") else s["path"]
            named = f" (id {s['id']})" if s["id"] is not None else ""
            console.print(f"  {where}{named}: {s['reason']}", highlight=False, soft_wrap=True)
        if len(info["skipped"]) > 10:
            console.print(f"  … all {len(info['skipped'])} in {out / BUILD_INFO}")
    print(f"Manifest written to {out / MANIFEST} ({counts['questions']} questions; build.json beside it)", flush=True)
