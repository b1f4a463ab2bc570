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

Configuration: :class:`PhaseFusionConfig` (every field a ``--flag`` and a
``--config`` YAML key). ``run.json`` (:func:`judgetrain.eval.runs.run_info`) records
it with an identity block — the fields that change results (model, adapter, dtype,
budget, phases, orderings, arms, origins, prefill, max_side) and the manifest's
sha256 — and is written only once the manifest and the model have loaded. A rerun
into the same folder resumes when the identity is the same (a larger ``--limit``
extends the run, a smaller one restricts the metrics to the questions it selects);
otherwise it is refused, naming each differing field, unless ``--overwrite``.

Results: ``predictions.jsonl`` holds per question one ``pass`` row per (origin,
grid, phase, ordering) with the letter and content-space posteriors, one
``cost`` row per (origin, grid), and a closing ``question`` row; the rows of a
question are written and fsync'd together, so a killed run resumes at the first
question without its closing row. ``metrics.json``, ``report.md`` (paper 001
Table 1 layout) and the plots come from those rows alone
(:mod:`judgetrain.eval.phasefusion_report`; ``judgetrain eval report RUN``).
"""

from __future__ import annotations

import json
import os
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from judgetrain.config import ConfigError, EvalArgs, arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.io import write_rows
from judgetrain.seeding import rng_for
from judgetrain.video import SAMPLERS, parse_fraction, phase_indices, sampler_indices

from .runs import METRICS, PREDICTIONS, EvalInputError, PredictionsError, PredictionWriter, check_resume, \
    file_identity, finish_run, read_predictions, repair_predictions, run_info, write_run_info

__all__ = [
    "DEFAULT_ARMS",
    "INSTRUCTION",
    "LETTERS",
    "Arm",
    "Grid",
    "PhaseFusionConfig",
    "evaluate",
    "inverse_permutation",
    "main",
    "make_parser",
    "mcq_prompt",
    "ordering_permutation",
    "orderings",
    "parse_arms",
    "parse_origins",
    "pool",
    "run",
    "to_content",
]

EVALUATION = "phasefusion"
LETTERS = string.ascii_uppercase
DEFAULT_ARMS = "single,fusion,vote,union,dense32"
PREAMBLE = "Select the best answer to the following multiple-choice question based on the video frames."
# Paper 001 App. A: "the instruction requests the option letter only".
INSTRUCTION = "Answer with the option's letter from the given choices directly."
# What run.json records of the device the model ran on (kept from the first run when a rerun loads no model).
_DEVICE_KEYS = ("device", "model_dtype", "memory_kind", "family")


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


def _check_sizes(budget: int, phases: int, n_orderings: int) -> list[str]:
    """One problem per size below 1, naming the field."""
    return [f"{name}: must be >= 1, got {value}" for name, value in
            (("budget", budget), ("phases", phases), ("orderings", n_orderings)) if value < 1]


def _origin_parts(spec: Any) -> list[Any] | None:
    """``--origins`` as given (``"0,1/6"``, ``["0", "1/6"]``, ``[0, 0.25]``) as one list of
    values, comma-separated words split; numbers and fractions are kept as they are (a
    float such as ``1 / 6`` is read by :func:`~judgetrain.video.parse_fraction`)."""
    if spec is None:
        return None
    items = [spec] if isinstance(spec, (str, int, float, Fraction)) else list(spec)
    out: list[Any] = []
    for x in items:
        out += [p.strip() for p in x.split(",") if p.strip()] if isinstance(x, str) else [x]
    return out


@dataclass(kw_only=True)
class PhaseFusionConfig(EvalArgs):
    """``judgetrain eval phasefusion``: every field is a flag (``--field-name``) and a ``--config`` key.

    Fields marked identity (model, adapter, dtype, budget, phases, orderings, arms,
    origins, prefill, max_side) and the manifest's sha256 are what a run folder must
    agree on to resume. ``arms`` and ``origins`` are normalised here (``origins``
    ``None`` becomes its default, ``0`` and ``1/(2S)``), so equal settings written
    differently are the same run."""

    manifest: Path = arg(help="video-MCQ manifest (JSON Lines; `judgetrain build video-mcq` writes one); its sha256 "
                              "is part of the run's identity")
    budget: int = arg(8, "frames per grid, b", identity=True)
    phases: int = arg(3, "phase grids fused, S", identity=True)
    orderings: int = arg(10, "option orderings per question, K (the identity first)", identity=True)
    arms: list[str] = arg(DEFAULT_ARMS.split(","), "arms to score (space- or comma-separated): single, fusion, "
                          "fusion-geo, vote, union, dense<N> (e.g. dense32), and the samplers left, midpoint, "
                          "inclusive, fps1", identity=True)
    origins: list[str] | None = arg(None, "grid origins in steps of the b-frame grid, each in [0, 1) (space- or "
                                          "comma-separated, e.g. 0,1/6; default: 0 and the half-step shift 1/(2S))",
                                    identity=True)
    prefill: str = arg("family", "text after the generation prompt: 'family' (the model family's, e.g. an empty think "
                                 "block for reasoning checkpoints), 'none', or the literal text", identity=True)
    max_side: int | None = arg(360, "resize frames so the longer side is at most this many pixels (App. A; null in "
                                    "a --config file: as decoded)", identity=True)
    frame_cache: Path | None = arg(None, "folder to keep decoded frames in across runs (keyed by video and max_side)")
    batch_size: str = arg("auto", "frame grids per forward pass, or 'auto' (a question's S phase grids in one batch)")
    limit: int | None = arg(None, "score only the first N questions of the manifest (a larger N later extends the "
                                  "run; a smaller one restricts the metrics to those N)")

    def __post_init__(self) -> None:
        common = self.common_problems()  # listed after this command's own
        self.manifest = Path(self.manifest)
        self.frame_cache = Path(self.frame_cache) if self.frame_cache else None
        self.arms = comma_list(self.arms)
        problems = _check_sizes(self.budget, self.phases, self.orderings)
        try:
            arms, _ = parse_arms(self.arms, self.budget, self.phases)
            self.arms = [a.name for a in arms]
        except ValueError as e:
            problems.append(f"arms: {e}")
        try:
            self.origins = [str(o) for o in parse_origins(_origin_parts(self.origins), max(self.phases, 1))]
        except ValueError as e:
            problems.append(f"origins: {e}")
        if self.max_side is not None and self.max_side < 1:
            problems.append(f"max_side: must be >= 1 pixel, got {self.max_side}")
        problems += common
        if problems:
            raise ConfigError(problems, "eval phasefusion configuration")


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


def evaluate(model: str, manifest: str | os.PathLike, out: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Score the manifest's questions under every arm, origin and ordering into run folder
    ``out``; ``fields`` are the other :class:`PhaseFusionConfig` fields (``n_orderings=`` is
    still read as ``orderings=``). See :func:`run`."""
    if "n_orderings" in fields:
        if "orderings" in fields:
            raise TypeError("evaluate() got both orderings= and its old name n_orderings=; pass orderings= only")
        fields["orderings"] = fields.pop("n_orderings")
    fields.pop("command", None)  # run.json records the command line itself
    return run(PhaseFusionConfig(model=str(model), manifest=manifest, out=out, **fields))


