"""The scoring engine: the one way evaluation, training-time validation and sweeps get answers from a model.

Three entry points, as functions over an already loaded ``(model, processor)`` and
as the methods of :class:`Scorer`, which also loads checkpoints: :func:`score`
(constrained scoring over each item's ``choices``), :func:`score_shared_prefix`
(the same, with the images and shared text of many prompts encoded once) and
:func:`generate` (greedy generation read by an answer parser). The docs' scoring
page (reference/api/scoring.md) opens with them in use. Every name is importable from here;
the submodules hold, each, one job:

- :mod:`~judgetrain.scoring.results`: :class:`ChoiceScores`, :class:`Generation`, :class:`GenerationOutput`.
- :mod:`~judgetrain.scoring.prompts`: items (task records or tuples), the prefill
  (:data:`FAMILY_PREFILL`) and :func:`render_prompt`.
- :mod:`~judgetrain.scoring.model`: model plumbing (the model wrapper, device, KV-cache
  row selection, eval mode).
- :mod:`~judgetrain.scoring.batching`: fixed or ``"auto"`` batch sizes and the
  out-of-memory retry loop (:data:`CPU_BATCH_SIZE`, :data:`MAX_AUTO_BATCH_SIZE`).
- :mod:`~judgetrain.scoring.lengths`: the batch order, longest first (items' token
  counts estimated before encoding), so that a batch's items are of similar length.
- :mod:`~judgetrain.scoring.constrained`: :func:`score`, and how its multi-token path
  matches a full forward pass.
- :mod:`~judgetrain.scoring.prefix`: :class:`PrefixGroup`, :func:`score_shared_prefix`.
- :mod:`~judgetrain.scoring.generation`: :func:`generate`.
- :mod:`~judgetrain.scoring.parsers`: :class:`Parser`, the parser factories and
  :func:`parser_for_record`.
- :mod:`~judgetrain.scoring.reward`: :func:`reward_scores`, one scalar per item from a reward model.
- :mod:`~judgetrain.scoring.scorer`: :class:`Scorer`.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

from . import batching, prompts
from .batching import CPU_BATCH_SIZE, MAX_AUTO_BATCH_SIZE
from .constrained import score
from .generation import generate
from .parsers import (
    ANSWER_CUE,
    Parser,
    choice_letter,
    frame_pair,
    integer_in_range,
    likert_1_5,
    one_of,
    ordering,
    parser_for_record,
    yes_no,
)
from .prefix import PrefixGroup, score_shared_prefix
from .prompts import FAMILY_PREFILL, render_prompt
from .results import ChoiceScores, Generation, GenerationOutput
from .reward import reward_scores
from .scorer import Scorer

__all__ = [
    "CPU_BATCH_SIZE",
    "FAMILY_PREFILL",
    "MAX_AUTO_BATCH_SIZE",
    "ChoiceScores",
    "Generation",
    "GenerationOutput",
    "Parser",
    "PrefixGroup",
    "Scorer",
    "choice_letter",
    "frame_pair",
    "generate",
    "integer_in_range",
    "likert_1_5",
    "one_of",
    "ordering",
    "parser_for_record",
    "render_prompt",
    "reward_scores",
    "score",
    "score_shared_prefix",
    "yes_no",
    "ANSWER_CUE",
]

# The type aliases of the signatures, importable from here as before (and, as before, not in __all__).
Item = prompts.Item
BatchSize = batching.BatchSize
