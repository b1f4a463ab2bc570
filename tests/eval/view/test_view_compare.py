"""`judgetrain eval view` of two real judge runs on one PRISM build in layouts P0, P4, P5 and P6
(pairwise and pointwise records): the overview puts their metrics in one table (`eval compare`'s
cells, each Δ with its interval) and their figures side by side, a link per run keeps each full
report, and an item page groups a record's frames into the sequences the model saw, in headless
Chromium."""

from __future__ import annotations

import re

import pytest

from judgetrain import records
from judgetrain.cli import main as cli_main
from judgetrain.eval.core import runs
from judgetrain.eval.core.compare import compare
from judgetrain.eval.core.stats import difference_interval
from judgetrain.eval.view import items as I
from judgetrain.eval.view import page as P

# a Δ cell: the signed difference, its interval, then which runs and their n
DELTA = re.compile(r"([+-]\d+\.\d) \[([+-]\d+\.\d), ([+-]\d+\.\d)\] \(\S+ vs \S+, n=\d+/\d+\)")


@pytest.fixture(scope="module")
def layouts_build(tmp_path_factory):
    """A PRISM build of two synthetic procedures in layouts P0, P4, P5 and P6, pairwise and pointwise."""
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism-layouts") / "prism"
    prism.build(
        prism.PrismConfig(
            out=out, synthetic=2, layouts=("P0", "P4", "P5", "P6"), synthetic_size=64, splits={"test": 1.0}, progress=False
        )
    )
    return out


@pytest.fixture(scope="module")
def two_runs(tiny_model, layouts_build, tmp_path_factory):
    """Two tiny models' judge runs on the same seeded sample of ten records (every layout, both tasks)."""
    root = tmp_path_factory.mktemp("view-compare")
    out = []
    for family in ("qwen3-vl", "qwen2.5-vl"):
        run = root / family
        assert (
            cli_main(
                [
                    "eval",
                    "judge",
                    "--model",
                    str(tiny_model(family)),
                    "--data",
                    str(layouts_build),
                    "--split",
                    "test",
                    "--out",
                    str(run),
                    "--sample",
                    "10",
                    "--batch-size",
                    "4",
                    "--no-progress",
                ]
            )
            == 0
        )
        out.append(run)
    return out


