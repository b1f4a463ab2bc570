"""The parts of figures every evaluation shares: a heatmap of rates that shows each cell's n and
greys the cells of small n, and Wilson error bars for bars and points.

A rate of 3 of 3 is not "1.00": :func:`rate_heatmap` draws a cell that counts fewer than
:data:`SMALL_N` items lighter, hatched and in italics (still in its value's colour, so a small
run's heatmap is not all grey), every cell annotated with its value and n in a legible font;
an empty cell is left blank. Rates are fractions in 0..1 (the colour scale),
annotated in %. :func:`wilson_yerr` turns Wilson intervals into matplotlib's ``yerr``.
Docs: "concepts/prism-mirage.md", "concepts/positional-bias.md", "concepts/timecatch.md".
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CELL_FONT", "EMPTY_COLOR", "SMALL_ALPHA", "SMALL_N", "rate_heatmap", "wilson_yerr"]

# Fewer items than this and a cell's rate is too uncertain to colour (3 of 3: Wilson [44, 100] %).
SMALL_N = 10
EMPTY_COLOR = "#F4F4F4"


CELL_FONT = 8
SMALL_ALPHA = 0.65  # how strongly a cell of small n keeps its colour (the rest is white): lighter, never grey


def _text_colour(rgba, alpha: float) -> str:
    """Black or white, whichever reads better on ``rgba`` drawn at ``alpha`` over white."""
    r, g, b = (alpha * c + (1 - alpha) for c in rgba[:3])
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def rate_heatmap(
    ax,
    values: Sequence[Sequence[float | None]],
    counts: Sequence[Sequence[int | None]],
    rows: Sequence[str],
    cols: Sequence[str],
    title: str,
    extra: Sequence[Sequence[str]] | None = None,
    small_n: int = SMALL_N,
):
    """Heatmap of rates (rows × cols, fractions, None = no data) on ``ax``, viridis 0..1, every cell with
    data in its value's colour and annotated ``"67%"``, ``extra``'s line, ``"n=12"`` in a legible font.
    A cell of fewer than ``small_n`` items keeps its colour but lighter (a second image at
    :data:`SMALL_ALPHA`, left out of the colour bar), hatched, its text in italics: visibly uncertain,
    still readable. An empty cell is blank. Returns the first image, for a colour bar."""
    import numpy as np
    from matplotlib.patches import Rectangle

    data = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=float)
    n = np.array([[0 if c is None else int(c) for c in row] for row in counts], dtype=int)
    has = ~np.isnan(data) & (n > 0)
    small = has & (n < small_n)
    from judgetrain.plotting import pyplot

    cmap = pyplot().get_cmap("viridis").with_extremes(bad=EMPTY_COLOR)
    im = ax.imshow(np.ma.masked_array(data, mask=~has | small), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    if small.any():
        light = cmap.with_extremes(bad=(0, 0, 0, 0))
        ax.imshow(np.ma.masked_array(data, mask=~small), cmap=light, vmin=0.0, vmax=1.0, aspect="auto", alpha=SMALL_ALPHA)
    for i, j in zip(*np.nonzero(has), strict=True):
        lines = [f"{100 * data[i, j]:.0f}%"] + ([extra[i][j]] if extra and extra[i][j] else []) + [f"n={n[i, j]}"]
        if small[i, j]:
            box = Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="white", linewidth=0, alpha=0.7)
            ax.add_patch(box)
        ax.text(
            j,
            i,
            "\n".join(lines),
            ha="center",
            va="center",
            fontsize=CELL_FONT,
            color=_text_colour(cmap(data[i, j]), SMALL_ALPHA if small[i, j] else 1.0),
            style="italic" if small[i, j] else "normal",
        )
    ax.set_xticks(range(len(cols)), list(cols), fontsize=8)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=8)
    ax.set_title(title, fontsize=9)
    return im


def wilson_yerr(values: Sequence[float | None], intervals: Sequence[Sequence[float] | None], scale: float = 1.0):
    """matplotlib's ``yerr`` (2 × N: below, above) of ``values`` from their intervals
    ``[lo, hi]``, times ``scale`` (100 for %); 0 where a value or its interval is missing."""
    below, above = [], []
    for v, ci in zip(values, intervals, strict=True):
        if v is None or not ci:
            below.append(0.0)
            above.append(0.0)
        else:
            # max(0, …): a Wilson bound of 1 of 1 can sit a rounding error inside the value itself
            below.append(max(0.0, scale * (v - ci[0])))
            above.append(max(0.0, scale * (ci[1] - v)))
    return [below, above]
