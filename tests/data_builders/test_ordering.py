"""Chronological-ordering probe (paper 002 App. G): answer parsing, metrics on hand-worked examples, records."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from datasets import Image as ImageFeature, List
from PIL import Image

from judgetrain import config, records
from judgetrain.cli import main as cli
from judgetrain.data_builders import ordering
from judgetrain.data_builders.core import BuildError
from judgetrain.data_builders.procedures import read_procedures
from judgetrain.eval.judge import ordering as M

# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text", [
    "2, 4, 1, 3",
    "2,4,1,3.",
    "2 4 1 3",
    "2-4-1-3",
    "2 -> 4 -> 1 -> 3",
    "2 → 4 → 1 → 3",
    "[2, 4, 1, 3]",
    "**2, 4, 1, 3**",
    "Image 2, Image 4, Image 1, Image 3",
    "Answer: 2, 4, 1, 3",
    "Final answer:\n\n2, 4, 1, 3\nThat is my ordering.",           # the line after the last marker
    "Image 2 shows the dough, image 4 the sauce.\nOrder: 2, 4, 1, 3",
    "The dough comes first, image 4 later.\n2, 4, 1, 3",            # no marker: the last line
])
def test_parse_ordering_reads_a_permutation(text):
    assert ordering.parse_ordering(text, 4) == [2, 4, 1, 3]


@pytest.mark.parametrize("text", [
    "",
    "2, 4, 1",              # too few
    "2, 4, 1, 3, 5",        # too many
    "2, 4, 4, 3",           # repeated
    "1, 3, 0, 2",           # 0-based
    "The order is 2, 4, 1, 3",   # words on the answer line: never guessed
    "2, 4, 1, 3\nI am not sure.",  # the last line is not an answer
    "Answer: B-D-A-C",      # letters are not this probe's format
    "Answer: 2, 4, 1, 3 or maybe 2, 1, 4, 3",
    "Answer:",
])
def test_parse_ordering_refuses_anything_else(text):
    assert ordering.parse_ordering(text, 4) is None


def test_gold_order_and_format():
    # shown[p] = chronological rank of the image at display position p
    assert ordering.gold_order([3, 1, 0, 2]) == [3, 2, 4, 1]  # rank 0 is image 3, rank 1 image 2, …
    assert ordering.gold_order([0, 1, 2]) == [1, 2, 3]
    assert ordering.format_ordering([3, 2, 4, 1]) == "3, 2, 4, 1"
    assert ordering.parse_ordering(ordering.format_ordering([3, 2, 4, 1]), 4) == [3, 2, 4, 1]


# --------------------------------------------------------------------------- metrics


def test_metrics_on_hand_worked_examples():
    gold = [2, 4, 1, 3]
    # one adjacent inversion (images 1 and 3): 5 concordant pairs, 1 discordant → tau = (5 − 1) / 6
    assert M.kendall_tau([2, 4, 3, 1], gold) == pytest.approx(2 / 3)
    assert M.position_accuracy([2, 4, 3, 1], gold) == 0.5
    assert M.kendall_tau(gold, gold) == 1.0 and M.position_accuracy(gold, gold) == 1.0
    assert M.kendall_tau([3, 1, 4, 2], gold) == pytest.approx(-1.0)  # reversed
    assert M.position_accuracy([3, 1, 4, 2], gold) == 0.0
    # a rotation (the first image moved to the end, the others one place earlier): 3 of 6 pairs discordant
    assert M.kendall_tau([4, 1, 3, 2], gold) == pytest.approx(0.0)
    assert M.exact_match(gold, gold) and not M.exact_match([2, 4, 3, 1], gold)
    assert not M.exact_match(None, gold)
    with pytest.raises(ValueError):
        M.kendall_tau([1, 2, 3], gold)


def test_ordering_metrics_count_invalid_answers_as_wrong():
    golds = [[2, 4, 1, 3], [1, 2, 3, 4], [3, 1, 2], [4, 3, 2, 1]]
    preds = [[2, 4, 1, 3], [1, 2, 4, 3], None, [1, 2, 3, 4]]
    m = M.ordering_metrics(preds, golds)
    assert (m["n"], m["n_valid"], m["n_invalid"]) == (4, 3, 1)
    assert m["exact_match"] == pytest.approx(1 / 4)         # the paper's x/n: 1 of 4
    assert m["exact_match_valid"] == pytest.approx(1 / 3)
    assert m["kendall_tau"] == pytest.approx((1 + 2 / 3 - 1) / 3)
    assert m["position_accuracy"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["chance_exact_match"] == pytest.approx((3 / 24 + 1 / 6) / 4)
    empty = M.ordering_metrics([None], [[1, 2]])
    assert empty["exact_match"] == 0 and empty["kendall_tau"] is None


def test_select_steps_is_evenly_spaced():
    assert ordering.select_steps(4, 4) == [0, 1, 2, 3]
    assert ordering.select_steps(5, 4) == [0, 1, 3, 4]      # 0, 1.33, 2.67, 4
    assert ordering.select_steps(7, 4) == [0, 2, 4, 6]
    assert ordering.select_steps(8, 4) == [0, 2, 5, 7]      # 0, 2.33, 4.67, 7
    assert ordering.select_steps(6, 3) == [0, 3, 5]         # 0, 2.5 → 3, 5
    with pytest.raises(ValueError):
        ordering.select_steps(3, 4)


# --------------------------------------------------------------------------- records


def test_probe_records(tmp_path, capsys):
    (cfg,) = config.parse(ordering.make_parser(), ["--out", str(tmp_path / "ds"), "--synthetic", "12", "--seed", "5",
                                                   "--no-progress", "--keep-work", "--labels", "numbers", "--image-size", "0"])
    assert ordering.main(cfg) == 0
    assert "Dataset written to" in capsys.readouterr().out
    procs = {p.id: p for p in read_procedures(tmp_path / "ds.work" / "synthetic" / "manifest.jsonl")[0]}
    ds = records.load(tmp_path / "ds", verify=True)
    assert list(ds) == ["test"] and len(ds["test"]) == 12
    rows = ds["test"].cast_column("images", List(ImageFeature(decode=False)))
    records.validate_records(rows, split="test")
    moved_first = set()
    for row in rows:
        m = json.loads(row["meta"])
        proc = procs[m["procedure_id"]]
        assert row["task"] == "ordering" and row["choices"] == [] and row["layout"] == "G" and row["n_frames"] == 4
        assert row["completion"][0]["content"][0]["text"] == row["label"]
        order = ordering.parse_ordering(row["label"], 4)
        assert order == m["gold_order"]
        assert m["steps_used"] == ordering.select_steps(proc.n, 4)
        images = [im["bytes"] for im in row["images"]]
        chronological = [proc.steps[s].image.read_bytes() for s in m["steps_used"]]
        # the answer puts the shown images back in chronological order, and the shown order is shuffled
        assert [images[k - 1] for k in order] == chronological and images != chronological
        assert row["position"] == next(p for p in range(4) if images[p] != chronological[p])
        moved_first.add(row["position"])
        texts = [c["text"] for c in row["prompt"][0]["content"] if c["type"] == "text"]
        assert texts[:4] == ["Image 1:", "Image 2:", "Image 3:", "Image 4:"]
        assert texts[4] == ordering.ORDERING_INSTRUCTION.format(n=4)
        assert not any(t in "\n".join(texts) for t in proc.texts)  # no step text leaks into the prompt
    assert len(moved_first) > 1
    again = ordering.build(ordering.OrderingConfig(out=tmp_path / "again", synthetic=12, seed=5, progress=False,
                                                   labels="numbers", image_size=0))
    first = json.loads((tmp_path / "ds" / "build.json").read_text())
    assert again["splits"] == first["splits"]


def test_all_steps_and_too_short(tmp_path):
    rows = []
    for pid, n in (("p4", 4), ("p6", 6), ("p2", 2)):
        (tmp_path / pid).mkdir()
        steps = []
        for k in range(n):
            Image.fromarray(np.full((8, 8, 3), 10 * k + n, np.uint8)).save(tmp_path / pid / f"{k}.png")
            steps.append({"text": f"step {k}", "image": f"{pid}/{k}.png"})
        rows.append({"id": pid, "category": "c", "steps": steps})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    info = ordering.build(ordering.OrderingConfig(out=tmp_path / "six", procedures=manifest, n_images=6, progress=False))
    assert info["counts"]["sequences"]["kept"] == 1 and [f["id"] for f in info["filtered"]] == ["p4", "p2"]
    info = ordering.build(ordering.OrderingConfig(out=tmp_path / "all", procedures=manifest, n_images=0, progress=False))
    ds = records.load(tmp_path / "all")["test"]
    assert sorted(ds["n_frames"]) == [2, 4, 6]
    two = next(r for r in ds if r["n_frames"] == 2)
    assert two["label"] == "B-A"  # the only non-identity order of two images (lettered, App. G)
    with pytest.raises(BuildError, match="--n-images"):
        ordering.OrderingConfig(out=tmp_path, n_images=1).check()
    assert math.isclose(M.ordering_metrics([[2, 1]], [[2, 1]])["chance_exact_match"], 0.5)


def test_manifest_bytes_and_field_types_are_located_not_fatal(tmp_path, capsys):
    """The probe as a user runs it, on a procedure manifest with a bad byte, a non-object row, a
    mistyped category and a duplicate id among good lines (integer id, null title, U+2028 / U+0085
    inside step texts): each bad line is located and skipped, the rest becomes records."""
    lines = []
    for pid, n in ((1, 4), ("p5", 5), ("p6", 6)):
        (tmp_path / str(pid)).mkdir()
        steps = []
        for k in range(n):
            Image.fromarray(np.full((8, 8, 3), 10 * k + n, np.uint8)).save(tmp_path / str(pid) / f"{k}.png")
            steps.append({"text": f"step\u2028{k}\u0085done", "image": f"{pid}/{k}.png"})
        lines.append(json.dumps({"id": pid, "category": "c", "title": None, "steps": steps}, ensure_ascii=False).encode())
    good = [{"text": "t", "image": "p5/0.png"}] * 4
    lines[1:1] = [b'{"id": "bad", "category": "\xff", "steps": []}',                              # 2 not UTF-8
                  b"[1, 2]",                                                                     # 3 a list
                  json.dumps({"id": "typed", "category": ["c"], "steps": good}).encode(),        # 4 category a list
                  json.dumps({"id": "1", "category": "c", "steps": good}).encode()]              # 5 the id of line 1
    manifest = tmp_path / "m.jsonl"
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    argv = ["build", "ordering-probe", "--procedures", str(manifest), "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "ds")]) == 0
    err = capsys.readouterr().err
    info = json.loads((tmp_path / "ds" / "build.json").read_text())
    skipped = {s["line"]: s["reason"] for s in info["skipped"]}
    assert sorted(skipped) == [2, 3, 4, 5] and {s["path"] for s in info["skipped"]} == {str(manifest)}
    assert skipped[2].startswith("not valid UTF-8 at byte ")
    assert skipped[3].startswith("not a JSON object (an array)")
    assert skipped[4].startswith("category: an array, not a string; ")
    assert skipped[5].startswith("id: '1' is also on line 1; ")
    assert all(f"{manifest}:{line}: " in err for line in skipped) and "Traceback" not in err
    assert info["counts"]["sequences"] | {"per_category": None} == {"kept": 3, "too_short": 0, "skipped": 4, "per_category": None}
    metas = [json.loads(m) for m in records.load(tmp_path / "ds")["test"]["meta"]]
    assert sorted(m["procedure_id"] for m in metas) == ["1", "p5", "p6"] and {m["title"] for m in metas} == {""}
    procs = {p.id: p for p in read_procedures(manifest)[0]}
    assert [procs[i].line for i in ("1", "p5", "p6")] == [1, 6, 7] and procs["1"].texts[0] == "step\u20280\u0085done"

    assert cli([*argv, "--out", str(tmp_path / "strict"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "4 bad input(s)" in err and f"{manifest}:2: not valid UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "strict").exists()


def test_cli_takes_a_yaml_config_and_flags_win(tmp_path, capsys):
    """`--config build.yaml` sets the fields, flags override them, an unknown key fails with a did-you-mean."""
    yaml_file = tmp_path / "build.yaml"
    yaml_file.write_text("synthetic: 4\nseed: 9\nn_images: 4\nsynthetic_size: 64\nkeep_work: true\n")
    out = tmp_path / "ds"
    assert cli(["build", "ordering-probe", "--config", str(yaml_file), "--out", str(out), "--n-images", "3",
                "--no-progress"]) == 0
    info = json.loads((out / "build.json").read_text())
    args = info["args"]
    # from the YAML file
    assert args["synthetic"] == 4 and info["seed"] == 9 and args["synthetic_size"] == 64 and args["keep_work"] is True
    assert (tmp_path / "ds.work").is_dir()
    # from the flags, over the YAML file
    assert args["n_images"] == 3 and args["progress"] is False
    ds = records.load(out, verify=True)["test"]
    assert len(ds) == 4 and set(ds["n_frames"]) == {3}
    capsys.readouterr()
    yaml_file.write_text("synthetic: 4\nn_image: 3\n")
    assert cli(["build", "ordering-probe", "--config", str(yaml_file), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown key 'n_image'; did you mean 'n_images'?" in err
    assert not (tmp_path / "bad").exists()


def test_lettered_448_px_records_as_appendix_g(tmp_path):
    """The defaults follow paper 002 App. G: images labelled A, B, C, D, resized to 448 x 448,
    answered as e.g. B-D-A-C; the judge's parser and metrics read that format."""
    import io

    from judgetrain.eval.judge import ordering_cell
    from judgetrain.scoring import parser_for_record

    assert ordering.main(ordering.OrderingConfig(out=tmp_path / "ds", synthetic=6, seed=5, progress=False)) == 0
    rows = records.load(tmp_path / "ds")["test"].cast_column("images", List(ImageFeature(decode=False)))
    for row in rows:
        m = json.loads(row["meta"])
        texts = [c["text"] for c in row["prompt"][0]["content"] if c["type"] == "text"]
        assert texts[:4] == ["Image A:", "Image B:", "Image C:", "Image D:"] and "D-C-B-A" in texts[4]
        assert row["label"] == "-".join("ABCD"[k - 1] for k in m["gold_order"]) and (m["labels"], m["image_size"]) == ("letters", 448)
        assert all(Image.open(io.BytesIO(im["bytes"])).size == (448, 448) for im in row["images"])
        parser = parser_for_record(row)
        assert parser(f"Answer: {row['label'].lower().replace('-', ' -> ')}") == row["label"]
        assert parser("Answer: A-B-C") is None and parser("A-A-B-C") is None
    cell = ordering_cell([{"label": "B-D-A-C", "prediction": "B-D-A-C", "valid": True},
                          {"label": "B-D-A-C", "prediction": "D-C-B-A", "valid": True}])
    assert cell["exact_match"] == 0.5 and cell["reverse_label_order"] == 1
    with pytest.raises(BuildError, match="--labels 'roman'"):
        ordering.OrderingConfig(out=tmp_path, labels="roman").check()
