"""matplotlib for files only: every figure judgetrain draws (reports, build summaries) is a PNG."""

from __future__ import annotations

__all__ = ["pyplot"]


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display on clusters), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
