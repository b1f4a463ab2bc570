"""``judgetrain build video-mcq --synthetic N``: its settings, the plan of question types,
option counts and gold positions, and the build that simulates a clip per question
(data_builders/synthetic.py), asks it a question (video_mcq/questions.py) and writes the videos,
the manifest and build.json, resuming a killed build. Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain.config import arg, comma_list, jsonable

from ..core.args import BuildArgs
from ..core.common import BuildError
from .common import BUILD_INFO, BUILDER, VERSION, manifest_row, post_init_base, raise_problems, write_manifest
from .questions import QTYPES, QUESTIONS, Draft, draft_question, n_objects

if TYPE_CHECKING:  # the physics module is imported only when a clip is simulated (_synthetic_question)
    from ..synthetic import PhysicsRun

__all__ = [
    "BENCHMARK_SYNTHETIC",
    "DEFAULT_FPS",
    "DEFAULT_FRAMES",
    "DEFAULT_MIN_GAP_S",
    "DEFAULT_OPTIONS",
    "DEFAULT_SIZE",
    "MAX_ATTEMPTS",
    "FrameSize",
    "OptionCounts",
    "SyntheticConfig",
    "build_synthetic",
    "plan",
]

BENCHMARK_SYNTHETIC = "synthetic-physics"
DEFAULT_FRAMES, DEFAULT_FPS, DEFAULT_SIZE = 96, 8, (160, 120)
DEFAULT_OPTIONS = (3, 5)
DEFAULT_MIN_GAP_S = 0.5
MAX_ATTEMPTS = 500


class _IntPair(tuple):
    """Two ints from a flag's text or a YAML pair (``parse``); a value that gives no pair is a
    BuildError naming ``FLAG`` and the form to write (``HINT``)."""

    FLAG = HINT = ""

    def __new__(cls, value: Any):
        try:
            pair = cls.parse(value)
            if len(pair) != 2:
                raise ValueError(value)
        except (TypeError, ValueError):
            raise BuildError(f"{cls.FLAG} {value!r}: {cls.HINT}") from None
        return super().__new__(cls, pair)

    @staticmethod
    def parse(value: Any) -> tuple[int, ...]:
        raise NotImplementedError


class OptionCounts(_IntPair):
    """Options per question, ``(min, max)``: from ``"3-5"``, ``"4"`` (one count), ``4`` or a pair
    (YAML ``[3, 5]``); the type of the ``--options`` field, so a flag and a YAML value give the same."""

    FLAG, HINT = "--options", "write MIN-MAX or N, e.g. 3-5 or 4"

    def __new__(cls, value: Any = DEFAULT_OPTIONS):
        return super().__new__(cls, value)

    @staticmethod
    def parse(value: Any) -> tuple[int, ...]:
        if isinstance(value, str):
            lo, _, hi = value.partition("-")
            return int(lo), int(hi or lo)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, value
        pair = tuple(int(v) for v in value)
        return pair * 2 if len(pair) == 1 else pair

    def __str__(self) -> str:
        return f"{self[0]}-{self[1]}" if self[0] != self[1] else str(self[0])


class FrameSize(_IntPair):
    """Video ``(width, height)`` in pixels: from ``"160x120"`` or a pair (YAML ``[160, 120]``);
    the type of the ``--size`` field."""

    FLAG, HINT = "--size", "write WIDTHxHEIGHT, e.g. 160x120"

    def __new__(cls, value: Any = DEFAULT_SIZE):
        return super().__new__(cls, value)

    @staticmethod
    def parse(value: Any) -> tuple[int, ...]:
        return tuple(int(v) for v in (value.lower().split("x") if isinstance(value, str) else value))

    def __str__(self) -> str:
        return f"{self[0]}x{self[1]}"


@dataclass(kw_only=True)
class SyntheticConfig(BuildArgs):
    """``judgetrain build video-mcq --synthetic N``: the synthetic questions' settings, each a flag
    (``--field-name``) and a ``--config`` key of the command (:class:`VideoMcqConfig`)."""

    synthetic: int | None = arg(None, "write N synthetic physics questions, one clip each", metavar="N")
    frames: int = arg(DEFAULT_FRAMES, "frames per clip (synthetic questions)")
    fps: int = arg(DEFAULT_FPS, "frames per second (synthetic questions)")
    options: OptionCounts = arg(
        OptionCounts(DEFAULT_OPTIONS),
        "options per question, MIN-MAX or N, e.g. 3-5 or 4 (synthetic questions)",
        metavar="MIN-MAX",
    )
    size: FrameSize = arg(FrameSize(DEFAULT_SIZE), "video WIDTHxHEIGHT in pixels (synthetic questions)", metavar="WxH")
    min_gap: float = arg(
        DEFAULT_MIN_GAP_S,
        "seconds between a deciding event and the runner-up; touches closer than "
        "this are one contact episode (synthetic questions)",
        metavar="S",
    )
    qtypes: list[str] = arg(list(QTYPES), "question types, space- or comma-separated, cycled in this order (synthetic questions)")

    def __post_init__(self) -> None:
        post_init_base(self, SyntheticConfig)
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
        raise_problems(self.synthetic_problems())

    def params(self) -> dict[str, Any]:
        """Everything a video depends on: a resumed build must match it."""
        return {
            "seed": self.seed,
            "frames": self.frames,
            "fps": self.fps,
            "options": list(self.options),
            "size": list(self.size),
            "min_gap_s": self.min_gap,
            "qtypes": list(self.qtypes),
            "version": VERSION,
        }


def plan(cfg: SyntheticConfig) -> list[tuple[int, str, int, int]]:
    """(index, qtype, option count, gold position) per question; a question's plan depends
    only on its index and the parameters, so a larger N extends a build without changing it.

    Types cycle in the order of ``qtypes``, option counts cycle through ``options`` per round
    of types, and the gold position is balanced per option count: each block of k questions
    with k options puts gold once in each slot, in a seeded order (hashlib seeds,
    :mod:`judgetrain.seeding`)."""
    from judgetrain.seeding import rng_for

    assert cfg.synthetic is not None  # a plan is of a --synthetic build
    ks = list(range(cfg.options[0], cfg.options[1] + 1))
    used: Counter = Counter()
    steps = []
    for i in range(cfg.synthetic):
        qtype = cfg.qtypes[i % len(cfg.qtypes)]
        k = ks[(i // len(cfg.qtypes)) % len(ks)]
        j = used[k]
        used[k] += 1
        block = rng_for(BUILDER, cfg.seed, "positions", k, j // k).permutation(k)
        steps.append((i, qtype, k, int(block[j % k])))
    return steps


def _synthetic_question(cfg: SyntheticConfig, index: int, qtype: str, k: int, pos: int):
    """Simulate clips of (seed, index, attempt = 0, 1, …) until one answers ``qtype``
    unambiguously; returns (draft, physics run, frame iterator, attempt). The clip is
    ``run_physics(("video-mcq", seed, index, attempt), …)``, recorded as ``clip_seed``."""
    from judgetrain.seeding import rng_for

    from ..synthetic import run_physics

    for attempt in range(MAX_ATTEMPTS):
        parts = (BUILDER, cfg.seed, index, attempt)
        n = n_objects(qtype, k, rng_for(*parts, "n_objects"))
        run, frames = run_physics(parts, cfg.frames, fps=cfg.fps, size=cfg.size, n_objects=n)
        draft = draft_question(qtype, run, k, pos, rng_for(*parts, "options"), cfg.min_gap)
        if draft is not None:
            return draft, run, frames, attempt
    raise BuildError(
        f"question {index} ({qtype}, {k} options, gold at {pos}): no clip among {MAX_ATTEMPTS} simulated "
        f"answers it unambiguously; lower --min-gap (now {cfg.min_gap} s) or lengthen --frames"
    )


def _refuse_other_build(out: Path, params: dict[str, Any]) -> None:
    """Raise BuildError when ``out`` already holds another build: another builder's, a converted
    benchmark (its build.json has no ``params``), or synthetic questions with other ``params``
    (:meth:`SyntheticConfig.params`). An empty folder, or one of the same build, passes (resumed)."""
    previous = _read_info(out)
    if previous is not None and (previous.get("builder"), "params" in previous) != (BUILDER, True):
        raise BuildError(
            f"{out} holds another build ({previous.get('builder')}, {previous.get('source', 'not synthetic')}); "
            "use a new --out folder for synthetic questions"
        )
    if previous is not None and previous["params"] != params:
        raise BuildError(
            f"{out} holds a video-mcq build with other parameters ({previous['params']}); "
            "use a new --out folder, or delete that one to rebuild"
        )


def _synthetic_row(qid: str, video: str, qtype: str, draft: Draft, run: PhysicsRun, clip_seed: list[Any]) -> dict[str, Any]:
    """The manifest row of one synthetic question: ``video`` relative to the manifest, the drafted
    question (the type's template when the draft has none), options and 0-based answer, the clip's
    duration (seconds) and frame count from its physics ``run``, and the row's ``qtype``,
    ``evidence_s``, ``n_objects`` and ``clip_seed`` (the ``run_physics`` seed parts)."""
    return manifest_row(
        qid,
        video,
        draft.question or QUESTIONS[qtype],
        draft.options,
        draft.answer,
        BENCHMARK_SYNTHETIC,
        run.duration_s,
        run.n_frames,
        qtype=qtype,
        evidence_s=list(draft.evidence_s),
        n_objects=len(run.names),
        clip_seed=clip_seed,
    )


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
    parameters (finished videos are kept); a folder built with other parameters is refused.

    Each row keeps ``qtype``, ``evidence_s`` (the deciding events' times), ``n_objects`` and
    ``clip_seed`` (``run_physics(clip_seed, num_frames, fps=…, n_objects=…)`` re-simulates the
    clip). The same arguments give byte-identical videos and manifest."""
    from tqdm.auto import tqdm

    from judgetrain.io import write_json
    from judgetrain.video import encode_mp4, mp4_codec

    cfg.check()
    out = Path(cfg.out)
    _refuse_other_build(out, cfg.params())
    (out / "videos").mkdir(parents=True, exist_ok=True)
    write_json(out / BUILD_INFO, {"builder": BUILDER, "version": VERSION, "params": cfg.params(), "complete": False})
    codec = mp4_codec()
    rows, written, rejected = [], 0, 0
    counts: dict[str, Counter] = {"qtype": Counter(), "options": Counter()}
    positions: dict[int, list[int]] = {k: [0] * k for k in range(cfg.options[0], cfg.options[1] + 1)}
    for index, qtype, k, pos in tqdm(plan(cfg), desc="video-mcq", unit="question", disable=not cfg.progress):
        draft, run, frames, attempt = _synthetic_question(cfg, index, qtype, k, pos)
        qid = f"vmcq-{index:05d}"
        path = out / "videos" / f"{qid}.mp4"
        if not (path.is_file() and path.stat().st_size > 0):
            encode_mp4(path, frames, cfg.fps, codec)
            written += 1
        rows.append(_synthetic_row(qid, f"videos/{path.name}", qtype, draft, run, [BUILDER, cfg.seed, index, attempt]))
        rejected += attempt
        counts["qtype"][qtype] += 1
        counts["options"][str(k)] += 1
        positions[k][pos] += 1
    manifest = write_manifest(out, rows)
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "params": cfg.params(),
        "complete": True,
        "args": {f.name: jsonable(getattr(cfg, f.name)) for f in fields(SyntheticConfig)},
        "seed": cfg.seed,
        "manifest": manifest.name,
        "codec": codec,
        "counts": {
            "questions": len(rows),
            "qtype": dict(counts["qtype"]),
            "options": dict(counts["options"]),
            "answer_position": {str(k): v for k, v in positions.items()},
            "answer_position_all": [sum(v[p] for v in positions.values() if p < len(v)) for p in range(cfg.options[1])],
            "videos_written": written,
            "videos_kept": len(rows) - written,
            "clips_rejected": rejected,
        },
        "skipped": [],
    }
    write_json(out / BUILD_INFO, info)
    return info
