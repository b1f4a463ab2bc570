"""Positional-bias analysis on hand-built prediction files: per-position accuracy / macro-F1 and W_avg,
TimeCatch per true position, the first-option binomial and Fisher tests on known cases (expected
p-values from the binomial and hypergeometric pmfs by hand), the ordering signature, and the plots."""

from __future__ import annotations

import json
import math

import pytest

from judgetrain import config
from judgetrain.eval import bias as B
from judgetrain.eval.core import runs
from judgetrain.io import RowAppender


def _pw(
    position,
    label,
    prediction,
    *,
    perturbation="semantic-1",
    layout="P0",
    presentation=None,
    valid=True,
    positional_subset=True,
    n_frames=6,
    k=0,
):
    if presentation is None:
        presentation = "gold_first" if (label == "A") != (layout == "P4") else "gold_second"
    return {
        "id": f"{perturbation}-{position}-{layout}-{label}-{prediction}-{k}",
        "task": "pairwise",
        "perturbation": perturbation,
        "position": position,
        "layout": layout,
        "label": label,
        "prediction": prediction if valid else None,
        "valid": valid,
        "correct": valid and prediction == label,
        "choices": ["A", "B"],
        "presentation": presentation,
        "positional_subset": positional_subset,
        "n_frames": n_frames,
    }


def test_position_table_accuracy_f1_and_weighted_average():
    from sklearn.metrics import f1_score
    from statsmodels.stats.proportion import proportion_confint

    rows = [
        # outlier at position 0: 4 answers, 3 right (A A B B vs A A B A)
        _pw(0, "A", "A", k=1),
        _pw(0, "A", "A", k=2),
        _pw(0, "B", "B", k=3),
        _pw(0, "B", "A", k=4),
        # position 1: 3 answers, one invalid; of the two valid, one right
        _pw(1, "A", "B", k=5),
        _pw(1, "B", "B", k=6),
        _pw(1, "A", None, valid=False, k=7),
        # not in the positional subset: ignored
        _pw(2, "A", "A", positional_subset=False, k=8),
        # swaps
        _pw(0, "A", "B", perturbation="swap", k=9),
        _pw(4, "B", "B", perturbation="swap", k=10),
    ]
    sem = B.position_table(B.type1_rows(rows, "semantic"), "semantic")
    assert sem["positions"] == ["0", "1"]
    assert sem["cells"]["0"]["accuracy"] == pytest.approx(3 / 4)
    assert sem["cells"]["0"]["f1"] == pytest.approx(f1_score(["A", "A", "B", "B"], ["A", "A", "B", "A"], average="macro"))
    assert sem["cells"]["1"]["n_valid"] == 2 and sem["cells"]["1"]["n_invalid"] == 1 and sem["cells"]["1"]["accuracy"] == 0.5
    # W_avg: valid-answer weights 4 and 2
    assert sem["w_avg"]["accuracy"] == pytest.approx((4 * 3 / 4 + 2 * 0.5) / 6)
    assert sem["w_avg"]["f1"] == pytest.approx((4 * sem["cells"]["0"]["f1"] + 2 * sem["cells"]["1"]["f1"]) / 6)
    assert (sem["w_avg"]["n"], sem["w_avg"]["n_valid"]) == (7, 6)
    # the valid-answer-weighted accuracy is the pooled one, 4 of 6, so it has a Wilson interval
    assert sem["w_avg"]["correct"] == 4 and sem["w_avg"]["accuracy"] == pytest.approx(4 / 6)
    assert sem["w_avg"]["accuracy_ci95"] == pytest.approx(list(proportion_confint(4, 6, method="wilson")))
    tmp = B.position_table(B.type1_rows(rows, "temporal"), "temporal")
    assert tmp["positions"] == ["0-1", "4-5"] and tmp["cells"]["4-5"]["accuracy"] == 1.0
    # rows without the flag qualify by length (at most 6 frames)
    bare = [{k: v for k, v in _pw(3, "A", "A", n_frames=n, k=n).items() if k != "positional_subset"} for n in (6, 7)]
    assert [r["n_frames"] for r in B.type1_rows(bare, "semantic")] == [6]


def _binomial_two_sided(k, n):
    """Exact two-sided binomial p for P = 1/2 by hand: the symmetric tails."""
    tail = sum(math.comb(n, i) for i in range(max(k, n - k), n + 1)) / 2**n
    return min(1.0, 2 * tail)


