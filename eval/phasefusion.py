"""PhaseFusion evaluation: frame-phase grids, option orderings and fused option posteriors (paper 001).

For every question of a video-MCQ manifest (DESIGN.md; ``judgetrain build
video-mcq``) and every grid origin ``δ``, each *grid* an arm needs is scored
under ``K`` option orderings:

- ``phase``: the ``S`` phase grids ``⌊(i + s/S + δ)·T/b⌋`` (Eq. 1), read by the
  arms ``fusion`` (arithmetic mean of the ``S`` content-space posteriors, Eq. 2),
  ``fusion-geo`` (geometric pooling) and ``vote`` (argmax majority over the same
  ``S`` views);
- ``single``: phase 0 alone (the plain single pass);
- ``union``: one pass over the dense ``S·b`` grid the phases partition (App. E);
- ``dense<N>``: a single pass at budget ``N`` (e.g. ``dense32``);
- ``left``, ``midpoint``, ``inclusive``, ``fps1``: the deployed samplers of Fig. 2
  (origin-free: scored at the first origin only).

The origin ``δ`` is in steps of the ``b``-frame grid (``1/(2S)``: the half-step
shift of App. F), i.e. the same absolute time shift ``δ·T/b`` for every grid.

Orderings: ordering 0 is the identity, ordering ``k`` a permutation drawn from a
numpy generator seeded by sha256 of (question id, ``k``) — the same in every
process, machine and model, so runs of different models are paired at the
(question, ordering) level. Slot ``j`` shows option ``perm[j]``; the letter
probabilities, renormalised over the live letters, map back to content space
through the inverse permutation (``q[perm[j]] = p[j]``).

Cost: one decoding pass per video for the union of every frame any arm needs
(:class:`judgetrain.video.FrameCache`); per grid, the frames and the shared
question are encoded once and the ``K`` orderings' options are scored against
copies of that cache, the ``S`` phases in one batch
(:func:`judgetrain.scoring.score_shared_prefix`). Latency and peak memory are
measured per grid and question (CUDA: ``torch.cuda.max_memory_allocated``; CPU:
the process's peak resident set, reset per grid through ``/proc/self/clear_refs``).

Results: ``predictions.jsonl`` holds per question one ``pass`` row per (origin,
grid, phase, ordering) with the letter and content-space posteriors, one
``cost`` row per (origin, grid), and a closing ``question`` row; the rows of a
question are written and fsync'd together, so a killed run resumes at the first
question without its closing row. ``metrics.json``, ``report.md`` (paper 001
Table 1 layout) and the plots come from those rows alone
(:mod:`judgetrain.eval.phasefusion_report`; ``judgetrain eval phasefusion
--report-only RUN``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from judgetrain.seeding import rng_for
from judgetrain.video import SAMPLERS, parse_fraction, phase_indices, sampler_indices

from .report import METRICS, PREDICTIONS, RUN_INFO, EvalInputError, PredictionWriter, check_same_run, read_predictions, \
    repair_predictions, write_json, write_rows

__all__ = [
    "DEFAULT_ARMS",
    "INSTRUCTION",
    "LETTERS",
    "Arm",
    "Grid",
    "configure_parser",
    "evaluate",
    "inverse_permutation",
    "main",
    "mcq_prompt",
    "ordering_permutation",
    "orderings",
    "parse_arms",
    "parse_origins",
    "pool",
    "to_content",
]

LETTERS = string.ascii_uppercase
DEFAULT_ARMS = "single,fusion,vote,union,dense32"
PREAMBLE = "Select the best answer to the following multiple-choice question based on the video frames."
# Paper 001 App. A: "the instruction requests the option letter only".
INSTRUCTION = "Answer with the option's letter from the given choices directly."
# Keys of run.json a resumed run must share with the run that wrote the predictions.
_IDENTITY = ("model", "adapter", "manifest", "budget", "phases", "orderings", "arms", "origins", "prefill",
             "max_side", "dtype")


# --------------------------------------------------------------------------- orderings and posteriors


def ordering_permutation(question_id: str, k: int, n_options: int) -> list[int]:
    """Ordering ``k`` of a question's ``n_options`` options: slot ``j`` shows option ``perm[j]``.

    ``k = 0`` is the identity; ``k > 0`` a permutation from a numpy generator seeded by
    sha256 of ("phasefusion-ordering", question id, k), independent of the model and
    the process (so it may repeat another ordering when options are few, as in the paper).
    """
    if n_options < 1 or k < 0:
        raise ValueError(f"need n_options >= 1 and k >= 0, got n_options={n_options}, k={k}")
    if k == 0:
        return list(range(n_options))
    return [int(x) for x in rng_for("phasefusion-ordering", question_id, k).permutation(n_options)]


def orderings(question_id: str, n_options: int, count: int) -> list[list[int]]:
    """The first ``count`` orderings of a question: the identity, then ``count - 1`` drawn ones."""
    if count < 1:
        raise ValueError(f"need at least one ordering, got {count}")
    return [ordering_permutation(question_id, k, n_options) for k in range(count)]


def inverse_permutation(perm: Sequence[int]) -> list[int]:
    """``inv[c]`` = the slot showing option ``c`` (``perm[inv[c]] == c``)."""
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"{list(perm)} is not a permutation of 0..{len(perm) - 1}")
    inv = [0] * len(perm)
    for slot, content in enumerate(perm):
        inv[content] = slot
    return inv


def to_content(letter_probs: Sequence[float], perm: Sequence[int]) -> list[float]:
    """Letter-slot posterior → content-space posterior ``q(c | π) = p(π⁻¹(c))``."""
    if len(letter_probs) != len(perm):
        raise ValueError(f"{len(letter_probs)} letter probabilities for a permutation of {len(perm)} options")
    return [float(letter_probs[slot]) for slot in inverse_permutation(perm)]


def pool(posteriors: Sequence[Sequence[float]], how: str = "arithmetic") -> list[float]:
    """Pool the content-space posteriors of several views into one (paper 001 Eq. 2).

    ``"arithmetic"``: their mean (a distribution whenever the inputs are).
    ``"geometric"``: the normalised geometric mean (``exp`` of the mean log; an option
    some view gives probability 0 gets 0).
    """
    p = np.asarray(posteriors, dtype=np.float64)
    if p.ndim != 2 or not p.size:
        raise ValueError("pool needs a non-empty list of equally long posteriors")
    if how == "arithmetic":
        return p.mean(axis=0).tolist()
    if how == "geometric":
        with np.errstate(divide="ignore"):
            logp = np.log(p).mean(axis=0)
        if np.isneginf(logp).all():
            raise ValueError("geometric pooling: every option has probability 0 under some view")
        g = np.exp(logp - logp.max())
        return (g / g.sum()).tolist()
    raise ValueError(f"unknown pooling {how!r}; use 'arithmetic' or 'geometric'")


def mcq_prompt(question: str, options: Sequence[str], perm: Sequence[int], n_images: int) -> list[dict[str, Any]]:
    """The chat for one ordering: the frames, then the question, the options in slot order
    labelled A, B, … and the letter-only instruction (everything before the options is
    shared by the orderings, so it is encoded once)."""
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options; at most {len(LETTERS)} can be lettered")
    lines = [PREAMBLE, question.strip()]
    lines += [f"{LETTERS[j]}. {options[c]}" for j, c in enumerate(perm)]
    lines.append(INSTRUCTION)
    content: list[dict[str, Any]] = [{"type": "image"} for _ in range(n_images)]
    content.append({"type": "text", "text": "\n".join(lines)})
    return [{"role": "user", "content": content}]


# --------------------------------------------------------------------------- grids and arms


@dataclass(frozen=True)
class Grid:
    """A frame grid family scored as one unit: ``views`` grids of ``budget`` frames each.

    ``kind``: ``"phase"`` (the S phase grids), ``"dense"`` (one uniform grid, left
    endpoint at the shifted origin; ``single``, ``union`` and ``dense<N>`` are of this
    kind) or a deployed sampler name (origin-free).
    """

    name: str
    kind: str
    budget: int
    views: int = 1

    @property
    def origin_free(self) -> bool:
        return self.kind in SAMPLERS

    @property
    def attention_units(self) -> int:
        """Visual-prefix attention cost ``views · budget²`` in frame-token² (paper 001 Table 1)."""
        return self.views * self.budget ** 2

    def indices(self, n_frames: int, fps: float, origin: Fraction, base_budget: int) -> list[list[int]]:
        """Frame indices of every view at ``origin`` (in steps of the ``base_budget`` grid)."""
        if self.kind == "phase":
            return [phase_indices(n_frames, self.budget, s, self.views, origin) for s in range(self.views)]
        if self.kind == "dense":
            # the same absolute shift δ·T/b, in steps of this grid: δ·N/b
            return [phase_indices(n_frames, self.budget, origin=origin * self.budget / base_budget)]
        return [sampler_indices(self.kind, n_frames, self.budget, fps)]


@dataclass(frozen=True)
class Arm:
    """An evaluated arm: which grid's passes it reads and how it pools their views.

    ``pool``: ``"single"`` (the grid's only view), ``"arithmetic"`` / ``"geometric"``
    (posterior pooling) or ``"vote"`` (plurality of the views' argmax answers, ties to
    the lowest content index).
    """

    name: str
    grid: str
    pool: str


def parse_arms(spec: str | Sequence[str], budget: int, phases: int) -> tuple[list[Arm], dict[str, Grid]]:
    """Arms from ``"single,fusion,vote,union,dense32"``-style names, and the grids they need.

    Names: ``single``, ``fusion``, ``fusion-geo``, ``vote``, ``union``, ``dense<N>``,
    and the deployed samplers ``left``, ``midpoint``, ``inclusive``, ``fps1``.
    """
    names = [x.strip() for x in spec.split(",")] if isinstance(spec, str) else [str(x).strip() for x in spec]
    names = [x for x in names if x]
    if not names:
        raise ValueError("--arms names no arm; e.g. --arms single,fusion,vote,union,dense32")
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ValueError(f"--arms repeats {', '.join(dup)}")
    arms: list[Arm] = []
    grids: dict[str, Grid] = {}
    for name in names:
        if name in ("fusion", "fusion-geo", "vote"):
            grid = Grid("phase", "phase", budget, phases)
            arm = Arm(name, "phase", {"fusion": "arithmetic", "fusion-geo": "geometric", "vote": "vote"}[name])
        elif name == "single":
            grid, arm = Grid("single", "dense", budget), Arm(name, "single", "single")
        elif name == "union":
            grid, arm = Grid("union", "dense", budget * phases), Arm(name, "union", "single")
        elif name.startswith("dense") and name[5:].isdigit() and int(name[5:]) >= 1:
            grid, arm = Grid(name, "dense", int(name[5:])), Arm(name, name, "single")
        elif name in SAMPLERS:
            grid, arm = Grid(name, name, budget), Arm(name, name, "single")
        else:
            raise ValueError(f"unknown arm {name!r}; arms are single, fusion, fusion-geo, vote, union, dense<N> "
                             f"(e.g. dense32) and the samplers {', '.join(SAMPLERS)}")
        grids.setdefault(grid.name, grid)
        arms.append(arm)
    return arms, grids


def parse_origins(spec: str | Sequence[Any] | None, phases: int) -> list[Fraction]:
    """Grid origins in steps of the b-frame grid: ``"0,1/6"``; ``None`` means ``0`` and the
    half-step shift ``1/(2S)`` (paper 001 App. F). Each must lie in [0, 1)."""
    if spec is None:
        return [Fraction(0), Fraction(1, 2 * phases)] if phases > 1 else [Fraction(0), Fraction(1, 2)]
    parts = [x.strip() for x in spec.split(",")] if isinstance(spec, str) else list(spec)
    out = [parse_fraction(x, "origin") for x in parts if str(x).strip()]
    if not out:
        raise ValueError("--origins names no origin; e.g. --origins 0,1/6")
    bad = [str(x) for x in out if x >= 1]
    if bad:
        raise ValueError(f"origin(s) {', '.join(bad)} not in [0, 1): an origin is a fraction of one grid step")
    if len(set(out)) != len(out):
        raise ValueError(f"--origins repeats a value: {spec}")
    return out


# --------------------------------------------------------------------------- measuring cost


class _PeakMemory:
    """Peak memory over a stretch of work: CUDA allocations, or the process's resident set."""

    def __init__(self, device: Any):
        self.cuda = getattr(device, "type", str(device)) == "cuda"
        self.device = device
        if self.cuda:
            self.kind = "cuda_max_memory_allocated"
        elif _can_reset_rss():
            self.kind = "process_rss_peak"
        else:  # no per-stretch reset: the peak since the process started
            self.kind = "process_rss_peak_since_start"

    def reset(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.kind == "process_rss_peak":
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # 5: reset the peak resident set size (VmHWM) to the current one

    def peak(self) -> int:
        if self.cuda:
            import torch

            torch.cuda.synchronize(self.device)
            return int(torch.cuda.max_memory_allocated(self.device))
        return _rss_peak()


def _can_reset_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _rss_peak() > 0
    except OSError:
        return False


def _rss_peak() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


# --------------------------------------------------------------------------- the run


@dataclass
class _Decoded:
    """One question's frames: the plan of (origin, grid, views) and every frame it needs, decoded once."""

    plan: list[tuple[Fraction, Grid, list[list[int]]]]
    images: dict[int, Any]
    row: dict[str, Any]  # the question's closing row (its facts and the decoding cost)


def _decode(q: Any, cache: Any, grids: dict[str, Grid], origins: list[Fraction], budget: int) -> _Decoded:
    """Probe the video, plan every grid at every origin and decode the union of their frames
    in one pass (origin-free samplers only at the first origin)."""
    from PIL import Image

    from judgetrain.video import probe, segment_frames

    info = probe(q.video)
    try:  # a bounded question (MVBench's start/end) is sampled inside its segment
        lo, hi = segment_frames(info.n_frames, info.fps, q.start, q.end)
    except ValueError as err:
        raise EvalInputError(f"question {q.id} (manifest line {q.line}): {err}") from None
    plan = [(origin, grid, [[lo + i for i in view] for view in grid.indices(hi - lo + 1, info.fps, origin, budget)])
            for k, origin in enumerate(origins) for grid in grids.values() if not (grid.origin_free and k > 0)]
    wanted = sorted({i for _, _, views in plan for view in views for i in view})
    decodes_before = cache.decodes
    t0 = time.perf_counter()
    frames = cache.get(q.video, wanted)
    decode_s = time.perf_counter() - t0
    row = {"id": q.id, "benchmark": q.benchmark, "kind": "question", "answer": q.answer, "n_options": len(q.options),
           "options": list(q.options), "question": q.question, "video": str(q.video), "n_frames": info.n_frames,
           "segment_frames": [lo, hi],
           "fps": info.fps, "duration": q.duration if q.duration is not None else info.duration_s,
           "decode_s": decode_s, "decoded_frames": len(wanted), "decode_passes": cache.decodes - decodes_before}
    return _Decoded(plan, {i: Image.fromarray(a) for i, a in zip(wanted, frames)}, row)


def _score(q: Any, decoded: _Decoded, scorer: Any, n_orderings: int, memory: _PeakMemory) -> list[dict[str, Any]]:
    """Every row of one question: passes and costs per (origin, grid), then the closing question row."""
    from judgetrain.scoring import PrefixGroup

    perms = orderings(q.id, len(q.options), n_orderings)
    letters = list(LETTERS[:len(q.options)])
    base = {"id": q.id, "benchmark": q.benchmark}
    rows: list[dict[str, Any]] = []
    for origin, grid, views in decoded.plan:
        groups = [PrefixGroup([decoded.images[i] for i in view],
                              [mcq_prompt(q.question, q.options, p, len(view)) for p in perms], letters)
                  for view in views]
        memory.reset()
        t0 = time.perf_counter()
        scores = scorer.score_shared_prefix(groups, progress=False)
        peak = memory.peak()  # synchronises CUDA before the clock stops
        latency = time.perf_counter() - t0
        for s, (view, per_ordering) in enumerate(zip(views, scores, strict=True)):
            for k, (perm, sc) in enumerate(zip(perms, per_ordering, strict=True)):
                posterior = to_content(sc.probs, perm)
                pred = int(np.argmax(posterior))
                rows.append({**base, "kind": "pass", "origin": str(origin), "grid": grid.name,
                             "phase": s, "ordering": k, "perm": perm, "frames": view,
                             "letter_probs": [float(x) for x in sc.probs], "posterior": posterior,
                             "pred": pred, "answer": q.answer, "correct": pred == q.answer})
        rows.append({**base, "kind": "cost", "origin": str(origin), "grid": grid.name,
                     "views": grid.views, "budget": grid.budget, "attention_units": grid.attention_units,
                     "passes": len(views) * len(perms), "latency_s": latency, "peak_memory_bytes": peak,
                     "memory_kind": memory.kind})
    rows.append(decoded.row)
    return rows


def _warm_up(scorer: Any, budget: int) -> None:
    """One untimed pass on blank frames, so one-off start-up costs (kernel selection, lazy
    initialisation) are not charged to the first arm measured."""
    from PIL import Image

    from judgetrain.scoring import PrefixGroup

    frames = [Image.new("RGB", (64, 48), (128, 128, 128)) for _ in range(budget)]
    prompts = [mcq_prompt("Which option?", ["yes", "no"], p, budget) for p in ([0, 1], [1, 0])]
    scorer.score_shared_prefix([PrefixGroup(frames, prompts, ["A", "B"])], progress=False)


def _load_scorer(model: str, adapter: str | None, dtype: str | None, batch_size: int | str, prefill: str,
                 grids: dict[str, Grid], budget: int) -> tuple[Any, _PeakMemory]:
    from judgetrain.scoring import FAMILY_PREFILL, Scorer

    pre: Any = FAMILY_PREFILL if prefill == "family" else (None if prefill == "none" else prefill)
    # A grid family is one scoring call of at most S frame grids: "auto" batches all of them
    # together (the engine halves the batch on out-of-memory).
    groups_per_pass = max(g.views for g in grids.values()) if batch_size == "auto" else batch_size
    scorer = Scorer.from_pretrained(model, adapter, dtype=dtype, batch_size=groups_per_pass, prefill=pre, progress=False)
    _warm_up(scorer, budget)
    return scorer, _PeakMemory(scorer.device)


def _check_sizes(budget: int, phases: int, n_orderings: int) -> None:
    if min(budget, phases, n_orderings) < 1:
        raise ValueError(f"--budget, --phases and --orderings must be >= 1 (got {budget}, {phases}, {n_orderings})")


def _done_and_clean(pred: Path) -> set[str]:
    """Ids whose closing ``question`` row is in ``pred``; rows of any other question (a kill
    mid-question, or a question that failed) are removed, atomically, so it is redone."""
    repair_predictions(pred)
    rows = read_predictions(pred)
    done = {r["id"] for r in rows if r.get("kind") == "question"}
    kept = [r for r in rows if r["id"] in done]
    if len(kept) != len(rows):
        write_rows(pred, kept)
    return done


def evaluate(
    model: str,
    manifest: str | os.PathLike,
    out: str | os.PathLike,
    *,
    adapter: str | None = None,
    budget: int = 8,
    phases: int = 3,
    n_orderings: int = 10,
    arms: str | Sequence[str] = DEFAULT_ARMS,
    origins: str | Sequence[Any] | None = None,
    limit: int | None = None,
    batch_size: int | str = "auto",
    dtype: str | None = None,
    prefill: str = "family",
    max_side: int | None = 360,
    frame_cache: str | os.PathLike | None = None,
    progress: bool = True,
    command: str | None = None,
) -> dict[str, Any]:
    """Score the manifest's questions under every arm, origin and ordering into run folder ``out``.

    Resumable: questions whose rows are complete in ``out/predictions.jsonl`` are
    skipped; a folder written with other settings (model, manifest, grids, orderings,
    arms, origins, prefill, frame size, dtype) is refused. A question whose video
    cannot be decoded gets an ``error`` row (counted in ``metrics.json``) and is
    retried on the next run. ``prefill``: ``"family"`` (the model family's, e.g. an
    empty think block for reasoning checkpoints), ``"none"``, or literal text.
    Returns ``{"out", "n_questions", "n_scored", "n_errors", "metrics"}``.
    """
    from judgetrain.data_builders.video_mcq import load_manifest
    from judgetrain.video import FrameCache, VideoDecodeError

    from .phasefusion_report import report

    _check_sizes(budget, phases, n_orderings)
    arm_list, grids = parse_arms(arms, budget, phases)
    origin_list = parse_origins(origins, phases)
    out, manifest = Path(out), Path(manifest)
    questions = load_manifest(manifest)
    if limit is not None:
        questions = questions[:limit]
    info = {"evaluation": "phasefusion", "model": str(model), "adapter": str(adapter) if adapter else None,
            "manifest": str(manifest.resolve()), "budget": budget, "phases": phases, "orderings": n_orderings,
            "arms": [a.name for a in arm_list], "origins": [str(o) for o in origin_list], "prefill": prefill,
            "max_side": max_side, "dtype": dtype, "limit": limit, "command": command}
    info_path = out / RUN_INFO
    old = check_same_run(out, info, _IDENTITY)
    out.mkdir(parents=True, exist_ok=True)
    info = {**old, **info}  # keeps what the first run learnt of the device until this one loads the model
    write_json(info_path, info)  # before any prediction, so a later run with other settings is refused
    pred = out / PREDICTIONS
    done = _done_and_clean(pred)
    todo = [q for q in questions if q.id not in done]

    n_scored = n_errors = 0
    if todo:
        from tqdm.auto import tqdm

        cache = FrameCache(max_side, cache_dir=frame_cache)
        scorer = memory = None
        with PredictionWriter(pred) as writer, tqdm(total=len(todo), desc="PhaseFusion", unit="question",
                                                    disable=not progress) as bar:
            for q in todo:
                try:
                    decoded = _decode(q, cache, grids, origin_list, budget)
                except (VideoDecodeError, EvalInputError) as e:  # this question only: recorded, counted
                    writer.write([{"id": q.id, "kind": "error", "benchmark": q.benchmark, "video": str(q.video),
                                   "line": q.line, "error": str(e)}])
                    n_errors += 1
                    bar.update(1)
                    continue
                if scorer is None:  # loaded once the first video decodes: a bad manifest fails in seconds
                    scorer, memory = _load_scorer(model, adapter, dtype, batch_size, prefill, grids, budget)
                    info.update(device=str(scorer.device), model_dtype=str(scorer.dtype).replace("torch.", ""),
                                memory_kind=memory.kind, family=scorer.family.name if scorer.family else None)
                    write_json(info_path, info)
                writer.write(_score(q, decoded, scorer, n_orderings, memory))
                n_scored += 1
                bar.update(1)
    if n_scored or n_errors or not (out / METRICS).is_file():
        metrics = report(out)
    else:  # finished before: nothing scored, nothing to recompute
        metrics = json.loads((out / METRICS).read_text())
    return {"out": out, "n_questions": len(questions), "n_scored": n_scored, "n_errors": n_errors, "metrics": metrics}


# --------------------------------------------------------------------------- CLI


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = ("PhaseFusion (paper 001): score video multiple-choice questions over S phase-offset frame grids "
                     "and K option orderings, fuse the option posteriors, and report cost, accuracy and stability "
                     "per arm (Table 1 layout).")
    p.epilog = (
        "examples:\n"
        "  judgetrain build video-mcq --out data/vmcq --synthetic 12\n"
        "  judgetrain eval phasefusion --model quickstart/models/qwen3-vl --manifest data/vmcq/manifest.jsonl \\\n"
        "      --budget 4 --phases 2 --orderings 3 --arms single,fusion,vote,union,dense16 --out results/pf-tiny\n"
        "  judgetrain eval phasefusion --model Qwen/Qwen3-VL-8B-Instruct --manifest videomme.jsonl \\\n"
        "      --budget 8 --phases 3 --orderings 10 --arms single,fusion,vote,union,dense32 --origins 0,1/6 --out results/pf-q3\n"
        "  judgetrain eval phasefusion --report-only results/pf-q3     # metrics, report and plots from predictions.jsonl\n"
        "  judgetrain eval phasefusion --report-only results/pf-q3 --rerun-of results/pf-q3-again   # + the re-run floor\n"
    )
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--model", help="model folder or hub id (base or merged)")
    p.add_argument("--adapter", default=None, help="PEFT adapter folder to load onto --model")
    p.add_argument("--manifest", type=Path, help="video-MCQ manifest (JSON Lines; judgetrain build video-mcq writes one)")
    p.add_argument("--out", type=Path, help="run folder; rerunning the same command resumes it")
    p.add_argument("--budget", type=int, default=8, help="frames per grid, b (default 8)")
    p.add_argument("--phases", type=int, default=3, help="phase grids fused, S (default 3)")
    p.add_argument("--orderings", type=int, default=10, help="option orderings per question, the identity first (default 10)")
    p.add_argument("--arms", default=DEFAULT_ARMS,
                   help="comma-separated arms: single, fusion, fusion-geo, vote, union, dense<N>, left, midpoint, "
                        f"inclusive, fps1 (default {DEFAULT_ARMS})")
    p.add_argument("--origins", default=None,
                   help="grid origins in grid steps, e.g. 0,1/6 (default: 0 and the half-step shift 1/(2S))")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="score only the first N questions")
    p.add_argument("--batch-size", default="auto", help="frame grids per forward pass, or 'auto' (default)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16, float16 or auto (default: float32 on CPU, checkpoint's on GPU)")
    p.add_argument("--prefill", default="family",
                   help="text after the generation prompt: 'family' (the model family's, e.g. an empty think block for "
                        "reasoning checkpoints), 'none', or the literal text")
    p.add_argument("--max-side", type=int, default=360, help="resize frames so the longer side is at most this (default 360, App. A)")
    p.add_argument("--frame-cache", type=Path, default=None, help="folder to keep decoded frames in across runs")
    p.add_argument("--report-only", type=Path, default=None, metavar="RUN",
                   help="recompute metrics.json, report.md and plots of RUN from its predictions.jsonl, score nothing")
    p.add_argument("--rerun-of", type=Path, default=None, metavar="RUN2",
                   help="with --report-only: a second run of the same model, manifest and settings (another process or "
                        "machine); reports the re-run floor across the two runs")
    p.add_argument("--no-progress", action="store_true")


def _command(args: argparse.Namespace) -> str:
    parts = ["judgetrain", "eval", "phasefusion", "--model", str(args.model)]
    if args.adapter:
        parts += ["--adapter", str(args.adapter)]
    parts += ["--manifest", str(args.manifest), "--out", str(args.out), "--budget", str(args.budget),
              "--phases", str(args.phases), "--orderings", str(args.orderings), "--arms", args.arms]
    for flag, value, default in (("--origins", args.origins, None), ("--limit", args.limit, None),
                                 ("--batch-size", args.batch_size, "auto"), ("--dtype", args.dtype, None),
                                 ("--prefill", args.prefill, "family"), ("--max-side", args.max_side, 360),
                                 ("--frame-cache", args.frame_cache, None)):
        if value != default:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(x) for x in parts)


