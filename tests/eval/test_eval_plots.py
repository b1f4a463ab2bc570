"""Figures a reader can trust: what the TimeCatch and judge charts draw, read from their matplotlib artists
(bars per class, chance lines, tick labels, axis labels, the title inside the figure)."""

from __future__ import annotations

import pytest

from judgetrain.eval import positional_bias as PB
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
    # a number in every column with items, none in frames 7–9; frame 11: 1 of 2 right, n = 2
    texts = {round(t.get_position()[0]): t.get_text() for t in ax.texts}
    assert sorted(texts) == [0, 1, 2, 3, 4, 5, 9, 10, 11]
    assert texts[10] == "0.50\n2" and texts[11] == f"{5 / 9:.2f}\n9"  # W_avg: 5 of 9 right
    assert ax.get_xlabel() == "frame (1-based; swap: earlier frame)" and _title_inside(fig, ax)
    _close(fig)
    assert TP.timecatch_positions_figure([("run", {})]) is None


# --------------------------------------------------------------------------- judge: pairwise by layout


def test_pairwise_layout_chart_labels_its_y_axis():
    pairwise = {"by_benchmark": {b: {"by_layout": {"P0": {"accuracy": 0.6, "f1": 0.5}, "P4": {"accuracy": 0.4, "f1": None}}}
                                 for b in ("PRISM", "MIRAGE")}}
    fig = JR.pairwise_layouts_figure(pairwise)
    assert [ax.get_ylabel() for ax in fig.axes] == ["accuracy / macro-F1 (0–1)"] * 2
    assert [ax.get_xlabel() for ax in fig.axes] == ["prompt layout"] * 2
    assert [[bar.get_height() for bar in c] for c in fig.axes[0].containers] == [[0.6, 0.4], [0.5, 0.0]]
    assert all(_title_inside(fig, ax) for ax in fig.axes)
    _close(fig)
