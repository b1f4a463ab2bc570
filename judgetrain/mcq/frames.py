"""A video multiple-choice question's frames: every grid planned at every origin, and the
union of their frames decoded in one pass (paper 001 §2, Table S8's decoding cost).

``judgetrain eval phasefusion`` scores the decoded views; ``judgetrain build
consistency-views`` saves them as training records, so both decode the same frames.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from judgetrain.mcq.manifest import ManifestError
from judgetrain.mcq.views import Grid

__all__ = ["BATCH1_LINES", "Decoded", "decode_question"]

# Paper 001 Table S8 times 100 questions at batch 1: questions on the manifest's first 100
# lines get that timing too (it re-decodes and re-scores, so it is not done for every question).
BATCH1_LINES = 100


@dataclass
class Decoded:
    """One question's frames: the plan of (origin, grid, views) and every frame it needs, decoded once."""

    plan: list[tuple[Fraction, Grid, list[list[int]]]]
    images: dict[int, Any]
    row: dict[str, Any]  # the question's closing row (its facts and the decoding cost)
    # per grid, seconds to decode its first-origin frames alone (Table S8's batch-1 timing)
    batch1_decode_s: dict[str, float] = field(default_factory=dict)


def decode_question(
    q: Any, cache: Any, grids: dict[str, Grid], origins: list[Fraction], budget: int, latency_lines: int = BATCH1_LINES
) -> Decoded:
    """Probe the video, plan every grid at every origin and decode the union of their frames
    in one pass (origin-free samplers only at the first origin). On the manifest's first
    ``latency_lines`` lines each grid is also decoded alone, for the batch-1 timing."""
    from PIL import Image

    from judgetrain.video import probe, segment_frames

    info = probe(q.video)
    try:  # a bounded question (MVBench's start/end) is sampled inside its segment
        lo, hi = segment_frames(info.n_frames, info.fps, q.start, q.end)
    except ValueError as err:
        raise ManifestError(f"question {q.id} (manifest line {q.line}): {err}") from None
    plan = [
        (origin, grid, [[lo + i for i in view] for view in grid.indices(hi - lo + 1, info.fps, origin, budget)])
        for k, origin in enumerate(origins)
        for grid in grids.values()
        if not (grid.origin_free and k > 0)
    ]
    wanted = sorted({i for _, _, views in plan for view in views for i in view})
    decodes_before = cache.decodes
    t0 = time.perf_counter()
    frames = cache.get(q.video, wanted)
    decode_s = time.perf_counter() - t0
    batch1 = _time_grid_decodes(q, plan, cache.max_side) if 0 < getattr(q, "line", 0) <= latency_lines else {}
    row = {
        "id": q.id,
        "benchmark": q.benchmark,
        "kind": "question",
        "answer": q.answer,
        "n_options": len(q.options),
        "options": list(q.options),
        "question": q.question,
        "video": str(q.video),
        "n_frames": info.n_frames,
        "segment_frames": [lo, hi],
        "fps": info.fps,
        "duration": q.duration if q.duration is not None else info.duration_s,
        "decode_s": decode_s,
        "decoded_frames": len(wanted),
        "decode_passes": cache.decodes - decodes_before,
        "batch1_timing_decodes": len(batch1),
    }
    return Decoded(plan, {i: Image.fromarray(a) for i, a in zip(wanted, frames, strict=True)}, row, batch1)


def _time_grid_decodes(q: Any, plan: list[tuple[Fraction, Grid, list[list[int]]]], max_side: int | None) -> dict[str, float]:
    """Seconds to decode each grid's first-origin frames from the video by themselves, as a
    harness scoring only that arm would (the frames are thrown away: the run uses the shared decode)."""
    from PIL import Image

    from judgetrain.video import decode_frames

    first = plan[0][0]
    out = {}
    for origin, grid, views in plan:
        if origin != first:
            continue
        t0 = time.perf_counter()
        [Image.fromarray(a) for a in decode_frames(q.video, sorted({i for v in views for i in v}), max_side=max_side)]
        out[grid.name] = time.perf_counter() - t0
    return out
