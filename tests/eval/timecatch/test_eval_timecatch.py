"""TimeCatch evaluation: metric values on hand-worked examples, predictions I/O, resume after
SIGKILL, finished runs never rescored, report/compare, data-parallel over two CPU processes."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgetrain import config
from judgetrain.eval import timecatch as T
from judgetrain.eval.core import compare as C, runs
from judgetrain.eval.timecatch import metrics as M, report as R
from judgetrain.io import RowAppender

LIMIT = 8  # the first 8 validation records hold all four tasks
ROOT = Path(__file__).resolve().parents[3]


def _row(task, label, prediction, choices, source="clevrer", subset="main", position=-1, n_frames=4, lpips=None):
    return {"id": f"{task}-{label}-{prediction}-{source}-{subset}-{position}-{lpips}", "task": task, "source": source,
            "subset": subset, "label": label, "prediction": prediction, "correct": label == prediction,
            "choices": choices, "position": position, "n_frames": n_frames, "lpips_swapped": lpips}


YN = ["yes", "no"]


def _pairs(n):
    return [f"{i} and {j}" for i in range(1, n + 1) for j in range(i + 1, n + 1)]


def _frames(n):
    return [str(i) for i in range(1, n + 1)]


# --------------------------------------------------------------------------- metrics, hand-worked


def test_accuracy_and_random_row_hand_worked():
    rows = [
        _row("temporal_detect", "yes", "yes", YN, lpips=0.05),
        _row("temporal_detect", "no", "yes", YN),
        _row("temporal_detect", "yes", "yes", YN, lpips=0.31),
        _row("temporal_localize", "2 and 3", "2 and 3", _pairs(4), position=1, n_frames=4),     # C(4,2) = 6
        _row("temporal_localize", "1 and 2", "3 and 4", _pairs(5), position=0, n_frames=5),     # C(5,2) = 10
        _row("frame_localize", "3", "1", _frames(4), position=2, n_frames=4),
        _row("frame_localize", "8", "8", _frames(8), position=7, n_frames=8, subset="main"),
        _row("frame_localize", "10", "2", _frames(10), position=9, n_frames=10, subset="long"),
        _row("frame_detect", "no", "no", YN, source="craft"),
    ]
    t = M.accuracy_table(rows)
    from statsmodels.stats.proportion import proportion_confint

    assert t["temporal_detect"]["clevrer"] == {"accuracy": 2 / 3, "random": 0.5, "n": 3, "correct": 2,
                                               "ci95": pytest.approx(list(proportion_confint(2, 3, method="wilson")))}
    assert t["temporal_localize"]["clevrer"]["accuracy"] == 0.5
    assert t["temporal_localize"]["clevrer"]["random"] == pytest.approx((1 / 6 + 1 / 10) / 2)
    assert t["frame_localize"]["clevrer"]["accuracy"] == pytest.approx(1 / 3)
    assert t["frame_localize"]["clevrer"]["random"] == pytest.approx((1 / 4 + 1 / 8 + 1 / 10) / 3)
    one_of_one = {"accuracy": 1.0, "random": 0.5, "n": 1, "correct": 1, "ci95": pytest.approx([0.2065, 1.0], abs=1e-4)}
    assert t["frame_detect"] == {"craft": one_of_one, "all": one_of_one}
    assert list(t) == list(M.TIMECATCH_TASKS)  # paper order, whatever the row order

    s = M.subset_table(rows)
    assert s["frame_localize"]["main"]["n"] == 2 and s["frame_localize"]["main"]["accuracy"] == 0.5
    assert s["frame_localize"]["long"] == {"accuracy": 0.0, "random": 0.1, "n": 1, "correct": 0,
                                           "ci95": pytest.approx([0.0, 0.7935], abs=1e-4)}

    # LPIPS: only swapped rows, 0.1-wide bins, 0.31 in bin 3 (empty bins 1, 2 kept with n = 0)
    bins = M.lpips_bins(rows)
    assert [(b["lo"], b["hi"], b["n"]) for b in bins] == [(0.0, 0.1, 1), (0.1, 0.2, 0), (0.2, 0.3, 0), (0.3, 0.4, 1)]
    assert bins[0]["accuracy"] == 1.0 and math.isnan(bins[1]["accuracy"])
    # a value exactly on an edge goes up (0.3 / 0.1 is 2.999… in floating point)
    assert M.lpips_bins([_row("temporal_detect", "yes", "no", YN, lpips=0.3)])[-1]["lo"] == 0.3


def test_confusion_bins_temporal_localization_by_the_pair_and_normalises_rows():
    rows = [
        _row("temporal_localize", "2 and 3", "2 and 3", _pairs(4), position=1, n_frames=4),
        _row("temporal_localize", "2 and 3", "2 and 4", _pairs(4), position=1, n_frames=4),  # same first frame: off the diagonal
        _row("temporal_localize", "1 and 2", "4 and 2", _pairs(4), position=0, n_frames=4),
        _row("temporal_localize", "1 and 2", "neither", _pairs(4), position=0, n_frames=4),  # counted, not dropped
        _row("frame_localize", "4", "4", _frames(4), position=3, n_frames=4),
        _row("frame_localize", "2", "?", _frames(4), position=1, n_frames=4),
    ]
    c = M.confusion(rows, "temporal_localize")
    assert c["labels"] == ["1 and 2", "2 and 3", "2 and 4", "3 and 4", "none"]
    assert c["counts"] == [[0, 0, 1, 0, 1], [0, 1, 1, 0, 0], [0] * 5, [0] * 5, [0] * 5]
    diagonal = sum(c["counts"][i][i] for i in range(len(c["labels"])))
    correct = sum(r["prediction"] == r["label"] for r in rows if r["task"] == "temporal_localize")
    assert diagonal == correct == 1
    assert c["normalized"][0] == [0.0, 0.0, 0.5, 0.0, 0.5] and c["normalized"][1] == [0.0, 0.5, 0.5, 0.0, 0.0]
    f = M.confusion(rows, "frame_localize")
    assert f["labels"] == [1, 2, 3, 4, "none"] and f["counts"][3] == [0, 0, 0, 1, 0] and f["counts"][1] == [0, 0, 0, 0, 1]
    assert M.confusion(rows, "frame_detect") is None


# --------------------------------------------------------------------------- predictions I/O, report, compare


def test_partial_last_line_is_dropped_and_bad_middle_line_named(tmp_path):
    p = tmp_path / runs.PREDICTIONS
    with RowAppender(p) as w:
        w.write([{"id": "a"}, {"id": "b"}])
    with open(p, "a") as f:
        f.write('{"id": "c", "task": "tempo')
    assert [r["id"] for r in runs.read_predictions(p)] == ["a", "b"]
    assert runs.repair_predictions(p) == 2
    assert p.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    p.write_text('{"id": "a"}\nnot json\n{"id": "b"}\n')
    with pytest.raises(runs.PredictionsError, match="line 2"):
        runs.read_predictions(p)


def _write_run(run, rows, model="m"):
    run.mkdir(parents=True)
    with RowAppender(run / runs.PREDICTIONS) as w:
        w.write(rows)
    (run / runs.RUN_INFO).write_text(json.dumps({"evaluation": "timecatch", "model": model, "adapter": None, "data": "d", "split": "test",
                                              "world_size": 1, "command": "judgetrain eval timecatch --model m"}))


def _runs(tmp_path):
    base = [_row("temporal_detect", "yes", "yes", YN, source="clevrer", lpips=0.12),
            _row("temporal_detect", "no", "yes", YN, source="clevrer"),
            _row("temporal_detect", "no", "no", YN, source="craft"),
            _row("frame_localize", "2", "1", _frames(4), source="clevrer", position=1)]
    tuned = [dict(r, prediction=r["label"], correct=True) for r in base[:3]] + [dict(base[3])]
    _write_run(tmp_path / "base", base, "base-model")
    _write_run(tmp_path / "tuned", tuned, "tuned-model")
    return tmp_path / "base", tmp_path / "tuned"


def test_report_recomputes_everything_from_predictions(tmp_path):
    base, _ = _runs(tmp_path)
    human = tmp_path / "human.csv"
    human.write_text("task,source,accuracy\ntemporal_detect,clevrer,91.7\ntemporal_detect,craft,75\n")
    m = R.report(base, human=human)
    assert m["by_task_source"]["temporal_detect"]["clevrer"]["accuracy"] == 0.5
    assert m["human"]["temporal_detect"]["clevrer"] == pytest.approx(0.917)
    md = (base / runs.REPORT).read_text()
    assert "| Random | 50.0 | 50.0 | 50.0 | 25.0 |" in md
    # each accuracy with its Wilson 95% interval and n: 1 of 2, 1 of 1, 2 of 3, 0 of 1
    assert ("| base-model | 50.0 [9.5, 90.5] (n=2) | 100.0 [20.7, 100.0] (n=1) | 66.7 [20.8, 93.9] (n=3) "
            "| 0.0 [0.0, 79.3] (n=1) |") in md
    assert "| Human | 91.7 | 75.0 | – | – |" in md
    assert "| n | 2 | 1 | 3 | 1 |" in md
    assert "judgetrain eval timecatch --model m" in md and "judgetrain eval report" in md
    for fig in ("confusion_frame_localize.png", "lpips_temporal_detect.png"):
        assert (base / fig).stat().st_size > 1000 and f"]({fig})" in md
    assert json.loads((base / runs.METRICS).read_text())["figures"] == ["confusion_frame_localize.png", "lpips_temporal_detect.png"]
    # recomputable: delete the outputs, regenerate, same metrics
    first = (base / runs.METRICS).read_text()
    for f in [runs.METRICS, runs.REPORT, "confusion_frame_localize.png"]:
        (base / f).unlink()
    R.report(base, human=human)
    assert (base / runs.METRICS).read_text() == first and (base / "confusion_frame_localize.png").is_file()


def test_compare_two_runs_with_delta_rows(tmp_path, capsys, rates):
    base, tuned = _runs(tmp_path)
    out = tmp_path / "cmp.md"
    cfg, = config.parse(C.make_parser(), [str(base), str(tuned), "--names", "0-shot,FT", "--out", str(out)])
    assert C.main(cfg) == 0
    md = out.read_text()
    lines = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in md.splitlines()
             if line.startswith("| ") and not line.startswith("| |")}
    # columns: TD clevrer, TD craft, FL clevrer, each with its Wilson interval and n
    assert lines["0-shot"] == ["50.0 [9.5, 90.5] (n=2)", "100.0 [20.7, 100.0] (n=1)", "0.0 [0.0, 79.3] (n=1)"]
    assert lines["FT"] == ["100.0 [34.2, 100.0] (n=2)", "100.0 [20.7, 100.0] (n=1)", "0.0 [0.0, 79.3] (n=1)"]
    deltas = [rates.delta(1, 2, 2, 2), rates.delta(1, 1, 1, 1), rates.delta(0, 1, 0, 1)]  # each Δ with its 95% interval
    assert lines["Δ FT"] == [f"{d} {ci} (FT vs 0-shot, n={n}/{n})" for d, ci, n in zip(("+50.0", "+0.0", "+0.0"), deltas, (2, 1, 1))]
    assert "Δ FT" in capsys.readouterr().out  # the rich table
    with pytest.raises(ValueError, match="one per run"):
        C.compare([base, tuned], names=["a"])


def _section(md, heading):
    """The markdown under ``heading`` up to the next ``## `` heading."""
    start = md.index(heading) + len(heading)
    end = md.find("\n## ", start)
    return md[start:] if end < 0 else md[start:end]


