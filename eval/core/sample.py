"""``--sample N``: a seeded sample of an evaluation's selected items, stratified so a smoke
test of a few items still sees every kind of item the set holds (``--limit N`` keeps the
first N in dataset order, which on a built set is often one task of one source).

The sample is the first N of one seeded order of every selected item, nested by the strata's
levels (:func:`stratified_order`): every task before a second item of one, within a task
every source, within a source every layout, within a layout every perturbation, and beyond
that each in proportion to its size. A larger N therefore extends a run made with a smaller
one, as ``--limit`` does, and the same items, seed and N give the same sample on any machine
(``random.Random`` seeded from a string, which hashes with SHA-512).
Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

__all__ = ["SAMPLE_STRATA", "sample_identity", "sampled", "stratified_order"]

# what a judge or TimeCatch record is stratified by (a PhaseFusion question: its benchmark and answer letter)
SAMPLE_STRATA = ("task", "source", "layout", "perturbation")


def stratified_order(strata: Sequence[tuple[Hashable, ...]], seed: int) -> list[int]:
    """Positions ``0..len(strata)-1`` in the order ``--sample`` takes them. ``strata[i]`` is item
    ``i``'s key, coarsest level first (task, source, layout, perturbation). Level by level, the
    groups' own orders are merged by rank over group size, rank 0 of every group first (groups in a
    seeded order): any prefix holds every task before a second item of one, then within each task
    every source, and so on down, and beyond that each group in proportion to its size. The items of
    one full key are shuffled by ``seed``."""
    return _order(list(range(len(strata))), strata, 0, seed)


def _order(items: list[int], strata: Sequence[tuple[Hashable, ...]], level: int, seed: int) -> list[int]:
    path = repr(strata[items[0]][:level]) if items else ""
    if not items or level == len(strata[items[0]]):
        random.Random(f"judgetrain-sample:{seed}:{path}").shuffle(items)
        return items
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for pos in items:
        groups[strata[pos][level]].append(pos)
    names = sorted(groups, key=repr)  # a stable order to shuffle, whatever order the items came in
    random.Random(f"judgetrain-sample:{seed}:{path}:groups").shuffle(names)
    keyed = []
    for turn, name in enumerate(names):
        group = _order(groups[name], strata, level + 1, seed)
        keyed += [(rank / len(group), turn, pos) for rank, pos in enumerate(group)]
    return [pos for _, _, pos in sorted(keyed)]


def sampled(idx: Sequence[int], strata: Sequence[tuple[Hashable, ...]], n: int, seed: int) -> list[int]:
    """The ``n`` items of ``idx`` (dataset positions, one stratum key each in ``strata``) that
    ``--sample n`` evaluates, in dataset order; all of them when ``n`` is not smaller."""
    if len(idx) != len(strata):
        raise ValueError(f"sampled: {len(idx)} items but {len(strata)} strata keys")
    take = stratified_order(strata, seed)[:n]
    return sorted(idx[p] for p in take)


def sample_identity(cfg: Any, strata: Sequence[str] = SAMPLE_STRATA) -> dict[str, Any] | None:
    """What a sampled run's identity records of its sampling (the seed and the strata; not N, which a
    later run may raise to extend it); ``None`` for a run without ``--sample``."""
    if getattr(cfg, "sample", None) is None:
        return None
    return {"seed": int(cfg.sample_seed), "strata": list(strata)}
