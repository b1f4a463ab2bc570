"""What the scoring engine returns: :class:`ChoiceScores` per item from constrained
scoring (:func:`~judgetrain.scoring.score`, :func:`~judgetrain.scoring.score_shared_prefix`),
and :class:`Generation` per item, gathered in a :class:`GenerationOutput` with its
validity counts, from greedy generation (:func:`~judgetrain.scoring.generate`).
Results come back in input order.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["ChoiceScores", "Generation", "GenerationOutput"]


@dataclass(frozen=True)
class ChoiceScores:
    """Constrained-scoring result for one item.

    Attributes:
        logprobs: per choice, in ``choices`` order, the log-probability renormalised
            over the choices (``sum(exp(logprobs)) == 1``), from the summed (or, with
            ``reduction="mean"``, length-normalised) sequence log-probabilities.
        raw_logprobs: per choice, the un-renormalised sequence log-probability
            ``log p(choice | prompt)``: the SUM of its tokens' log-probabilities,
            whatever the reduction.
        prediction: the choice with the highest score (ties go to the lowest index).
        prediction_index: its 0-based index in ``choices``.
        choices: the choices, as given.
        num_tokens: per choice, how many tokens it was scored as.
    """

    logprobs: list[float]
    raw_logprobs: list[float]
    prediction: str
    prediction_index: int
    choices: list[str] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)

    @property
    def probs(self) -> list[float]:
        """The renormalised probabilities, ``exp(logprobs)``."""
        return [math.exp(x) for x in self.logprobs]


@dataclass(frozen=True)
class Generation:
    """One greedy generation and what the parser read from it.

    Attributes:
        text: the generated text (special tokens removed; the prefill is part of the
            prompt, not of ``text``), stripped of surrounding whitespace.
        answer: the parser's canonical answer, ``None`` when it could not read one.
        valid: ``answer is not None``.
        num_tokens: generated tokens, the end-of-turn token included when reached.
        truncated: generation stopped at ``max_new_tokens`` before an end-of-turn token.
    """

    text: str
    answer: str | None
    valid: bool
    num_tokens: int
    truncated: bool


@dataclass(frozen=True)
class GenerationOutput(Sequence[Generation]):
    """The generations of :func:`generate`, in input order, with validity counts.

    Behaves as a sequence of :class:`Generation`; ``n_invalid`` counts the
    answers no parser could read (recorded as invalid, never guessed).
    """

    generations: list[Generation]

    def __len__(self) -> int:
        return len(self.generations)

    def __getitem__(self, i):
        return self.generations[i]

    def __iter__(self) -> Iterator[Generation]:
        return iter(self.generations)

    @property
    def n_valid(self) -> int:
        return sum(g.valid for g in self.generations)

    @property
    def n_invalid(self) -> int:
        return len(self.generations) - self.n_valid

    @property
    def invalid_rate(self) -> float:
        return self.n_invalid / len(self.generations) if self.generations else 0.0

    @property
    def n_truncated(self) -> int:
        return sum(g.truncated for g in self.generations)

    def counts(self) -> dict[str, int | float]:
        """``{"n", "valid", "invalid", "invalid_rate", "truncated"}`` for metrics.json."""
        return {
            "n": len(self),
            "valid": self.n_valid,
            "invalid": self.n_invalid,
            "invalid_rate": self.invalid_rate,
            "truncated": self.n_truncated,
        }