def test_table2_holds_the_main_set_and_the_long_set_has_its_own_table(tmp_path):
    # A CRAFT-like source built with both sets, CLEVRER with the main set only (paper 000 §3.3).
    rows = [
        _row("temporal_detect", "yes", "yes", YN, source="clevrer"),
        _row("temporal_detect", "no", "yes", YN, source="clevrer"),
        _row("temporal_localize", "1 and 2", "1 and 2", _pairs(4), source="craft", position=0, n_frames=4),   # 1/C(4,2)
        _row("temporal_localize", "2 and 3", "1 and 2", _pairs(5), source="craft", position=1, n_frames=5),   # 1/C(5,2)
        _row("temporal_localize", "1 and 2", "5 and 6", _pairs(9), source="craft", subset="long", position=0, n_frames=9),
        _row("temporal_localize", "3 and 4", "1 and 2", _pairs(12), source="craft", subset="long", position=2,
             n_frames=12),
        _row("frame_localize", "2", "2", _frames(4), source="craft", position=1, n_frames=4),
        _row("frame_localize", "5", "5", _frames(6), source="craft", position=4, n_frames=6),
        _row("frame_localize", "9", "9", _frames(10), source="craft", subset="long", position=8, n_frames=10),
        # no subset field (an older predictions.jsonl): 16 frames is the long set
        _row("frame_localize", "3", "1", _frames(16), source="craft", subset=None, position=2, n_frames=16),
    ]
    rows = [dict(r, id=f"r{i}") for i, r in enumerate(rows)]
    _write_run(tmp_path / "run", rows)
    m = R.report(tmp_path / "run")
    main, long = m["table2"]["main"], m["table2"]["long"]
    # Random per table from its own items
    assert main["temporal_localize"]["craft"]["random"] == pytest.approx((1 / 6 + 1 / 10) / 2)     # 13.3%
    assert long["temporal_localize"]["craft"]["random"] == pytest.approx((1 / 36 + 1 / 66) / 2)    # 2.1%
    assert main["frame_localize"]["craft"]["random"] == pytest.approx((1 / 4 + 1 / 6) / 2)         # 20.8%
    assert long["frame_localize"]["craft"]["random"] == pytest.approx((1 / 10 + 1 / 16) / 2)       # 8.1%
    # what one table over both sets gave (and by_task_source still gives, over all lengths)
    assert m["by_task_source"]["temporal_localize"]["craft"]["random"] == pytest.approx((1 / 6 + 1 / 10 + 1 / 36 + 1 / 66) / 4)
    assert set(main) == {"temporal_detect", "temporal_localize", "frame_localize"} and set(long) == {"temporal_localize",
                                                                                                    "frame_localize"}
    md = (tmp_path / "run" / runs.REPORT).read_text()
    t2 = _section(md, "## Table 2: accuracy (%) per task and source, main set (4–8 frames)")
    assert "| Random | 50.0 | 13.3 | 20.8 |" in t2 and "| n | 2 | 2 | 2 |" in t2
    assert "| m | 50.0 [9.5, 90.5] (n=2) | 50.0 [9.5, 90.5] (n=2) | 100.0 [34.2, 100.0] (n=2) |" in t2
    assert "7.7" not in t2 and "14.5" not in t2  # the mixed Random values of the old single table
    lt = _section(md, "## Long set (9–16 frames): accuracy (%) per task and source")
    assert "| Random | 2.1 | 8.1 |" in lt and "| m | 0.0 [0.0, 65.8] (n=2) | 50.0 [9.5, 90.5] (n=2) |" in lt
    assert "| n | 2 | 2 |" in lt
    assert md.index("## Table 2") < md.index("## Long set")
    # eval compare: Table 2's cells, then the long set's, marked
    assert R.cells(m) == {"TD clevrer": 50.0, "TL craft": 50.0, "FL craft": 100.0, "TL craft long": 0.0,
                          "FL craft long": 50.0}
    assert R.cell_counts(m) == {"TD clevrer": (1, 2), "TL craft": (1, 2), "FL craft": (2, 2), "TL craft long": (0, 2),
                                "FL craft long": (1, 2)}