def test_first_option_binomial_test_on_a_known_case():
    from statsmodels.stats.proportion import proportion_confint

    # 10 valid answers, balanced presentation; the judge always answers A under P0 (A shown first)
    # except twice: 8 of 10 choose the first-shown sequence.
    rows = []
    for k in range(5):
        rows.append(_pw(0, "A", "A", k=k))  # gold first, chose first: right
        rows.append(_pw(0, "B", "A" if k < 3 else "B", k=10 + k))  # gold second: 3 chose first (wrong), 2 right
    rows.append(_pw(0, "A", None, valid=False, k=99))  # invalid: left out
    fo = B.first_option_bias(rows)
    assert (fo["n"], fo["n_valid"], fo["n_gold_first"], fo["n_gold_second"]) == (11, 10, 5, 5)
    assert fo["chose_first"] == 8 and fo["first_rate"] == 0.8
    want = (math.comb(10, 8) + math.comb(10, 9) + math.comb(10, 10)) * 2 / 1024  # = 112/1024
    assert fo["binomial_p"] == pytest.approx(want) == pytest.approx(_binomial_two_sided(8, 10))
    lo, hi = proportion_confint(8, 10, alpha=0.05, method="beta")  # Clopper–Pearson, computed by statsmodels
    assert fo["first_rate_ci95"] == pytest.approx([lo, hi])
    # beside it, the Wilson interval of every rate, over the rows each one counts
    wilson = {
        key: list(proportion_confint(k, n, method="wilson"))
        for key, k, n in (("first_rate", 8, 10), ("first_rate_gold_second", 3, 5), ("accuracy_gold_second", 2, 5))
    }
    assert {key: fo["wilson95"][key] for key in wilson} == {key: pytest.approx(v) for key, v in wilson.items()}
    assert fo["first_rate_gold_first"] == 1.0 and fo["first_rate_gold_second"] == pytest.approx(3 / 5)
    assert fo["accuracy_gold_first"] == 1.0 and fo["accuracy_gold_second"] == pytest.approx(2 / 5)
    assert fo["accuracy_gap"] == pytest.approx(3 / 5)
    # Fisher's exact test of [[5, 0], [2, 3]] by hand: tables with the same margins (7 right, 3 wrong; 5 and 5),
    # P(a right in row 1) = C(7,a) C(3,5-a) / C(10,5); two-sided = sum over tables no more likely than observed
    pmf = {a: math.comb(7, a) * math.comb(3, 5 - a) / math.comb(10, 5) for a in range(2, 6)}
    assert fo["fisher_p"] == pytest.approx(sum(p for p in pmf.values() if p <= pmf[5] * (1 + 1e-9)))
    assert fo["a_rate_gold_first"] == 1.0 and fo["a_rate_gold_second"] == pytest.approx(3 / 5)


def test_first_shown_follows_the_presentation_under_p4():
    # P4 shows B first: gold B is then gold_first and answering B is choosing the first-shown sequence
    rows = [_pw(0, "B", "B", layout="P4", k=1), _pw(0, "A", "B", layout="P4", k=2)]
    assert [r["presentation"] for r in rows] == ["gold_first", "gold_second"]
    fo = B.first_option_bias(rows)
    assert fo["chose_first"] == 2 and fo["a_rate_gold_first"] == 0.0 and fo["binomial_p"] == pytest.approx(0.5)
    assert B.first_option_bias([{"task": "pairwise", "presentation": None, "prediction": "A"}]) is None


def _tc(task, position, label, prediction, n_frames=5, k=0):
    return {
        "id": f"{task}-{position}-{k}",
        "task": task,
        "position": position,
        "label": label,
        "prediction": prediction,
        "correct": label == prediction,
        "choices": [str(i) for i in range(1, n_frames + 1)],
        "n_frames": n_frames,
    }


def test_timecatch_accuracy_by_true_position():
    from judgetrain.eval.core.stats import wilson

    rows = [
        _tc("frame_localize", 0, "1", "1", k=1),
        _tc("frame_localize", 0, "1", "3", k=2),
        _tc("frame_localize", 3, "4", "4", k=3),
        _tc("frame_detect", -1, "no", "no", k=4),
        _tc("frame_detect", 2, "yes", "no", k=5),
    ]
    tc = B.timecatch_positions(rows)
    assert list(tc) == ["frame_detect", "frame_localize"]
    fl = tc["frame_localize"]
    assert fl["positions"] == ["1", "4"] and fl["cells"]["1"]["accuracy"] == 0.5 and fl["cells"]["4"]["n"] == 1
    assert fl["w_avg"] == {"accuracy": pytest.approx(2 / 3), "n": 3, "correct": 2, "ci95": pytest.approx(list(wilson(2, 3)))}
    assert (
        tc["frame_detect"]["positions"] == ["3"] and tc["frame_detect"]["cells"]["3"]["accuracy"] == 0.0
    )  # intact item left out


def _write_run(path, rows, model):
    path.mkdir(parents=True)
    with RowAppender(path / runs.PREDICTIONS) as w:
        w.write(rows)
    (path / runs.RUN_INFO).write_text(json.dumps({"model": model, "adapter": None}))


