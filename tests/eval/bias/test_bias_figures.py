"""What a person sees in the figures of `eval bias` (issue #39): after drawing, every title, axis label,
tick label, legend and cell text lies inside the figure canvas (nothing cut at an edge), heatmap cell
text is legible and fits its cell, and cells of small n keep their value's colour (lighter and hatched,
never one flat grey). Drawn with matplotlib on the Agg backend from real analysis results."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.container import BarContainer

from judgetrain.eval import bias as B
from judgetrain.eval.bias import plots as PB
from judgetrain.plotting import pyplot


def _texts(fig):
    """Every text-like artist a reader sees: suptitle, figure legends, and per axes its title, axis
    labels, tick labels, legend and texts (the heatmap cells)."""
    out = [("legend", leg) for leg in fig.legends]
    if fig._suptitle is not None:
        out.append(("suptitle", fig._suptitle))
    for ax in fig.axes:
        out += [("title", ax.title), ("xlabel", ax.xaxis.label), ("ylabel", ax.yaxis.label)]
        out += [("tick", t) for t in ax.get_xticklabels() + ax.get_yticklabels()]
        out += [("cell", t) for t in ax.texts]
        if ax.get_legend() is not None:
            out.append(("legend", ax.get_legend()))
    return [(kind, a) for kind, a in out if a.get_visible() and (kind == "legend" or a.get_text())]


def _all_inside(fig):
    """The artists of :func:`_texts` whose drawn box leaves the canvas (an empty list when none does)."""
    fig.canvas.draw()
    renderer, frame = fig.canvas.get_renderer(), fig.bbox
    outside = []
    for kind, a in _texts(fig):
        box = a.get_window_extent(renderer)
        if not (frame.x0 - 0.5 <= box.x0 and box.x1 <= frame.x1 + 0.5 and frame.y0 - 0.5 <= box.y0 and box.y1 <= frame.y1 + 0.5):
            outside.append((kind, getattr(a, "get_text", lambda: "legend")(), tuple(round(v) for v in box.extents)))
    return outside


def _close(fig):
    pyplot().close(fig)


def _cells(n_valid, correct):
    cells = {
        str(p): {"accuracy": c / n, "f1": c / n, "n_valid": n, "n": n}
        for p, (n, c) in enumerate(zip(n_valid, correct, strict=True))
    }
    return {
        "positions": list(cells),
        "cells": cells,
        "w_avg": {"accuracy": sum(correct) / sum(n_valid), "f1": 0.5, "n_valid": sum(n_valid), "n": sum(n_valid)},
    }


def _pairwise(layout, gold, answer, k):
    presentation = "gold_first" if (gold == "A") != (layout == "P4") else "gold_second"
    return {
        "id": f"{layout}-{k}",
        "task": "pairwise",
        "layout": layout,
        "label": gold,
        "prediction": answer,
        "valid": True,
        "choices": ["A", "B"],
        "presentation": presentation,
        "first_option": "B" if layout == "P4" else "A",
    }


@pytest.mark.parametrize("runs", [1, 3])
def test_wavg_legend_and_labels_lie_inside_the_canvas(runs):
    prism = {kind: {"all": _cells([4, 12], [4, 6])} for kind in ("semantic", "temporal")}
    fig = PB.wavg_figure([(f"run-{i}", prism) for i in range(runs)])
    assert fig.axes[0].get_legend() is not None and len(fig.axes[0].get_legend().get_texts()) == 4
    assert _all_inside(fig) == []
    # the legend does not cover the bars: it sits right of the plotting area
    fig.canvas.draw()
    legend = fig.axes[0].get_legend().get_window_extent(fig.canvas.get_renderer())
    assert legend.x0 >= fig.axes[0].get_window_extent().x1
    _close(fig)


def test_first_option_figure_shows_letter_and_first_position_side_by_side_inside_the_canvas():
    always_a = B.first_option_bias([_pairwise(lay, "AB"[k % 2], "A", k) for lay in ("P0", "P4", "P6") for k in range(16)])
    first = B.first_option_bias(
        [_pairwise(lay, "AB"[k % 2], "B" if lay == "P4" else "A", k) for lay in ("P0", "P4", "P6") for k in range(16)]
    )
    old = {
        k: v
        for k, v in always_a.items()
        if k
        in (
            "first_rate",
            "first_rate_gold_first",
            "first_rate_gold_second",
            "n_valid",
            "n_gold_first",
            "n_gold_second",
            "binomial_p",
            "wilson95",
        )
    }
    fig = PB.first_option_figure([("always-a", always_a), ("first", first), ("old bias.json", old)])
    left, right = fig.axes
    assert [t.get_text().split("\n")[0] for t in left.get_xticklabels()] == ["always-a", "first", "old bias.json"]
    assert [t.get_text().split("\n")[0] for t in right.get_xticklabels()] == ["always-a", "first"]
    bars = [c for c in right.containers if isinstance(c, BarContainer)]
    heights = [[round(b.get_height(), 6) for b in c] for c in bars]
    # always A: P(A) 100, first-shown 100 where A is first, 0 where B is; always first: P(A) 66.7, first-shown 100 / 100
    assert heights == [[100.0, pytest.approx(200 / 3)], [100.0, 100.0], [0.0, 100.0]]
    assert [t.get_text().split("\n")[-1] for t in right.get_xticklabels()] == ["letter", "first-option"]
    assert _all_inside(fig) == []
    _close(fig)


def _cell_box(ax, i, j):
    (x0, y0), (x1, y1) = ax.transData.transform([(j - 0.5, i + 0.5), (j + 0.5, i - 0.5)])
    return min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)


def _cell_colour(fig, ax, i, j):
    """The median colour drawn in cell (i, j) (its text and hatching are a minority of its pixels)."""
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    x0, y0, x1, y1 = _cell_box(ax, i, j)
    h = pixels.shape[0]
    block = pixels[int(h - y1) + 3 : int(h - y0) - 3, int(x0) + 3 : int(x1) - 3].reshape(-1, 3)
    return np.median(block, axis=0)


def test_small_n_heatmap_cells_keep_their_colour_and_readable_text():
    # every position answered by 3 items (n < 10), 0 to 3 right: four different rates, all of small n (W_avg: n=12)
    prism = {"semantic": {"all": _cells([3, 3, 3, 3], [0, 1, 2, 3])}}
    fig = PB.positions_figure([("zs", prism)], "PRISM")
    (ax,) = [a for a in fig.axes if a.get_title()]
    assert _all_inside(fig) == []
    colours = [_cell_colour(fig, ax, 0, j) for j in range(4)]
    for c in colours:  # not grey: the channels differ
        assert c.max() - c.min() > 25, colours
    for a in range(4):  # and not all alike: each rate its own colour
        for b in range(a + 1, 4):
            assert np.abs(colours[a] - colours[b]).sum() > 45, (a, b, colours)
    renderer = fig.canvas.get_renderer()
    for t in ax.texts:
        x, y = t.get_position()
        assert t.get_fontsize() >= 8 and t.get_style() == ("italic" if x < 4 else "normal")  # small n: in italics
        box, (cx0, cy0, cx1, cy1) = t.get_window_extent(renderer), _cell_box(ax, round(y), round(x))
        assert cx0 <= box.x0 and box.x1 <= cx1 and cy0 <= box.y0 and box.y1 <= cy1, t.get_text()
    assert any(p.get_hatch() for p in ax.patches)  # hatched: uncertain at a glance
    assert "hatched: n < 10" in fig._suptitle.get_text()
    _close(fig)


def test_a_tall_by_layout_heatmap_keeps_every_cell_text_in_its_cell():
    rows = [
        (
            f"run-{r} · P{lay}",
            {
                "semantic": {"all": _cells([3, 12, 40, 5, 9, 10], [1, 6, 30, 5, 0, 10])},
                "temporal": {"all": _cells([12, 12, 12, 12, 12], [6, 7, 8, 9, 10])},
            },
        )
        for r in range(2)
        for lay in range(7)
    ]
    fig = PB.positions_figure(rows, "PRISM Type-1 by layout and position")
    assert _all_inside(fig) == []
    renderer = fig.canvas.get_renderer()
    for ax in [a for a in fig.axes if a.get_title()]:
        for t in ax.texts:
            x, y = t.get_position()
            box, (cx0, cy0, cx1, cy1) = t.get_window_extent(renderer), _cell_box(ax, round(y), round(x))
            assert cx0 <= box.x0 and box.x1 <= cx1 and cy0 <= box.y0 and box.y1 <= cy1, (ax.get_title(), t.get_text())
    _close(fig)