def test_held_out_split_prefers_test_then_validation():
    assert T.held_out_split(["train", "validation", "test"]) == "test"
    assert T.held_out_split(["validation", "train"]) == "validation"
    with pytest.raises(runs.EvalInputError, match="no held-out split.*pass --split train"):
        T.held_out_split(["train"], "data/tc")
    cfg, = config.parse(T.make_parser(), ["--model", "m", "--data", "d", "--out", "o"])
    assert cfg.split is None  # no fixed "test" default that a default build does not have


# --------------------------------------------------------------------------- the real scoring engine on a tiny model


@pytest.fixture(scope="module")
def tiny_qwen(tiny_model):
    return tiny_model("qwen3-vl")


def _argv(model, data, out, *extra):
    return ["--model", str(model), "--data", str(data), "--split", "validation", "--out", str(out),
            "--batch-size", "2", "--limit", str(LIMIT), "--no-progress", *extra]


@pytest.fixture(scope="module")
def reference_run(tiny_qwen, timecatch_build, tmp_path_factory):
    """An uninterrupted in-process run over the first LIMIT validation records."""
    out = tmp_path_factory.mktemp("runs") / "reference"
    cfg, = config.parse(T.make_parser(), _argv(tiny_qwen, timecatch_build[0], out))
    assert T.main(cfg) == 0
    return out


