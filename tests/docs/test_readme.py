"""The README is one screen or two that points into the site (issue 40): at most 150 lines,
every link a file of the repository (no path outside it), the papers by title, and the way
to evaluate one's own judge near the top."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def links(text: str) -> list[str]:
    """The targets of the Markdown links of ``text``, web addresses left out."""
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_short_and_links_only_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    found = links(text)
    assert len(found) >= 15, found  # it is a way into the site
    outside = [t for t in found if not (REPO / t.split("#")[0]).resolve().is_relative_to(REPO)]
    missing = [t for t in found if not (REPO / t.split("#")[0]).is_file()]
    assert outside == [] and missing == [], (outside, missing)
    assert "../" not in text


def test_the_readme_names_the_papers_and_shows_how_to_evaluate_a_judge_first():
    text = README.read_text(encoding="utf-8")
    for title in (
        "What's the Catch? Evaluating Temporal Consistency in Vision-Language Models",
        "Stable Scores, Unstable Answers",
        "Order Matters: LVLMs as Judges for Temporal Reasoning",
    ):
        assert title in " ".join(text.split()), title
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## Set up", "## Evaluate your judge"], headings
    section = text.split("## Evaluate your judge", 1)[1].split("\n## ", 1)[0]
    assert "judgetrain eval timecatch --model" in section and "docs/get-started/evaluate.md" in section
    assert text.index("## Evaluate your judge") < len(text) // 4  # within the first screen
