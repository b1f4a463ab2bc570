"""Every rate in every report carries its n and Wilson 95% interval (issue 26): a test reads each
report — TimeCatch, judge, positional bias — and the `eval compare` table, built from small run
folders (a hand-written `predictions.jsonl` + `run.json`, rebuilt through `eval report`'s code
path), checks every rate column (tests/eval/conftest.py: `check_rates`), and checks one Wilson
value against the formula worked by hand (k = 3 of n = 4: [30.1, 95.4] %)."""

from __future__ import annotations

import json
import re

import pytest

from judgetrain.cli import main as cli_main
from judgetrain.eval import bias as B
from judgetrain.eval.core import runs
from judgetrain.eval.core.compare import compare
from judgetrain.eval.judge import report as JR
from judgetrain.eval.timecatch import report as TR
from judgetrain.io import write_json, write_rows

YN = ["yes", "no"]


def _run(path, evaluation, rows, **info):
    path.mkdir(parents=True)
    write_rows(path / runs.PREDICTIONS, rows)
    write_json(path / runs.RUN_INFO, {"evaluation": evaluation, "model": f"models/{path.name}", "adapter": None,
                                      "data": "d", "split": "test", "identity": {"data": {"sha256": "d0"}},
                                      "items": {"n": len(rows), "ids": [r["id"] for r in rows]}, **info})
    return path


def _td(i, right, source="clevrer"):
    """Temporal detection of an intact sequence (gold "no"), answered right or wrong."""
    return {"id": f"td-{source}-{i}", "task": "temporal_detect", "source": source, "subset": "main", "label": "no",
            "prediction": "no" if right else "yes", "correct": right, "choices": YN, "position": -1, "n_frames": 4,
            "lpips_swapped": None}


def _timecatch_rows(right):
    """4 TD clevrer items, the first ``right`` answered right; a swapped pair with LPIPS; one FL item."""
    rows = [_td(i, i < right) for i in range(4)]
    swapped = {"id": "td-swap", "task": "temporal_detect", "source": "craft", "subset": "main", "label": "yes",
               "prediction": "yes", "correct": True, "choices": YN, "position": 1, "n_frames": 4, "lpips_swapped": 0.12,
               "sequence_id": "s1", "layout": "A", "perturbation": "swap"}
    intact = dict(swapped, id="td-intact", label="no", prediction="yes", correct=False, position=-1, lpips_swapped=None,
                  perturbation="none")
    fl = {"id": "fl-1", "task": "frame_localize", "source": "clevrer", "subset": "long", "label": "2", "prediction": "2",
          "correct": True, "choices": ["1", "2", "3", "4", "5", "6", "7", "8", "9"], "position": 1, "n_frames": 9,
          "lpips_swapped": None}
    return [*rows, swapped, intact, fl]


def _three_of_four(rates):
    lo, hi = rates.wilson(3, 4)
    assert (round(100 * lo, 1), round(100 * hi, 1)) == (30.1, 95.4)  # 0.3006…, 0.9544…
    return lo, hi, f"75.0 [{100 * lo:.1f}, {100 * hi:.1f}] (n=4)"


def test_timecatch_report_prints_every_rate_with_n_and_wilson(tmp_path, rates):
    run = _run(tmp_path / "zs", "timecatch", _timecatch_rows(3))
    m = TR.report(run)
    lo, hi, cell = _three_of_four(rates)
    assert m["table2"]["main"]["temporal_detect"]["clevrer"]["ci95"] == pytest.approx([lo, hi])
    md = (run / runs.REPORT).read_text()
    assert rates.check(md) >= 10  # Table 2, the long set, by length, LPIPS bins
    table2 = next(rows for header, rows in rates.tables(md) if header[0] == "" and "clevrer" in header[1])
    assert next(r for r in table2 if r[0] == "zs")[1] == cell  # TD clevrer: 3 of 4
    assert "| Random | 50.0 |" in md and "| n | 4 |" in md  # the paper's rows stay
    lpips = next(rows for header, rows in rates.tables(md) if header[0] == "LPIPS bin")
    assert lpips[1][1:3] == ["100.0 [20.7, 100.0] (n=1)", "0.0 [0.0, 79.3] (n=1)"]  # 1 of 1, 0 of 1
    # the balanced accuracy, 50 %, with the interval its two classes' Wilson intervals make (MOVER)
    (l1, _), (_, u2) = rates.wilson(1, 1), rates.wilson(0, 1)
    below, above = 0.5 * ((1 - l1) ** 2 + 0**2) ** 0.5, 0.5 * (0**2 + u2**2) ** 0.5  # swapped 1 of 1, intact 0 of 1
    assert re.fullmatch(r"50\.0 \[(\d+\.\d), (\d+\.\d)\] \(n=2\)", lpips[1][3]), lpips[1][3]
    assert [float(x) for x in re.findall(r"\d+\.\d", lpips[1][3])[1:3]] == pytest.approx([100 * (0.5 - below), 100 * (0.5 + above)], abs=0.06)
    assert "Wilson 95% interval" in md


