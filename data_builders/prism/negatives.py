"""PRISM's negatives: the perturbed copies of a gold sequence (semantic outliers of
Types 1–3, consecutive and non-consecutive swaps, a shuffle), each drawn from a
generator seeded by (seed, kind, source, id) through hashlib; positions are 0-based.
Docs: "concepts/prism-mirage.md" (the negatives table)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from judgetrain import records
from judgetrain.seeding import rng_for

from ..procedures import Procedure

SEMANTIC, TEMPORAL = records.SEMANTIC, records.TEMPORAL
PERTURBATIONS = SEMANTIC + TEMPORAL
DEFAULT_NONCONSECUTIVE = 2
SHUFFLE_MIN_MOVED = 3


@dataclass(frozen=True)
class OutlierImage:
    """An out-of-context image: step ``step`` (0-based) of another procedure."""

    procedure_id: str
    step: int
    category: str
    image: str


@dataclass(frozen=True)
class Variant:
    """A gold sequence or one of its negatives, as shown.

    ``order[p]`` is the gold step (0-based) shown at position ``p``, or None
    where an out-of-context image (``outliers``, keyed by position) stands.
    ``position`` is the first touched position (-1 for the gold), ``positions``
    every touched one, ascending; ``key`` names the variant uniquely within its
    gold sequence (``"gold"``, ``"semantic-1@2"``, ``"swap@0-1"``, ``"shuffle"``…)."""

    perturbation: str
    key: str
    order: tuple[int | None, ...]
    position: int = -1
    positions: tuple[int, ...] = ()
    outliers: tuple[tuple[int, OutlierImage], ...] = ()

    @property
    def subset(self) -> str:
        return "gold" if self.perturbation == "none" else "semantic" if self.perturbation in SEMANTIC else "temporal"

    def images(self, gold_images: Sequence) -> list:
        """The images shown, given the gold sequence's images (outliers by their path)."""
        extra = dict(self.outliers)
        return [gold_images[g] if g is not None else extra[p].image for p, g in enumerate(self.order)]


def gold_variant(n: int) -> Variant:
    return Variant("none", "gold", tuple(range(n)))


def consecutive_swaps(n: int) -> list[Variant]:
    """Every consecutive swap (i, i+1), i = 0…n−2."""
    out = []
    for i in range(n - 1):
        order = list(range(n))
        order[i], order[i + 1] = order[i + 1], order[i]
        out.append(Variant("swap", f"swap@{i}-{i + 1}", tuple(order), i, (i, i + 1)))
    return out


def nonconsecutive_swaps(n: int, count: int, rng: np.random.Generator) -> list[Variant]:
    """``min(count, #pairs)`` distinct swaps (i, j) with j − i ≥ 2, drawn uniformly
    without replacement from all such pairs; returned in (i, j) order."""
    pairs = [(i, j) for i in range(n) for j in range(i + 2, n)]
    picked = sorted(pairs[k] for k in rng.choice(len(pairs), size=min(count, len(pairs)), replace=False)) if pairs else []
    out = []
    for i, j in picked:
        order = list(range(n))
        order[i], order[j] = order[j], order[i]
        out.append(Variant("swap-nonconsecutive", f"swap-nonconsecutive@{i}-{j}", tuple(order), i, (i, j)))
    return out


def shuffle_variant(n: int, rng: np.random.Generator, min_moved: int = SHUFFLE_MIN_MOVED) -> Variant:
    """A uniform random permutation, redrawn until at least ``min_moved`` frames
    leave their place (so never the identity and never a single swap)."""
    if n < min_moved:
        raise ValueError(f"a shuffle that moves {min_moved} frames needs at least {min_moved} frames, got {n}")
    while True:
        order = [int(x) for x in rng.permutation(n)]
        moved = tuple(p for p, g in enumerate(order) if p != g)
        if len(moved) >= min_moved:
            return Variant("shuffle", "shuffle", tuple(order), moved[0], moved)


def semantic_variants(n: int, k: int, pool: Sequence[OutlierImage], rng: np.random.Generator) -> list[Variant]:
    """Type k semantic outliers. k = 1: one variant per position 0…n−1, each with
    an image drawn uniformly from ``pool``; k ≥ 2: one variant, k distinct
    positions and k distinct pool images, drawn uniformly."""
    if not pool:
        raise ValueError("no out-of-context images to draw from (the pool is empty)")
    picks: list[tuple[tuple[int, ...], tuple[int, ...]]]
    if k == 1:
        picks = [((p,), (int(rng.integers(len(pool))),)) for p in range(n)]
    else:
        if len(pool) < k or n < k:
            raise ValueError(f"semantic-{k} needs {k} frames and {k} distinct out-of-context images (have {n} and {len(pool)})")
        positions = tuple(sorted(int(p) for p in rng.choice(n, size=k, replace=False)))
        picks = [(positions, tuple(int(i) for i in rng.choice(len(pool), size=k, replace=False)))]
    out = []
    for positions, images in picks:
        order = tuple(None if p in positions else p for p in range(n))
        outliers = tuple((p, pool[i]) for p, i in zip(positions, images, strict=True))
        key = f"semantic-{k}@{','.join(map(str, positions))}"
        out.append(Variant(f"semantic-{k}", key, order, positions[0], positions, outliers))
    return out


def outlier_pool(gold: Procedure, candidates: Iterable[Procedure]) -> list[OutlierImage]:
    """Every step image of the ``candidates`` of another category than ``gold``, in (id, step) order."""
    pool = []
    for proc in sorted(candidates, key=lambda p: p.id):
        if proc.category != gold.category:
            pool += [OutlierImage(proc.id, k, proc.category, str(s.image)) for k, s in enumerate(proc.steps)]
    return pool


def make_negatives(
    gold: Procedure,
    pool: Sequence[OutlierImage],
    *,
    seed: int,
    perturbations: Sequence[str] = PERTURBATIONS,
    nonconsecutive: int = DEFAULT_NONCONSECUTIVE,
) -> list[Variant]:
    """Every negative of ``gold`` (in :data:`PERTURBATIONS` order), each kind drawn
    from its own generator seeded by (seed, kind, source, id)."""
    n, out = gold.n, []

    def rng(kind: str) -> np.random.Generator:
        return rng_for(seed, "prism", kind, gold.source, gold.id)

    for kind in PERTURBATIONS:
        if kind not in perturbations:
            continue
        if kind in SEMANTIC:
            out += semantic_variants(n, int(kind[-1]), pool, rng(kind))
        elif kind == "swap":
            out += consecutive_swaps(n)
        elif kind == "swap-nonconsecutive":
            out += nonconsecutive_swaps(n, nonconsecutive, rng(kind))
        else:
            out.append(shuffle_variant(n, rng(kind)))
    return out
