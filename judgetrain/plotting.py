"""matplotlib for files only: every figure judgetrain draws (reports, build summaries) is a PNG.

README: "Layout".
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save_figure"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display on clusters), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 120) -> None:
    """Save ``fig`` as a PNG at ``path`` atomically (a temp file beside it, then a rename, as
    :mod:`judgetrain.io` does for text) and close it. ``bbox_inches="tight"`` grows the image
    to hold every label, so a long title or tick label is never cut off at the edge."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.tmp.png")
    try:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        pyplot().close(fig)
