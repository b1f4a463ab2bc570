"""``judgetrain eval view``: the run browser, a static page set over one or several evaluation runs.

:mod:`.items` reads a run folder into the items the page shows, :mod:`.thumbs` makes the
frames' content-addressed thumbnails, :mod:`.markdown` turns a report into HTML (markdown-it-py),
:mod:`.compare` lays several runs' metrics side by side (``eval compare``'s numbers),
:mod:`.page` writes the page set with the files of :mod:`.assets` (jinja2, from ``templates/``),
and :mod:`.command` is the CLI.
Docs: "how-to/run-browser.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "assets": ["STATIC_FILES", "index_html", "static_file"],
        "command": ["ViewConfig", "main", "make_parser"],
        "compare": ["compare_table"],
        "items": ["dataset_images", "load_run", "messages_text", "posterior_summary", "sequence_groups"],
        "markdown": ["to_html"],
        "page": ["DETAIL_CHUNK", "TABLE_CHUNK", "write_pages", "write_view"],
        "thumbs": ["THUMB_SIDE", "Thumbs", "jpeg", "resolve_frames", "video_key"],
    },
)
