"""The subset of markdown judgetrain's reports use, as HTML, for the run browser's overview.

Headings, paragraphs, ``-`` lists, pipe tables, fenced code, images (their paths rewritten
into the page folder), ``**bold**``, ``*emphasis*`` and inline code; everything else is
escaped text. No network, no library: the page must open from disk.
README: "`judgetrain eval view`".
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

__all__ = ["to_html"]

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
_INLINE = ((re.compile(r"`([^`]+)`"), r"<code>\1</code>"), (re.compile(r"\*\*([^*]+)\*\*"), r"<b>\1</b>"),
           (re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])"), r"<i>\1</i>"))


def _inline(text: str, image_src: Callable[[str], str]) -> str:
    out, at = [], 0
    for m in _IMAGE.finditer(text):
        out.append(_format(text[at:m.start()]))
        out.append(f'<img class="figure" alt="{html.escape(m.group(1))}" src="{html.escape(image_src(m.group(2)))}">')
        at = m.end()
    out.append(_format(text[at:]))
    return "".join(out)


def _format(text: str) -> str:
    text = html.escape(text, quote=False).replace("&lt;br&gt;", "<br>")
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    return text


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: list[str], image_src: Callable[[str], str]) -> str:
    rows = [_cells(line) for line in lines if not set(line.replace("|", "").strip()) <= set("-: ")]
    head, body = rows[0], rows[1:]
    out = ["<table class=\"md\"><thead><tr>", *(f"<th>{_inline(c, image_src)}</th>" for c in head), "</tr></thead><tbody>"]
    for row in body:
        out += ["<tr>", *(f"<td>{_inline(c, image_src)}</td>" for c in row), "</tr>"]
    return "".join(out) + "</tbody></table>"


def to_html(md: str, image_src: Callable[[str], str] = lambda s: s) -> str:
    """``md`` as HTML; ``image_src(path)`` gives the page path of an image the markdown names."""
    blocks: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
            blocks.append("<pre>" + html.escape("\n".join(lines[i + 1:end])) + "</pre>")
            i = end + 1
            continue
        kind = "table" if line.startswith("|") else "list" if line.startswith(("- ", "* ")) else \
            "heading" if line.startswith("#") else "blank" if not line.strip() else "text"
        j = i + 1
        while kind in ("table", "list", "text") and j < len(lines) and _same(kind, lines[j]):
            j += 1
        chunk = lines[i:j]
        if kind == "table":
            blocks.append(_table(chunk, image_src))
        elif kind == "list":
            blocks.append("<ul>" + "".join(f"<li>{_inline(c[2:], image_src)}</li>" for c in chunk) + "</ul>")
        elif kind == "heading":
            level = min(len(line) - len(line.lstrip("#")) + 1, 6)
            blocks.append(f"<h{level}>{_inline(line.lstrip('#').strip(), image_src)}</h{level}>")
        elif kind == "text":
            blocks.append("<p>" + _inline(" ".join(chunk), image_src) + "</p>")
        i = j
    return "\n".join(blocks)


def _same(kind: str, line: str) -> bool:
    if kind == "table":
        return line.startswith("|")
    if kind == "list":
        return line.startswith(("- ", "* "))
    return bool(line.strip()) and not line.startswith(("|", "#", "- ", "* ", "```"))