def _accuracy_part(metrics):
    return {k: v for k, v in metrics.items() if k != "run"}


def test_run_writes_predictions_metrics_report(reference_run, timecatch_build, rates):
    out = reference_run
    rows = runs.read_predictions(out / runs.PREDICTIONS)
    from judgetrain import records

    ds = records.load(timecatch_build[0])["validation"].select(range(LIMIT))
    assert [r["id"] for r in rows] == ds["id"]  # dataset order, one line per record
    assert {r["task"] for r in rows} == set(M.TIMECATCH_TASKS)
    for r, rec in zip(rows, ds.select_columns(["label", "choices", "meta", "position"]), strict=False):
        assert r["label"] == rec["label"] and r["choices"] == rec["choices"] and r["position"] == rec["position"]
        assert r["prediction"] in r["choices"] and r["correct"] == (r["prediction"] == r["label"])
        assert sum(r["probs"]) == pytest.approx(1.0) and r["prediction"] == r["choices"][max(range(len(r["probs"])), key=r["probs"].__getitem__)]
        assert r["lpips_swapped"] == json.loads(rec["meta"]).get("lpips_swapped")
        assert r["subset"] in ("main", "long") and r["model"].endswith("qwen3-vl")
    m = json.loads((out / runs.METRICS).read_text())
    assert m["n"] == LIMIT and m["run"]["world_size"] == 1
    assert m == R.report(out)  # recomputable from predictions.jsonl alone
    assert "temporal_localize" in m["confusion"] and m["lpips_bins"]["temporal_detect"]
    # the report of a real run: every rate with its n and Wilson interval
    assert rates.check((out / runs.REPORT).read_text()) >= 8


