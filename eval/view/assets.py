"""The run browser's files from the package's ``templates/`` folder, through jinja2:
``index.html`` (a template: the title and the data files' ``<script>`` tags, autoescaped),
``app.js`` (the views, vanilla JavaScript, no library) and ``style.css``, both copied as
they are. :mod:`.page` writes them into every page folder.
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

__all__ = ["STATIC_FILES", "index_html", "static_file"]

STATIC_FILES = ("app.js", "style.css")


@cache
def _loader() -> jinja2.BaseLoader:
    import jinja2

    return jinja2.PackageLoader(__package__, "templates")


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=_loader(),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def index_html(title: str, scripts: Sequence[str]) -> str:
    """The page: ``title`` (escaped) and a ``<script>`` tag per data file of ``scripts``
    (page-relative paths, loaded in that order before ``app.js``)."""
    return _environment().get_template("index.html").render(title=title, scripts=list(scripts))


def static_file(name: str) -> str:
    """The text of ``name``, one of :data:`STATIC_FILES`, as the package ships it."""
    if name not in STATIC_FILES:
        raise ValueError(f"{name!r} is not one of the run browser's static files {STATIC_FILES}")
    source, _, _ = _loader().get_source(_environment(), name)
    return source
