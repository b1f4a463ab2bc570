"""matplotlib for files only: every figure judgetrain draws (reports, build summaries) is a PNG.

Docs: "reference/development.md".
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["pyplot", "save_figure", "save_if_drawn"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display on clusters), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> None:
    """Save ``fig`` as a PNG at ``path`` atomically (:func:`judgetrain.io.atomic_path`) and close
    it. ``bbox_inches="tight"`` grows the image to hold every label, so a long title or tick
    label is never cut off at the edge."""
    from judgetrain.io import atomic_path

    with atomic_path(path, ".tmp.png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    pyplot().close(fig)


def save_if_drawn(fig: Any | None, path: str | os.PathLike) -> bool:
    """:func:`save_figure` of ``fig`` when there is one (a figure function returns ``None`` when it
    has nothing to draw); True when it saved."""
    if fig is None:
        return False
    save_figure(fig, path)
    return True
