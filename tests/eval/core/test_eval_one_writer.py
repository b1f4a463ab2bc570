"""One writer per run folder (issue #35): a second evaluation into an --out another process is
writing stops at once naming that process (or, with --wait, runs once it has finished), and so
does `eval report`; `eval report` refuses rows that repeat a row's key instead of counting them
twice (PhaseFusion: per pass, and one closing row per question); an --out that is, holds or lies
inside an input is refused; an --out whose parent cannot be written is one clean error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judgetrain.eval.core import runs
from judgetrain.eval.core.rebuild import ReportConfig, rebuild
from judgetrain.writer import FolderNotWritableError


def judgetrain(*args) -> list[str]:
    return [sys.executable, "-m", "judgetrain", *map(str, args)]


def judge(model, data, out, *extra) -> list[str]:
    return judgetrain("eval", "judge", "--model", model, "--data", data, "--split", "test", "--out", out, "--limit", 2,
                      "--batch-size", 2, "--no-progress", *extra)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_run_into_a_folder_being_written_is_refused_then_waits_and_runs(tiny_model, prism_build, tmp_path,
                                                                               writer_lock):
    """The bug: two `eval timecatch` into one --out both exited 0 with 108 + 108 rows in predictions.jsonl,
    every n doubled. Here the first process holds the folder until the test lets it go."""
    model, out = tiny_model("qwen3-vl"), tmp_path / "run"
    holder = writer_lock.hold(out)
    done = subprocess.run(judge(model, prism_build, out), capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"error: --out {out}: another judgetrain process is writing this folder: process {holder.pid} on " in done.stderr
    assert "add --wait to start as soon as it has finished" in done.stderr
    assert not out.exists()

    waiter, said = writer_lock.waiting(judge(model, prism_build, out, "--wait"))
    assert f"--out {out}: process {holder.pid} on " in said[-1]
    writer_lock.release()
    stdout, stderr = waiter.communicate(timeout=600)
    assert waiter.returncode == 0, stderr
    rows = runs.read_predictions(out / runs.PREDICTIONS)
    assert len(rows) == 2 and len({r["id"] for r in rows}) == 2
    assert json.loads((out / runs.METRICS).read_text())["items"] == {"selected": 2, "evaluated": 2}

    holder = writer_lock.hold(out)  # `eval report` rewrites the run's report: never while another process writes it
    report = subprocess.run(judgetrain("eval", "report", out), capture_output=True, text=True, timeout=600)
    assert report.returncode == 2 and "Traceback" not in report.stderr, report.stderr
    assert f"error: eval report {out}: another judgetrain process is writing this folder: process {holder.pid}" in report.stderr
    bias = subprocess.run(judgetrain("eval", "bias", out), capture_output=True, text=True, timeout=600)  # it writes there too
    assert bias.returncode == 2 and "Traceback" not in bias.stderr, bias.stderr
    assert f"error: eval bias {out}: another judgetrain process is writing this folder: process {holder.pid}" in bias.stderr
    assert not (out / "bias.json").exists()
    writer_lock.release()

    # what two runs at once used to leave: one item's row twice; the report refuses it, naming file, line and id
    lines = (out / runs.PREDICTIONS).read_text().splitlines(keepends=True)
    (out / runs.PREDICTIONS).write_text("".join([*lines, lines[0]]))
    metrics = (out / runs.METRICS).read_bytes()
    with pytest.raises(runs.PredictionsError) as exc:
        rebuild(ReportConfig(run=out))
    assert str(exc.value).startswith(f"{out / runs.PREDICTIONS}, line 3: a second row for id {rows[0]['id']!r}, "
                                     "the first at line 1.")
    assert (out / runs.METRICS).read_bytes() == metrics  # nothing recounted


def _pf_rows(qid: str) -> list[dict]:
    """A PhaseFusion question's rows: a pass per phase and ordering, a cost row, the closing row."""
    passes = [{"id": qid, "kind": "pass", "origin": "0", "grid": "phase", "phase": s, "ordering": k}
              for s in range(2) for k in range(2)]
    return [*passes, {"id": qid, "kind": "cost", "origin": "0", "grid": "phase"}, {"id": qid, "kind": "question"}]


