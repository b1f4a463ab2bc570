"""A run's ``report.md`` as HTML for the run browser's overview, through markdown-it-py.

CommonMark with GitHub's pipe tables (markdown-it-py's ``commonmark`` preset and its
``table`` rule). Raw HTML in a report is shown as text, except the ``<br>`` line breaks that
report tables put in their header cells. Relative paths of images and links (a report's
figures are linked images, ``[![title](fig.png)](fig.png)``,
:func:`judgetrain.eval.core.markdown.figures_markdown`) are rewritten into the page folder;
headings go one level down, below the page's own heading for the run. Nothing is fetched:
the page must open from disk.
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

__all__ = ["to_html"]

# a URL with a scheme (http:, file:, data:…), an absolute path or an in-page anchor: left as written
_NOT_RELATIVE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*:|/|#)")
_BREAKS = ("<br>", "<br/>", "<br />")


def _line_break(state: StateInline, silent: bool) -> bool:
    """``<br>`` in a report's text: a line break (report tables title their columns on two lines)."""
    tag = next((b for b in _BREAKS if state.src.startswith(b, state.pos)), None)
    if tag is None:
        return False
    if not silent:
        state.push("hardbreak", "br", 0)
    state.pos += len(tag)
    return True


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.inline.ruler.before("autolink", "line_break_tag", _line_break)
    return md


def _rewrite(tokens: Sequence[Token], local: Callable[[str], str]) -> None:
    """Headings one level down, tables and images classed for the page's style sheet, relative
    image and link targets through ``local``."""
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + 1, 6)}"
        elif token.type == "table_open":
            token.attrSet("class", "md")
        for child in token.children or []:
            key = "src" if child.type == "image" else "href" if child.type == "link_open" else None
            if key is None:
                continue
            target = str(child.attrGet(key) or "")
            if target and not _NOT_RELATIVE.match(target):
                child.attrSet(key, local(target))
            if child.type == "image":
                child.attrSet("class", "figure")


def to_html(md: str, local: Callable[[str], str] = lambda s: s) -> str:
    """``md`` (a report's markdown) as HTML; ``local(path)`` gives the page path of a file the
    report names by a relative path (its figures)."""
    parser = _parser()
    env: dict = {}
    tokens = parser.parse(md, env)
    _rewrite(tokens, local)
    return parser.renderer.render(tokens, parser.options, env)
