"""The parts of figures every evaluation shares: a heatmap of rates that shows each cell's n and
greys the cells of small n, and Wilson error bars for bars and points.

A rate of 3 of 3 is not "1.00": :func:`rate_heatmap` colours a cell only when it counts at
least :data:`SMALL_N` items; a cell with fewer is drawn grey and annotated with its value
and n, an empty cell is left blank. Rates are fractions in 0..1 (the colour scale),
annotated in %. :func:`wilson_yerr` turns Wilson intervals into matplotlib's ``yerr``.
README: "`judgetrain eval judge`, `eval bias`", "`judgetrain eval timecatch`, `eval report`, `eval compare`".
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["EMPTY_COLOR", "SMALL_COLOR", "SMALL_N", "rate_heatmap", "wilson_yerr"]

# Fewer items than this and a cell's rate is too uncertain to colour (3 of 3: Wilson [44, 100] %).
SMALL_N = 10
SMALL_COLOR, EMPTY_COLOR = "#C8C8C8", "#F4F4F4"


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
    """Heatmap of ``values`` (rows × cols, fractions, None = no data) on ``ax``, viridis 0..1.

    A cell of ``counts`` ≥ ``small_n`` is coloured and annotated ``"67%"``, then ``extra``'s
    line if any, then ``"n=12"``; a cell of 1 ≤ n < ``small_n`` is grey (:data:`SMALL_COLOR`,
    left out of the colour scale) and annotated the same way, in italics; an empty cell
    (None value or n 0) is blank. Returns the image, for a colour bar."""
    import numpy as np

    data = np.array([[np.nan if v is None else float(v) for v in row] for row in values], dtype=float)
    n = np.array([[0 if c is None else int(c) for c in row] for row in counts], dtype=int)
    has = ~np.isnan(data) & (n > 0)
    small = has & (n < small_n)
    from judgetrain.plotting import pyplot

    plt = pyplot()
    from matplotlib.colors import ListedColormap

    cmap = plt.get_cmap("viridis").with_extremes(bad=EMPTY_COLOR)
    im = ax.imshow(np.ma.masked_array(data, mask=~has | small), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    if small.any():
        shade = np.where(small, 1.0, np.nan)
        ax.imshow(np.ma.masked_invalid(shade), cmap=ListedColormap([SMALL_COLOR]), vmin=0.0, vmax=1.0, aspect="auto")
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if not has[i, j]:
                continue
            lines = [f"{100 * data[i, j]:.0f}%"] + ([extra[i][j]] if extra and extra[i][j] else []) + [f"n={n[i, j]}"]
            coloured = not small[i, j]
            ax.text(
                j,
                i,
                "\n".join(lines),
                ha="center",
                va="center",
                fontsize=6,
                color=("black" if data[i, j] > 0.6 else "white") if coloured else "#333333",
                style="normal" if coloured else "italic",
            )
    ax.set_xticks(range(len(cols)), list(cols), fontsize=7)
    ax.set_yticks(range(len(rows)), list(rows), fontsize=7)
    ax.set_title(title, fontsize=8)
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
