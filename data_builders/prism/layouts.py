"""PRISM's prompt layouts P0–P6 (paper 002 A.2) as parts, and the judge instructions (A.3).

A prompt is a list of parts ``("text", str)``, ``("image", x)`` or ``("grid", [x, …])``
(P6: one grid image per sequence), rendered into a record by
:func:`.render.layout_record`. The step texts are always the gold sequence's;
only the images differ between Sequence A and B. MIRAGE uses the same layouts.
Docs: "concepts/prism-mirage.md" (the layout table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LAYOUTS = ("P0", "P1", "P2", "P3", "P4", "P5", "P6")
POINTWISE_LAYOUTS = tuple(layout for layout in LAYOUTS if layout != "P4")  # P4 = P0 with one sequence (A.2)

# Our wording (A.3): the paper describes these templates (a 5-point rubric anchoring 3 to order
# violations and 1-2 to content mismatches; a pairwise prompt that commits to A or B before any
# rationale) but its Figure S2 wording is not in the text.
PAIRWISE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given the steps of a "
    "process and two image sequences, Sequence A and Sequence B, each meant to illustrate those steps in order. "
    "Decide which sequence better adheres to the described process: every image should show the content of its "
    "step, and the images should follow the chronological order of the steps. Commit to your choice before any "
    "explanation: begin your answer with the letter of the better sequence, A or B."
)
POINTWISE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given the steps of a "
    "process and one image sequence meant to illustrate those steps in order. Rate how well the sequence follows "
    "the described process on this scale:\n"
    "5 - Coherent: every image shows the content of its step, in the correct chronological order.\n"
    "4 - Mostly coherent: the content and the order are right, but some steps are hard to recognise.\n"
    "3 - Order violation: every image belongs to the process, but some images are out of chronological order.\n"
    "2 - Content mismatch: one image is out of context; it does not belong to this process.\n"
    "1 - Severe content mismatch: two or more images are out of context.\n"
    "Commit to your score before any explanation: begin your answer with a single digit from 1 to 5."
)
GRID_NOTE = {
    "pairwise": "Each sequence is shown as one grid image whose numbered cells read left to right, top to bottom.",
    "pointwise": "The sequence is shown as one grid image whose numbered cells read left to right, top to bottom.",
}


def instruction_for(mode: str, layout: str, base: str | None = None) -> str:
    """The instruction text of ``mode`` under ``layout`` (P6 adds how to read the grid)."""
    text = base if base is not None else (PAIRWISE_INSTRUCTION if mode == "pairwise" else POINTWISE_INSTRUCTION)
    return f"{text}\n{GRID_NOTE[mode]}" if layout == "P6" else text


def check_layouts(layouts: Sequence[str]) -> list[str]:
    """The ``--layouts`` problem, if any: an unknown layout, or none at all."""
    bad = [x for x in layouts if x not in LAYOUTS]
    if bad or not layouts:
        return [
            f"--layouts: unknown {bad}; choose one or more of {list(LAYOUTS)}" if bad else "--layouts: give at least one layout"
        ]
    return []


def steps_block(title: str, steps: Sequence[str], title_label: str = "Task") -> str:
    """``"Task: <title>"`` (if any), then ``"Steps:"`` and ``"k. <text>"`` lines (if any)."""
    lines = [f"{title_label}: {title}"] if title else []
    if steps:
        lines.append("Steps:")
        lines += [f"{k}. {t}" for k, t in enumerate(steps, start=1)]
    return "\n".join(lines)


def _numbered(seq: Sequence) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, im in enumerate(seq, start=1):
        out += [("text", f"Image {k}:"), ("image", im)]
    return out


def pairwise_parts(
    layout: str, title: str, steps: Sequence[str], seq_a: Sequence, seq_b: Sequence, instruction: str, title_label: str = "Task"
) -> list[tuple[str, Any]]:
    """The prompt of a pairwise record as parts ``("text", str)``, ``("image", x)``
    or ``("grid", [x, …])``, per the layout table of docs/concepts/prism-mirage.md;
    ``instruction`` is the last part. Under P5 the sequences may differ in
    length (MIRAGE): step k shows the k-th image of each sequence that has one."""
    S = ("text", steps_block(title, steps, title_label))
    A, B = ("text", "Sequence A:"), ("text", "Sequence B:")
    imgs_a, imgs_b = [("image", x) for x in seq_a], [("image", x) for x in seq_b]
    if layout == "P0":
        parts = [S, A, *imgs_a, B, *imgs_b]
    elif layout == "P1":
        parts = [A, *imgs_a, B, *imgs_b, S]
    elif layout == "P2":
        parts = [S, A, *_numbered(seq_a), B, *_numbered(seq_b)]
    elif layout == "P3":
        parts = [S, A, *imgs_a, B, *imgs_b, S]
    elif layout == "P4":
        parts = [S, B, *imgs_b, A, *imgs_a]
    elif layout == "P5":
        parts = [("text", f"{title_label}: {title}")] if title else []
        for k in range(max(len(seq_a), len(seq_b), len(steps))):
            parts.append(("text", f"Step {k + 1}: {steps[k]}" if k < len(steps) else f"Step {k + 1}:"))
            if k < len(seq_a):
                parts += [("text", f"Sequence A, image {k + 1}:"), ("image", seq_a[k])]
            if k < len(seq_b):
                parts += [("text", f"Sequence B, image {k + 1}:"), ("image", seq_b[k])]
    elif layout == "P6":
        parts = [S, A, ("grid", list(seq_a)), B, ("grid", list(seq_b))]
    else:
        raise ValueError(f"unknown layout {layout!r}; choose from {list(LAYOUTS)}")
    return [p for p in parts if p != ("text", "")] + [("text", instruction)]


def pointwise_parts(
    layout: str, title: str, steps: Sequence[str], seq: Sequence, instruction: str, title_label: str = "Task"
) -> list[tuple[str, Any]]:
    """The prompt of a pointwise record as parts (see :func:`pairwise_parts`);
    P4 is P0 (one sequence), per that layout table."""
    S, X = ("text", steps_block(title, steps, title_label)), ("text", "Sequence:")
    imgs = [("image", x) for x in seq]
    if layout in ("P0", "P4"):
        parts = [S, X, *imgs]
    elif layout == "P1":
        parts = [X, *imgs, S]
    elif layout == "P2":
        parts = [S, X, *_numbered(seq)]
    elif layout == "P3":
        parts = [S, X, *imgs, S]
    elif layout == "P5":
        parts = [("text", f"{title_label}: {title}")] if title else []
        for k in range(max(len(seq), len(steps))):
            parts.append(("text", f"Step {k + 1}: {steps[k]}" if k < len(steps) else f"Step {k + 1}:"))
            if k < len(seq):
                parts.append(("image", seq[k]))
    elif layout == "P6":
        parts = [S, X, ("grid", list(seq))]
    else:
        raise ValueError(f"unknown layout {layout!r}; choose from {list(LAYOUTS)}")
    return [p for p in parts if p != ("text", "")] + [("text", instruction)]
