"""``--report_to wandb`` on an evaluation: a real tiny TimeCatch run logged offline, then read back
from the offline run wandb wrote (its ``.wandb`` log, the items table and the frame images)."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import pytest
from PIL import Image

from judgetrain import config, records
from judgetrain.config import ConfigError
from judgetrain.eval import timecatch as T
from judgetrain.eval.core import runs
from judgetrain.eval.core import wandb_report as W

LIMIT = 4  # the first validation records: enough for a table, a few seconds on 2 cores


def _argv(model, data, out, *extra):
    return [
        "--model",
        str(model),
        "--data",
        str(data),
        "--split",
        "validation",
        "--out",
        str(out),
        "--batch-size",
        "2",
        "--limit",
        str(LIMIT),
        "--no-progress",
        *extra,
    ]


def test_flat_metrics_hand_worked():
    metrics = {
        "table2": {"main": {"td": {"accuracy": 0.75, "n": 4, "ci95": [0.3, 0.95]}}},
        "unit": "%",
        "missing": None,
        "ok": True,
        "bins": [{"lo": 0.0, "n": 2}],
    }
    assert W.flat_metrics(metrics) == {
        "table2/main/td/accuracy": 0.75,
        "table2/main/td/n": 4,
        "table2/main/td/ci95/0": 0.3,
        "table2/main/td/ci95/1": 0.95,
        "ok": True,
        "bins/0/lo": 0.0,
        "bins/0/n": 2,
    }


def test_report_to_is_parsed_checked_and_not_identity(tmp_path):
    parse = T.make_parser
    (cfg,) = config.parse(parse(), _argv("m", tmp_path, tmp_path / "o", "--report-to", "wandb"))
    assert cfg.report_to == ["wandb"] and "report_to" not in config.identity(cfg)
    (cfg,) = config.parse(parse(), _argv("m", tmp_path, tmp_path / "o", "--report_to", "none"))
    assert cfg.report_to == []
    (cfg,) = config.parse(parse(), _argv("m", tmp_path, tmp_path / "o"))
    assert cfg.report_to == [] and not W.reports_to_wandb(cfg.report_to)
    with pytest.raises(ConfigError, match=r"report_to: 'tensorboard'; evaluations report to none or wandb"):
        config.parse(parse(), _argv("m", tmp_path, tmp_path / "o", "--report-to", "tensorboard"))


def test_image_rows_limit_from_the_environment(monkeypatch):
    monkeypatch.delenv(W.IMAGE_ROWS_ENV, raising=False)
    assert W.image_rows_limit() == 200
    monkeypatch.setenv(W.IMAGE_ROWS_ENV, "7")
    assert W.image_rows_limit() == 7
    monkeypatch.setenv(W.IMAGE_ROWS_ENV, "-1")
    with pytest.raises(ValueError, match=W.IMAGE_ROWS_ENV):
        W.image_rows_limit()


def test_filmstrip_puts_frames_side_by_side_at_one_height():
    red, blue = Image.new("RGB", (40, 20), "red"), Image.new("RGB", (10, 10), "blue")
    strip = W.filmstrip([red, blue], height=128)  # the tallest frame's height: 20; blue scaled to 20x20
    assert strip.size == (40 + 2 + 20, 20)
    assert strip.getpixel((0, 0)) == (255, 0, 0) and strip.getpixel((41, 5)) == (255, 255, 255)
    assert strip.getpixel((50, 10)) == (0, 0, 255)
    assert W.filmstrip([red], height=10).size == (20, 10)
    assert W.filmstrip([]) is None


def _wandb_records(path):
    """The protobuf records of an offline run's ``.wandb`` file: a LevelDB-style log (a 7-byte
    file header, then 32 KiB blocks of chunks with a 7-byte header: crc32, length, type
    full/first/middle/last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's tail too short for a header is padding
            pos += 32768 - pos % 32768
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:
            break
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # full, last
            record = pb.Record()
            record.ParseFromString(buf)
            out.append(record)
            buf = b""
    return out


def _key(item):
    return item.key or "/".join(item.nested_key)


def _summary(by_type):
    """The run summary an offline log holds: its summary records' updates, later ones winning."""
    return {_key(i): json.loads(i.value_json) for r in by_type.get("summary", []) for i in r.summary.update}


