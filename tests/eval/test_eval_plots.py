"""Figures a reader can trust: what the TimeCatch, judge and bias charts draw, read from their matplotlib artists
(bars per class, chance lines, tick labels, axis labels, the title inside the figure, each heatmap cell's n and
the grey of small-n cells, Wilson error bars)."""

from __future__ import annotations

import pytest
from matplotlib.container import BarContainer, ErrorbarContainer

from judgetrain.eval import bias as PB
from judgetrain.eval.core.stats import wilson
from judgetrain.eval.judge import report as JR
from judgetrain.eval.timecatch import plots as TP, tables as TT
from judgetrain.plotting import pyplot

YN = ["yes", "no"]


def _detect(seq, layout, swapped, prediction, lpips=None):
    """A temporal-detection prediction row; prompt B's "yes" means intact (paper 000 App. A.2)."""
    anomaly = "no" if layout == "B" else "yes"
    intact = "yes" if layout == "B" else "no"
    label = anomaly if swapped else intact
    return {"id": f"{seq}-{layout}-{swapped}", "task": "temporal_detect", "source": "craft", "sequence_id": seq,
            "layout": layout, "perturbation": "swap" if swapped else "none", "label": label, "prediction": prediction,
            "correct": prediction == label, "choices": YN, "n_frames": 5, "subset": "main",
            "lpips_swapped": lpips if swapped else None}


def _pairs(seq, layout, lpips, pred_swapped, pred_intact):
    return [_detect(seq, layout, True, pred_swapped, lpips), _detect(seq, layout, False, pred_intact)]


def _title_inside(fig, ax):
    fig.canvas.draw()
    box, frame = ax.title.get_window_extent(fig.canvas.get_renderer()), fig.bbox
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def _close(fig):
    pyplot().close(fig)


# --------------------------------------------------------------------------- LPIPS bins: both classes


def test_lpips_bins_hold_both_classes_so_always_yes_scores_half():
    # A model that always says "anomaly": "yes" under prompt A, "no" under prompt B.
    rows = (_pairs("s1", "A", 0.05, "yes", "yes") + _pairs("s2", "A", 0.15, "yes", "yes")
            + _pairs("s2", "B", 0.15, "no", "no") + _pairs("s3", "A", 0.17, "yes", "yes"))
    bins = TT.lpips_class_bins(rows)
    assert [(b["lo"], b["hi"], b["swapped"]["n"], b["intact"]["n"]) for b in bins] == [(0.0, 0.1, 1, 1), (0.1, 0.2, 3, 3)]
    for b in bins:
        assert b["swapped"]["accuracy"] == 1.0 and b["intact"]["accuracy"] == 0.0 and b["balanced_accuracy"] == 0.5
    # a model right on half the swapped items and on every intact one: (1/2 + 1) / 2
    mixed = _pairs("s1", "A", 0.12, "yes", "no") + _pairs("s2", "A", 0.13, "no", "no")
    from sklearn.metrics import balanced_accuracy_score

    assert TT.lpips_class_bins(mixed)[1]["balanced_accuracy"] == 0.75 == balanced_accuracy_score([1, 1, 0, 0], [1, 0, 0, 0])
    # rows without sequence ids (nothing to pair): swapped only, no balanced accuracy
    alone = [dict(r, sequence_id=None) for r in rows]
    assert [b["intact"]["n"] for b in TT.lpips_class_bins(alone)] == [0, 0]
    assert all(b["balanced_accuracy"] is None for b in TT.lpips_class_bins(alone))


def _lines_at(ax, y):
    return [line for line in ax.get_lines() if list(line.get_ydata()) == [y, y]]


