"""`judgetrain eval view` on the other two evaluations: a real judge run (PRISM pairwise and
pointwise records) and a real PhaseFusion run (phase grids decoded from a video), each read
into the browser's items and written into a page set whose thumbnails and details are what
the run stored."""

from __future__ import annotations

import json

import pytest

from judgetrain.cli import main as cli_main
from judgetrain.eval.core import runs
from judgetrain.eval.view import items as I
from judgetrain.eval.view import page as P


def _detail(page, index):
    """The details of items ``index`` of a written page set, by id: {id: [per run detail]}."""
    out = {}
    for path in sorted((page / "data").glob("detail-*.js")):
        text = path.read_text()
        _, _, body = text[len("JT.addDetail(") : -3].partition(",")
        out.update(json.loads(body))
    return out


@pytest.fixture(scope="module")
def judge_run(tiny_model, prism_build, tmp_path_factory):
    out = tmp_path_factory.mktemp("view-judge") / "run"
    assert (
        cli_main(
            [
                "eval",
                "judge",
                "--model",
                str(tiny_model("qwen3-vl")),
                "--data",
                str(prism_build),
                "--split",
                "test",
                "--out",
                str(out),
                "--limit",
                "6",
                "--batch-size",
                "4",
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def test_a_judge_run_opens_with_its_frames_prompt_and_posterior(judge_run, tmp_path):
    rows = runs.read_predictions(judge_run / runs.PREDICTIONS)
    run = I.load_run(judge_run)
    assert run["evaluation"] == "judge" and run["warnings"] == [] and len(run["items"]) == len(rows) == 6
    for it, row in zip(run["items"], rows, strict=True):
        assert (it["id"], it["task"], it["pred"], it["probs"]) == (row["id"], row["task"], row["prediction"], row["probs"])
        assert it["prompt"] == row["prompt_text"] and it["prompt_kind"] == "rendered"
        # P0: Sequence A's images, then Sequence B's, the gold one holding n_frames
        assert [h for g in it["frames"] for _, h in g["refs"]] == row["frames"] and len(row["frames"]) >= 2
        sizes = [row["n_frames"], len(row["frames"]) - row["n_frames"]]
        assert [(g["label"], len(g["refs"])) for g in it["frames"]] == [
            ("Sequence A", sizes[row["label"] != "A"]),
            ("Sequence B", sizes[row["label"] == "A"]),
        ]
    page = tmp_path / "page"
    P.write_view([judge_run], page, progress=False, store=tmp_path / "store")
    assert {p.stem for p in (page / "thumbs").glob("*.jpg")} == {h for r in rows for h in r["frames"]}
    detail = _detail(page, 0)
    assert [detail[r["id"]][0]["probs"] for r in rows] == [r["probs"] for r in rows]


@pytest.fixture(scope="module")
def pf_run(tiny_model, clips, tmp_path_factory):
    out = tmp_path_factory.mktemp("view-pf") / "run"
    assert (
        cli_main(
            [
                "eval",
                "phasefusion",
                "--model",
                str(tiny_model("qwen3-vl")),
                "--manifest",
                str(clips),
                "--out",
                str(out),
                "--budget",
                "4",
                "--phases",
                "2",
                "--orderings",
                "2",
                "--arms",
                "single,fusion",
                "--no-progress",
            ]
        )
        == 0
    )
    return out


def test_a_phasefusion_run_opens_one_item_per_question_with_each_phase_grid(pf_run, tmp_path):
    rows = runs.read_predictions(pf_run / runs.PREDICTIONS)
    questions = [r for r in rows if r.get("kind") == "question"]
    passes = [r for r in rows if r.get("kind") == "pass"]
    run = I.load_run(pf_run)
    assert [it["id"] for it in run["items"]] == [q["id"] for q in questions]
    origin = json.loads((pf_run / runs.RUN_INFO).read_text())["origins"][0]
    for it, q in zip(run["items"], questions, strict=True):
        mine = [p for p in passes if p["id"] == q["id"]]
        # the posterior shown is arm fusion's: the mean of the phase grids' posteriors at the identity ordering
        # and the first origin (as the report's Table A reads it); one frame group per (origin, grid, phase)
        fused = [p for p in mine if p["grid"] == "phase" and p["ordering"] == 0 and p["origin"] == origin]
        assert len(fused) == 2 and it["probs"] == pytest.approx(
            [sum(p["posterior"][j] for p in fused) / 2 for j in range(len(q["options"]))], abs=1e-12
        )
        assert it["correct"] == (max(range(len(it["probs"])), key=it["probs"].__getitem__) == q["answer"])
        assert "arm fusion" in it["main"] and "ordering 0, the identity ordering" in it["main"]
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


def test_a_phasefusion_item_page_says_when_each_frame_is_which_posterior_it_shows_and_every_pass(pf_run, tmp_path, open_item):
    from selenium.webdriver.common.by import By

    rows = runs.read_predictions(pf_run / runs.PREDICTIONS)
    q = next(r for r in rows if r.get("kind") == "question")
    passes = [r for r in rows if r.get("kind") == "pass" and r["id"] == q["id"]]
    index = P.write_view([pf_run], tmp_path / "page", progress=False, store=tmp_path / "store")
    driver = open_item(index, q["id"])
    text = driver.find_element(By.ID, "main").text
    assert "phase phase" not in text
    # every frame's place in the video, in seconds: its index over the video's fps (the run stores indices)
    captions = [c.text for c in driver.find_elements(By.CSS_SELECTOR, ".seq-group figcaption")]
    groups = {(p["origin"], p["grid"], p["phase"]): p["frames"] for p in passes}
    assert captions == [f"frame {i} · {i / q['fps']:.2f} s" for idx in groups.values() for i in idx]
    assert f"index ÷ the video's {q['fps']:g} fps" in driver.find_element(By.ID, "frames-note").text
    titles = [t.text for t in driver.find_elements(By.CSS_SELECTOR, ".group-title")]
    assert titles[:3] == ["single grid · origin 0", "phase grid · phase 0 · origin 0", "phase grid · phase 1 · origin 0"]
    # which arm and ordering the bars are
    main = driver.find_element(By.CSS_SELECTOR, ".main-posterior").text
    assert "arm fusion" in main and "ordering 0, the identity ordering" in main and "origin 0" in main
    # every pass, shown without a click: one row each, the rows the main posterior reads in bold
    table = driver.find_element(By.CSS_SELECTOR, "table.passes")
    assert table.is_displayed() and not driver.find_elements(By.CSS_SELECTOR, "details")
    body = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(body) == len(passes) == 12
    cells = [[td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")] for tr in body]
    assert [c[:4] for c in cells] == [[p["origin"], p["grid"], str(p["phase"]), str(p["ordering"])] for p in passes]
    assert [c[-len(q["options"]) :] for c in cells] == [[f"{x:.3f}" for x in p["posterior"]] for p in passes]
    bold = [tr.get_attribute("class") == "main" for tr in body]
    assert bold == [p["grid"] == "phase" and p["ordering"] == 0 and p["origin"] == "0" for p in passes]
