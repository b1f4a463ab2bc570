"""`judgetrain eval view`: a real TimeCatch run of a tiny model, its page set, and that page in
headless Chromium (Selenium) from a file:// URL and from `python -m http.server`."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgetrain import config, records
from judgetrain.eval import timecatch as T
from judgetrain.eval.core import runs
from judgetrain.eval.view import assets as A
from judgetrain.eval.view import command as V
from judgetrain.eval.view import items as I
from judgetrain.eval.view import markdown as MD
from judgetrain.eval.view import page as P
from judgetrain.eval.view import thumbs as TH
from tests.browsers import start_chromium

LIMIT = 8  # the first 8 validation records hold all four tasks


@pytest.fixture(scope="module")
def tc_run(tiny_model, timecatch_build, tmp_path_factory):
    """A real TimeCatch run over the first LIMIT validation records."""
    out = tmp_path_factory.mktemp("view-runs") / "zero-shot"
    (cfg,) = config.parse(
        T.make_parser(),
        [
            "--model",
            str(tiny_model("qwen3-vl")),
            "--data",
            str(timecatch_build[0]),
            "--split",
            "validation",
            "--out",
            str(out),
            "--batch-size",
            "4",
            "--limit",
            str(LIMIT),
            "--no-progress",
        ],
    )
    assert T.main(cfg) == 0
    return out


def _rows(run):
    return runs.read_predictions(run / runs.PREDICTIONS)


# --------------------------------------------------------------------------- hand-worked pieces


def test_posterior_summary_is_the_top_probability_and_its_lead():
    assert I.posterior_summary([0.2, 0.5, 0.3], 1) == (0.5, pytest.approx(0.2))
    assert I.posterior_summary([0.9, 0.1], 1) == (0.1, pytest.approx(-0.8))  # a prediction that is not the argmax
    assert I.posterior_summary([1.0], 0) == (1.0, None)
    assert I.posterior_summary(None, None) == (None, None)


def test_messages_text_marks_each_image():
    prompt = [
        {
            "role": "user",
            "content": [
                {"type": "image", "text": None},
                {"type": "text", "text": "Frame 2:"},
                {"type": "image", "text": None},
                {"type": "text", "text": " Swapped?"},
            ],
        }
    ]
    assert I.messages_text(prompt) == "[user]\n<image>Frame 2:<image> Swapped?"


def test_markdown_tables_headings_images_and_escaping():
    md = (
        "# Title\n\nsome **bold** <b>x</b>\n\n| a | b<br>c |\n|---|---:|\n| 1 | 2 |\n\n- one\n- two\n\n"
        "![fig](acc.png)\n\n[![Fig 1](conf.png)](conf.png)\n\n[web](https://example.org/a.png)\n\n```\n<x>\n```\n"
    )
    html = MD.to_html(md, lambda s: "runs/0/" + s)
    assert html.splitlines() == [
        "<h2>Title</h2>",
        "<p>some <strong>bold</strong> &lt;b&gt;x&lt;/b&gt;</p>",  # raw HTML is text
        '<table class="md">',
        "<thead>",
        "<tr>",
        "<th>a</th>",
        '<th style="text-align:right">b<br />',
        "c</th>",
        "</tr>",
        "</thead>",
        "<tbody>",
        "<tr>",
        "<td>1</td>",
        '<td style="text-align:right">2</td>',
        "</tr>",
        "</tbody>",
        "</table>",
        "<ul>",
        "<li>one</li>",
        "<li>two</li>",
        "</ul>",
        '<p><img src="runs/0/acc.png" alt="fig" class="figure" /></p>',
        # a linked figure, as every report writes its figures: the image inside its link, both into the page folder
        '<p><a href="runs/0/conf.png"><img src="runs/0/conf.png" alt="Fig 1" class="figure" /></a></p>',
        '<p><a href="https://example.org/a.png">web</a></p>',
        "<pre><code>&lt;x&gt;",
        "</code></pre>",
    ]


def test_the_page_is_the_package_template_with_its_title_escaped():
    index = A.index_html("base <b> & lora", ["data/meta.js", "data/items-0000.js"])
    assert "<title>base &lt;b&gt; &amp; lora · judgetrain eval view</title>" in index
    assert re.findall(r'<script src="([^"]+)"></script>', index) == ["data/meta.js", "data/items-0000.js", "app.js"]
    templates = Path(A.__file__).parent / "templates"
    assert [A.static_file(n) for n in A.STATIC_FILES] == [(templates / n).read_text() for n in A.STATIC_FILES]
    with pytest.raises(ValueError, match="static files"):
        A.static_file("index.html")


def _overview_figures(report_html: str) -> tuple[list[tuple[str, str | None]], str]:
    """Each <img> of a report's HTML with the href of the link around it, and the report's text."""
    from html.parser import HTMLParser

    class Read(HTMLParser):
        def __init__(self):
            super().__init__()
            self.links, self.images, self.text = [], [], []

        def handle_starttag(self, tag, attrs):
            if tag == "a":
                self.links.append(dict(attrs)["href"])
            elif tag == "img":
                self.images.append((dict(attrs)["src"], self.links[-1] if self.links else None))

        def handle_endtag(self, tag):
            if tag == "a":
                self.links.pop()

        def handle_data(self, data):
            self.text.append(data)

    reader = Read()
    reader.feed(report_html)
    return reader.images, "".join(reader.text)


# --------------------------------------------------------------------------- what a run stores for the page


def test_prediction_rows_hold_the_rendered_prompt_and_the_frames_by_content(tc_run, timecatch_build):
    rows = _rows(tc_run)
    ds = records.load(timecatch_build[0])["validation"]
    stored = list(records.stored_rows(ds.select(range(LIMIT))))
    for row, rec in zip(rows, stored, strict=True):
        assert row["id"] == rec["id"]
        assert row["frames"] == [hashlib.sha256(im["bytes"]).hexdigest() for im in rec["images"]]
        assert len(row["frames"]) == sum(c["type"] == "image" for m in rec["prompt"] for c in m["content"])
        instruction = rec["prompt"][-1]["content"][-1]["text"]
        assert instruction in row["prompt_text"] and row["prompt_text"].count("<|vision_start|>") == len(row["frames"])


# --------------------------------------------------------------------------- the page set


def test_page_set_thumbnails_are_content_addressed_and_made_once(tc_run, tmp_path):
    store = tmp_path / "store"
    index = P.write_view([tc_run], tmp_path / "page", progress=False, store=store)
    assert index == tmp_path / "page" / "index.html" and index.is_file()
    frames = {h for r in _rows(tc_run) for h in r["frames"]}
    assert {p.stem for p in (tmp_path / "page" / "thumbs").glob("*.jpg")} == frames == {p.stem for p in store.glob("*.jpg")}
    # another page folder over the same store makes no thumbnail, it links them
    again = TH.Thumbs(tmp_path / "other", store)
    assert all(again.have(h) for h in frames) and again.made == 0
    text = (tmp_path / "page" / "data" / "items-0000.js").read_text()
    assert text.startswith("JT.addItems(") and "http" not in index.read_text()  # nothing from the network
    table = json.loads(text[len("JT.addItems(") : -3])
    assert [t[0] for t in table] == [r["id"] for r in _rows(tc_run)]
    first = _rows(tc_run)[0]
    pred = first["choices"].index(first["prediction"])
    assert table[0][4][0][:3] == [first["prediction"], first["correct"], first["probs"][pred]]


def test_the_overview_shows_every_figure_of_the_report_as_a_linked_image(tc_run, tmp_path):
    """The report's figures are linked images (``[![title](fig.png)](fig.png)``): each is an <img>
    inside its link, both pointing at the page folder's copy, with no markdown left as text."""
    report = (tc_run / runs.REPORT).read_text()
    named = re.findall(r"\[!\[[^\]]*\]\(([^)]+)\)\]\(\1\)", report)
    assert named and set(named) == {p.name for p in tc_run.glob("*.png")}
    P.write_view([tc_run], tmp_path / "page", progress=False, store=tmp_path / "store")
    meta = (tmp_path / "page" / "data" / "meta.js").read_text()
    (run,) = json.loads(meta[len("JT.setMeta(") : -3])["runs"]
    images, text = _overview_figures(run["report"])
    assert images == [(f"runs/0/{name}", f"runs/0/{name}") for name in named]
    assert all((tmp_path / "page" / src).is_file() for src, _ in images)
    assert "](" not in text and "![" not in text and not re.search(r"^\s*\[\s*$", text, re.M)


