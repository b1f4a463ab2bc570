"""The task record: schema, validation messages, ids, hashes, atomic save/load."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import datasets
import pytest
from PIL import Image

from judgetrain import records


def png(colour: str) -> dict:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), colour).save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def good(**overrides) -> dict:
    row = records.make_record(
        id="r1", task="temporal_detect", images=[png("red"), png("blue")], instruction="Swapped?", answer="yes",
        choices=["yes", "no"], label="yes", source="synthetic-physics", perturbation="swap", position=0, n_frames=2,
        layout="A", meta={"lpips_swapped": 0.2},
    )
    row.update(overrides)
    return row


def errors_of(row) -> list[tuple[str, str]]:
    return [(e.column, e.message) for e in records.validate_record(row, split="train", index=3)]


def test_valid_record_has_no_errors_and_matches_features():
    row = good()
    assert errors_of(row) == []
    ds = datasets.Dataset.from_list([row], features=records.FEATURES)
    assert ds.features == records.FEATURES
    assert ds[0]["prompt"][0]["content"][0]["type"] == "image"
    assert len(ds[0]["images"]) == 2


@pytest.mark.parametrize(
    "overrides, column, needle",
    [
        ({"task": "temporal_guess"}, "task", "not a task"),
        ({"label": "maybe"}, "label", "not one of the choices"),
        ({"choices": ["yes"], "label": "yes"}, "choices", "at least 2"),
        ({"choices": ["yes", "yes"]}, "choices", "duplicates"),
        ({"position": 5}, "position", "outside 0..1"),
        ({"perturbation": "none", "position": 0}, "position", "must be -1"),
        ({"meta": "{not json"}, "meta", "not valid JSON"),
        ({"meta": "[1, 2]"}, "meta", "JSON object"),
        ({"n_frames": "2"}, "n_frames", "must be an int"),
        ({"images": [png("red")]}, "images", "1 image(s) but the prompt has 2"),
        ({"id": ""}, "id", "must not be empty"),
        ({"completion": [{"role": "user", "content": [{"type": "text", "text": "yes"}]}]}, "completion", "role 'assistant'"),
        ({"prompt": [{"role": "user", "content": [{"type": "video", "text": None}]}]}, "prompt", "expected 'image' or 'text'"),
        ({"prompt": [{"role": "user", "content": [{"type": "text", "text": None}]}]}, "prompt", "without a string 'text'"),
        ({"prompt": [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]}, "prompt", "last prompt message"),
        ({"task": "ordering"}, "choices", "must be empty for the free-form task"),
    ],
)
def test_each_kind_of_bad_row_is_named(overrides, column, needle):
    errs = errors_of(good(**overrides))
    assert any(c == column and needle in m for c, m in errs), errs


def test_missing_and_unknown_columns():
    row = good()
    del row["layout"]
    row["extra"] = 1
    errs = errors_of(row)
    assert ("layout", "missing column") in errs
    assert any(c == "extra" and "unknown column" in m for c, m in errs)


def test_validation_error_lists_every_violation_with_row_and_id():
    rows = [good(id="a"), good(id="b", label="maybe"), good(id="a"), good(id="c", task="x", meta="{")]
    with pytest.raises(records.RecordValidationError) as exc:
        records.validate_records(rows, split="validation")
    text = str(exc.value)
    assert "validation row 1 (id 'b'), column 'label'" in text
    assert "validation row 2 (id 'a'), column 'id': duplicate id" in text
    assert "row 3 (id 'c'), column 'task'" in text and "row 3 (id 'c'), column 'meta'" in text
    assert len(exc.value.errors) == 4


def test_ids_are_stable_across_processes():
    here = records.make_id("timecatch", 42, "clip-1", prefix="tc-")
    code = "from judgetrain.records import make_id; print(make_id('timecatch', 42, 'clip-1', prefix='tc-'))"
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert here == there and here.startswith("tc-") and len(here) == 19
    assert records.make_id("timecatch", 42, "clip-2") != records.make_id("timecatch", 42, "clip-1")


def test_content_hash_depends_on_content_only(tmp_path):
    a = datasets.Dataset.from_list([good(id="x"), good(id="y")], features=records.FEATURES)
    b = datasets.Dataset.from_list([good(id="x"), good(id="y")], features=records.FEATURES)
    assert records.content_hash(a) == records.content_hash(b)
    changed_image = datasets.Dataset.from_list([good(id="x"), good(id="y", images=[png("red"), png("green")])], features=records.FEATURES)
    assert records.content_hash(changed_image) != records.content_hash(a)
    reordered = datasets.Dataset.from_list([good(id="y"), good(id="x")], features=records.FEATURES)
    assert records.content_hash(reordered) != records.content_hash(a)
    # the hash survives a save/load round trip (Arrow layout may differ, content does not)
    records.save(datasets.DatasetDict(train=a), tmp_path / "ds", {"builder": "test"})
    assert records.load(tmp_path / "ds", verify=True)["train"].num_rows == 2
    info = records.read_build_info(tmp_path / "ds")
    assert info["splits"]["train"] == {"rows": 2, "content_hash": records.content_hash(a)}


def test_save_refuses_invalid_rows_and_leaves_nothing(tmp_path):
    bad = datasets.Dataset.from_list([good(label="maybe")], features=records.FEATURES)
    with pytest.raises(records.RecordValidationError, match="column 'label'"):
        records.save(datasets.DatasetDict(train=bad), tmp_path / "ds", {})
    assert list(tmp_path.iterdir()) == []


def test_an_empty_split_is_refused_before_anything_is_written(tmp_path):
    ds = datasets.Dataset.from_list([good(id="x")], features=records.FEATURES)
    with pytest.raises(ValueError, match=r"split\(s\) \['test'\] hold no records"):
        records.save(datasets.DatasetDict(train=ds, test=ds.select([])), tmp_path / "ds", {})
    assert list(tmp_path.iterdir()) == []


def test_duplicate_ids_across_splits_are_refused(tmp_path):
    ds = datasets.Dataset.from_list([good(id="same")], features=records.FEATURES)
    with pytest.raises(records.RecordValidationError, match="duplicate id"):
        records.save(datasets.DatasetDict(train=ds, validation=ds), tmp_path / "ds", {})


def test_load_refuses_a_half_written_dataset(tmp_path):
    ds = datasets.DatasetDict(train=datasets.Dataset.from_list([good()], features=records.FEATURES))
    # what a build killed inside save_to_disk leaves: the files without build.json
    ds.save_to_disk(str(tmp_path / "partial"))
    with pytest.raises(records.IncompleteDatasetError, match="no build.json"):
        records.load(tmp_path / "partial")
    with pytest.raises(records.IncompleteDatasetError, match="no such dataset folder"):
        records.load(tmp_path / "absent")


def test_save_replaces_a_previous_build_atomically(tmp_path):
    out = tmp_path / "ds"
    first = datasets.DatasetDict(train=datasets.Dataset.from_list([good(id="one")], features=records.FEATURES))
    second = datasets.DatasetDict(train=datasets.Dataset.from_list([good(id="two"), good(id="three")], features=records.FEATURES))
    records.save(first, out, {"n": 1})
    records.save(second, out, {"n": 2})
    loaded = records.load(out, verify=True)
    assert loaded["train"]["id"] == ["two", "three"]
    assert json.loads((out / "build.json").read_text())["n"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no temporary folders left behind


def test_load_detects_modified_files(tmp_path):
    out = tmp_path / "ds"
    records.save(datasets.DatasetDict(train=datasets.Dataset.from_list([good()], features=records.FEATURES)), out, {})
    info = json.loads((out / "build.json").read_text())
    info["splits"]["train"]["content_hash"] = "0" * 64
    (out / "build.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="content hash"):
        records.load(out, verify=True)


_KILLED_SAVE = """
import resource, signal, sys
import datasets
sys.path.insert(0, sys.argv[2])
from test_records import good
from judgetrain import records
rows = [good(id=f"r{i}") for i in range(40)]
dd = datasets.DatasetDict(train=datasets.Dataset.from_list(rows, features=records.FEATURES),
                          validation=datasets.Dataset.from_list([good(id="v")], features=records.FEATURES))
