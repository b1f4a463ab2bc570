"""``judgetrain build video-mcq --from egoschema|mvbench|videomme|nextqa``: a benchmark's published
annotation files (read by :mod:`.benchmarks`) into one manifest beside its videos, with every
unusable question located and counted in build.json; this module is the conversion's config
(:class:`ConvertConfig`) and the build itself. Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from judgetrain.config import arg, jsonable
from judgetrain.mcq.manifest import check_line

from ..core.args import BuildArgs
from ..core.common import BuildError, Skip
from .annotations import Item
from .benchmarks import CONVERTERS, NEXTQA_MAP, Benchmark, annotation_files, benchmark_items
from .common import BUILD_INFO, BUILDER, VERSION, manifest_row, post_init_base, raise_problems, write_manifest

__all__ = ["ConvertConfig", "build_converted", "convert"]


@dataclass(kw_only=True)
class ConvertConfig(BuildArgs):
    """``judgetrain build video-mcq --from BENCHMARK``: a benchmark conversion's settings, each a flag
    (``--field-name``) and a ``--config`` key of the command (:class:`VideoMcqConfig`)."""

    source: Benchmark | None = arg(None, "convert a benchmark's published annotations (YAML key: source)", aliases=["--from"])
    annotations: Path | None = arg(
        None,
        "EgoSchema questions.json, an MVBench task JSON (or its json/ folder), "
        "Video-MME parquet/JSON, a NExT-QA split CSV (benchmark conversion)",
        metavar="FILE",
    )
    answers: Path | None = arg(None, "EgoSchema subset_answers.json; unset: the one beside --annotations", metavar="FILE")
    video_map: Path | None = arg(
        None, f"NExT-QA {NEXTQA_MAP} (video id -> NExTVideo path); unset: the one beside --annotations", metavar="FILE"
    )
    videos: Path | None = arg(None, "the benchmark's video folder, inside --out (benchmark conversion)", metavar="DIR")
    sample: int | None = arg(
        None, "keep random.Random(seed).sample(usable, N) (paper 001 App. A: 500, seed 42; benchmark conversion)", metavar="N"
    )
    probe: bool = arg(False, "read every video's frame count and fps into num_frames / duration (benchmark conversion)")

    def __post_init__(self) -> None:
        post_init_base(self, ConvertConfig)
        self.out = Path(self.out) if self.out is not None else None
        for name in ("annotations", "answers", "video_map", "videos"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))

    def convert_problems(self) -> list[str]:
        problems = []
        if self.source not in CONVERTERS:
            problems.append(
                f"--from {self.source!r}: choose one of {', '.join(CONVERTERS)}"
                if self.source is not None
                else f"--from: give the benchmark to convert, one of {', '.join(CONVERTERS)}"
            )
        if self.annotations is None or self.videos is None:
            problems.append(f"--from {self.source or 'BENCHMARK'} needs --annotations FILE and --videos DIR")
        if self.annotations is not None and not self.annotations.exists():
            problems.append(f"--annotations {self.annotations}: no such file or folder")
        if self.videos is not None and not self.videos.is_dir():
            problems.append(f"--videos {self.videos}: no such folder")
        elif self.videos is not None and not self.videos.resolve().is_relative_to(Path(self.out).resolve()):
            problems.append(
                f"--videos {self.videos} is not inside --out {self.out}: manifest paths stay inside the manifest's "
                f"folder; write the manifest above the videos, e.g. --out {self.videos.parent}"
            )
        if self.answers is not None and self.source != "egoschema":
            problems.append("--answers is for EgoSchema only (its answers come in a separate file)")
        if self.video_map is not None and self.source != "nextqa":
            problems.append(f"--video-map is for NExT-QA only (its {NEXTQA_MAP})")
        problems += self._nextqa_problems()
        if self.sample is not None and self.sample < 1:
            problems.append(f"--sample {self.sample}: keep at least one question")
        return problems

    def _nextqa_problems(self) -> list[str]:
        if self.source != "nextqa" or self.annotations is None or not self.annotations.exists():
            return []
        if self.annotations.is_dir():
            return [
                f"--annotations {self.annotations}: a folder; give one NExT-QA split, e.g. "
                f"--annotations {self.annotations / 'val.csv'}"
            ]
        video_map = self.video_map or self.annotations.with_name(NEXTQA_MAP)
        if not video_map.is_file():
            return [
                f"--video-map {video_map}: no such file; NExT-QA's {NEXTQA_MAP} lies beside train.csv, val.csv "
                "and test.csv in dataset/nextqa/ (or give its path with --video-map FILE)"
            ]
        return []

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        raise_problems(self.convert_problems())


def convert(
    source: Benchmark, annotations: str | os.PathLike, videos: str | os.PathLike, out: str | os.PathLike, **options: Any
) -> dict[str, Any]:
    """Convert a benchmark's annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``):
    :func:`build_converted` of ``ConvertConfig(source=…, annotations=…, videos=…, out=…, **options)``
    (options: ``answers``, ``video_map``, ``sample``, ``seed``, ``probe``, ``strict``, ``progress``)."""
    return build_converted(
        ConvertConfig(source=source, annotations=Path(annotations), videos=Path(videos), out=Path(out), **options)
    )


def build_converted(cfg: ConvertConfig) -> dict[str, Any]:
    """Convert ``cfg.source``'s annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``).

    ``cfg.source`` is a key of :data:`CONVERTERS`; ``cfg.videos`` must lie inside ``cfg.out``.
    Questions with a missing (or, with ``probe``, unreadable) video or an
    inconsistent annotation are listed in build.json's ``skipped`` (file[item],
    id, reason) and counted; ``strict`` raises instead. Returns build.json's content.

    Every annotation file may be JSON Lines (``.jsonl``, one item per line); a plain JSON file is
    parsed whole, and an error in it (not UTF-8, not JSON) names the file. NExT-QA's CSV must
    have its columns (a missing one names the file, line 1 and the expected header). Also left out, located
    (``file[index]`` or ``file:line``) and counted: an item that lacks a field, a JSON Lines line
    that is not UTF-8, not JSON or not an object, a CSV record with the wrong number of fields,
    and a repeated id. ``probe`` reads every
    video's frame count and fps (PyAV) into ``num_frames`` and ``duration``; ``sample`` keeps
    ``random.Random(seed).sample(usable, sample)``, the subsets of paper 001 App. A (seed 42).
    """
    from tqdm.auto import tqdm

    from judgetrain.io import write_json

    cfg.check()
    source, annotations, out = cfg.source, cfg.annotations, cfg.out
    assert source is not None  # check() refused a missing --from
    out.mkdir(parents=True, exist_ok=True)
    assert annotations is not None and cfg.videos is not None  # check() requires both
    items = benchmark_items(source, annotations, cfg.videos, cfg.answers, cfg.video_map)

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
        assert row is not None and item.id is not None  # a row, and its id, come with no problem
        seen[item.id] = item.where
        rows.append(row)
    usable = len(rows)
    if cfg.sample is not None:
        if not 1 <= cfg.sample <= len(rows):
            raise BuildError(f"--sample {cfg.sample}: {len(rows)} usable questions; choose 1..{len(rows)}")
        rows = random.Random(cfg.seed).sample(rows, cfg.sample)  # paper 001 App. A: random.Random(42).sample
    if not rows:
        raise BuildError(f"{annotations}: no usable question ({len(skipped)} skipped; first: {skipped[0] if skipped else '-'})")
    manifest = write_manifest(out, rows)
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "source": source,
        "benchmark": CONVERTERS[source],
        "args": {f.name: jsonable(getattr(cfg, f.name)) for f in fields(ConvertConfig)},
        "seed": cfg.seed,
        "manifest": manifest.name,
        "sources": [
            {"path": str(p), "bytes": p.stat().st_size} for p in annotation_files(source, annotations, cfg.answers, cfg.video_map)
        ],
        "counts": {
            "annotated": len(items),
            "usable": usable,
            "questions": len(rows),
            "skipped": len(skipped),
            "skipped_by_reason": dict(kinds),
            "options": dict(Counter(str(len(r["options"])) for r in rows)),
            "answer_position": dict(Counter(str(r["answer"]) for r in rows)),
        },
        "skipped": [asdict(s) for s in skipped],
    }
    write_json(out / BUILD_INFO, info)
    return info


def _converted_row(
    item: Item, source: str, out: Path, probe: bool, seen: Mapping[str, str]
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The manifest row of one converted question, or (kind, reason) why it cannot be used."""
    from judgetrain.video import VideoDecodeError
    from judgetrain.video import probe as probe_video

    if item.problem is not None:
        return None, item.problem
    # only an item with a problem lacks its id (too broken to name) or its video (not in NExT-QA's map)
    assert item.id is not None and item.video is not None
    if item.id in seen:
        return None, ("duplicate id", f"id {item.id!r} is already used by {seen[item.id]}")
    if "\x00" in str(item.video):  # pathlib would call it missing
        return None, (
            "bad annotation",
            f"video: {str(item.video)!r} holds a NUL byte (\\x00), which no file path can; fix the annotation",
        )
    if item.video.is_dir():
        return None, ("missing video", f"video: {item.video} is a folder, not a video file; put the video there")
    if not item.video.is_file():
        return None, ("missing video", f"video not found: {item.video}")
    duration = num_frames = None
    if probe:
        try:
            info = probe_video(item.video)
        except (VideoDecodeError, OSError, ValueError, RecursionError, MemoryError) as e:  # one video's failure is its skip
            what = str(e) if isinstance(e, (VideoDecodeError, OSError)) else f"{item.video}: {type(e).__name__}: {e}"
            return None, ("unreadable video", f"unreadable video: {what}")
        duration, num_frames = info.duration_s, info.n_frames
    rel = Path(os.path.relpath(item.video.absolute(), out.absolute())).as_posix()
    row = manifest_row(item.id, rel, item.question, item.options, item.answer, source, duration, num_frames, **item.extra)
    _, bad = check_line(row, out)  # the loader's own checks, so that the manifest always loads
    return (None, ("bad annotation", "; ".join(bad))) if bad else (row, None)
