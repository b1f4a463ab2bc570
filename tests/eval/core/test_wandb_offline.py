"""An offline wandb report is whole inside its run folder: a small hand-built run folder (three
records, two frames each) logged offline with an empty home folder, then read back from the
run folder alone: the ``.wandb`` log, the item table and the frame images it references, the
metrics in the run summary, the ``wandb sync`` line printed, and a second report that resumes
the same wandb run."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from PIL import Image

# the offline log's reader (wandb has no public one): the test module beside this one
from test_wandb_report import _key, _wandb_records

from judgetrain import records
from judgetrain.eval.core import wandb_report as W

COLOURS = [("red", "blue"), ("green", "white"), ("black", "yellow")]
METRICS = {"n": 3, "accuracy": 2 / 3, "ci95": [0.2, 0.9], "by_task": {"temporal_detect": {"accuracy": 2 / 3}}, "unit": "%"}


def _png(colour: str, size: tuple[int, int]) -> dict:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def _run_folder(root: Path) -> Path:
    """A finished TimeCatch-like run folder over a three-record dataset of its own."""
    recs = [
        records.make_record(
            id=f"r{i}",
            task="temporal_detect",
            images=[_png(a, (16, 8)), _png(b, (8, 8))],
            instruction="Swapped?",
            answer="yes",
            choices=["yes", "no"],
            label="yes",
            source="synthetic",
            perturbation="swap",
            position=0,
            n_frames=2,
            layout="A",
            meta={},
        )
        for i, (a, b) in enumerate(COLOURS)
    ]
    ds = datasets.Dataset.from_list(recs, features=records.FEATURES)
    records.save(datasets.DatasetDict(validation=ds), root / "ds", {"builder": "test"})
    run = root / "run"
    run.mkdir()
    preds = [
        {
            "id": f"r{i}",
            "task": "temporal_detect",
            "source": "synthetic",
            "label": "yes",
            "prediction": "yes" if i else "no",
            "correct": bool(i),
            "choices": ["yes", "no"],
            "probs": [0.7, 0.3] if i else [0.4, 0.6],
            "n_frames": 2,
        }
        for i in range(len(COLOURS))
    ]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (run / "run.json").write_text(json.dumps({"evaluation": "timecatch", "data": str(root / "ds"), "split": "validation"}))
    (run / "metrics.json").write_text(json.dumps(METRICS))
    return run


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    """A user without a key who says ``WANDB_MODE=offline``, with an empty home folder (and no
    XDG folders elsewhere), so anything wandb writes outside the run folder shows there."""
    for name in [k for k in os.environ if k.startswith(("WANDB_", "XDG_"))]:
        monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    return home


def _records_by_type(path: Path) -> dict[str, list]:
    by_type: dict[str, list] = {}
    for r in _wandb_records(path):
        by_type.setdefault(r.WhichOneof("record_type"), []).append(r)
    assert "exit" in by_type, f"{path} holds no exit record: {sorted(by_type)}"
    return by_type


def _of_run(folder: Path, run_id: str) -> bool:
    """Whether ``folder`` is an offline folder of run ``run_id`` (wandb adds ``-N`` to a second one within a second)."""
    return re.fullmatch(rf"offline-run-\d{{8}}_\d{{6}}-{run_id}(-\d+)?", folder.name) is not None


def _inside(path: str | Path, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(folder.resolve())


def _report(run: Path, capsys) -> tuple[Path, dict[str, list]]:
    """Log ``run``; the offline run folder its last line says to sync, and that run's records."""
    W.log_run(run)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    m = re.search(r"offline: sync with `wandb sync (\S+)`$", last)
    assert m, last
    sync = Path(m.group(1))
    assert "project" not in last and sync.is_dir() and sync.parent == run / "wandb" and sync.name.startswith("offline-run-")
    (log,) = sync.glob("run-*.wandb")
    return sync, _records_by_type(log)