class _RunFolder:
    """The run folder, opened for writing once the run is real (manifest and model loaded,
    or nothing left that needs the model): the old run is replaced (``--overwrite``) or
    resumed, ``run.json`` written, and prediction rows appended from then on."""

    def __init__(self, cfg: PhaseFusionConfig, info: dict[str, Any], old: dict[str, Any] | None):
        self.cfg, self.info, self.old = cfg, info, old
        self.writer: PredictionWriter | None = None
        self.pending: list[dict[str, Any]] = []  # rows of questions that failed before the run began

    def begin(self, device: dict[str, Any] | None) -> None:
        if self.writer is not None:
            return
        old = check_resume(self.cfg.out, self.info, overwrite=self.cfg.overwrite)  # clears a replaced run
        if device is None:  # no model loaded in this call: what the first run learnt of the device stays
            device = {k: old[k] for k in _DEVICE_KEYS if k in old}
        self.info.update(device)
        if old.get("rerun_of"):  # `eval report --rerun-of`: later reports keep the comparison
            self.info["rerun_of"] = old["rerun_of"]
        self.info = write_run_info(self.cfg.out, self.info, old)
        self.writer = PredictionWriter(self.cfg.out / PREDICTIONS)
        self.write(self.pending)
        self.pending = []

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self.writer is None:
            self.pending += rows
        elif rows:
            self.writer.write(rows)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _resumable(out: Path, info: dict[str, Any], overwrite: bool) -> dict[str, Any] | None:
    """The run.json this run resumes (``{}`` for a new folder), or ``None`` when ``--overwrite``
    will replace the folder's run (only once this run is real). A folder holding another
    run is refused here, before anything loads."""
    try:
        return check_resume(out, info)
    except PredictionsError:
        if not overwrite:
            raise
        return None