def test_old_run_without_the_new_fields_opens_from_its_dataset_or_with_what_it_has(tc_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(tc_run, old)
    rows = [{k: v for k, v in r.items() if k not in ("prompt_text", "frames")} for r in _rows(tc_run)]
    (old / runs.PREDICTIONS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = I.load_run(old)
    assert run["warnings"] == [] and all(it["prompt_kind"] == "messages" for it in run["items"])
    assert [len(it["frames"][0]["refs"]) for it in run["items"]] == [len(r["frames"]) for r in _rows(tc_run)]
    index = P.write_view([old], tmp_path / "page", progress=False, store=tmp_path / "store")
    thumbs = {p.stem for p in (tmp_path / "page" / "thumbs").glob("*.jpg")}
    assert thumbs == {h for r in _rows(tc_run) for h in r["frames"]} and index.is_file()
    info = json.loads((old / runs.RUN_INFO).read_text())
    info["data"] = str(tmp_path / "gone")
    (old / runs.RUN_INFO).write_text(json.dumps(info))
    run = I.load_run(old)
    assert "is not there" in run["warnings"][0] and all(it["frames"] is None for it in run["items"])
    assert P.write_view([old], tmp_path / "page2", progress=False, store=tmp_path / "store").is_file()


def test_command_defaults_to_run_view_and_needs_out_for_several(tc_run, capsys):
    (cfg,) = config.parse(V.make_parser(), [str(tc_run), "--no-progress"])
    assert cfg.out == tc_run / "view" and V.main(cfg) == 0
    assert capsys.readouterr().out.strip() == f"Run page: {tc_run / 'view' / 'index.html'}"
    with pytest.raises(config.ConfigError, match="--out DIR"):
        config.parse(V.make_parser(), [str(tc_run), str(tc_run)])


# --------------------------------------------------------------------------- in a real browser


def _driver():
    return start_chromium()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_page(driver, url, rows, n_runs, n_figures, shot):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(driver, 20)
    driver.get(url)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#rows tr")) == len(rows))
    # filter by task: exactly that task's items
    Select(driver.find_element(By.ID, "f-task")).select_by_value("frame_localize")
    shown = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tr")]
    assert shown == [r["id"] for r in rows if r["task"] == "frame_localize"] and shown
    Select(driver.find_element(By.ID, "f-task")).select_by_value("")
    # sort by the top probability, ascending then descending
    top = {r["id"]: r["probs"][r["choices"].index(r["prediction"])] for r in rows}
    driver.find_element(By.CSS_SELECTOR, "th[data-sort=top]").click()
    shown = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tr")]
    assert [top[i] for i in shown] == sorted(top.values())
    driver.find_element(By.CSS_SELECTOR, "th[data-sort=top]").click()
    shown = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tr")]
    assert [top[i] for i in shown] == sorted(top.values(), reverse=True)
    # open the item with the most frames: its thumbnails load, its posterior is predictions.jsonl's
    row = max(rows, key=lambda r: len(r["frames"]))
    driver.find_element(By.CSS_SELECTOR, f"#rows tr[data-id='{row['id']}']").click()
    wait.until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == row["id"])
    wait.until(lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete)"))
    widths = driver.execute_script("return Array.from(document.querySelectorAll('img.thumb')).map(i => i.naturalWidth)")
    assert len(widths) == len(row["frames"]) and all(w > 0 for w in widths)
    boxes = driver.find_elements(By.CSS_SELECTOR, ".run")
    assert len(boxes) == n_runs
    for box in boxes:
        bars = box.find_elements(By.CSS_SELECTOR, ".bar")
        assert [b.get_attribute("data-choice") for b in bars] == row["choices"]
        assert [float(b.get_attribute("data-p")) for b in bars] == row["probs"]
        assert row["prompt_text"] == box.find_element(By.CSS_SELECTOR, "pre.prompt").get_attribute("textContent")
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 0
    driver.find_element(By.ID, "nav-overview").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "section.overview table.md"))
    # every figure of every run's report: a loaded image inside its link, and no markdown shown as text
    wait.until(lambda d: d.execute_script("return Array.from(document.images).every(i => i.complete)"))
    figures = driver.execute_script(
        "return Array.from(document.querySelectorAll('section.overview img')).map("
        "i => [i.naturalWidth, i.parentElement.tagName, i.parentElement.getAttribute('href'),"
        " i.getAttribute('src')])"
    )
    assert len(figures) == n_runs * n_figures > 0
    assert all(w > 0 and parent == "A" and href == src for w, parent, href, src in figures), figures
    text = driver.find_element(By.ID, "main").text
    assert "](" not in text and "![" not in text