def test_lpips_chart_draws_both_classes_and_chance_only_for_balanced_accuracy():
    rows = _pairs("s1", "A", 0.05, "yes", "yes") + _pairs("s2", "A", 0.15, "yes", "no")
    bins = TT.lpips_class_bins(rows)
    fig = TP.lpips_figure(bins)
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["swapped: said anomalous", "intact partner: said intact"]
    assert [[bar.get_height() for bar in c] for c in ax.containers] == [[100.0, 100.0], [0.0, 100.0]]
    chance = _lines_at(ax, 50)
    assert [line.get_label() for line in chance] == ["chance (balanced accuracy)"]
    marks = [line for line in ax.get_lines() if line.get_label() == "balanced accuracy"]
    assert list(marks[0].get_ydata()) == [50.0, 100.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.0–0.1\nn=1+1", "0.1–0.2\nn=1+1"]
    assert ax.get_ylabel() == "accuracy per class (%)"
    _close(fig)
    # swapped items alone: no 50% line (a bar of one class has no chance level), and the title says so
    fig = TP.lpips_figure(TT.lpips_class_bins([dict(r, sequence_id=None) for r in rows]))
    ax = fig.axes[0]
    assert [c.get_label() for c in ax.containers] == ["swapped: said anomalous"]
    assert _lines_at(ax, 50) == [] and not any("chance" in line.get_label() for line in ax.get_lines())
    assert "swapped items only" in ax.get_title()
    _close(fig)


@pytest.mark.parametrize("partners", [True, False])
def test_lpips_title_fits_in_the_figure(partners):
    rows = _pairs("s1", "A", 0.05, "yes", "no")  # one bin: the narrowest figure
    if not partners:
        rows = [dict(r, sequence_id=None) for r in rows]
    fig = TP.lpips_figure(TT.lpips_class_bins(rows))
    assert _title_inside(fig, fig.axes[0])
    _close(fig)


def test_confusion_title_fits_a_three_by_three_matrix():
    conf = {"labels": [1, 2, 3], "counts": [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
            "normalized": [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]}
    fig = TP.confusion_figure(conf, "temporal_localize")
    assert _title_inside(fig, fig.axes[0])
    _close(fig)


# --------------------------------------------------------------------------- TimeCatch position heatmap


def _located(frame, correct, n_frames=12):
    return {"id": f"fl-{frame}-{correct}", "task": "frame_localize", "source": "craft", "position": frame - 1,
            "n_frames": n_frames, "label": str(frame), "prediction": str(frame) if correct else str(n_frames),
            "choices": [str(k) for k in range(1, n_frames + 1)]}


def test_position_heatmap_frame_axis_has_every_frame():
    # anomalies at frames 1–6, 10 and 11: frames 7–9 hold no item
    rows = [_located(f, f % 2 == 0) for f in (1, 2, 3, 4, 5, 6, 10, 11)] + [_located(11, True)]
    positions = PB.timecatch_positions(rows)
    assert positions["frame_localize"]["positions"] == ["1", "2", "3", "4", "5", "6", "10", "11"]
    fig = TP.timecatch_positions_figure([("run", positions)])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(k) for k in range(1, 12)] + ["W_avg"]
    # a number and its n in every column with items, none in frames 7–9; frame 11: 1 of 2 right, n = 2
    texts = {round(t.get_position()[0]): t.get_text() for t in ax.texts}
    assert sorted(texts) == [0, 1, 2, 3, 4, 5, 9, 10, 11]
    assert texts[10] == "50%\nn=2" and texts[11] == f"{100 * 5 / 9:.0f}%\nn=9"  # W_avg: 5 of 9 right
    # every cell has fewer than 10 items: none is coloured, all with items are grey
    coloured, grey = ax.images
    assert coloured.get_array().mask.all() and int((~grey.get_array().mask).sum()) == 9
    assert ax.get_xlabel() == "frame (1-based; swap: earlier frame)" and _title_inside(fig, ax)
    _close(fig)
    assert TP.timecatch_positions_figure([("run", {})]) is None


# --------------------------------------------------------------------------- judge: pairwise by layout


def _bar_errors(container):
    """(below, above) of each bar's or point's error bar, from its drawn segments."""
    err = container if isinstance(container, ErrorbarContainer) else container.errorbar
    return [(round(seg[0][1], 6), round(seg[1][1], 6)) for seg in err.lines[2][0].get_segments()]


def test_pairwise_layout_chart_draws_wilson_intervals_and_n():
    def cell(correct, valid, n):
        return {"accuracy": correct / valid, "accuracy_all": correct / n, "n_valid": valid, "n": n, "correct": correct,
                "accuracy_ci95": list(wilson(correct, valid)), "accuracy_all_ci95": list(wilson(correct, n)), "f1": 0.5}

    block = {"by_layout": {"P0": cell(3, 4, 5), "P4": cell(2, 2, 2)}, "all": cell(5, 6, 7)}
    fig = JR.pairwise_layouts_figure({"by_benchmark": {"PRISM": block, "MIRAGE": block}})
    assert [ax.get_ylabel() for ax in fig.axes] == ["accuracy (%), Wilson 95%"] * 2
    assert [ax.get_xlabel() for ax in fig.axes] == ["prompt layout (n valid / n)"] * 2
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["P0\nn=4/5", "P4\nn=2/2", "all\nn=6/7"]
    valid, counted_wrong = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    lo, hi = wilson(3, 4)  # 30.1–95.4 %, the error bar of P0's 75%
    assert _bar_errors(valid)[0] == (round(100 * lo, 6), round(100 * hi, 6))
    assert list(valid.lines[0].get_ydata()) == pytest.approx([75.0, 100.0, 500 / 6])
    assert list(counted_wrong.lines[0].get_ydata()) == pytest.approx([60.0, 100.0, 500 / 7])
    assert [line.get_label() for line in _lines_at(ax, 50)] == ["chance"]
    assert all(_title_inside(fig, a) for a in fig.axes)
    _close(fig)


# --------------------------------------------------------------------------- bias: positions, first option, W_avg


def _position_cells(n_valid, correct):
    cells = {str(p): {"accuracy": c / n, "f1": c / n, "n_valid": n, "n": n}
             for p, (n, c) in enumerate(zip(n_valid, correct, strict=True))}
    return {"positions": list(cells), "cells": cells, "w_avg": {"accuracy": sum(correct) / sum(n_valid), "f1": 0.5,
                                                                 "n_valid": sum(n_valid), "n": sum(n_valid)}}


def test_position_heatmap_shows_n_greys_small_cells_and_drops_empty_rows():
    # position 0: 3 of 3 right (n < 10: grey, never a bright "100%" cell); position 1: 9 of 12
    prism = {"semantic": {"all": _position_cells([3, 12], [3, 9])}}
    fig = PB.positions_figure([("zs", prism), ("ordering", None), ("tc", {})], "PRISM")
    ax, = [a for a in fig.axes if a.get_title()]  # the colour bar has no title
    assert [t.get_text() for t in ax.get_yticklabels()] == ["zs"]  # no empty "ordering" or "tc" row
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "W_avg"]
    texts = {round(t.get_position()[0]): t.get_text() for t in ax.texts}
    assert texts == {0: "100%\nF1 100\nn=3", 1: "75%\nF1 75\nn=12", 2: "80%\nF1 50\nn=15"}
    coloured, grey = ax.images
    assert list(coloured.get_array().mask[0]) == [True, False, False]  # 3 of 3 is left out of the colour scale
    assert list(grey.get_array().mask[0]) == [False, True, True]
    assert [t.get_style() for t in sorted(ax.texts, key=lambda t: t.get_position()[0])] == ["italic", "normal", "normal"]
    assert _title_inside(fig, ax)
    _close(fig)
    assert PB.positions_figure([("ordering", None)], "PRISM") is None


