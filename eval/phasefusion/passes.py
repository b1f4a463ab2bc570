"""One PhaseFusion question's passes: score every grid of its decoded frames
(:func:`judgetrain.mcq.frames.decode_question`) under every option ordering, and measure
what that cost (latency, peak memory).

:func:`score_question` turns one question into its ``pass``, ``cost``
and closing ``question`` rows (that one with ``prompts``, the exact text scored per grid and
ordering, which ``judgetrain eval view`` shows; on the first
:data:`~judgetrain.mcq.frames.BATCH1_LINES` manifest lines also timing
Table S8's decoding + scoring at batch 1); :func:`load_scorer` loads and warms up the model. The run
loop that calls them is :mod:`judgetrain.eval.phasefusion`. Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from judgetrain.mcq.frames import Decoded
from judgetrain.mcq.views import LETTERS, Grid, mcq_prompt, orderings, to_content

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

__all__ = ["PeakMemory", "load_scorer", "score_question"]


# --------------------------------------------------------------------------- measuring cost


class PeakMemory:
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


# --------------------------------------------------------------------------- one question


def score_question(q: Any, decoded: Decoded, scorer: Any, n_orderings: int, memory: PeakMemory) -> list[dict[str, Any]]:
    """Every row of one question: passes and costs per (origin, grid), then the closing question row."""
    from judgetrain.scoring import PrefixGroup

    perms = orderings(q.id, len(q.options), n_orderings)
    letters = list(LETTERS[: len(q.options)])
    base = {"id": q.id, "benchmark": q.benchmark}
    rows: list[dict[str, Any]] = []
    for origin, grid, views in decoded.plan:
        groups = [
            PrefixGroup(
                [decoded.images[i] for i in view], [mcq_prompt(q.question, q.options, p, len(view)) for p in perms], letters
            )
            for view in views
        ]
        memory.reset()
        t0 = time.perf_counter()
        scores = scorer.score_shared_prefix(groups, progress=False)
        peak = memory.peak()  # synchronises CUDA before the clock stops
        latency = time.perf_counter() - t0
        batch1 = {}
        if grid.name in decoded.batch1_decode_s and origin == decoded.plan[0][0]:
            batch1 = {
                "batch1_decode_s": decoded.batch1_decode_s[grid.name],
                "batch1_score_s": _time_batch1(q, views, decoded.images, scorer, perms[0], letters),
            }
        for s, (view, per_ordering) in enumerate(zip(views, scores, strict=True)):
            for k, (perm, sc) in enumerate(zip(perms, per_ordering, strict=True)):
                posterior = to_content(sc.probs, perm)
                pred = int(np.argmax(posterior))
                rows.append(
                    {
                        **base,
                        "kind": "pass",
                        "origin": str(origin),
                        "grid": grid.name,
                        "phase": s,
                        "ordering": k,
                        "perm": perm,
                        "frames": view,
                        "letter_probs": [float(x) for x in sc.probs],
                        "posterior": posterior,
                        "pred": pred,
                        "answer": q.answer,
                        "correct": pred == q.answer,
                    }
                )
        rows.append(
            {
                **base,
                "kind": "cost",
                "origin": str(origin),
                "grid": grid.name,
                "views": grid.views,
                "budget": grid.budget,
                "attention_units": grid.attention_units,
                "passes": len(views) * len(perms),
                "latency_s": latency,
                "peak_memory_bytes": peak,
                "memory_kind": memory.kind,
                **batch1,
            }
        )
    # what `eval view` shows of the question: the exact text scored under each grid and ordering (its frames are
    # the pass rows' `frames`, indices into the row's `video`)
    prompts = {
        grid.name: [scorer.render(mcq_prompt(q.question, q.options, p, len(views[0]))) for p in perms]
        for _, grid, views in decoded.plan
        if views
    }
    rows.append({**decoded.row, "prompts": prompts})
    return rows


def _time_batch1(
    q: Any, views: list[list[int]], images: dict[int, Any], scorer: Any, identity: list[int], letters: list[str]
) -> float:
    """Seconds to score each view alone at the identity ordering, one forward pass after
    another (batch 1, serial: Table S8's setting)."""
    from judgetrain.scoring import PrefixGroup

    t0 = time.perf_counter()
    for view in views:
        scorer.score_shared_prefix(
            [PrefixGroup([images[i] for i in view], [mcq_prompt(q.question, q.options, identity, len(view))], letters)],
            progress=False,
        )
    return time.perf_counter() - t0


def _warm_up(scorer: Any, budget: int) -> None:
    """One untimed pass on blank frames, so one-off start-up costs (kernel selection, lazy
    initialisation) are not charged to the first arm measured."""
    from PIL import Image

    from judgetrain.scoring import PrefixGroup

    frames = [Image.new("RGB", (64, 48), (128, 128, 128)) for _ in range(budget)]
    prompts = [mcq_prompt("Which option?", ["yes", "no"], p, budget) for p in ([0, 1], [1, 0])]
    scorer.score_shared_prefix([PrefixGroup(frames, prompts, ["A", "B"])], progress=False)


def load_scorer(
    model: str,
    adapter: str | None,
    dtype: str | None,
    batch_size: BatchSize,
    prefill: str,
    grids: dict[str, Grid],
    budget: int,
    device: str | None = None,
) -> tuple[Any, PeakMemory]:
    """The scorer (warmed up, batching a question's phase grids together under ``"auto"``)
    and the peak-memory meter of its device. ``prefill``: ``"family"``, ``"none"`` or literal text;
    ``device``: this process's device under a multi-process launch (``None``: CUDA when available)."""
    from judgetrain.scoring import FAMILY_PREFILL, Scorer

    pre: Any = FAMILY_PREFILL if prefill == "family" else (None if prefill == "none" else prefill)
    # A grid family is one scoring call of at most S frame grids: "auto" batches all of them
    # together (the engine halves the batch on out-of-memory).
    groups_per_pass = max(g.views for g in grids.values()) if batch_size == "auto" else batch_size
    scorer = Scorer.from_pretrained(
        model, adapter, dtype=dtype, device=device, batch_size=groups_per_pass, prefill=pre, progress=False
    )
    _warm_up(scorer, budget)
    return scorer, PeakMemory(scorer.device)
