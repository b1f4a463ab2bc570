"""Batching: the batch size (fixed, or ``"auto"``: on CUDA the first batch holds one
item and its peak memory sets the size from the free memory, on CPU it is
:data:`CPU_BATCH_SIZE`) and the loop that runs a scoring or generation step over
batches in a given order (the engine's: longest first, :mod:`~judgetrain.scoring.lengths`),
halving the batch (then the continuation rows per pass) and retrying after an out-of-memory error.
A step that feeds continuation rows in passes of its own runs each pass under
:func:`continuation_pass`, which turns an out-of-memory error into :class:`ContinuationOutOfMemory`
carrying the pass's row count, so the loop knows what to halve.

accelerate's ``find_executable_batch_size`` is the same idea for one training loop: it retries
a whole function at one shrinking size and garbage-collects before every call. Here the loop
resumes at the batch that failed, keeps every finished result, and halves a second size (the
rows of a continuation pass) once the batch is down to one item.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

__all__ = [
    "CPU_BATCH_SIZE",
    "MAX_AUTO_BATCH_SIZE",
    "BatchSize",
    "Batcher",
    "ContinuationOutOfMemory",
    "continuation_pass",
    "run_batched",
]


logger = logging.getLogger(__name__)

# "auto" batch size on CPU (no free-memory probe there: throughput flattens
# early on CPU and RAM is rarely the limit for the models scored here).
CPU_BATCH_SIZE = 8
# Upper bound for the "auto" batch size on an accelerator.
MAX_AUTO_BATCH_SIZE = 64
# Fraction of free accelerator memory the "auto" batch size plans to use.
_AUTO_MEMORY_FRACTION = 0.8


BatchSize = int | Literal["auto"]


class ContinuationOutOfMemory(Exception):
    """Out of memory in one forward pass over ``rows`` continuation rows (raised from the
    device's ``torch.OutOfMemoryError``): :func:`run_batched` retries with fewer rows per pass."""

    def __init__(self, rows: int):
        super().__init__(f"out of memory in a pass over {rows} continuation row(s)")
        self.rows = rows


@contextmanager
def continuation_pass(rows: int) -> Iterator[None]:
    """Run one forward pass over ``rows`` continuation rows: its out-of-memory error becomes
    :class:`ContinuationOutOfMemory` (``rows``), raised from it."""
    import torch

    try:
        yield
    except torch.OutOfMemoryError as err:
        raise ContinuationOutOfMemory(rows) from err


class Batcher:
    """Batch size: fixed, or "auto" (CPU: CPU_BATCH_SIZE; CUDA: probe the first
    item's peak memory, size batches to the free memory, halve on out-of-memory)."""

    def __init__(self, spec: BatchSize, device: torch.device, n: int):
        if spec != "auto" and (isinstance(spec, bool) or not isinstance(spec, int) or spec < 1):
            raise ValueError(f"batch_size must be a positive int or 'auto', got {spec!r}")
        self.device = device
        self.cuda = device.type == "cuda"
        self.probe = spec == "auto" and self.cuda
        self.size = 1 if self.probe else (CPU_BATCH_SIZE if spec == "auto" else int(spec))
        self.size = max(1, min(self.size, n))
        self.rows: int | None = None  # cap on continuation rows per pass (set on OOM at size 1)
        self.spec = spec

    @contextmanager
    def measure(self) -> Iterator[None]:
        import torch

        if not self.probe:
            yield
            return
        dev = self.device
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        yield
        peak = max(torch.cuda.max_memory_allocated(dev) - before, 1)
        free, _ = torch.cuda.mem_get_info(dev)
        self.size = max(1, min(MAX_AUTO_BATCH_SIZE, int(_AUTO_MEMORY_FRACTION * free / peak)))
        self.probe = False
        logger.info("auto batch size: %d (%.0f MiB peak for one item, %.0f MiB free)", self.size, peak / 2**20, free / 2**20)

    def shrink(self, rows_in_batch: int) -> bool:
        """Halve after an out-of-memory error; False when nothing is left to halve."""
        self.probe = False
        if self.size > 1:
            self.size //= 2
        elif rows_in_batch > 1 and (self.rows is None or self.rows > 1):
            self.rows = max(1, (self.rows or rows_in_batch) // 2)
        else:
            return False
        logger.warning(
            "out of memory: retrying with batch size %d%s",
            self.size,
            f", {self.rows} continuation rows per pass" if self.rows else "",
        )
        return True


def run_batched(
    n: int,
    fn: Callable[[list[int], Batcher], list],
    batcher: Batcher,
    progress: bool,
    desc: str,
    order: Sequence[int] | None = None,
) -> list:
    """``fn(indices, batcher)`` over batches of ``order`` (default: input order; e.g.
    :func:`~judgetrain.scoring.lengths.longest_first`), results in input order."""
    import torch
    from tqdm.auto import tqdm

    results: list = [None] * n
    order = list(range(n)) if order is None else list(order)
    if sorted(order) != list(range(n)):
        raise ValueError(f"order must be a permutation of range({n})")
    i = 0
    with tqdm(total=n, desc=desc, unit="item", disable=not progress, leave=False) as bar:
        while i < n:
            idx = order[i : i + batcher.size]
            rows = 0  # > 0: out of memory, in a pass over this many continuation rows (1: the batch itself)
            try:
                with batcher.measure():
                    out = fn(idx, batcher)
            except ContinuationOutOfMemory as err:
                rows = err.rows
            except torch.OutOfMemoryError:
                rows = 1
            if rows:  # outside the except clause, so the error no longer holds the batch's tensors
                gc.collect()  # a traceback's frames can hold them in a reference cycle
                if batcher.cuda:
                    torch.cuda.empty_cache()
                if not batcher.shrink(rows):
                    raise torch.OutOfMemoryError(
                        f"{desc}: out of memory with one item per batch (items {i}..). Use a smaller dtype "
                        "(bfloat16), fewer or smaller images (min_pixels/max_pixels), or a larger device."
                    )
                continue
            for j, r in zip(idx, out, strict=True):
                results[j] = r
            i += len(idx)
            bar.update(len(idx))
    return results