def test_first_option_chart_draws_the_wilson_interval_of_every_bar():
    fo = {"first_rate": 0.8, "first_rate_gold_first": 1.0, "first_rate_gold_second": 0.6, "n_valid": 10, "n_gold_first": 5,
          "n_gold_second": 5, "binomial_p": 0.109375,
          "wilson95": {"first_rate": list(wilson(8, 10)), "first_rate_gold_first": list(wilson(5, 5)),
                       "first_rate_gold_second": list(wilson(3, 5))}}
    fig = PB.first_option_figure([("zs", fo), ("empty", None)])
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == ["all", "gold first", "gold second"]
    assert [[round(b.get_height(), 6) for b in c] for c in bars] == [[80.0], [100.0], [60.0]]
    lo, hi = wilson(8, 10)
    assert _bar_errors(bars[0]) == [(round(100 * lo, 6), round(100 * hi, 6))]
    assert _bar_errors(bars[2]) == [tuple(round(100 * x, 6) for x in wilson(3, 5))]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["zs\nn=10 (5/5), p=0.11"]
    assert _title_inside(fig, ax)
    _close(fig)


def test_wavg_chart_leaves_out_runs_without_a_type1_subset():
    prism = {"semantic": {"all": _position_cells([4, 4], [4, 2])}}
    prism["semantic"]["all"]["w_avg"]["accuracy_ci95"] = list(wilson(6, 8))
    fig = PB.wavg_figure([("zs", prism), ("ordering", None)])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["zs"]
    lo, hi = wilson(6, 8)
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert _bar_errors(bars[0]) == [(round(100 * lo, 6), round(100 * hi, 6))]
    assert bars[1].errorbar is None or not any(_bar_errors(bars[1])[0])  # macro-F1 is not a rate: no interval
    assert _title_inside(fig, ax)
    _close(fig)
    assert PB.wavg_figure([("ordering", None)]) is None
