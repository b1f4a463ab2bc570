"""PhaseFusion results that say what they measured (#39): report.md's Table A prints every accuracy
with its Wilson 95% interval and n and names the arm its Δ is against, the confirmatory family
words fusion's own-view row with the run's S, and margin.png keeps the single pass's line visible
when fusion draws the same points. The report comes from the tiny offline run of
docs/concepts/phasefusion.md (a tiny qwen3-vl, S = 2 phases, the dense16 arm as the reference)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judgetrain.eval.core import runs
from judgetrain.eval.phasefusion import plots as PP
from judgetrain.plotting import pyplot

ARMS = "single,fusion,vote,union,dense16"


@pytest.fixture(scope="module")
def run(tiny_model, clips, tmp_path_factory):
    """``judgetrain eval phasefusion`` as docs/concepts/phasefusion.md runs it (b = 4, S = 2, K = 3, dense16), on the three clips."""
    from judgetrain.cli import main

    out = tmp_path_factory.mktemp("pf-labels") / "run"
    argv = [
        "eval",
        "phasefusion",
        "--model",
        tiny_model("qwen3-vl"),
        "--manifest",
        clips,
        "--out",
        out,
        "--budget",
        "4",
        "--phases",
        "2",
        "--orderings",
        "3",
        "--arms",
        ARMS,
        "--latency-lines",
        "0",
        "--no-progress",
    ]
    assert main([str(a) for a in argv]) == 0
    return out, (out / runs.REPORT).read_text(), json.loads((out / runs.METRICS).read_text())


def _table_a(rates, md):
    return next((h, rows) for h, rows in rates.tables(md) if h[0] == "arm" and "peak MiB" in h and "acc. %" in h)


def test_table_a_prints_each_accuracy_with_its_wilson_interval_and_n(run, rates):
    _, md, m = run
    header, rows = _table_a(rates, md)
    n = m["table_a"]["n"]
    assert n == 3 and [r[0] for r in rows] == ARMS.split(",")
    by_arm = {r["arm"]: r for r in m["table_a"]["rows"]}
    for row in rows:
        for column, key in (("acc. %", "accuracy"), ("consensus %", "consensus_accuracy"), ("flip %", "flip_rate")):
            cell, value = row[header.index(column)], by_arm[row[0]][key]
            k = round(value * n)
            lo, hi = rates.wilson(k, n)
            assert cell == f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] (n={n})", (row[0], column, cell)
    # every accuracy of the report (Table B, phase sensitivity too) is a rate with its n and interval
    assert rates.check(md) >= 3 * len(rows)
    assert "Rates in %, each as value [Wilson 95% interval] (n = the items it counts)." in md


def test_table_a_names_the_arm_its_delta_is_against(run, rates):
    _, md, m = run
    assert m["table_a"]["reference"] == "dense16"  # the single pass with the most attention units
    header, rows = _table_a(rates, md)
    assert "Δ vs `dense16` (points)" in header and "95% CI of Δ" in header and "Δ vs ref." not in md
    delta = {r[0]: r[header.index("Δ vs `dense16` (points)")] for r in rows}
    assert delta["dense16"] == "reference"
    assert all(v.startswith(("+", "-")) for a, v in delta.items() if a != "dense16")
    assert "Reference: `dense16`, the single pass with the most attention units" in md


def test_the_own_view_row_of_the_family_is_worded_with_the_runs_s(run):
    out, md, m = run
    assert m["arms"]["fusion"]["views"] == 2 and json.loads((out / runs.RUN_INFO).read_text())["phases"] == 2
    family = md.split("## Multiplicity")[1].split("\n## ")[0]
    assert "| all | S = 2 vs. its own single views | phase 0 |" in family
    assert "| S = 2 vs. its own single views (Table S2's row at the paper's S = 3) |" in family
    assert "S = 3 vs. its own single views" not in md
    assert "| S = 3 vs. S = 2 phase count | not computed" in family  # the paper's comparison of two runs, as it is


# --------------------------------------------------------------------------- margin.png


def _items(n=12, seed=0):
    """Per-question answers of one arm (the keys :func:`margin_figure` reads), K = 3 orderings."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        top1 = float(rng.uniform(0.35, 0.95))
        margin = float(rng.uniform(0, top1 - 0.05))
        answers = [int(a) for a in rng.integers(0, 3, 3)]
        consensus = max(set(answers), key=answers.count)
        out.append(
            {
                "margin": margin,
                "top1": top1,
                "answers": answers,
                "identity": answers[0],
                "consensus": consensus,
                "flip": len(set(answers)) > 1,
                "correct": bool(rng.random() < 0.5),
                "consensus_correct": bool(rng.random() < 0.5),
            }
        )
    return out


def _pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)


def _shows(fig, line, min_pixels=30):
    """Pixels that clearly change (a channel by more than 100 of 255) when ``line`` is hidden: the part of it
    no other artist covers. A line drawn exactly under another changes only anti-aliased edges, by less."""
    with_it = _pixels(fig)
    line.set_visible(False)
    without = _pixels(fig)
    line.set_visible(True)
    return int((np.abs(with_it - without).max(axis=-1) > 100).sum()) >= min_pixels


def _inside(fig, artist, renderer):
    box, frame = artist.get_window_extent(renderer), fig.bbox
    return frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1


def test_margin_plot_keeps_every_series_visible_when_arms_agree():
    single = _items()
    fig = PP.margin_figure({}, {"single": single, "fusion": [dict(x) for x in single]})  # fusion = single everywhere
    try:
        _, reliability, risk = fig.axes
        pairs = ((reliability, "single", "fusion"), (risk, "single: margin", "fusion: margin"))
        for ax, a, b in pairs:
            lines = {line.get_label(): line for line in ax.get_lines()}
            assert np.array_equal(lines[a].get_xydata(), lines[b].get_xydata())  # the same points
            assert (lines[a].get_linestyle(), lines[a].get_marker()) != (lines[b].get_linestyle(), lines[b].get_marker())
            assert _shows(fig, lines[a]) and _shows(fig, lines[b]), (a, b)
        assert _shows(fig, next(x for x in risk.get_lines() if "vote share" in x.get_label()))
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            assert ax.get_legend() is not None and _inside(fig, ax.get_legend(), renderer)
            for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
                assert _inside(fig, text, renderer), text.get_text()
        assert [t.get_text() for t in reliability.get_legend().get_texts()] == ["single", "fusion"]
    finally:
        pyplot().close(fig)


def test_margin_png_of_the_run_is_written(run):
    out, md, _ = run
    assert (out / "margin.png").is_file() and "[![The one-pass margin" in md
