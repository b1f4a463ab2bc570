"""``judgetrain build consistency-views``: training records with views, for consistency tuning
(paper 001, App. C).

Each question of a video-MCQ manifest (``judgetrain build video-mcq``) becomes V = S·K
ordinary task records, one per *view*: the S phase grids of PhaseFusion's sampler
(:func:`judgetrain.video.phase_indices`, b frames each, origin 0) crossed with the first K
of PhaseFusion's seeded option orderings (ordering 0 is the manifest's order). A view is a
full prompt with its own frames (PhaseFusion's letter-only prompt, ``mcq_prompt``) and the
gold letter mapped into that view's order: the letter of the slot that shows option
``answer`` (``label = LETTERS[inverse_permutation(perm)[answer]]``). Frames, orderings and
prompt are the ones ``judgetrain eval phasefusion`` scores (:mod:`judgetrain.mcq.views`,
:mod:`judgetrain.mcq.frames`, below both the builders and the evaluations), imported, never
rewritten.

The records are the one record format (DESIGN.md, "The task record"), task ``video_mcq``,
so every tool reads them; which records belong together lives in ``meta``: ``group`` (the
question id), ``view`` (0..V−1, view ``s·K + k`` = phase ``s``, ordering ``k``), ``views``,
``phase``, ``ordering``, ``perm`` (slot ``j`` shows option ``perm[j]``), ``answer`` (the
gold option, 0-based, in manifest order) and ``frames`` (0-based frame indices of the
video). A question's views are consecutive, all in one split (split by question, seeded).

Each video is decoded once for the union of the frames its questions need
(:class:`judgetrain.video.FrameCache`, questions taken video by video); the frames go to
``OUT.work/frames`` as PNG and every view that shows a frame stores those same bytes. A
build run again after a kill decodes only the questions whose frames are not there yet
(``frames.json`` marks a question's folder complete, with the video and settings it holds).
Docs: "reference/commands/build-consistency-views.md", "how-to/consistency-tuning.md".
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from judgetrain.config import arg
from judgetrain.io import write_text
from judgetrain.jsonl import read_jsonl
from judgetrain.mcq.frames import decode_question
from judgetrain.mcq.manifest import ManifestError, VideoQuestion, check_line
from judgetrain.mcq.views import LETTERS, Grid, inverse_permutation, mcq_prompt, orderings
from judgetrain.records import make_id
from judgetrain.video import MAX_SIDE, FrameCache, VideoDecodeError

from .core.args import WorkBuildArgs
from .core.common import BuildError, Fractions, Skip, builder_parser, finish_summary, save_build, split_table
from .core.manifests import nothing_left, report_skips
from .core.outfolder import already_built
from .core.steps import assign_splits, build_info, config_json, each_plan, generate_splits, manifest_source, work_dirs

__all__ = [
    "BUILDER",
    "LAYOUT",
    "TASK",
    "VERSION",
    "ConsistencyViewsConfig",
    "build",
    "gold_letter",
    "main",
    "make_parser",
    "view_records",
]

BUILDER = "consistency-views"
VERSION = "1.0.0"
TASK = "video_mcq"
LAYOUT = "PF"  # PhaseFusion's letter-only MCQ prompt (paper 001 App. A)
SPLIT_SALT = "consistency-views-split"


@dataclass(kw_only=True)
class ConsistencyViewsConfig(WorkBuildArgs):
    """``judgetrain build consistency-views``: every field is a flag (``--field-name``) and a ``--config`` key."""

    manifest: Path = arg(None, "video-MCQ manifest (JSON Lines; `judgetrain build video-mcq` writes one)", metavar="MANIFEST")
    budget: int = arg(8, "frames per view, b (paper 001 App. C: 8 frames per clip)", metavar="B")
    phases: int = arg(
        3, "phase grids per question, S: grid s samples ⌊(i + s/S)·T/b⌋ (1: the left-endpoint grid only)", metavar="S"
    )
    orderings: int = arg(
        2, "option orderings per question, K: PhaseFusion's seeded orderings 0..K-1 (0 = manifest order)", metavar="K"
    )
    max_side: int = arg(
        MAX_SIDE, "longer frame side in pixels after resizing (paper 001 App. A: 360, as eval phasefusion)", metavar="PX"
    )
    splits: Fractions = arg(
        Fractions("train=0.9,validation=0.1"), "fractions per split, by question (all of a question's views go to one split)"
    )

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        self.manifest = Path(self.manifest) if self.manifest is not None else None
        self.splits = Fractions(self.splits)

    @property
    def views(self) -> int:
        """V = S·K views per question."""
        return self.phases * self.orderings

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        problems = []
        if self.manifest is None:
            problems.append(
                "--manifest: missing; give a video-MCQ manifest (`judgetrain build video-mcq --out DIR --synthetic N` "
                "writes DIR/manifest.jsonl)"
            )
        for name in ("budget", "phases", "orderings"):
            if getattr(self, name) < 1:
                problems.append(f"--{name} {getattr(self, name)}: must be at least 1")
        if self.max_side < 16:
            problems.append(f"--max-side {self.max_side}: frames must keep at least 16 pixels on their longer side")
        bad = [s for s in self.splits if s not in ("train", "validation", "test")]
        if bad:
            problems.append(f"--splits: unknown split {bad}; use train, validation, test")
        if (
            not self.splits
            or any(v < 0 for v in self.splits.values())
            or not math.isclose(sum(self.splits.values()), 1.0, abs_tol=1e-6)
        ):
            problems.append(f"--splits {self.splits}: fractions must be non-negative and sum to 1, e.g. train=0.9,validation=0.1")
        if problems:
            raise BuildError("invalid consistency-views build options:\n" + "\n".join(f"  - {p}" for p in problems))


# --------------------------------------------------------------------------- one question's views


def gold_letter(perm: list[int], answer: int) -> str:
    """The letter of the slot that shows option ``answer`` when slot ``j`` shows option ``perm[j]``."""
    return LETTERS[inverse_permutation(perm)[answer]]


def view_records(plan: dict[str, Any], images_of: Any) -> list[dict[str, Any]]:
    """The V records of one planned question, view ``s·K + k`` = phase grid ``s`` under ordering ``k``.
    ``images_of(frame_indices)`` gives the stored images of a phase grid's frames (bytes dicts)."""
    options, answer, qid = plan["options"], plan["answer"], plan["id"]
    perms = orderings(qid, len(options), plan["orderings"])
    out = []
    for s, frames in enumerate(plan["frames"]):
        images = images_of(frames)
        for k, perm in enumerate(perms):
            view = s * len(perms) + k
            letter = gold_letter(perm, answer)
            prompt = mcq_prompt(plan["question"], options, perm, len(frames))
            for message in prompt:  # the record schema's content items carry both keys
                message["content"] = [{"type": c["type"], "text": c.get("text")} for c in message["content"]]
            meta = {
                "group": qid,
                "view": view,
                "views": len(plan["frames"]) * len(perms),
                "phase": s,
                "phases": len(plan["frames"]),
                "ordering": k,
                "orderings": len(perms),
                "perm": perm,
                "answer": answer,
                "options": list(options),
                "frames": frames,
                "budget": len(frames),
                "video": plan["video"],
                "manifest_line": plan["line"],
                "benchmark": plan["benchmark"],
                "extra": plan["extra"],
            }
            out.append(
                {
                    "id": f"{qid}:v{view}",
                    "task": TASK,
                    "images": images,
                    "prompt": prompt,
                    "completion": [{"role": "assistant", "content": [{"type": "text", "text": letter}]}],
                    "choices": list(LETTERS[: len(options)]),
                    "label": letter,
                    "source": plan["benchmark"],
                    "perturbation": "none",
                    "position": -1,
                    "n_frames": len(frames),
                    "layout": LAYOUT,
                    "meta": json.dumps(meta, sort_keys=True),
                }
            )
    return out