def test_the_page_in_headless_chromium_from_disk_and_from_a_local_server(tc_run, tmp_path):
    driver = _driver()
    rows, figures = _rows(tc_run), len(list(tc_run.glob("*.png")))
    one = P.write_view([tc_run], tmp_path / "one", progress=False, store=tmp_path / "store")
    two = P.write_view([tc_run, tc_run], tmp_path / "two", ["base", "again"], progress=False, store=tmp_path / "store")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=two.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _check_page(driver, one.as_uri(), rows, 1, figures, tmp_path / "file-item.png")
        for _ in range(100):  # the server is up once it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        _check_page(driver, f"http://127.0.0.1:{port}/index.html", rows, 2, figures, tmp_path / "http-item.png")
    finally:
        driver.quit()
        server.kill()
        server.wait()


def test_a_dataset_or_any_folder_that_is_not_a_run_is_refused_before_anything_is_written(prism_build, tmp_path, capsys):
    from judgetrain.cli import main as cli

    before = sorted(p.relative_to(prism_build) for p in prism_build.rglob("*"))
    assert cli(["eval", "view", str(prism_build), "--no-progress"]) == 2  # once a 22-line FileNotFoundError traceback
    err = capsys.readouterr().err
    assert err == (
        "error: invalid eval view configuration:\n"
        f"  - runs: {prism_build} is a dataset folder (build.json found: `judgetrain build prism` wrote it), "
        f"not an evaluation run; evaluate a model on it first (`judgetrain eval judge --model MODEL --data "
        f"{prism_build} --out results/RUN`), then view the run: `judgetrain eval view results/RUN`\n"
    )
    assert sorted(p.relative_to(prism_build) for p in prism_build.rglob("*")) == before  # no view/ in the dataset
    stopped, empty, absent = tmp_path / "stopped", tmp_path / "empty", tmp_path / "absent"
    empty.mkdir()
    stopped.mkdir()
    (stopped / runs.RUN_INFO).write_text("{}")
    assert cli(["eval", "view", str(stopped), str(empty), str(absent), "--out", str(tmp_path / "view")]) == 2
    err = capsys.readouterr().err
    assert f"{stopped} holds run.json but no predictions.jsonl yet: the run stopped before its first item; rerun" in err
    assert f"{empty} holds no predictions.jsonl, so it is not a run folder; give the --out folder of a" in err
    assert f"{absent}: no such folder" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "stopped"]
    manifests = tmp_path / "vmcq"  # a video-MCQ build: PhaseFusion reads its manifest, not --data
    manifests.mkdir()
    (manifests / "build.json").write_text('{"builder": "video-mcq"}')
    assert cli(["eval", "view", str(manifests)]) == 2
    assert (
        f"(`judgetrain eval phasefusion --model MODEL --manifest {manifests}/manifest.jsonl --out results/RUN`)"
        in capsys.readouterr().err
    ) and not (manifests / "view").exists()