def test_default_command_works_on_a_default_build(reference_run, tiny_qwen, timecatch_build, tmp_path, capsys):
    data, info, _ = timecatch_build
    assert set(info["splits"]) == {"train", "validation"}  # what `build timecatch` writes by default
    out = tmp_path / "default"
    argv = [a for a in _argv(tiny_qwen, data, out) if a not in ("--split", "validation")]
    capsys.readouterr()
    assert _cli(*argv) == 0
    said = capsys.readouterr().out
    assert "no --split given; evaluating split 'validation'" in said and "no test split" in said
    run = json.loads((out / runs.RUN_INFO).read_text())
    assert run["split"] == "validation" and run["identity"]["split"] == "validation"
    assert run["split_chosen"].startswith("default: the build's held-out split, as the build wrote no test split")
    assert json.loads((out / runs.METRICS).read_text())["run"]["split_chosen"] == run["split_chosen"]
    assert "split `validation` (default: the build's held-out split" in (out / runs.REPORT).read_text()
    # the same items and predictions as the run that named the split, and that run's folder resumes with nothing to do
    assert runs.read_predictions(out / runs.PREDICTIONS) == runs.read_predictions(reference_run / runs.PREDICTIONS)
    result = T.evaluate(str(tiny_qwen), data, out, split="validation", batch_size=2, limit=LIMIT, progress=False)
    assert result["n_scored"] == 0
    assert json.loads((out / runs.RUN_INFO).read_text())["split_chosen"] == "--split"