def _pair(i, label, prediction, layout="P0", subset="PRISM-Semantic"):
    return {"id": f"pw-{layout}-{i}", "task": "pairwise", "layout": layout, "subset": subset, "label": label,
            "prediction": prediction, "valid": prediction is not None, "correct": prediction == label,
            "choices": ["A", "B"], "method": "score", "presentation": "gold_first" if label == "A" else "gold_second",
            "perturbation": "semantic-1", "position": i % 2, "positional_subset": True, "n_frames": 4}


def _judge_rows():
    # P0: 4 valid answers, 3 right, one invalid; P4: 2 valid, both right
    pw = [_pair(0, "A", "A"), _pair(1, "B", "B"), _pair(2, "A", "A"), _pair(3, "B", "A"), _pair(4, "A", None),
          _pair(5, "A", "A", "P4"), _pair(6, "B", "B", "P4")]
    point = [{"id": f"pt-{i}", "task": "pointwise", "layout": "P0", "subset": "PRISM-Semantic", "label": g, "prediction": p,
              "valid": True, "correct": g == p, "choices": ["1", "2", "3", "4", "5"], "method": "score",
              "teacher_answer": "2"} for i, (g, p) in enumerate([("5", "5"), ("2", "1"), ("4", "4")])]
    order = [{"id": f"o{i}", "task": "ordering", "label": gold, "prediction": said, "valid": True, "method": "generate"}
             for i, (gold, said) in enumerate([("2, 1, 3", "2, 1, 3"), ("3, 1, 2", "1, 2, 3")])]
    return pw + point + order


def test_judge_report_prints_every_rate_in_percent_with_n_and_wilson(tmp_path, rates):
    run = _run(tmp_path / "judge", "judge", _judge_rows(), mode="score")
    m = JR.report(run)
    lo, hi, cell = _three_of_four(rates)
    p0 = m["pairwise"]["by_layout"]["P0"]
    assert (p0["correct"], p0["n_valid"], p0["n"]) == (3, 4, 5)
    assert p0["accuracy_ci95"] == pytest.approx([lo, hi]) and p0["accuracy_all_ci95"] == pytest.approx(rates.wilson(3, 5))
    md = (run / runs.REPORT).read_text()
    assert rates.check(md) >= 12  # pairwise by layout and subset, pointwise, score shares, ordering
    layouts = next(rows for header, rows in rates.tables(md) if header[:2] == ["layout", "Acc"])
    lo5, hi5 = rates.wilson(3, 5)
    # % like every report: Acc 3/4, Acc (invalid = wrong) 3/5, macro P/R/F1 of A A B B vs A A B A
    assert layouts[0][:6] == ["P0", cell, f"60.0 [{100 * lo5:.1f}, {100 * hi5:.1f}] (n=5)", "83.3", "75.0", "73.3"]
    order = next(rows for header, rows in rates.tables(md) if header[0] == "exact match")
    assert order[0][0] == "50.0 [9.5, 90.5] (n=2)" and order[0][4] == "16.7"  # chance: 1/3! in %


def test_bias_report_prints_every_rate_with_n_and_wilson(tmp_path, rates):
    run = _run(tmp_path / "judge", "judge", _judge_rows(), mode="score")
    result = B.bias([run])
    md = (run / B.BIAS_REPORT).read_text()
    assert rates.check(md) >= 10  # positions, by layout, first option (and by layout), ordering
    # P0 and P4 together: 6 valid answers, A shown first in every row, A answered 4 times
    fo = result["runs"]["judge"]["first_option"]
    assert (fo["chose_first"], fo["n_valid"]) == (4, 6)
    assert fo["wilson95"]["first_rate"] == pytest.approx(rates.wilson(4, 6))
    assert fo["first_rate_ci95"] != pytest.approx(fo["wilson95"]["first_rate"])  # the exact interval stays beside it
    w = result["runs"]["judge"]["prism_positions"]["semantic"]["all"]["w_avg"]
    assert (w["correct"], w["n_valid"]) == (5, 6) and w["accuracy_ci95"] == pytest.approx(rates.wilson(5, 6))
    by_layout = next(rows for header, rows in rates.tables(md) if header[:2] == ["run", "layout"])
    _, _, cell = _three_of_four(rates)
    assert by_layout[0][:3] == ["judge", "P0", cell]  # P0: 3 of 4 valid answers chose the first-shown


