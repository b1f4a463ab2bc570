"""TimeCatch's LPIPS-bin figure (``lpips_temporal_detect.png``) shows how sure each rate is (#39): every
bar carries its class's Wilson 95% interval as an error bar, the balanced-accuracy marker the MOVER
combination of the two, each span checked against the interval of the plotted counts worked by hand;
empty classes get none, and the legend, title and axis labels stay inside the figure."""

from __future__ import annotations

import pytest
from matplotlib.collections import LineCollection

from judgetrain.eval.timecatch import plots as TP
from judgetrain.eval.timecatch import tables as TT
from judgetrain.plotting import pyplot

YN = ["yes", "no"]


def _detect(seq, layout, swapped, prediction, lpips=None):
    """A temporal-detection row; prompt B's "yes" means intact (paper 000 App. A.2)."""
    anomaly, intact = ("no", "yes") if layout == "B" else ("yes", "no")
    label = anomaly if swapped else intact
    return {
        "id": f"{seq}-{layout}-{swapped}",
        "task": "temporal_detect",
        "source": "craft",
        "sequence_id": seq,
        "layout": layout,
        "perturbation": "swap" if swapped else "none",
        "label": label,
        "prediction": prediction,
        "correct": prediction == label,
        "choices": YN,
        "n_frames": 5,
        "subset": "main",
        "lpips_swapped": lpips if swapped else None,
    }


def _rows():
    """Bin 0.0–0.1: swapped 2 of 3 right, intact partners 1 of 3; bin 0.1–0.2 empty; bin 0.2–0.3:
    swapped 2 of 2 (one without a partner), intact 1 of 1."""
    rows = []
    for seq, said_swapped, said_intact in (("s1", "yes", "no"), ("s2", "yes", "yes"), ("s3", "no", "yes")):
        rows += [_detect(seq, "A", True, said_swapped, 0.05), _detect(seq, "A", False, said_intact)]
    rows += [_detect("s4", "B", True, "no", 0.25), _detect("s4", "B", False, "yes")]
    rows.append(dict(_detect("s5", "A", True, "yes", 0.27), sequence_id=None))
    return rows


def _spans(ax, gid):
    """{x: (low, high)} of the vertical error bars drawn as the LineCollection ``gid``."""
    found = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]
    assert len(found) == 1, f"no error bars {gid!r}"
    out = {}
    for seg in found[0].get_segments():
        (x0, y0), (x1, y1) = seg
        assert x0 == pytest.approx(x1)  # vertical
        out[round(float(x0), 6)] = (min(y0, y1), max(y0, y1))
    return out


def _mover(cells, balanced):
    """MOVER for the mean of two independent proportions, from their Wilson limits (by hand)."""
    (p1, (l1, u1)), (p2, (l2, u2)) = cells
    return (balanced - 0.5 * ((p1 - l1) ** 2 + (p2 - l2) ** 2) ** 0.5, balanced + 0.5 * ((u1 - p1) ** 2 + (u2 - p2) ** 2) ** 0.5)


def test_every_plotted_rate_has_its_wilson_or_mover_error_bar(rates):
    bins = TT.lpips_class_bins(_rows())
    assert [(b["swapped"]["correct"], b["swapped"]["n"], b["intact"]["correct"], b["intact"]["n"]) for b in bins] == [
        (2, 3, 1, 3),
        (0, 0, 0, 0),
        (2, 2, 1, 1),
    ]
    fig = TP.lpips_figure(bins)
    try:
        ax = fig.axes[0]
        swapped, intact = _spans(ax, "wilson swapped"), _spans(ax, "wilson intact")
        # bars at bin − 0.2 (swapped) and bin + 0.2 (intact); the empty bin 1 has no bar to bound
        assert sorted(swapped) == [-0.2, 1.8] and sorted(intact) == [0.2, 2.2]
        for x, (k, n) in ((-0.2, (2, 3)), (1.8, (2, 2))):
            assert swapped[x] == pytest.approx(tuple(100 * v for v in rates.wilson(k, n)), abs=1e-9)
        for x, (k, n) in ((0.2, (1, 3)), (2.2, (1, 1))):
            assert intact[x] == pytest.approx(tuple(100 * v for v in rates.wilson(k, n)), abs=1e-9)
        # each whisker spans its bar's top: the plotted rate lies inside its interval
        for container, spans in zip(ax.containers, (swapped, intact), strict=True):
            for bar in container:
                x = round(bar.get_x() + bar.get_width() / 2, 6)
                if x in spans:
                    assert spans[x][0] <= bar.get_height() <= spans[x][1]
        balanced = _spans(ax, "mover balanced")
        assert sorted(balanced) == [0.0, 2.0]
        for x, b in ((0.0, bins[0]), (2.0, bins[2])):
            cells = [(c["accuracy"], rates.wilson(c["correct"], c["n"])) for c in (b["swapped"], b["intact"])]
            lo, hi = _mover(cells, b["balanced_accuracy"])
            assert balanced[x] == pytest.approx((100 * max(0.0, lo), 100 * min(1.0, hi)), abs=1e-9)
            assert balanced[x][0] <= 100 * b["balanced_accuracy"] <= balanced[x][1]
        assert TT.balanced_interval(bins[1]) is None and bins[1]["balanced_accuracy_ci95"] is None
        fig.canvas.draw()
        renderer, frame = fig.canvas.get_renderer(), fig.bbox
        for artist in (ax.get_legend(), ax.title, ax.xaxis.label, ax.yaxis.label):
            box = artist.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
    finally:
        pyplot().close(fig)


def test_swapped_items_alone_get_bars_with_intervals_and_no_balanced_marker(rates):
    bins = TT.lpips_class_bins([dict(r, sequence_id=None) for r in _rows()])
    fig = TP.lpips_figure(bins)
    try:
        ax = fig.axes[0]
        assert [c.get_label() for c in ax.containers] == ["swapped: said anomalous"]  # the bars alone
        assert _spans(ax, "wilson swapped")[-0.2] == pytest.approx(tuple(100 * v for v in rates.wilson(2, 3)), abs=1e-9)
        gids = {c.get_gid() for c in ax.collections}
        assert "wilson intact" not in gids and "mover balanced" not in gids
    finally:
        pyplot().close(fig)