def run(cfg: PhaseFusionConfig) -> dict[str, Any]:
    """Score the questions ``cfg`` selects under every arm, origin and ordering into ``cfg.out``.

    Resumable: questions whose rows are complete in ``out/predictions.jsonl`` are
    skipped; a folder holding a run of another identity (settings marked identity, the
    manifest's content, the model, the adapter) is refused, naming what differs, unless
    ``cfg.overwrite``. ``run.json`` is written once the manifest and the model have
    loaded, so a run that fails before that leaves the folder as it was. A question
    whose video cannot be decoded gets an ``error`` row (counted in ``metrics.json``)
    and is retried on the next run. ``cfg.prefill``: ``"family"`` (the model family's,
    e.g. an empty think block for reasoning checkpoints), ``"none"``, or literal text.
    Returns ``{"out", "n_questions", "n_scored", "n_errors", "metrics"}``
    (``n_questions``: the questions selected).
    """
    from judgetrain.mcq_manifest import load_manifest
    from judgetrain.video import FrameCache, VideoDecodeError

    from .phasefusion_report import report
    from .sharded import parse_batch_size

    _, grids = parse_arms(cfg.arms, cfg.budget, cfg.phases)
    origin_list = parse_origins(cfg.origins, cfg.phases)
    out = cfg.out
    questions = load_manifest(cfg.manifest)  # a bad manifest fails here, naming file:line: field
    if cfg.limit is not None:
        questions = questions[:cfg.limit]
    # the manifest's bytes: one rewritten in place is other data, never mixed with its old predictions
    info = run_info(EVALUATION, cfg, data={"sha256": file_identity(cfg.manifest)}, items=[q.id for q in questions])
    info["manifest"] = str(cfg.manifest.resolve())
    old = _resumable(out, info, cfg.overwrite)
    done = _done_and_clean(out / PREDICTIONS) if old else set()
    todo = [q for q in questions if q.id not in done]

    folder = _RunFolder(cfg, info, old)
    n_scored = n_errors = 0
    try:
        if todo:
            from tqdm.auto import tqdm

            cache = FrameCache(cfg.max_side, cache_dir=cfg.frame_cache)
            scorer = memory = None
            with tqdm(total=len(todo), desc="PhaseFusion", unit="question", disable=not cfg.progress) as bar:
                for q in todo:
                    try:
                        decoded = _decode(q, cache, grids, origin_list, cfg.budget)
                    except (VideoDecodeError, EvalInputError) as e:  # this question only: recorded, counted
                        folder.write([{"id": q.id, "kind": "error", "benchmark": q.benchmark, "video": str(q.video),
                                       "line": q.line, "error": str(e)}])
                        n_errors += 1
                        bar.update(1)
                        continue
                    if scorer is None:  # loaded once the first video decodes: a bad manifest fails in seconds
                        scorer, memory = _load_scorer(cfg.model, cfg.adapter, cfg.dtype,
                                                      parse_batch_size(cfg.batch_size), cfg.prefill, grids, cfg.budget)
                        folder.begin({"device": str(scorer.device),
                                      "model_dtype": str(scorer.dtype).replace("torch.", ""),
                                      "memory_kind": memory.kind,
                                      "family": scorer.family.name if scorer.family else None})
                    folder.write(_score(q, decoded, scorer, cfg.orderings, memory))
                    n_scored += 1
                    bar.update(1)
        folder.begin(None)  # no model was needed: every question done before, or no video decoded
    finally:
        folder.close()
    changed = (old or {}).get("items") != info["items"]
    if n_scored or n_errors or changed or not (out / METRICS).is_file():
        metrics = report(out)
    else:  # finished before: nothing scored, nothing to recompute
        metrics = json.loads((out / METRICS).read_text())
    finish_run(out)
    return {"out": out, "n_questions": len(questions), "n_scored": n_scored, "n_errors": n_errors, "metrics": metrics}


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        PhaseFusionConfig, "judgetrain eval phasefusion",
        "PhaseFusion (paper 001): score video multiple-choice questions over S phase-offset frame grids and K option "
        "orderings, fuse the option posteriors, and report cost, accuracy and stability per arm (Table 1 layout).",
        "examples:\n"
        "  judgetrain build video-mcq --out data/vmcq-12 --synthetic 12\n"
        "  judgetrain eval phasefusion --model quickstart/models/qwen3-vl --manifest data/vmcq-12/manifest.jsonl \\\n"
        "      --budget 4 --phases 2 --orderings 3 --arms single,fusion,vote,union,dense16 --out results/pf-tiny\n"
        "  judgetrain eval phasefusion --model Qwen/Qwen3-VL-8B-Instruct --manifest videomme.jsonl \\\n"
        "      --budget 8 --phases 3 --orderings 10 --arms single,fusion,vote,union,dense32 --origins 0,1/6 --out results/pf-q3\n"
        "  judgetrain eval phasefusion --config pf.yaml --limit 50    # YAML keys are the fields below; flags win\n"
        "  judgetrain eval report results/pf-q3     # metrics, report and plots again, from predictions.jsonl\n"
        "  judgetrain eval report results/pf-q3 --rerun-of results/pf-q3-again   # + the re-run floor across two runs\n")


def main(cfg: PhaseFusionConfig) -> int:
    from .phasefusion_report import print_summary

    result = run(cfg)
    if result["n_scored"] == 0 and result["n_errors"] == 0:
        print("Nothing left to score: every selected question was already in predictions.jsonl.", flush=True)
    print_summary(result["metrics"], result["out"])
    return 0


if __name__ == "__main__":  # python -m judgetrain.eval.phasefusion ...
    from .sharded import run_as_module

    run_as_module("judgetrain.eval.phasefusion")