def test_compare_cells_carry_n_and_wilson_and_delta_names_the_runs(tmp_path, rates, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # the terminal table side by side, each cell on one line
    zs = _run(tmp_path / "ZS", "timecatch", _timecatch_rows(3))
    ft = _run(tmp_path / "FT", "timecatch", _timecatch_rows(4))
    for r in (zs, ft):
        TR.report(r)
    out = tmp_path / "cmp.md"
    assert cli_main(["eval", "compare", str(zs), str(ft), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    md = out.read_text()
    (header, rows), = rates.tables(md)
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    _, _, cell = _three_of_four(rates)
    assert by["ZS"]["TD clevrer"] == cell and by["FT"]["TD clevrer"] == "100.0 [51.0, 100.0] (n=4)"
    assert by["Δ FT"]["TD clevrer"] == f"+25.0 {rates.delta(3, 4, 4, 4)} (FT vs ZS, n=4/4)"
    assert re.fullmatch(r"\+0\.0 \[-\d+\.\d, \+\d+\.\d\] \(FT vs ZS, n=1/1\)", by["Δ FT"]["FL clevrer long"])
    for label in ("ZS", "FT"):  # every run cell of TimeCatch is a rate
        assert all(rates.is_rate(c) for c in list(by[label].values())[1:]), by[label]
    assert "Wilson 95% interval" in md and f"+25.0 {rates.delta(3, 4, 4, 4)} (FT vs ZS, n=4/4)" in printed
    assert "different items" not in md

    # a run on fewer items: refused, then compared with a plain line naming how many items differ
    fewer = _run(tmp_path / "few", "timecatch", _timecatch_rows(4)[1:])
    TR.report(fewer)
    assert cli_main(["eval", "compare", str(zs), str(fewer)]) == 2
    capsys.readouterr()
    result = compare([zs, fewer], allow_different_data=True)
    assert result["items"] == {"few": {"n_first": 7, "n_other": 6, "only_first": 1, "only_other": 0}}
    assert ("few and ZS were evaluated on different items (missing from few: 1 of ZS's 7; missing from ZS: 0 of "
            "few's 6)") in result["markdown"]
    (header, rows), = rates.tables(result["markdown"])
    assert dict(zip(header, rows[2], strict=True))["TD clevrer"] == f"+25.0 {rates.delta(3, 4, 3, 3)} (few vs ZS, n=3/4)"
    assert cli_main(["eval", "compare", str(zs), str(fewer), "--allow-different-data"]) == 0
    assert "few and ZS were evaluated on different items" in capsys.readouterr().out


def test_compare_of_judge_runs_gives_rates_an_interval_and_f1_its_n(tmp_path, rates):
    base = _run(tmp_path / "base", "judge", _judge_rows(), mode="score")
    fixed = _run(tmp_path / "fixed", "judge", [dict(r, prediction=r["label"], correct=True, valid=True)
                                              if r["task"] == "pairwise" else r for r in _judge_rows()], mode="score")
    for r in (base, fixed):
        JR.report(r)
    result = compare([base, fixed])
    (header, rows), = rates.tables(result["markdown"])
    by = {r[0]: dict(zip(header, r, strict=True)) for r in rows}
    lo, hi = rates.wilson(5, 6)  # P0 and P4: 5 of 6 valid answers right
    assert by["base"]["pairwise Acc all"] == f"83.3 [{100 * lo:.1f}, {100 * hi:.1f}] (n=6)"
    assert by["fixed"]["pairwise Acc all"] == "100.0 [64.6, 100.0] (n=7)"
    assert by["base"]["pairwise F1 all"].endswith("(n=6)") and "[" not in by["base"]["pairwise F1 all"]
    assert by["Δ fixed"]["pairwise Acc all"] == f"+16.7 {rates.delta(5, 6, 7, 7)} (fixed vs base, n=7/6)"
    assert by["base"]["ordering exact match"] == "50.0 [9.5, 90.5] (n=2)"
    assert json.loads((base / runs.METRICS).read_text())["ordering"]["exact"] == 1