def generate_records(plans_json: str, cfg_json: str) -> Iterator[dict]:
    """Records of the plans (one per question, V records each) in plan order: one split's ``Dataset.from_generator``."""
    for _cfg, plan, load in each_plan(plans_json, cfg_json, BUILDER, "question"):
        yield from view_records(plan, _stored_images(load, Path(plan["folder"])))


def _stored_images(load: Callable[[str], bytes], folder: Path) -> Callable[[list[int]], list[dict[str, Any]]]:
    """``images_of`` for :func:`view_records`: the frames decoded into ``folder`` (``<index>.png``), as bytes dicts."""
    return lambda frames: [{"bytes": load(str(folder / f"{i}.png")), "path": None} for i in frames]


# --------------------------------------------------------------------------- reading and decoding

# What decoding one question may raise (PyAV, Pillow, numpy, the file system): its skip, never the build's end
DECODE_ERRORS = (OSError, ValueError, RuntimeError, RecursionError, MemoryError)


class ViewsProblem(ValueError):
    """A question whose views cannot differ; the message says why and how to fix it."""


def read_questions(manifest: Path) -> tuple[list[VideoQuestion], list[Skip]]:
    """The questions of a video-MCQ manifest, and a located :class:`Skip` for every bad line (the
    checks of :func:`judgetrain.mcq.manifest.check_line`, and a repeated id): one bad line is one skip."""
    if not manifest.is_file():
        raise BuildError(
            f"--manifest {manifest}: no such manifest; build one with `judgetrain build video-mcq --out DIR "
            "--synthetic N` (it writes DIR/manifest.jsonl)"
        )
    questions: list[VideoQuestion] = []
    skips: list[Skip] = []
    seen: dict[str, int] = {}
    for item in read_jsonl(manifest):
        fields: dict[str, Any] | None
        bad: list[str]
        if item.problem:
            fields, bad = None, [item.problem]
        else:
            fields, bad = check_line(item.row, manifest.parent)
        if fields is not None and fields["id"] in seen:
            bad = [f"id: {fields['id']!r} is also on line {seen[fields['id']]}; give every question its own id"]
            fields = None
        if fields is None:
            rid = item.row.get("id") if item.row is not None else None
            skips.append(Skip(str(manifest), item.line, "; ".join(bad), None if rid is None else str(rid)))
            continue
        seen[fields["id"]] = item.line
        questions.append(VideoQuestion(**fields, line=item.line))
    return questions, skips