def test_finished_run_is_never_rescored(reference_run, tiny_qwen, timecatch_build, capsys):
    out = reference_run
    before = (out / runs.PREDICTIONS).read_bytes()
    result = T.evaluate(str(tiny_qwen), timecatch_build[0], out, split="validation", batch_size=2, limit=LIMIT,
                        progress=False)
    assert result["n_scored"] == 0 and (out / runs.PREDICTIONS).read_bytes() == before
    # another model into the same folder is refused rather than mixed in
    with pytest.raises(ValueError, match="another run"):
        T.evaluate(str(tiny_qwen) + "-other", timecatch_build[0], out, split="validation", limit=LIMIT, progress=False)


def test_sigkill_mid_run_then_resume_matches_uninterrupted(reference_run, tiny_qwen, timecatch_build, tmp_path):
    ref = reference_run
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "judgetrain.eval.timecatch", *_argv(tiny_qwen, timecatch_build[0], out)]
    cmd[cmd.index("--batch-size") + 1] = "1"  # one line per flush: easy to stop in the middle
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pred = out / runs.PREDICTIONS
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if pred.exists() and pred.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"run ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(runs.read_predictions(pred))
    assert 3 <= done < LIMIT and not (out / runs.METRICS).exists()
    with open(pred, "a") as f:  # what a kill in the middle of a write leaves
        f.write('{"id": "tc-partial", "task": "temporal_det')

    cfg, = config.parse(T.make_parser(), _argv(tiny_qwen, timecatch_build[0], out))
    result = T.evaluate(cfg.model, cfg.data, cfg.out, split="validation", batch_size=2, limit=LIMIT, progress=False)
    assert result["n_scored"] == LIMIT - done
    rows = runs.read_predictions(pred)
    assert pred.read_bytes().endswith(b"\n") and len(rows) == LIMIT == len({r["id"] for r in rows})
    got = json.loads((out / runs.METRICS).read_text())
    assert _accuracy_part(got) == _accuracy_part(json.loads((ref / runs.METRICS).read_text()))
    assert got["run"] == json.loads((ref / runs.METRICS).read_text())["run"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_match_one(reference_run, tiny_qwen, timecatch_build, tmp_path):
    ref = reference_run
    out = tmp_path / "ddp"
    accelerate = Path(sys.executable).parent / "accelerate"
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           "-m", "judgetrain.eval.timecatch", *_argv(tiny_qwen, timecatch_build[0], out)]
    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads((out / runs.METRICS).read_text())
    assert got["run"]["world_size"] == 2  # `--cpu --num_processes 2` would silently run one process
    assert _accuracy_part(got) == _accuracy_part(json.loads((ref / runs.METRICS).read_text()))
    assert not list(out.glob("predictions.rank*.jsonl"))
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)] == \
        [r["id"] for r in runs.read_predictions(ref / runs.PREDICTIONS)]


# --------------------------------------------------------------------------- run identity: no silent mixing


def _cli(*argv):
    from judgetrain.cli import main as cli_main

    return cli_main(["eval", "timecatch", *argv])


def test_rebuilt_dataset_is_refused_then_overwrite_starts_afresh(tiny_qwen, synthetic_manifest, tmp_path, capsys):
    from judgetrain.data_builders import timecatch as builder

    data, out = tmp_path / "ds", tmp_path / "run"

    def build(seed):
        builder.build(builder.TimeCatchConfig(out=data, videos=synthetic_manifest, seed=seed, lpips_random_backbone=True,
                                              tasks=["temporal_detect"], progress=False, overwrite=True))

    build(7)
    argv = _argv(tiny_qwen, data, out)
    assert _cli(*argv) == 0
    first = {r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)}
    build(8)  # the same folder, another seed: other records
    capsys.readouterr()
    assert _cli(*argv) == 2
    err = capsys.readouterr().err
    assert "holds predictions of another run" in err and "data.content_hash.validation" in err
    assert "--out NEW_FOLDER" in err and "--overwrite" in err
    assert {r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)} == first  # untouched

    assert _cli(*argv, "--overwrite") == 0
    from judgetrain import records

    new_ids = records.load(data)["validation"]["id"][:LIMIT]
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)] == new_ids
    m = json.loads((out / runs.METRICS).read_text())
    assert m["n"] == len(new_ids) and m["items"] == {"selected": len(new_ids), "evaluated": len(new_ids)}