def test_offline_report_is_whole_in_the_run_folder_and_a_second_one_resumes_it(tmp_path, empty_home, capsys):
    run = _run_folder(tmp_path)
    sync, by_type = _report(run, capsys)
    assert list(empty_home.rglob("*")) == [], "wandb wrote into the home folder"
    run_id = by_type["run"][0].run.run_id
    assert _of_run(sync, run_id) and W.stored_run_id(run) == run_id

    # metrics: every number once, in the summary; the history holds the table alone
    summary = {_key(i): json.loads(i.value_json) for r in by_type["summary"] for i in r.summary.update}
    assert (
        {k: summary[k] for k in W.flat_metrics(METRICS)}
        == W.flat_metrics(METRICS)
        == {"n": 3, "accuracy": 2 / 3, "ci95/0": 0.2, "ci95/1": 0.9, "by_task/temporal_detect/accuracy": 2 / 3}
    )
    history = {_key(i) for r in by_type["history"] for i in r.history.item}
    assert history and all(k.startswith(("_", W.TABLE_KEY + "/")) for k in history), history

    # the item table and the images it references: files under RUN/wandb
    (artifact,) = [r.artifact for r in by_type["artifact"] if r.artifact.type == "run_table"]
    files = {c.path: c.local_path for c in artifact.manifest.contents}
    assert all(_inside(p, run / "wandb") and Path(p).is_file() for p in files.values()), files
    table = json.loads(Path(files[f"{W.TABLE_KEY}.table.json"]).read_text())
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert [r["id"] for r in rows] == ["r0", "r1", "r2"] and len(files) == 1 + len(COLOURS)
    for row, (left, right) in zip(rows, COLOURS, strict=True):
        assert row["frames"]["_type"] == "image-file"
        with Image.open(files[row["frames"]["path"]]) as png:  # 16x8 and 8x8 side by side, 2 white pixels between
            assert png.size == (16 + 2 + 8, 8)
            assert png.convert("RGB").getpixel((0, 0)) == Image.new("RGB", (1, 1), left).getpixel((0, 0))
            assert png.convert("RGB").getpixel((16 + 2, 0)) == Image.new("RGB", (1, 1), right).getpixel((0, 0))

    # a second report: the same wandb run, resumed (offline: a newer folder with the same id)
    again, by_type2 = _report(run, capsys)
    assert again != sync and _of_run(again, run_id) and by_type2["run"][0].run.run_id == run_id
    assert sorted(p.name for p in (run / "wandb").glob("offline-run-*")) == sorted([sync.name, again.name])
    assert W.stored_run_id(run) == run_id and list(empty_home.rglob("*")) == []


def test_no_wandb_line_where_wandb_is_not_used(tmp_path):
    """A sweep's check of its recipe (``report_to: none``) builds a ``TrainingArguments``, whose
    first import prints transformers' "[INFO] Running in WANDB offline mode" under
    ``WANDB_MODE=offline``: the controller checks with that hidden, and puts it back after."""
    repo = Path(__file__).resolve().parents[3]
    code = (
        "import os\n"
        "from judgetrain import sweep\n"
        "from judgetrain.wandb_mode import offline_mode_hidden\n"
        f"space = sweep.SearchSpace.load({str(repo / 'recipes/spaces/tiny.yaml')!r})\n"
        "with offline_mode_hidden():\n"
        f"    space.validate({str(repo / 'recipes/tiny/qwen3vl-prism-pairwise-lora.yaml')!r}, [])\n"
        "print('mode', os.environ['WANDB_MODE'])\n"
    )
    env = {**os.environ, "WANDB_MODE": "offline", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=repo, check=True)
    assert "wandb" not in (done.stdout + done.stderr).lower() and done.stdout.splitlines()[-1] == "mode offline"
    assert "report_to: none" in (repo / "recipes/tiny/qwen3vl-prism-pairwise-lora.yaml").read_text()