def _lookup(metrics, key):
    for part in key.split("/"):
        metrics = metrics[int(part)] if isinstance(metrics, list) else metrics[part]
    return metrics


def _read_back(out):
    """The offline run under ``out/wandb``: its records by type, and its item table's rows and
    staged files. wandb's service may still be flushing the log after ``finish()`` returns: the
    log is complete once it holds the exit record."""
    offline = list((out / "wandb").glob("offline-run-*"))
    assert len(offline) == 1, "one offline run under the run folder"
    path = next(offline[0].glob("run-*.wandb"))
    for _ in range(120):
        by_type = {}
        for r in _wandb_records(path):
            by_type.setdefault(r.WhichOneof("record_type"), []).append(r)
        if "exit" in by_type:
            break
        time.sleep(0.5)
    assert "exit" in by_type, f"{path} never got its exit record: {sorted(by_type)}"
    (artifact,) = [r.artifact for r in by_type["artifact"] if r.artifact.type == "run_table"]
    files = {c.path: c.local_path for c in artifact.manifest.contents}
    table = json.loads(Path(files[f"{W.TABLE_KEY}.table.json"]).read_text())
    assert table["columns"] == W.ITEM_COLUMNS
    return by_type, [dict(zip(table["columns"], row, strict=True)) for row in table["data"]], files


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    """wandb as a user without a key sees it: conftest disables it, this re-enables it offline."""
    for name in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.netrc with a key; artifacts staged here


def test_timecatch_run_logged_offline_and_read_back(tiny_model, timecatch_build, tmp_path, monkeypatch, offline_wandb):
    monkeypatch.setenv(W.IMAGE_ROWS_ENV, "3")  # the 4th row goes without its frames
    out = tmp_path / "tc-wandb"
    (cfg,) = config.parse(T.make_parser(), _argv(tiny_model("qwen3-vl"), timecatch_build[0], out, "--report-to", "wandb"))
    assert T.main(cfg) == 0
    by_type, rows, files = _read_back(out)
    run = by_type["run"][0].run
    assert (run.display_name, run.project, run.job_type) == ("tc-wandb", "judgetrain", "eval")
    configs = [run.config, *(r.config for r in by_type.get("config", []))]  # set at init, then any updates
    config_items = {_key(i): json.loads(i.value_json) for c in configs for i in c.update}
    assert config_items["evaluation"] == "timecatch" and config_items["report_to"] == ["wandb"]
    assert config_items["n_items"] == LIMIT and "items" not in config_items and "identity" not in config_items

    # every number of metrics.json, exactly, under its /-joined key, in the run summary (not the history)
    metrics = json.loads((out / runs.METRICS).read_text())
    scalars = {k: v for k, v in _summary(by_type).items() if not k.startswith("_") and not k.startswith(W.TABLE_KEY + "/")}
    assert scalars["n"] == LIMIT and scalars["run/world_size"] == 1
    assert len(scalars) > 20 and all(v == _lookup(metrics, k) for k, v in scalars.items())
    assert scalars == W.flat_metrics(metrics)
    history = {_key(i) for r in by_type["history"] for i in r.history.item}
    assert all(k.startswith(("_", W.TABLE_KEY + "/")) for k in history), history

    # the item table (the run_table artifact, staged for `wandb sync`) and its frame images
    preds = runs.read_predictions(out / runs.PREDICTIONS)
    assert [r["id"] for r in rows] == [p["id"] for p in preds] and len(rows) == LIMIT
    ds = records.load(timecatch_build[0])["validation"].select(range(LIMIT))
    for row, pred, rec in zip(rows, preds, ds, strict=True):
        assert json.loads(row["posterior"]) == dict(zip(pred["choices"], pred["probs"], strict=True))
        assert (row["gold"], row["prediction"], row["correct"]) == (pred["label"], pred["prediction"], pred["correct"])
        assert (row["task"], row["source"], row["top_prob"]) == (pred["task"], pred["source"], max(pred["probs"]))
        texts = [c["text"] for m in rec["prompt"] for c in m["content"] if c["type"] == "text"]
        assert row["prompt"].count("<image>") == len(rec["images"]) and all(t in row["prompt"] for t in texts)
    for row, rec in zip(rows[:3], ds, strict=False):
        image = row["frames"]
        assert image["_type"] == "image-file" and image["path"].startswith("media/images/")
        frames = rec["images"]
        h = min(128, max(f.height for f in frames))
        width = sum(round(f.width * h / f.height) for f in frames) + 2 * (len(frames) - 1)
        with Image.open(files[image["path"]]) as png:
            assert png.size == (image["width"], image["height"]) == (width, h)
            first = frames[0].convert("RGB").resize((round(frames[0].width * h / frames[0].height), h))
            assert png.getpixel((0, 0)) == first.getpixel((0, 0))
    assert rows[3]["frames"] is None