@pytest.fixture(scope="module")
def page(two_runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("view-compare-page")
    return P.write_view(two_runs, root / "page", ["q3", "q25"], progress=False, store=root / "store")


def _letters_from_prompt(prompt) -> list[str | None]:
    """Each image's sequence as the prompt says it: the last "Sequence A:", "Sequence B:" or
    "Sequence A, image k:" (P5) text before it; None under a pointwise "Sequence:"."""
    current, out = None, []
    for message in prompt:
        for part in message["content"]:
            if part["type"] == "image":
                out.append(current)
            else:
                marks = re.findall(r"Sequence( [AB])?[:,]", part.get("text") or "")
                current = marks[-1].strip() or None if marks else current
    return out


# --------------------------------------------------------------------------- hand-worked pieces


def test_the_difference_interval_is_newcombes_published_one_later_minus_first():
    # Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10: 56/70 − 48/80 and 9/10 − 3/10
    assert difference_interval(48, 80, 56, 70) == pytest.approx((0.0524, 0.3339), abs=5e-5)
    assert difference_interval(3, 10, 9, 10) == pytest.approx((0.1705, 0.8090), abs=5e-5)
    assert difference_interval(56, 70, 48, 80) == pytest.approx((-0.3339, -0.0524), abs=5e-5)


def test_frames_are_grouped_by_sequence_as_every_layout_lays_them_out(layouts_build):
    ds = records.load(layouts_build)["test"]
    seen = set()
    for row in records.stored_rows(ds.select_columns(["task", "layout", "label", "n_frames", "prompt"])):
        letters = _letters_from_prompt(row["prompt"])
        groups = I.sequence_groups(row, list(range(len(letters))))
        if row["task"] == "pointwise":
            assert [(g["label"], g["refs"]) for g in groups] == [("Sequence", list(range(len(letters))))]
        else:
            # each group: the images of one sequence in prompt order, the groups in the order first shown
            expected = {}
            for i, letter in enumerate(letters):
                expected.setdefault(f"Sequence {letter}", []).append(i)
            assert [(g["label"], g["refs"]) for g in groups] == list(expected.items()), (row["layout"], row["label"])
        seen.add((row["task"], row["layout"]))
    assert seen == {(t, x) for t in ("pairwise", "pointwise") for x in ("P0", "P4", "P5", "P6")} - {("pointwise", "P4")}


# --------------------------------------------------------------------------- in a real browser


def test_two_runs_overview_is_one_compare_table_and_figures_side_by_side(two_runs, page, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 20)
    browser.get(f"{page.as_uri()}#overview")
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "table#compare"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "table.compare")) == 1
    assert not browser.find_elements(By.CSS_SELECTOR, ".report")  # the full reports are not stacked here
    head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#compare thead th")]
    assert head == ["metric", "q3", "q25", "Δ q25"]
    # every metric of `eval compare`, its Δ the one compare computes, with an interval around it
    result = compare(two_runs, ["q3", "q25"])
    body = browser.find_elements(By.CSS_SELECTOR, "#compare tbody tr")
    assert [tr.get_attribute("data-metric") for tr in body] == result["columns"]
    deltas = result["rows"][2][1]
    with_interval = 0
    for tr, delta in zip(body, deltas, strict=True):
        cell = tr.find_element(By.CSS_SELECTOR, "td[data-kind=delta]").text
        if (m := DELTA.fullmatch(cell)) is not None:
            value, lo, hi = map(float, m.groups())
            assert value == pytest.approx(delta, abs=0.051) and lo <= value <= hi
            with_interval += 1
    assert with_interval > 0
    # each figure in one row, one column per run: the same figure of both runs side by side
    wait.until(lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete && i.naturalWidth)"))
    names = sorted(p.name for p in two_runs[0].glob("*.png"))
    assert (
        names and [tr.get_attribute("data-figure") for tr in browser.find_elements(By.CSS_SELECTOR, "#figures tbody tr")] == names
    )
    for name in names:
        boxes = browser.execute_script(
            "return Array.from(document.querySelectorAll('#figures tr[data-figure=\"' + arguments[0] + '\"] img'))"
            ".map(i => { const r = i.getBoundingClientRect(); return [r.left, r.top, r.right, r.width]; })",
            name,
        )
        assert len(boxes) == 2 and abs(boxes[0][1] - boxes[1][1]) < 1  # one row
        assert boxes[0][2] <= boxes[1][0] and min(b[3] for b in boxes) > 100  # two columns, left to right
    # each run's full report is a click away
    links = browser.find_elements(By.CSS_SELECTOR, "a.full-report")
    assert [a.get_attribute("href").rsplit("#", 1)[1] for a in links] == ["run=0", "run=1"]
    links[1].click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.overview[data-run='1'] .report table.md"))
    assert (two_runs[1] / runs.REPORT).read_text().splitlines()[0].lstrip("# ") in browser.find_element(By.ID, "main").text


def _groups(driver):
    from selenium.webdriver.common.by import By

    return [
        (g.find_element(By.CSS_SELECTOR, ".group-title").text, len(g.find_elements(By.CSS_SELECTOR, "img.thumb")))
        for g in driver.find_elements(By.CSS_SELECTOR, ".seq-group")
    ]


def test_an_item_page_groups_the_frames_into_the_sequences_the_model_saw(two_runs, page, open_item):
    rows = runs.read_predictions(two_runs[0] / runs.PREDICTIONS)
    by = {(r["task"], r["layout"]): r for r in rows}
    assert {("pairwise", "P0"), ("pairwise", "P4"), ("pairwise", "P6"), ("pointwise", "P0")} <= set(by)
    for (task, layout), row in by.items():
        driver = open_item(page, row["id"])
        n = len(row["frames"])
        if task == "pointwise":
            expected = [("Sequence", n)]
        elif layout == "P6":  # one grid image per sequence
            expected = [("Sequence A", 1), ("Sequence B", 1)]
        else:  # the gold sequence has n_frames images, the other the rest; P4 shows B first
            a = row["n_frames"] if row["label"] == "A" else n - row["n_frames"]
            expected = [("Sequence A", a), ("Sequence B", n - a)]
            expected = expected[::-1] if layout == "P4" else expected
        assert _groups(driver) == expected, (task, layout)
        widths = driver.execute_script("return Array.from(document.querySelectorAll('img.thumb')).map(i => i.naturalWidth)")
        assert len(widths) == n and all(w > 0 for w in widths)
