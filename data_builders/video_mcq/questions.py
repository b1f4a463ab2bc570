"""The synthetic physics questions of ``judgetrain build video-mcq --synthetic``: from one
simulated clip (:class:`~judgetrain.data_builders.synthetic.PhysicsRun`), a question of each
type whose answer follows from the event log and positions, or None when the clip leaves it
ambiguous (see :func:`draft_question`). Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations, pairwise

import numpy as np

__all__ = ["FASTEST_RATIO", "LEFTMOST_GAP", "MOST_BOUNCES_LEAD", "QTYPES", "QUESTIONS", "Draft", "draft_question", "n_objects"]

QTYPES = ("first_collision", "most_bounces", "fastest", "leftmost_end", "collision_count")
QUESTIONS = {
    "first_collision": "Which two objects collide with each other first?",
    "most_bounces": "Which object bounces off the floor the most times?",
    "fastest": "Which object moves fastest on average over the whole video?",
    "leftmost_end": "Which object is farthest to the left at the end of the video?",
    "collision_count": "How many times do the {a} and the {b} collide with each other?",
}
FASTEST_RATIO = 1.1  # the fastest object travels >= 10 % farther than the next
MOST_BOUNCES_LEAD = 2  # the most-bouncing object bounces at least twice more than the next
LEFTMOST_GAP = 0.3  # world units (~ one object radius) in every frame of the last second


@dataclass(frozen=True)
class Draft:
    """One question before it becomes a manifest row: options in shown order, gold index, deciding times."""

    options: tuple[str, ...]
    answer: int
    evidence_s: tuple[float, ...]
    question: str | None = None  # None: the type's fixed question


def _obj(name: str) -> str:
    return f"The {name}"


def _pair(a: str, b: str) -> str:
    return f"The {a} and the {b}"


def _place(
    gold: str, primary: Sequence[str], secondary: Sequence[str], k: int, pos: int, rng: np.random.Generator
) -> tuple[str, ...] | None:
    """Gold at ``pos`` among ``k`` options; distractors drawn from ``primary`` first, then ``secondary``."""
    pool = [primary[i] for i in rng.permutation(len(primary))] + [secondary[i] for i in rng.permutation(len(secondary))]
    if len(pool) < k - 1:
        return None
    picked = pool[: k - 1]
    picked = [picked[i] for i in rng.permutation(len(picked))]
    return tuple(picked[:pos] + [gold] + picked[pos:])


def _event_times(run, kind: str) -> dict[tuple[str, ...], list[float]]:
    """Times of every ``kind`` event per object (bounce) or per pair (collision), in time order."""
    times: dict[tuple[str, ...], list[float]] = {}
    for e in run.events:
        if e.kind == kind:
            times.setdefault((e.a, e.b) if kind == "collision" else (e.a,), []).append(e.time_s)
    return times


def _episodes(times: Sequence[float], min_gap: float) -> list[float]:
    """Start times of contact episodes: a pair touching again within ``min_gap`` of its
    previous touch is still in the same collision as far as a viewer can tell."""
    starts: list[float] = []
    for prev, t in pairwise([-math.inf, *times]):
        if t - prev >= min_gap:
            starts.append(t)
    return starts


def _pairs(run) -> list[tuple[str, str]]:
    return list(combinations(run.names, 2))  # scene order, as the simulator names collisions


def _first_collision(run, k, pos, rng, min_gap):
    """Gold: the pair that touches first, at least ``min_gap`` ahead of any other pair's first
    touch; distractors: pairs colliding later first, then pairs that never collide."""
    first = {pair: ts[0] for pair, ts in _event_times(run, "collision").items()}
    if not first:
        return None
    ranked = sorted(first, key=first.get)
    if len(ranked) > 1 and first[ranked[1]] - first[ranked[0]] < min_gap:
        return None
    never = [_pair(*p) for p in _pairs(run) if p not in first]
    options = _place(_pair(*ranked[0]), [_pair(*p) for p in ranked[1:]], never, k, pos, rng)
    if options is None:
        return None
    return Draft(options, pos, tuple(round(first[p], 4) for p in ranked[:2]))


def _most_bounces(run, k, pos, rng, min_gap):
    per_object = _event_times(run, "bounce")
    starts = {name: _episodes(per_object.get((name,), []), min_gap) for name in run.names}
    ranked = sorted(run.names, key=lambda name: -len(starts[name]))
    if len(starts[ranked[0]]) - len(starts[ranked[1]]) < MOST_BOUNCES_LEAD:
        return None
    options = _place(_obj(ranked[0]), [_obj(name) for name in ranked[1:]], [], k, pos, rng)
    return None if options is None else Draft(options, pos, tuple(round(t, 4) for t in starts[ranked[0]]))


def _fastest(run, k, pos, rng, min_gap):
    path = np.linalg.norm(np.diff(run.substeps, axis=0), axis=-1).sum(axis=0)
    order = np.argsort(-path, kind="stable")
    if path[order[0]] < FASTEST_RATIO * path[order[1]]:
        return None
    options = _place(_obj(run.names[order[0]]), [_obj(run.names[i]) for i in order[1:]], [], k, pos, rng)
    return None if options is None else Draft(options, pos, ())


def _leftmost_end(run, k, pos, rng, min_gap):
    last = run.positions[max(0, run.n_frames - run.fps) :, :, 0]  # x of every object, last second
    order = np.argsort(last, axis=1, kind="stable")
    leader = order[:, 0]
    gaps = np.take_along_axis(last, order[:, 1:2], 1)[:, 0] - np.take_along_axis(last, order[:, :1], 1)[:, 0]
    if (leader != leader[-1]).any() or gaps.min() < LEFTMOST_GAP:
        return None
    i = int(leader[-1])
    rest = [_obj(n) for j, n in enumerate(run.names) if j != i]
    options = _place(_obj(run.names[i]), rest, [], k, pos, rng)
    t_end = run.duration_s
    return None if options is None else Draft(options, pos, (round(t_end - 1.0, 4), round(t_end, 4)))


def _collision_count(run, k, pos, rng, min_gap):
    per_pair = _event_times(run, "collision")
    counts = {pair: _episodes(per_pair.get(pair, []), min_gap) for pair in _pairs(run)}
    eligible = [pair for pair, starts in counts.items() if len(starts) >= pos]  # the options start at count - pos >= 0
    if not eligible:
        return None
    a, b = eligible[int(rng.integers(len(eligible)))]
    starts = counts[(a, b)]
    low = len(starts) - pos
    return Draft(
        tuple(str(low + i) for i in range(k)),
        pos,
        tuple(round(t, 4) for t in starts),
        QUESTIONS["collision_count"].format(a=a, b=b),
    )


_GENERATORS: dict[str, Callable[..., Draft | None]] = {
    "first_collision": _first_collision,
    "most_bounces": _most_bounces,
    "fastest": _fastest,
    "leftmost_end": _leftmost_end,
    "collision_count": _collision_count,
}
_PAIR_TYPES = ("first_collision",)  # options are pairs of objects: 3 objects give 3 pairs, 4 give 6


def n_objects(qtype: str, k: int, rng: np.random.Generator) -> int:
    """3..4 objects, more only when the options need them: the box is small, and with five
    objects something collides every few frames, which leaves few unambiguous answers."""
    if qtype == "collision_count":
        least = 3
    elif qtype in _PAIR_TYPES:
        least = 3 if k <= 3 else 4
    else:
        least = max(3, k)  # one object per option
    return int(rng.integers(least, max(least, 4) + 1))


def draft_question(qtype: str, run, k: int, pos: int, rng: np.random.Generator, min_gap: float) -> Draft | None:
    """The ``qtype`` question about ``run`` with ``k`` options and gold at ``pos`` (0-based), or
    None when the clip does not answer it unambiguously (the caller simulates another clip).

    | qtype | question | options |
    | --- | --- | --- |
    | ``first_collision`` | Which two objects collide with each other first? | object pairs of the clip |
    | ``most_bounces`` | Which object bounces off the floor the most times? | objects of the clip |
    | ``fastest`` | Which object moves fastest on average over the whole video? | objects of the clip |
    | ``leftmost_end`` | Which object is farthest to the left at the end of the video? | objects of the clip |
    | ``collision_count`` | How many times do the <a> and the <b> collide with each other? | consecutive counts, ascending |

    Touches of one pair (or one object and the floor) less than ``min_gap`` seconds after the
    previous one belong to the same contact episode: one collision (bounce) to a viewer. The
    answer is unambiguous when the first collision comes at least ``min_gap`` before any other
    pair's, the most-bouncing object has at least :data:`MOST_BOUNCES_LEAD` more bounce episodes
    than the next, the fastest object travels at least 10 % (:data:`FASTEST_RATIO`) farther than
    the next (path length over every physics substep), and the leftmost object leads by at least
    :data:`LEFTMOST_GAP` world units in every frame of the last second. Distractors are other
    objects (or pairs) of the same clip, those taking part in later events first; count options
    stay ascending, so their window is chosen to put gold at ``pos``. ``evidence_s`` lists the
    times of the deciding events (first collision and runner-up, the bounces or collisions
    counted, the last second). They are instants, so a coarse frame grid misses most of them
    and which ones depends on its phase, as PhaseFusion needs.
    """
    return _GENERATORS[qtype](run, k, pos, rng, min_gap)
