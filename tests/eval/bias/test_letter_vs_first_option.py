"""Letter bias and first-option bias told apart on constructed judge runs (issue #39): prediction rows
made by `eval judge`'s own row writer (``prediction_row``) over a balanced PRISM-like pairwise set
(layouts P0 / P4 / P6, gold A and B equally often; P4 shows the sequence labelled B first), answered by
a judge that always says "A" and by one that always picks the first-presented sequence. ``eval bias``
must name the preference each one has, in bias.json and in its printed summary line; and it must
refuse, writing nothing, a run with nothing to analyse."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from judgetrain.eval import bias as B
from judgetrain.eval.core import runs
from judgetrain.eval.judge.command import prediction_row
from judgetrain.io import RowAppender
from judgetrain.scoring import Generation


def _presentation(gold: str, layout: str) -> str:
    # the PRISM builder's rule (data_builders/prism/records.py): P4 shows B's images first
    return "gold_first" if (gold == "A") != (layout == "P4") else "gold_second"


def _record(k: int, gold: str, layout: str) -> dict:
    meta = {"presentation": _presentation(gold, layout), "positional_subset": True}
    return {
        "id": f"prism-{layout}-{k}",
        "task": "pairwise",
        "source": "prism",
        "layout": layout,
        "perturbation": "semantic-1",
        "position": k % 6,
        "n_frames": 6,
        "choices": ["A", "B"],
        "label": gold,
        "meta": json.dumps(meta),
    }


def _run(path, layouts, judge, per_layout=16, model="models/judge"):
    """A run folder as `eval judge` writes it: one row per record of ``per_layout`` items per layout,
    half with gold A, answered by ``judge(first_shown_letter)``."""
    rows = []
    for layout in layouts:
        for k in range(per_layout):
            record = _record(k, "AB"[k % 2], layout)
            first = "B" if layout == "P4" else "A"
            answer = judge(first)
            rows.append(prediction_row(record, Generation(f"Answer: {answer}", answer, True, 3, False), model, None))
    path.mkdir(parents=True)
    with RowAppender(path / runs.PREDICTIONS) as w:
        w.write(rows)
    (path / runs.RUN_INFO).write_text(json.dumps({"model": model, "adapter": None}))
    assert all(r["first_option"] == ("B" if r["layout"] == "P4" else "A") for r in rows)  # the real rows say it
    return path


def _summary(capsys, run, name):
    from judgetrain.cli import main as cli_main

    assert cli_main(["eval", "bias", str(run)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"{name}: ")]
    fo = json.loads((run / B.BIAS_JSON).read_text())["runs"][name]["first_option"]
    # "NAME: semantic W_avg acc % 50.0 [36.4, 63.6] (n=48); " then the presentation effect
    head, _, effect = line.partition("); ")
    assert head.startswith(f"{name}: semantic W_avg acc % "), line
    return effect, fo


def _rate(rates, k, n):
    lo, hi = rates.wilson(k, n)
    return f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] (n={n})"


def test_an_always_a_judge_shows_letter_bias_not_first_option_bias(tmp_path, capsys, rates):
    run = _run(tmp_path / "always-a", ("P0", "P4", "P6"), lambda first: "A", model="models/always-a")
    line, fo = _summary(capsys, run, "always-a")
    # 48 answers, all A; the first-shown sequence is chosen 32 times (P0, P6) and never under P4
    assert (fo["n_valid"], fo["chose_a"], fo["chose_first"]) == (48, 48, 32)
    assert fo["letter_rate"] == 1.0 and fo["letter_binomial_p"] == pytest.approx(2 / 2**48)
    assert fo["first_rate"] == pytest.approx(2 / 3) and fo["binomial_p"] == pytest.approx(0.0293, abs=1e-4)
    assert fo["wilson95"]["letter_rate"] == pytest.approx(rates.wilson(48, 48))
    assert (fo["n_a_first"], fo["n_b_first"]) == (32, 16)
    assert (fo["first_rate_a_first"], fo["first_rate_b_first"]) == (1.0, 0.0)
    assert (fo["letter_rate_a_first"], fo["letter_rate_b_first"]) == (1.0, 1.0)  # A whichever letter is first
    assert fo["first_rate_balanced"] == 0.5 and fo["letter_rate_balanced"] == 1.0
    assert fo["position_given_letter_p"] == 1.0 and fo["letter_given_position_p"] < 1e-6
    assert fo["verdict"] == "letter" and fo["first_explained_by_letter"] and not fo["letter_explained_by_first"]
    assert line == (
        f"letter bias (prefers A): answers A {_rate(rates, 48, 48)}, binomial p < 0.0001; "
        f"first-option rate {_rate(rates, 32, 48)}, binomial p = 0.0293 — explained by the letter preference "
        "(the first-shown sequence is chosen 100.0 % where A is shown first (n=32), 0.0 % where B is (n=16))"
    )
    md = (run / B.BIAS_REPORT).read_text()
    assert f"- **always-a**: {line}\n" in md
    assert rates.check(md) >= 10


@pytest.mark.parametrize("layouts", [("P0", "P4", "P6"), ("P0", "P4")])
def test_an_always_first_judge_shows_first_option_bias_not_letter_bias(tmp_path, capsys, rates, layouts):
    run = _run(tmp_path / "first", layouts, lambda first: first, model="models/first")
    line, fo = _summary(capsys, run, "first")
    n, n_b = 16 * len(layouts), 16
    assert (fo["n_valid"], fo["chose_first"], fo["chose_a"]) == (n, n, n - n_b)
    assert fo["first_rate"] == 1.0 and fo["binomial_p"] < 1e-4
    assert (fo["first_rate_a_first"], fo["first_rate_b_first"]) == (1.0, 1.0)  # first whichever letter that is
    assert fo["letter_rate_balanced"] == 0.5 and fo["letter_given_position_p"] == 1.0
    assert fo["position_given_letter_p"] < 1e-4
    assert fo["verdict"] == "first_option" and not fo["first_explained_by_letter"]
    assert line.startswith(f"first-option bias: chooses the first-shown {_rate(rates, n, n)}, binomial p < 0.0001; ")
    assert "letter bias" not in line
    if layouts == ("P0", "P4"):  # A shown first as often as B: the letter rate is 50% and nothing to explain
        assert fo["letter_rate"] == 0.5 and fo["letter_binomial_p"] == 1.0 and not fo["letter_significant"]
        assert line.endswith(f"; A rate {_rate(rates, 16, 32)}, binomial p = 1.0000")
    else:  # P0 and P6 show A first: A is answered 2 times in 3, which the first-option preference explains
        assert fo["letter_rate"] == pytest.approx(2 / 3) and fo["letter_explained_by_first"]
        assert line.endswith(
            f"; A rate {_rate(rates, 32, 48)}, binomial p = 0.0293 — explained by the first-option preference "
            "(A is answered 100.0 % where A is shown first (n=32), 0.0 % where B is (n=16))"
        )


def test_a_run_that_shows_a_first_everywhere_says_the_two_are_confounded(tmp_path, capsys):
    run = _run(tmp_path / "p0", ("P0",), lambda first: "A", model="models/p0")
    line, fo = _summary(capsys, run, "p0")
    assert fo["verdict"] == "confounded" and fo["position_given_letter_p"] is None and fo["n_b_first"] == 0
    assert "confounded" in line and "P4 shows B first" in line


def test_bias_refuses_a_run_with_nothing_to_analyse_and_writes_nothing(tmp_path):
    run = tmp_path / "pointwise"
    rows = [
        {
            "id": f"pw-{k}",
            "task": "pointwise",
            "label": "4",
            "prediction": "5",
            "valid": True,
            "layout": "P0",
            "perturbation": "none",
            "position": -1,
            "choices": ["1", "2", "3", "4", "5"],
        }
        for k in range(3)
    ]
    run.mkdir()
    with RowAppender(run / runs.PREDICTIONS) as w:
        w.write(rows)
    (run / runs.RUN_INFO).write_text(json.dumps({"model": "models/pointwise", "adapter": None}))
    good = _run(tmp_path / "good", ("P0", "P4"), lambda first: "A")
    before = {p.name for p in run.iterdir()}
    for argv, written in (([str(run)], run), ([str(good), str(run), "--out", str(tmp_path / "both")], tmp_path / "both")):
        done = subprocess.run(
            [sys.executable, "-m", "judgetrain", "eval", "bias", *argv], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2, done.stderr
        err = done.stderr
        assert str(run / runs.PREDICTIONS) in err and "pointwise 3" in err and str(good) not in err
        for needs in (
            "pairwise PRISM / MIRAGE records",
            "TimeCatch run",
            "ordering-probe run",
            "Nothing was written",
            "leave that run out",
        ):
            assert needs in err
        assert "Traceback" not in err
        assert {p.name for p in run.iterdir()} == before  # no bias.md, bias.json or figure
        assert not (written / B.BIAS_JSON).exists() and not (written / B.BIAS_REPORT).exists()
    assert not (tmp_path / "both").exists()
