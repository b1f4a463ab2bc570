"""`judgetrain eval view` on the other two evaluations: a real judge run (PRISM pairwise and
pointwise records) and a real PhaseFusion run (phase grids decoded from a video), each read
into the browser's items and written into a page set whose thumbnails and details are what
the run stored."""

from __future__ import annotations

import json

import pytest

from judgetrain.cli import main as cli_main
from judgetrain.eval.core import runs
from judgetrain.eval.view import items as I, page as P


def _detail(page, index):
    """The details of items ``index`` of a written page set, by id: {id: [per run detail]}."""
    out = {}
    for path in sorted((page / "data").glob("detail-*.js")):
        text = path.read_text()
        _, _, body = text[len("JT.addDetail("):-3].partition(",")
        out.update(json.loads(body))
    return out


@pytest.fixture(scope="module")
def judge_run(tiny_model, prism_build, tmp_path_factory):
    out = tmp_path_factory.mktemp("view-judge") / "run"
    assert cli_main(["eval", "judge", "--model", str(tiny_model("qwen3-vl")), "--data", str(prism_build), "--split", "test",
                     "--out", str(out), "--limit", "6", "--batch-size", "4", "--no-progress"]) == 0
    return out


def test_a_judge_run_opens_with_its_frames_prompt_and_posterior(judge_run, tmp_path):
    rows = runs.read_predictions(judge_run / runs.PREDICTIONS)
    run = I.load_run(judge_run)
    assert run["evaluation"] == "judge" and run["warnings"] == [] and len(run["items"]) == len(rows) == 6
    for it, row in zip(run["items"], rows, strict=True):
        assert (it["id"], it["task"], it["pred"], it["probs"]) == (row["id"], row["task"], row["prediction"], row["probs"])
        assert it["prompt"] == row["prompt_text"] and it["prompt_kind"] == "rendered"
        assert [h for _, h in it["frames"][0]["refs"]] == row["frames"] and len(row["frames"]) >= 2
    page = tmp_path / "page"
    P.write_view([judge_run], page, progress=False, store=tmp_path / "store")
    assert {p.stem for p in (page / "thumbs").glob("*.jpg")} == {h for r in rows for h in r["frames"]}
    detail = _detail(page, 0)
    assert [detail[r["id"]][0]["probs"] for r in rows] == [r["probs"] for r in rows]


@pytest.fixture(scope="module")
def pf_run(tiny_model, clips, tmp_path_factory):
    out = tmp_path_factory.mktemp("view-pf") / "run"
    assert cli_main(["eval", "phasefusion", "--model", str(tiny_model("qwen3-vl")), "--manifest", str(clips), "--out", str(out),
                     "--budget", "4", "--phases", "2", "--orderings", "2", "--arms", "single,fusion", "--no-progress"]) == 0
    return out


def test_a_phasefusion_run_opens_one_item_per_question_with_each_phase_grid(pf_run, tmp_path):
    rows = runs.read_predictions(pf_run / runs.PREDICTIONS)
    questions = [r for r in rows if r.get("kind") == "question"]
    passes = [r for r in rows if r.get("kind") == "pass"]
    run = I.load_run(pf_run)
    assert [it["id"] for it in run["items"]] == [q["id"] for q in questions]
    for it, q in zip(run["items"], questions, strict=True):
        mine = [p for p in passes if p["id"] == q["id"]]
        # the posterior shown is the mean over the question's passes; one frame group per (origin, grid, phase)
        mean = [sum(p["posterior"][j] for p in mine) / len(mine) for j in range(len(q["options"]))]
        assert it["probs"] == pytest.approx(mean, abs=1e-12)
        groups = {(p["origin"], p["grid"], p["phase"]): p["frames"] for p in mine}
        assert [[i for _, _, i in g["refs"]] for g in it["frames"]] == list(groups.values())
        assert all(text in it["prompt"] for texts in q["prompts"].values() for text in texts)
        assert it["flipped"] == (len({p["pred"] for p in mine}) > 1)
    page = tmp_path / "page"
    P.write_view([pf_run], page, progress=False, store=tmp_path / "store")
    frames = {(p["id"], i) for p in passes for i in p["frames"]}
    thumbs = list((page / "thumbs").glob("*.jpg"))
    # one thumbnail per distinct (video, frame index): questions on one video share theirs
    videos = {q["id"]: q["video"] for q in questions}
    assert len(thumbs) == len({(videos[qid], i) for qid, i in frames}) > 0
    detail = _detail(page, 0)
    assert [d[0]["probs"] for d in (detail[q["id"]] for q in questions)] == [it["probs"] for it in run["items"]]