def test_limit_and_tasks_select_what_the_metrics_cover(reference_run, tiny_qwen, timecatch_build, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reference_run, out)
    before = (out / runs.PREDICTIONS).read_bytes()
    n_all = len({r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)})
    capsys.readouterr()
    # a smaller limit: nothing scored, nothing lost, the metrics cover exactly the first 5
    assert _cli(*_argv(tiny_qwen, timecatch_build[0], out)[:-3], "--limit", "5", "--no-progress") == 0
    m = json.loads((out / runs.METRICS).read_text())
    assert (out / runs.PREDICTIONS).read_bytes() == before
    assert m["n"] == 5 and m["items"] == {"selected": 5, "evaluated": 5}
    # and the report says what it left out, and why (it used to say only "items: 5 of the 5")
    assert f"predictions of {n_all - 5} item(s) are left out of the metrics" in capsys.readouterr().err
    assert f"left out: predictions of {n_all - 5} item(s)" in (out / runs.REPORT).read_text()
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["limit"] == 5 and info["items"]["n"] == 5 and info["finished"]
    # one task: the metrics hold that task alone
    argv = _argv(tiny_qwen, timecatch_build[0], out) + ["--tasks", "frame_detect"]
    assert _cli(*argv) == 0
    m = json.loads((out / runs.METRICS).read_text())
    rows = [r for r in runs.read_predictions(out / runs.PREDICTIONS)]
    assert set(m["by_task_source"]) == {"frame_detect"}
    assert m["n"] == m["items"]["selected"] == sum(1 for r in rows if r["task"] == "frame_detect")
    assert len(rows) > m["n"]  # the other tasks' predictions stay for a later run


def test_a_model_that_fails_to_load_leaves_no_run_info(tiny_qwen, timecatch_build, tmp_path, capsys):
    out = tmp_path / "run"
    assert _cli(*_argv(tmp_path / "no-such-model", timecatch_build[0], out)) == 2
    assert "no-such-model' does not exist" in capsys.readouterr().err
    assert not (out / runs.RUN_INFO).exists()
    assert _cli(*_argv(tiny_qwen, timecatch_build[0], out)) == 0  # the corrected command is not refused
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["evaluation"] == "timecatch" and info["identity"]["model"]["files"]["model.safetensors"]
    assert info["versions"]["torch"] and info["started"] <= info["finished"]
    assert info["identity"]["data"]["content_hash"]["validation"] == timecatch_build[1]["splits"]["validation"]["content_hash"]


def test_report_dispatches_on_the_evaluation(reference_run, tmp_path):
    import shutil

    from judgetrain.cli import main as cli_main

    out = tmp_path / "run"
    shutil.copytree(reference_run, out)
    (out / runs.METRICS).unlink()
    assert cli_main(["eval", "report", str(out)]) == 0
    assert json.loads((out / runs.METRICS).read_text()) == json.loads((reference_run / runs.METRICS).read_text())
    assert (out / runs.REPORT).read_text().startswith("# TimeCatch evaluation")


def _detect_only(folder: Path) -> Path:
    """A two-record TimeCatch-shaped dataset holding temporal_detect alone (split validation)."""
    import io

    import datasets
    from PIL import Image

    from judgetrain import records

    def png(colour):
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": None}

    rows = [records.make_record(id=f"r{k}", task="temporal_detect", images=[png("red"), png("blue")], instruction="Swapped?",
                                answer=label, choices=["yes", "no"], label=label, source="s", perturbation="none",
                                position=-1, n_frames=2, layout="A", meta={}) for k, label in enumerate(("yes", "no"))]
    ds = datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows, features=records.FEATURES)})
    records.save(ds, folder, {"builder": "timecatch"})
    return folder