def main(args: argparse.Namespace) -> int:
    from .phasefusion_report import print_summary, report
    from .sharded import parse_batch_size  # the same --batch-size rule as every evaluation

    if args.report_only is not None:
        if not (args.report_only / PREDICTIONS).is_file():
            raise SystemExit(f"error: {args.report_only} holds no {PREDICTIONS}; pass the --out folder of a "
                             "judgetrain eval phasefusion run")
        metrics = report(args.report_only, rerun_of=args.rerun_of)
        print_summary(metrics, args.report_only)
        return 0
    if args.rerun_of is not None:
        raise SystemExit("error: --rerun-of goes with --report-only RUN (score both runs first)")
    missing = [f for f, v in (("--model", args.model), ("--manifest", args.manifest), ("--out", args.out)) if v is None]
    if missing:
        raise SystemExit(f"error: {', '.join(missing)} required (or --report-only RUN); see judgetrain eval phasefusion --help")
    try:  # flag values, checked before anything loads
        _check_sizes(args.budget, args.phases, args.orderings)
        parse_arms(args.arms, args.budget, args.phases)
        parse_origins(args.origins, args.phases)
        parse_batch_size(args.batch_size)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    result = evaluate(args.model, args.manifest, args.out, adapter=args.adapter, budget=args.budget, phases=args.phases,
                      n_orderings=args.orderings, arms=args.arms, origins=args.origins, limit=args.limit,
                      batch_size=parse_batch_size(args.batch_size), dtype=args.dtype, prefill=args.prefill,
                      max_side=args.max_side, frame_cache=args.frame_cache, progress=not args.no_progress,
                      command=_command(args))
    if result["n_scored"] == 0 and result["n_errors"] == 0:
        print("Nothing left to score: every question was already in predictions.jsonl.", flush=True)
    print_summary(result["metrics"], result["out"])
    return 0


if __name__ == "__main__":  # python -m judgetrain.eval.phasefusion ...
    import sys

    _parser = argparse.ArgumentParser(prog="judgetrain eval phasefusion")
    configure_parser(_parser)
    sys.exit(main(_parser.parse_args()))
