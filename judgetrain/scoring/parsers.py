"""Answer parsers: each maps a generated text to a canonical answer string, or to
``None`` when the text holds no well-formed answer (recorded as invalid and counted,
never mapped to a guess): :func:`yes_no`, :func:`choice_letter`,
:func:`integer_in_range`, :func:`frame_pair`, :func:`likert_1_5`, :func:`ordering`,
:func:`one_of`, and :func:`parser_for_record`, the parser for a task record's answer format.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANSWER_CUE",
    "Parser",
    "choice_letter",
    "frame_pair",
    "integer_in_range",
    "likert_1_5",
    "one_of",
    "ordering",
    "parser_for_record",
    "yes_no",
]


@dataclass(frozen=True)
class Parser:
    """A named answer parser: ``parser(text)`` is the canonical answer string, or
    ``None`` when the text holds no well-formed answer (never a guess)."""

    name: str
    fn: Callable[[str], str | None] = field(repr=False, compare=False)

    def __call__(self, text: str) -> str | None:
        if not isinstance(text, str):
            return None
        return self.fn(text)


# "Answer: yes", "The answer is 3", "Final answer: 3 and 4", "Rating: 4": the text after the last cue is the answer.
ANSWER_CUE = re.compile(r"(?i)\b(?:final\s+answer|answer|rating|score)\s*(?:is\b|:)\s*:?")
_WRAP = " \t\r\n*_`\"'“”‘’"
_SENTENCE = r"(?:[\n!?;:]|\.\s)"


def _answer_span(text: str) -> str:
    text = text.strip()
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text:
        return ""  # a reasoning block that never closed holds no answer
    cues = list(ANSWER_CUE.finditer(text))
    if cues:
        text = text[cues[-1].end() :]
    return text.strip()


def _clean(s: str) -> str:
    prev = None
    while prev != s:
        prev = s
        s = s.strip(_WRAP).rstrip(".!?")
    return s


def _parse_with(text: str, match: Callable[[str], str | None], sentence: str = _SENTENCE) -> str | None:
    """Try the whole answer span, then its first sentence; ``match`` full-matches a cleaned candidate."""
    span = _answer_span(text)
    for candidate in (span, re.split(sentence, span, maxsplit=1)[0]):
        cand = _clean(candidate)
        if cand:
            got = match(cand)
            if got is not None:
                return got
    return None


_YES_NO = re.compile(r"(?i)(yes|no)")


def yes_no() -> Parser:
    """``"yes"`` / ``"no"``: "Yes", "no.", "Yes, the frames ...", "Answer: no"; "maybe", "yes or no" -> None."""

    def match(c: str) -> str | None:
        m = _YES_NO.fullmatch(c)
        return m.group(1).lower() if m else None

    return Parser("yes_no", lambda t: _parse_with(t, match, r"(?:[\n!?;:,]|\.\s)"))


_LETTER = re.compile(r"(?i)(?:(?:option|sequence|choice|answer)\s*)?[(\[]?\s*([a-z])\s*[)\]]?")


def choice_letter(letters: str | Sequence[str] = "AB") -> Parser:
    """One of ``letters`` (upper case): "A", "B.", "(A)", "Sequence B", "Option A, because ...".
    A lower-case letter counts only on its own ("a")."""
    allowed = {str(x).upper() for x in letters}
    if not allowed or any(len(x) != 1 or not x.isalpha() for x in allowed):
        raise ValueError(f"choice_letter needs single letters, got {letters!r}")

    def match(c: str) -> str | None:
        m = _LETTER.fullmatch(c)
        if not m:
            return None
        letter = m.group(1)
        if letter.upper() not in allowed or (letter.islower() and c.strip("()[] ") != letter):
            return None
        return letter.upper()

    return Parser(f"choice_letter({''.join(sorted(allowed))})", lambda t: _parse_with(t, match, r"(?:[\n!?;:,]|\.\s)"))


_INTEGER = re.compile(r"(?i)(?:(?:frame|image|picture|number|no\.?)\s*#?\s*)?(\d{1,6})")


def integer_in_range(lo: int, hi: int) -> Parser:
    """An integer in ``lo..hi`` (inclusive) as its decimal string: "3", "Frame 3.", "03";
    out of range, "3 and 4", "3, 4" -> None."""
    if lo > hi:
        raise ValueError(f"integer_in_range: lo ({lo}) > hi ({hi})")

    def match(c: str) -> str | None:
        m = _INTEGER.fullmatch(c)
        if not m:
            return None
        v = int(m.group(1))
        return str(v) if lo <= v <= hi else None

    return Parser(f"integer_in_range({lo},{hi})", lambda t: _parse_with(t, match))


def likert_1_5() -> Parser:
    """A 1..5 rating: "4", "4.", "Rating: 4" -> "4"; "6", "four" -> None."""
    inner = integer_in_range(1, 5)
    return Parser("likert_1_5", inner.fn)


_PAIR = re.compile(
    r"(?i)(?:(?:frames?|images?|pictures?)\s*)?[(\[]?\s*(\d{1,6})\s*(?:,|and|&)\s*(?:(?:frame|image|picture)\s*)?(\d{1,6})\s*[)\]]?"
)


def frame_pair(lo: int = 1, hi: int = 10**6, *, ordered: bool = False) -> Parser:
    """Two distinct frame numbers in ``lo..hi`` as ``"i and j"``: "3 and 4", "3, 4",
    "frames 3 and 4", "(3, 4)". Unordered (default): "4 and 3" -> "3 and 4". Out of
    range or equal numbers -> None."""

    def match(c: str) -> str | None:
        m = _PAIR.fullmatch(c)
        if not m:
            return None
        a, b = int(m.group(1)), int(m.group(2))
        if a == b or not (lo <= a <= hi and lo <= b <= hi):
            return None
        if not ordered:
            a, b = min(a, b), max(a, b)
        return f"{a} and {b}"

    return Parser(f"frame_pair({lo},{hi}{',ordered' if ordered else ''})", lambda t: _parse_with(t, match))


_ORDER = re.compile(r"(?i)(?:(?:order|ordering|sequence)\s*:?\s*)?[(\[]?\s*(\d{1,6}(?:\s*(?:,|>|->|→|\s)\s*\d{1,6})*)\s*[)\]]?")


_LETTER_ORDER = re.compile(
    r"(?i)(?:(?:order|ordering|sequence)\s*:?\s*)?[(\[]?\s*([a-z](?:\s*(?:,|-|–|—|>|->|→|\s)\s*[a-z])*)\s*[)\]]?"
)


def ordering(n: int, letters: bool = False) -> Parser:
    """A permutation of 1..n as ``"3, 1, 2, 4"`` (separators ",", whitespace, ">", "->"),
    or with ``letters`` of A.. as ``"B-D-A-C"`` (paper 002 App. G; separators "-", ",",
    whitespace, ">", "->", "→", any case); a repeated, missing or out-of-range one -> None."""
    if n < 1:
        raise ValueError(f"ordering needs n >= 1, got {n}")

    def numbers(c: str) -> str | None:
        m = _ORDER.fullmatch(c)
        if not m:
            return None
        values = [int(v) for v in re.findall(r"\d+", m.group(1))]
        if sorted(values) != list(range(1, n + 1)):
            return None
        return ", ".join(map(str, values))

    def lettered(c: str) -> str | None:
        m = _LETTER_ORDER.fullmatch(c)
        if not m:
            return None
        values = [v.upper() for v in re.findall(r"[a-zA-Z]", m.group(1))]
        if sorted(values) != [chr(ord("A") + k) for k in range(n)]:
            return None
        return "-".join(values)

    return Parser(f"ordering({n}{', letters' if letters else ''})", lambda t: _parse_with(t, lettered if letters else numbers))


def one_of(choices: Sequence[str]) -> Parser:
    """Exactly one of ``choices`` (case-insensitive, surrounding punctuation ignored), returned as given."""
    table = {c.strip().lower(): c for c in choices}

    def match(c: str) -> str | None:
        return table.get(c.lower())

    return Parser(f"one_of({len(table)})", lambda t: _parse_with(t, match))


def parser_for_record(record: Mapping[str, Any]) -> Parser:
    """The parser for a task record's answer format, from its ``task``, ``choices`` and
    ``n_frames``. For closed tasks an answer outside ``choices`` is also invalid."""
    task = record.get("task")
    choices = list(record.get("choices") or [])
    n = int(record.get("n_frames") or 0)
    lowered = {c.lower() for c in choices}
    if task == "ordering":  # letters when the gold answer is lettered ("B-D-A-C"), else numbers
        return ordering(n, letters=any(ch.isalpha() for ch in str(record.get("label") or "")))
    if task in ("temporal_detect", "frame_detect") and lowered == {"yes", "no"}:
        inner = yes_no()
    elif task == "frame_localize" and n:
        inner = integer_in_range(1, n)
    elif task == "temporal_localize" and n:
        inner = frame_pair(1, n)
    elif task == "pairwise" and choices and all(len(c) == 1 and c.isalpha() for c in choices):
        inner = choice_letter(choices)
    elif task == "pointwise" and choices and all(c.isdigit() for c in choices):
        values = sorted(int(c) for c in choices)
        inner = likert_1_5() if values == [1, 2, 3, 4, 5] else integer_in_range(values[0], values[-1])
    elif choices:
        inner = one_of(choices)
    else:
        raise ValueError(f"no answer parser for task {task!r} without choices; pass parser= to generate().")
    if not choices:
        return inner
    allowed = set(choices)
    return Parser(inner.name, lambda t: a if (a := inner(t)) in allowed else None)