def test_phasefusion_run_logs_one_row_per_pass_with_its_view(tiny_model, clips, tmp_path, offline_wandb):
    from judgetrain.cli import main
    from judgetrain.video import decode_frames

    out = tmp_path / "pf-wandb"
    assert (
        main(
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
                "2",
                "--phases",
                "2",
                "--orderings",
                "2",
                "--arms",
                "single,fusion",
                "--limit",
                "1",
                "--no-progress",
                "--report-to",
                "wandb",
            ]
        )
        == 0
    )
    _, rows, files = _read_back(out)
    preds = runs.read_predictions(out / runs.PREDICTIONS)
    passes = [p for p in preds if p["kind"] == "pass"]
    (question,) = [p for p in preds if p["kind"] == "question"]
    # grids single (1 view) and phase (2 views), at origins 0 and 1/4, under 2 orderings: (1 + 2) x 2 x 2
    assert len(rows) == len(passes) == 12 and len({r["view"] for r in rows}) == 12
    for row, p in zip(rows, passes, strict=True):
        assert row["view"] == f"{p['grid']} origin {p['origin']} phase {p['phase']} ordering {p['ordering']}"
        assert json.loads(row["posterior"]) == dict(zip(question["options"], p["posterior"], strict=True))
        assert (row["gold"], row["prediction"]) == (question["options"][question["answer"]], question["options"][p["pred"]])
        assert row["prompt"].count("<image>") == len(p["frames"]) == row["n_frames"] == 2
        frames = decode_frames(question["video"], p["frames"])
        h, w = frames[0].shape[:2]
        with Image.open(files[row["frames"]["path"]]) as png:
            assert png.size == (2 * w + 2, h)
            assert png.getpixel((w + 2, 0)) == tuple(int(x) for x in frames[1][0, 0])


def test_rows_of_a_run_whose_records_are_gone_keep_the_predictions(tmp_path, capsys):
    rows = [
        {
            "id": "a",
            "task": "frame_detect",
            "source": "s",
            "label": "no",
            "prediction": "yes",
            "correct": False,
            "choices": ["yes", "no"],
            "probs": [0.75, 0.25],
            "n_frames": 4,
        }
    ]
    (row,) = W.item_rows(rows, {"data": str(tmp_path / "moved"), "split": "test"}, image_rows=10)
    assert row == ["a", "frame_detect", "s", None, "no", "yes", False, 0.75, '{"yes": 0.75, "no": 0.25}', None, 4, None]
    assert "prompts and frames left out" in capsys.readouterr().err


def test_eval_report_logs_the_rebuilt_run_too(tiny_model, timecatch_build, tmp_path, offline_wandb):
    """`judgetrain eval report RUN --report_to wandb`: the rebuilt metrics and the item table,
    as the evaluation itself logs them; an unknown destination is refused naming the field."""
    from judgetrain.eval.core import rebuild

    out = tmp_path / "tc-report"
    (cfg,) = config.parse(T.make_parser(), _argv(tiny_model("qwen3-vl"), timecatch_build[0], out))
    assert T.main(cfg) == 0 and not (out / "wandb").exists()
    (rcfg,) = config.parse(rebuild.make_parser(), [str(out), "--report_to", "wandb"])
    assert rebuild.main(rcfg) == 0
    by_type, rows, _ = _read_back(out)
    summary, flat = _summary(by_type), W.flat_metrics(json.loads((out / runs.METRICS).read_text()))
    assert {k: summary[k] for k in flat} == flat
    assert [r["id"] for r in rows] == [p["id"] for p in runs.read_predictions(out / runs.PREDICTIONS)]
    with pytest.raises(config.ConfigError, match="report_to: 'tensorboard'"):
        config.parse(rebuild.make_parser(), [str(out), "--report_to", "tensorboard"])
