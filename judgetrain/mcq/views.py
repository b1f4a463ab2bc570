"""The views of a video multiple-choice question: option orderings, the letter-only prompt
and frame grids (paper 001 Eq. 1, §2.1, App. A).

Pure functions of ids and sizes (no model, no video): which options each ordering shows
in which slot (seeded by the question id, so every process and every part agrees), the
chat one ordering shows, and which frames a grid samples at an origin. ``judgetrain eval
phasefusion`` scores these views and ``judgetrain build consistency-views`` trains on
them, so they live here, below both. Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from judgetrain.seeding import rng_for
from judgetrain.video import SAMPLERS, phase_indices, sampler_indices

__all__ = [
    "INSTRUCTION",
    "LETTERS",
    "PREAMBLE",
    "Grid",
    "inverse_permutation",
    "mcq_prompt",
    "ordering_permutation",
    "orderings",
    "to_content",
]

LETTERS = string.ascii_uppercase
PREAMBLE = "Select the best answer to the following multiple-choice question based on the video frames."
# Paper 001 App. A: "the instruction requests the option letter only".
INSTRUCTION = "Answer with the option's letter from the given choices directly."


# --------------------------------------------------------------------------- orderings and the prompt


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


# --------------------------------------------------------------------------- grids


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
        return self.views * self.budget**2

    def indices(self, n_frames: int, fps: float, origin: Fraction, base_budget: int) -> list[list[int]]:
        """Frame indices of every view at ``origin`` (in steps of the ``base_budget`` grid)."""
        if self.kind == "phase":
            return [phase_indices(n_frames, self.budget, s, self.views, origin) for s in range(self.views)]
        if self.kind == "dense":
            # the same absolute shift δ·T/b, in steps of this grid: δ·N/b
            return [phase_indices(n_frames, self.budget, origin=origin * self.budget / base_budget)]
        return [sampler_indices(self.kind, n_frames, self.budget, fps)]
