"""Teacher prompts and answers for rationale distillation: the reasoning-first instruction that replaces a
PRISM / MIRAGE prompt's commit-first one, the answer formats (JSON fields, ``Answer: X`` line), and the checks
that turn a teacher's reply into a usable (rationale, answer) or the reason it is not.

Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.common import BuildError
from ..mirage.records import MIRAGE_INSTRUCTION
from ..prism.layouts import PAIRWISE_INSTRUCTION, POINTWISE_INSTRUCTION, instruction_for

# The instruction each source builder ends its prompts with, per task.
BASE_INSTRUCTIONS = {
    "prism": {"pairwise": PAIRWISE_INSTRUCTION, "pointwise": POINTWISE_INSTRUCTION},
    "mirage": {"pairwise": MIRAGE_INSTRUCTION},
}
# Where the builders' "answer first" sentence starts; everything before it (role, rubric) is kept.
COMMIT = "Commit to your"
REASON_FIRST = {
    "pairwise": (
        "Reason before you answer: go through the steps one by one and, for each sequence, say whether its image "
        "shows the step and whether the images follow the order of the steps; then decide."
    ),
    "pointwise": (
        "Reason before you answer: go through the steps one by one and say whether the image shows the step and "
        "whether the images follow the order of the steps; then give the score the scale assigns."
    ),
}
ANSWER_LINE = {
    "pairwise": 'End with your verdict alone on the last line, written "Answer: A" or "Answer: B".',
    "pointwise": 'End with your score alone on the last line, written "Answer: N" with N a digit from 1 to 5.',
}
JSON_FIELDS = {
    "pairwise": 'Reply in JSON: your step-by-step reasoning in "rationale", then the letter of the better sequence, A or B, in "answer".',
    "pointwise": 'Reply in JSON: your step-by-step reasoning in "rationale", then your score, a digit from 1 to 5, in "answer".',
}
ANSWER_PREFIX = "Answer: "


def teacher_instruction(builder: str, task: str, layout: str, closing: str) -> str:
    """The builder's instruction for ``task`` under ``layout`` with its commit-first
    sentence replaced by :data:`REASON_FIRST` and ``closing`` (the output format)."""
    base = BASE_INSTRUCTIONS[builder][task]
    if COMMIT not in base:
        raise BuildError(
            f"the {builder} {task} instruction no longer contains {COMMIT!r}; update "
            "judgetrain.data_builders.rationales.prompts.COMMIT to the sentence that asks for the answer first"
        )
    return instruction_for(task, layout, base[: base.index(COMMIT)] + REASON_FIRST[task] + " " + closing)


def rewrite_prompt(
    prompt: Sequence[Mapping[str, Any]], *, builder: str, task: str, layout: str, closing: str, rid: str
) -> list[dict]:
    """``prompt`` (a record's messages) with its closing instruction replaced by
    :func:`teacher_instruction`; everything before it (images, steps, layout
    text) unchanged. BuildError when the prompt does not end with the builder's
    instruction (a dataset built by another version of the builder)."""
    old = instruction_for(task, layout, BASE_INSTRUCTIONS[builder][task])
    messages = [{"role": m["role"], "content": [dict(c) for c in m["content"]]} for m in prompt]
    last = messages[-1]["content"][-1]
    if last.get("type") != "text" or not last["text"].endswith(old):
        raise BuildError(
            f"record {rid!r}: its prompt does not end with the {builder} {task} instruction for layout {layout}; "
            f"rebuild the dataset with the current `judgetrain build {builder}`"
        )
    last["text"] = last["text"][: len(last["text"]) - len(old)] + teacher_instruction(builder, task, layout, closing)
    return messages


def with_rationale_completion(rationale: str, answer: str) -> str:
    """The with-rationale SFT target: the rationale, then ``Answer: X`` on its own last line."""
    return f"{rationale.strip()}\n{ANSWER_PREFIX}{answer}"


def split_answer(text: str, parser: Callable[[str], str | None]) -> tuple[str, str] | str:
    """``(rationale, answer)`` from a generation asked to end with ``Answer: X``, or
    the reason it cannot be used: no answer the parser reads, an answer that is
    not alone on the last line, or nothing before that line."""
    answer = parser(text)
    lines = text.strip().splitlines()
    if answer is None or not lines:
        return "no parseable answer in the generated text"
    if parser(lines[-1]) != answer:
        return f"the answer {answer!r} is not alone on the last line"
    rationale = "\n".join(lines[:-1]).strip()
    if not rationale:
        return "no rationale before the answer line"
    return rationale, answer


def prompt_text(prompt: Sequence[Mapping[str, Any]]) -> str:
    """A canonical rendering of a message list for the cache key: roles, texts and
    image placeholders in order (the images themselves are keyed by their hashes)."""
    return json.dumps(
        [[m["role"], [c["text"] if c["type"] == "text" else "<image>" for c in m["content"]]] for m in prompt], ensure_ascii=False
    )


def check_answer(obj: Any, choices: Sequence[str]) -> str | None:
    """Why a teacher's JSON answer is unusable, or None: it must be an object with a
    non-empty string ``rationale`` and an ``answer`` string among ``choices``."""
    if not isinstance(obj, dict):
        return f"the answer is JSON but not an object: {str(obj)[:80]!r}"
    missing = [k for k in ("rationale", "answer") if k not in obj]
    if missing:
        return f"the answer lacks {missing}"
    if not isinstance(obj["rationale"], str) or not obj["rationale"].strip():
        return "empty rationale"
    if not isinstance(obj["answer"], str) or obj["answer"] not in choices:
        return f"answer {obj['answer']!r} is not one of the choices {list(choices)} (give it as a string)"
    return None


def sha256(data: bytes | str) -> str:
    """Hex sha256 of bytes, or of a string's UTF-8 encoding."""
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()