# the kernel kills the process (SIGXFSZ, which Python ignores unless told) at the first write
# past 4 KB: inside the first split's arrow file, as a kill -9 mid-save would
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
records.save(dd, sys.argv[1], {"n": 1})
"""


def test_a_killed_save_is_never_loadable_and_the_next_save_cleans_it(tmp_path):
    import signal
    from pathlib import Path

    out = tmp_path / "ds"
    proc = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(out), str(Path(__file__).parent)],
                          capture_output=True, text=True)
    assert proc.returncode == -signal.SIGXFSZ, proc.stderr[-2000:]
    partial = list(tmp_path.glob(".ds.partial-*"))
    assert len(partial) == 1 and not out.exists()
    with pytest.raises(FileNotFoundError):  # no dataset_dict.json: datasets cannot open it
        datasets.load_from_disk(str(partial[0]))
    stale = tmp_path / ".ds.old-0badf00d"
    stale.mkdir()
    ds = datasets.DatasetDict(train=datasets.Dataset.from_list([good(id="one")], features=records.FEATURES))
    records.save(ds, out, {"n": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    assert records.load(out, verify=True)["train"]["id"] == ["one"]


def test_save_records_the_identity_it_is_given_and_no_other(tmp_path):
    dd = datasets.DatasetDict(train=datasets.Dataset.from_list([good()], features=records.FEATURES))
    identity = {"builder": "test", "version": "1", "seed": 3, "manifest": {"sha256": "ab" * 32}}
    info = records.save(dd, tmp_path / "a", {"builder": "test", "seed": 3}, identity=identity)
    assert info["identity"] == identity == records.read_build_info(tmp_path / "a")["identity"]
    assert "identity" not in records.save(dd, tmp_path / "b", {"builder": "test"})  # none given: none recorded
    assert "identity" not in records.read_build_info(tmp_path / "b")


def _batch_ends(arrow_file) -> list[int]:
    """The byte offset at which each record batch of a saved split's Arrow stream ends."""
    import pyarrow as pa

    stream = io.BytesIO(arrow_file.read_bytes())
    reader, ends = pa.ipc.open_stream(stream), []
    for _ in reader:
        ends.append(stream.tell())
    return ends