def test_phasefusion_rows_are_keyed_per_pass_and_a_second_closing_row_is_refused(tmp_path):
    """PhaseFusion writes many rows per question: its passes differ by phase and ordering and are no
    repeat; a second closing row for one question (what two runs at once wrote) is."""
    run = tmp_path / "pf"
    run.mkdir()
    (run / runs.RUN_INFO).write_text(json.dumps({"evaluation": "phasefusion"}))
    rows = _pf_rows("q1") + _pf_rows("q2")
    (run / runs.PREDICTIONS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs.check_unique(run / runs.PREDICTIONS)  # every row its own key

    (run / runs.PREDICTIONS).write_text("".join(json.dumps(r) + "\n" for r in [*rows, {"id": "q1", "kind": "question"}]))
    with pytest.raises(runs.PredictionsError) as exc:
        rebuild(ReportConfig(run=run))
    assert str(exc.value).startswith(f"{run / runs.PREDICTIONS}, line 13: a second row for id 'q1' (kind=question), "
                                     "the first at line 6.")
    assert "Delete the repeated rows and rerun" in str(exc.value)


def test_an_out_that_is_or_lies_inside_the_data_or_the_model_is_refused(tiny_model, prism_build, tmp_path):
    """The bug: `eval … --out DATASET` was accepted and its files mixed into the dataset."""
    from judgetrain.eval.judge.command import evaluate

    data, model = tmp_path / "data", tmp_path / "model"
    shutil.copytree(prism_build, data)
    shutil.copytree(tiny_model("qwen3-vl"), model)
    before = snapshot(tmp_path)
    for out, what in ((data, f"is --data ({data})"), (data / "results", f"lies inside --data ({data})"),
                      (model / "eval", f"lies inside --model ({model})"), (tmp_path, f"holds --model ({model})")):
        with pytest.raises(runs.EvalInputError) as exc:
            evaluate(str(model), data, out, split="test", limit=2, progress=False, overwrite=True)
        assert str(exc.value).startswith(f"--out {out} {what}: "), str(exc.value)
        assert "Nothing was written; give --out a folder apart from" in str(exc.value)
    assert snapshot(tmp_path) == before


def test_an_out_holding_a_manifest_or_inside_its_videos_is_refused(tiny_model, clips, tmp_path):
    from judgetrain.eval import phasefusion

    before = snapshot(clips.parent)
    for out, what in ((clips.parent, f"holds --manifest ({clips.resolve()})"),
                      (clips.parent / "videos" / "run", f"lies inside the media --manifest lists ({clips.parent / 'videos'})")):
        with pytest.raises(runs.EvalInputError) as exc:
            phasefusion.evaluate(str(tiny_model("qwen3-vl")), clips, out, budget=4, phases=2, orderings=2, limit=1)
        assert str(exc.value).startswith(f"--out {out} {what}: "), str(exc.value)
    assert snapshot(clips.parent) == before


def test_an_out_under_a_file_or_a_folder_that_cannot_be_written_is_one_clean_error(tiny_model, prism_build, tmp_path):
    """The bug: a PermissionError traceback. As root chmod stops nothing: a file on the way and /sys stand
    in for a folder this user cannot write."""
    from judgetrain.eval.judge.command import evaluate

    (tmp_path / "a_file").write_text("not a folder\n")
    out = tmp_path / "a_file" / "run"
    with pytest.raises(FolderNotWritableError) as exc:
        evaluate(str(tiny_model("qwen3-vl")), prism_build, out, split="test", limit=2, progress=False)
    assert str(exc.value) == (f"--out {out}: cannot be written: {tmp_path / 'a_file'} is a file, not a folder. Nothing was "
                              f"written; give --out a path under a folder (or move the file {tmp_path / 'a_file'} away).")
    done = subprocess.run(judge(tiny_model("qwen3-vl"), prism_build, "/sys/judgetrain-test/run"), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: --out /sys/judgetrain-test/run: cannot be written: this user may not create "
                                  "or write files in /sys"), done.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_an_out_whose_parent_may_not_be_written_is_one_clean_error(tiny_model, prism_build, tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        done = subprocess.run(judge(tiny_model("qwen3-vl"), prism_build, parent / "run"), capture_output=True, text=True,
                              timeout=600)
    finally:
        parent.chmod(0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "PermissionError" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: --out {parent / 'run'}: cannot be written: this user may not create or write "
                                  f"files in {parent} (Permission denied). Nothing was written; give --out a folder you "
                                  f"can write (or change the permissions of {parent})."), done.stderr
    assert not list(parent.iterdir())
