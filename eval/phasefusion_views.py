"""PhaseFusion's views of a question: option orderings, frame grids and arms, and the
fusion of content-space posteriors (paper 001 Eq. 1–2, App. E, F).

Pure functions of ids, sizes and posteriors (no model, no video): which options each
ordering shows in which slot, which frames each grid samples at each origin, which
grids an ``--arms`` list needs and how an arm pools its views. The evaluation that
scores them is :mod:`judgetrain.eval.phasefusion`. README: "`judgetrain eval phasefusion`".
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from judgetrain.seeding import rng_for
from judgetrain.video import SAMPLERS, parse_fraction, phase_indices, sampler_indices

__all__ = [
    "INSTRUCTION",
    "LETTERS",
    "PREAMBLE",
    "Arm",
    "Grid",
    "inverse_permutation",
    "mcq_prompt",
    "ordering_permutation",
    "orderings",
    "parse_arms",
    "parse_origins",
    "pool",
    "to_content",
]

LETTERS = string.ascii_uppercase
PREAMBLE = "Select the best answer to the following multiple-choice question based on the video frames."
# Paper 001 App. A: "the instruction requests the option letter only".
INSTRUCTION = "Answer with the option's letter from the given choices directly."


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