def test_a_selection_of_no_item_is_refused_before_the_run_folder_is_touched(prism_build, tmp_path, capsys):
    # once a FileNotFoundError traceback from the report, with a run.json left behind
    data, out, no_model = _detect_only(tmp_path / "ds"), tmp_path / "run", tmp_path / "no-model"
    capsys.readouterr()
    assert _cli("--model", str(no_model), "--data", str(data), "--tasks", "frame_detect", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {data} [validation] has no record of task(s) ['frame_detect']; it holds temporal_detect (2): "
                   "pass --tasks temporal_detect, or rebuild with `judgetrain build timecatch --tasks …`\n")
    assert not out.exists()
    # a PRISM set holds no TimeCatch task at all: the message says which evaluation reads it
    assert _cli("--model", str(no_model), "--data", str(prism_build), "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {prism_build} [test] has no record of task(s) ['temporal_detect', ")
    assert "it holds pairwise (" in err and "it is a prism build" in err and "`judgetrain eval judge`" in err
    assert "Traceback" not in err and not out.exists()
    assert _cli("--model", str(no_model), "--data", str(data), "--tasks", "", "--out", str(out)) == 2
    assert "tasks: give at least one of temporal_detect" in capsys.readouterr().err


def test_human_reference_from_excel_is_read_and_bad_values_are_refused_where_they_are(tmp_path, capsys):
    from judgetrain.cli import main as cli_main

    base, _ = _runs(tmp_path)
    human = tmp_path / "human.csv"
    human.write_bytes(b"\xef\xbb\xbftask,source,accuracy\r\ntemporal_detect,clevrer,91.7\r\ntemporal_detect,craft,75\r\n")
    assert cli_main(["eval", "report", str(base), "--human", str(human)]) == 0  # Excel's CSV UTF-8: once "missing ['task']"
    assert "| Human | 91.7 | 75.0 | – | – |" in (base / runs.REPORT).read_text()
    metrics = (base / runs.METRICS).read_bytes()
    allowed = "give a fraction in 0–1 or a percentage in 0–100"
    for value, why in (("NaN", "is not a finite number"), ("Infinity", "is not a finite number"),
                       ("-0.5", "is outside 0–100"), ("150", "is outside 0–100")):
        human.write_text(f"task,source,accuracy\ntemporal_detect,craft,75\ntemporal_detect,clevrer,{value}\n")
        capsys.readouterr()
        assert cli_main(["eval", "report", str(base), "--human", str(human)]) == 2
        assert capsys.readouterr().err == f"error: {human}, line 3, column 'accuracy': {value!r} {why}; {allowed}\n"
        assert (base / runs.METRICS).read_bytes() == metrics  # nothing rewritten with the bad reference
    as_json = tmp_path / "human.json"
    as_json.write_text('{"temporal_detect": {"clevrer": NaN}}')
    with pytest.raises(ValueError, match=r"\['temporal_detect'\]\['clevrer'\]: nan is not a finite number; give a fraction"):
        R.report(base, human=as_json)
    human.write_text("task,source,accuracy\ntemporal_detect,clevrer,0.5\ntemporal_detect,,0.5\n")
    with pytest.raises(ValueError, match=r"line 3, column 'source': empty; give a value in every column"):
        R.report(base, human=human)
    human.write_text('task,source,accuracy\ntemporal_detect,"cle\nvrer",0.5\ntemporal_detect,craft,-1\n')
    with pytest.raises(ValueError, match=r"human.csv, line 4, column 'accuracy': '-1' is outside"):  # a cell of two lines
        R.report(base, human=human)
    human.write_text("task,source,accuracy\ntemporal_detect,clevrer,0.5\ntemporal_detect,clevrer,0.6\n")
    with pytest.raises(ValueError, match=r"line 3: task 'temporal_detect', source 'clevrer' repeats line 2; keep one"):
        R.report(base, human=human)