def test_bias_command_on_two_hand_built_runs(tmp_path, capsys):
    from judgetrain.cli import main as cli_main

    first_biased = [
        _pw(p, lab, "A", layout=lay, k=i)
        for i, (p, lab, lay) in enumerate([(p, lab, lay) for p in range(6) for lab in "AB" for lay in ("P0", "P4")])
    ]
    first_biased += [_pw(p, lab, "A", perturbation="swap", k=100 + p) for p in range(5) for lab in "AB"]
    first_biased += [
        {"id": "o1", "task": "ordering", "label": "3, 1, 2, 4", "prediction": "4, 3, 2, 1", "valid": True},
        {"id": "o2", "task": "ordering", "label": "2, 1, 4, 3", "prediction": None, "valid": False},
    ]
    perfect = [dict(r, prediction=r["label"], correct=True) for r in first_biased if r["task"] == "pairwise"]
    _write_run(tmp_path / "zs", first_biased, "models/zero-shot")
    _write_run(tmp_path / "ft", perfect, "models/tuned")
    _write_run(tmp_path / "tc", [_tc("frame_localize", 1, "2", "2", k=1)], "models/tc")
    out = tmp_path / "bias"
    assert cli_main(["eval", "bias", str(tmp_path / "zs"), str(tmp_path / "ft"), str(tmp_path / "tc"), "--out", str(out)]) == 0
    b = json.loads((out / B.BIAS_JSON).read_text())
    assert list(b["runs"]) == ["zero-shot", "tuned", "tc"]
    zs, ft = b["runs"]["zero-shot"], b["runs"]["tuned"]
    assert zs["prism_positions"]["semantic"]["all"]["positions"] == ["0", "1", "2", "3", "4", "5"]
    assert zs["prism_positions"]["semantic"]["all"]["w_avg"]["accuracy"] == 0.5
    assert set(zs["prism_positions"]["semantic"]["by_layout"]) == {"P0", "P4"}
    w = ft["prism_positions"]["temporal"]["all"]["w_avg"]
    assert {k: w[k] for k in ("accuracy", "f1", "n", "n_valid", "correct")} == {
        "accuracy": 1.0,
        "f1": 1.0,
        "n": 10,
        "n_valid": 10,
        "correct": 10,
    }
    # answering A always: first-shown under P0 and the swaps, second-shown under P4
    fo = zs["first_option"]
    assert fo["n_valid"] == 34 and fo["chose_first"] == 12 + 10
    assert fo["binomial_p"] == pytest.approx(_binomial_two_sided(22, 34))
    assert fo["by_layout"]["P4"]["first_rate"] == 0.0 and fo["by_layout"]["P0"]["first_rate"] == 1.0
    assert ft["first_option"]["first_rate"] == 0.5 and ft["first_option"]["binomial_p"] == 1.0
    assert zs["ordering"]["reverse_label_order"] == 1 and zs["ordering"]["invalid_rate"] == 0.5
    assert b["runs"]["tc"]["timecatch_positions"]["frame_localize"]["cells"]["2"]["accuracy"] == 1.0
    for fig in (
        "bias_positions.png",
        "bias_positions_by_layout.png",
        "bias_wavg.png",
        "bias_first_option.png",
        "bias_timecatch_positions.png",
    ):
        assert (out / fig).stat().st_size > 1000 and fig in b["figures"]
    md = (out / B.BIAS_REPORT).read_text()
    assert "| zero-shot | 50.0 [15.0, 85.0] (n=4) / 33.3 |" in md  # position 0: A,A,B,B gold, all answered A
    assert "| tuned | 100.0 [51.0, 100.0] (n=4) / 100.0 |" in md
    # the TimeCatch-only run has no PRISM row: no empty row in the tables (or the heatmap)
    assert "| tc |" not in md.split("## TimeCatch")[0]
    assert "--names zero-shot,tuned,tc" in md
    assert "Bias report in" in capsys.readouterr().out
    with pytest.raises(ValueError, match="--out"):
        B.bias([tmp_path / "zs", tmp_path / "ft"])
    with pytest.raises(FileNotFoundError, match="predictions.jsonl"):
        B.bias([tmp_path / "nothing"])


def test_bias_config_takes_run_folders_as_bare_words(tmp_path, capsys):
    from pathlib import Path

    from judgetrain.cli import main as cli_main

    (cfg,) = config.parse(B.make_parser(), ["results/ov"])
    assert cfg.runs == [Path("results/ov")] and cfg.names is None and cfg.out is None
    (cfg,) = config.parse(B.make_parser(), ["a", "b", "--names", "zero-shot,LoRA", "--out", "results/bias"])
    assert (cfg.runs, cfg.names, cfg.out) == ([Path("a"), Path("b")], ["zero-shot", "LoRA"], Path("results/bias"))
    yaml_file = tmp_path / "bias.yaml"
    yaml_file.write_text("runs: [a, b]\nnames: [x, y]\nout: o\n")
    (cfg,) = config.parse(B.make_parser(), ["--config", str(yaml_file)])
    assert (cfg.runs, cfg.names, cfg.out) == ([Path("a"), Path("b")], ["x", "y"], Path("o"))
    # every problem at once, before any run folder is read
    with pytest.raises(config.ConfigError) as e:
        config.parse(B.make_parser(), ["a", "b", "--names", "x,y,z"])
    assert "--out DIR" in str(e.value) and "3 name(s) for 2 run(s)" in str(e.value)
    assert cli_main(["eval", "bias", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "pass --out DIR for the combined analysis" in capsys.readouterr().err