def check_views_differ(q: VideoQuestion, n_frames: int, grids: list[list[int]]) -> None:
    """``ViewsProblem`` when the phase grids of ``q``'s video cannot give views that differ in time:
    a video of one frame, or phase grids that all pick the same frames."""
    if n_frames < 2:
        raise ViewsProblem(
            f"{q.video} has {n_frames} frame; every view would show that one frame {len(grids[0])} times; "
            "give a video of at least 2 frames, or drop the line"
        )
    if len(grids) > 1 and all(g == grids[0] for g in grids):
        raise ViewsProblem(
            f"{q.video} has {n_frames} frames, too few for {len(grids)} different phase grids of "
            f"{len(grids[0])} frames (all pick frames {[i + 1 for i in grids[0]]}); give a longer video, "
            "lower --budget, or use --phases 1"
        )


def _decode_skip(cfg, q: VideoQuestion, error: BaseException) -> Skip:
    """The located skip of a question whose video could not be decoded into views."""
    if isinstance(error, ViewsProblem):
        return Skip(str(cfg.manifest), q.line, f"video: {error}", q.id)
    what = (
        str(error)
        if isinstance(error, (VideoDecodeError, ManifestError, OSError))
        else f"{q.video}: {type(error).__name__}: {error}"
    )
    return Skip(str(cfg.manifest), q.line, f"video: {what}; fix or replace the file, or drop the line", q.id)


def _by_video(questions: list[VideoQuestion]) -> list[VideoQuestion]:
    """Questions video by video (videos in order of first appearance, questions in manifest order within one),
    so the frame cache holds each video while all its questions are planned."""
    first: dict[str, int] = {}
    for i, q in enumerate(questions):
        first.setdefault(str(q.video), i)
    return sorted(questions, key=lambda q: (first[str(q.video)], q.line))


def decode_questions(
    questions: list[VideoQuestion], cfg: ConsistencyViewsConfig, work: Path
) -> tuple[list[dict], list[Skip], dict]:
    """Plan every question's phase grids and decode its frames (each video once for the union its
    questions need) into ``work/frames/<question>/<index>.png``; returns the plans (manifest order),
    the questions skipped and why, and the decoding counts."""
    from tqdm.auto import tqdm

    cache = FrameCache(cfg.max_side, max_videos=1)
    grids = {"phase": Grid("phase", "phase", cfg.budget, cfg.phases)}
    plans, skips, resumed = [], [], 0
    for q in tqdm(_by_video(questions), desc="decoding", unit="question", disable=not cfg.progress):
        folder = work / "frames" / make_id(q.id)
        try:
            frames = _decoded_before(folder, q, cfg)
            if frames is not None:
                resumed += 1
            else:
                frames = _decode_into(folder, q, cfg, cache, grids)
        except DECODE_ERRORS as e:
            skip = _decode_skip(cfg, q, e)
            if cfg.strict:
                raise BuildError(str(skip)) from None
            skips.append(skip)
            continue
        plans.append(
            {
                "id": q.id,
                "line": q.line,
                "question": q.question,
                "options": list(q.options),
                "answer": q.answer,
                "benchmark": q.benchmark,
                "video": str(q.video.relative_to(cfg.manifest.parent.resolve())),
                "extra": q.extra,
                "frames": frames,
                "orderings": cfg.orderings,
                "folder": str(folder),
            }
        )
    plans.sort(key=lambda p: p["line"])
    counts = {"decode_passes": cache.decodes, "videos": len({str(q.video) for q in questions}), "resumed_questions": resumed}
    return plans, skips, counts


_DONE = "frames.json"  # written after a question's PNGs, so a killed build decodes that question again


def _frames_key(q: VideoQuestion, cfg) -> dict:
    """What a question's decoded frames depend on: its video (path and size) and the sampling settings."""
    return {
        "video": str(q.video),
        "bytes": q.video.stat().st_size,
        "budget": cfg.budget,
        "phases": cfg.phases,
        "max_side": cfg.max_side,
    }