def _truncated(folder, rows: int, keep) -> tuple:
    """A saved dataset (train: ``rows`` records, validation: one) whose train .arrow file is cut to ``keep(file)`` bytes."""
    import os

    dd = datasets.DatasetDict(train=datasets.Dataset.from_list([good(id=f"r{k}") for k in range(rows)], features=records.FEATURES),
                              validation=datasets.Dataset.from_list([good(id="v")], features=records.FEATURES))
    records.save(dd, folder, {"builder": "timecatch"})
    (arrow,) = (folder / "train").glob("*.arrow")
    os.truncate(arrow, keep(arrow))
    return folder, arrow


def rebuild_message(folder, what: str) -> str:
    return (f"{folder}: split 'train' ({folder / 'train'}) {what}: its files are truncated or damaged (a copy cut short, "
            f"a full disk). Rebuild the dataset: rerun `judgetrain build timecatch … --out {folder} --overwrite` with the "
            f'arguments recorded in {folder / "build.json"} ("args").')


def test_a_truncated_arrow_file_is_named_with_the_split_and_the_rebuild(tmp_path):
    folder, _ = _truncated(tmp_path / "cut", 3, lambda f: f.stat().st_size // 2)  # pyarrow's OSError, once as it was
    with pytest.raises(records.DamagedDatasetError) as exc:
        records.load(folder)
    assert str(exc.value).startswith(f"{folder}: split 'train' ({folder / 'train'}) cannot be read (Expected to ")
    assert str(exc.value).endswith(rebuild_message(folder, "").split(") : ", 1)[1])  # the same rebuild advice
    # datasets writes a split with images in batches of 100 rows; a file cut after the first batch read back 100 rows, no error
    folder, _ = _truncated(tmp_path / "boundary", 101, lambda f: _batch_ends(f)[0])
    assert len(datasets.load_from_disk(str(folder))["train"]) == 100
    with pytest.raises(records.DamagedDatasetError) as exc:
        records.load(folder)
    assert str(exc.value) == rebuild_message(folder, "holds 100 rows, but build.json says 101")


def test_eval_and_train_refuse_a_truncated_dataset_with_the_rebuild(tmp_path, tiny_model, capsys):
    from pathlib import Path

    from judgetrain.cli import main as cli

    folder, _ = _truncated(tmp_path / "ds", 3, lambda f: f.stat().st_size // 2)
    capsys.readouterr()
    assert cli(["eval", "timecatch", "--model", str(tmp_path / "no-model"), "--data", str(folder), "--out",
                str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder}: split 'train' ({folder / 'train'}) cannot be read (") and "Traceback" not in err
    assert f"--out {folder} --overwrite" in err and not (tmp_path / "run").exists()
    assert cli(["eval", "judge", "--model", str(tmp_path / "no-model"), "--data", str(folder), "--out",
                str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder}: split 'train' ({folder / 'train'}) cannot be read (") and "Traceback" not in err
    assert not (tmp_path / "run").exists()
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
    assert cli(["train", str(recipe), "--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets", str(folder),
                "--output_dir", str(tmp_path / "out")]) == 2  # refused by the checks before any process is launched
    err = capsys.readouterr().err
    assert f"datasets: {folder}: split 'train' ({folder / 'train'}) cannot be read (" in err and "Traceback" not in err
    assert f"--out {folder} --overwrite" in err and not (tmp_path / "out").exists()