def _decoded_before(folder: Path, q: VideoQuestion, cfg) -> list[list[int]] | None:
    """The frame indices an earlier (possibly killed) build decoded into ``folder`` for ``q`` with
    the same video and settings; None when it must be decoded."""
    done = folder / _DONE
    if not done.is_file():
        return None
    saved = json.loads(done.read_text())
    return saved["frames"] if saved.get("key") == _frames_key(q, cfg) else None


def _decode_into(folder: Path, q: VideoQuestion, cfg, cache, grids) -> list[list[int]]:
    """Decode ``q``'s phase grids, write each frame as ``folder/<index>.png`` and mark the folder done."""
    decoded = decode_question(q, cache, grids, [Fraction(0)], cfg.budget, latency_lines=0)
    ((_origin, _grid, frames),) = decoded.plan
    check_views_differ(q, decoded.row["n_frames"], frames)
    folder.mkdir(parents=True, exist_ok=True)
    for i, image in decoded.images.items():
        image.save(folder / f"{i}.png", format="PNG")
    write_text(folder / _DONE, json.dumps({"key": _frames_key(q, cfg), "frames": list(frames)}))
    return list(frames)


# --------------------------------------------------------------------------- the build


def record_counts(dataset) -> dict:
    """``build.json``'s ``counts.records``: per split, the total, the questions and the gold letters."""
    out = {}
    for name, ds in dataset.items():
        cols = ds.select_columns(["label", "meta"]).to_dict()
        groups = {json.loads(m)["group"] for m in cols["meta"]}
        out[name] = {"total": len(ds), "questions": len(groups), "gold_letter": dict(sorted(Counter(cols["label"]).items()))}
    return out


def build(cfg: ConsistencyViewsConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    cfg.check()
    if (done := already_built(cfg, BUILDER, VERSION)) is not None:  # same build: nothing to do; another: refused
        return done
    out, work = work_dirs(cfg)
    manifest = cfg.manifest.resolve()
    questions, skips = read_questions(cfg.manifest)
    report_skips(skips, cfg.strict)
    plans, failed, decoding = decode_questions(questions, cfg, work)
    for s in failed:
        print(f"warning: skipped {s}", file=sys.stderr)
    skips += failed
    if not plans:
        raise nothing_left(
            cfg.manifest, "question", len(questions), skips, f"{manifest}: no question could be decoded ({len(skips)} skipped)"
        )
    split_of = assign_splits([(p["id"], p["benchmark"]) for p in plans], cfg.splits, cfg.seed, SPLIT_SALT)
    by_split = {name: [{**p, "split": name} for p in plans if split_of[p["id"]] == name] for name in cfg.splits}
    cfg_json = config_json(cfg, "manifest")
    dataset = generate_splits(generate_records, by_split, cfg_json, work, [*cfg.splits], BUILDER)
    protocol = {
        "views_per_question": cfg.views,
        "phases": cfg.phases,
        "orderings": cfg.orderings,
        "budget": cfg.budget,
        "origin": "0",
        "view_index": "phase * orderings + ordering",
        "task": TASK,
        "layout": LAYOUT,
    }
    counts = {
        "records": record_counts(dataset),
        "questions": {"manifest": len(questions), "kept": len(plans), "skipped": len(skips)},
        "decoding": decoding,
    }
    info = build_info(
        BUILDER,
        VERSION,
        cfg,
        cfg_json,
        protocol=protocol,
        sources=[manifest_source(manifest)],
        counts=counts,
        skipped=[asdict(s) for s in skips],
    )
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(
        ConsistencyViewsConfig,
        "consistency-views",
        "Build consistency-tuning records (paper 001 App. C): every video-MCQ question as S phase grids × "
        "K option orderings, one record per view, the gold letter mapped into each view's order.",
        [
            "--manifest data/vmcq/manifest.jsonl --out data/vmcq-views   # after `build video-mcq --out data/vmcq`",
            "--manifest data/vmcq/manifest.jsonl --out data/vmcq-views-8 --budget 8 --phases 3 --orderings 2",
        ],
    )


def main(cfg: ConsistencyViewsConfig) -> int:
    from rich.console import Console

    info = build(cfg)
    console = Console()
    q = info["counts"]["questions"]
    console.print(
        f"consistency views: {q['kept']} of {q['manifest']} question(s), {info['protocol']['views_per_question']} "
        f"view(s) each; {info['counts']['decoding']['decode_passes']} decoding pass(es) over "
        f"{info['counts']['decoding']['videos']} video(s)"
    )
    console.print(split_table("Gold letter per split (all views)", "gold letter", info["counts"]["records"], "gold_letter"))
    finish_summary(console, info, Path(cfg.out))
    return 0
