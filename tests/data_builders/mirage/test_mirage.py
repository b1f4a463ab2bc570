"""MIRAGE builder: manifest schema, majority votes, pairs per prompt, layouts, balance, splits, synthetic manifest."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from datasets import Image as ImageFeature, List
from PIL import Image

from judgetrain import config, records
from judgetrain.cli import main as cli
from judgetrain.data_builders import mirage, prism
from judgetrain.data_builders.core import BuildError


def noise_png(path: Path, seed) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(path)
    return path.name


def seq(root: Path, prompt: str, sid: str, n: int, votes, generator=None, **extra) -> dict:
    images = []
    for k in range(n):
        rel = f"{prompt}/{sid}/{k}.png"
        noise_png(root / rel, [hash_str(prompt), hash_str(sid), k])
        images.append(rel)
    return {"id": sid, "generator": generator or f"gen-{sid}", "images": images, "votes": votes, **extra}


def hash_str(s: str) -> int:
    return int.from_bytes(s.encode(), "big") % (2**32)


def write_handmade(root: Path) -> Path:
    rows = [
        {"id": "r1", "domain": "recipes", "prompt": "Bake bread", "steps": ["Mix.", "Knead.", "Proof.", "Bake."], "sequences": [
            seq(root, "r1", "g1", 4, [1, 1, 0], backbone="FLUX.1"),  # positive
            seq(root, "r1", "g2", 4, [0, 0, 1]),                     # negative
            seq(root, "r1", "g3", 4, [True, False]),                 # tie
            seq(root, "r1", "g4", 4, []),                            # unannotated
            seq(root, "r1", "g5", 4, [0, 0, 0], generator="gen-g2"),  # negative, same generator as g2
        ]},
        {"id": "r2", "domain": "recipes", "prompt": "Make tea", "sequences": [  # prompt only: lengths may differ
            seq(root, "r2", "a", 5, [1, 1, 1]), seq(root, "r2", "b", 3, [1, 1, 0]), seq(root, "r2", "c", 3, [0, 0, 0])]},
        {"id": "v1", "domain": "vist", "prompt": "A camping trip", "steps": ["We left.", "We hiked.", "We camped."], "sequences": [
            seq(root, "v1", "x", 3, [1, 1]), seq(root, "v1", "y", 3, [0, 1, 0])]},
        {"id": "v2", "domain": "vist", "prompt": "A day out", "sequences": [seq(root, "v2", "n1", 3, [0, 0])]},
        {"id": "v3", "domain": "vist", "prompt": "A night in", "sequences": [seq(root, "v3", "p1", 3, [1])]},
    ]
    lines = [json.dumps(r) for r in rows]                                                   # lines 1-5
    ok = seq(root, "bad", "ok", 3, [1])
    lines += [
        "[1, 2",                                                                            # 6 not JSON
        json.dumps({"id": "b1", "domain": "movies", "prompt": "p", "sequences": [ok]}),      # 7 bad domain
        json.dumps({"id": "b2", "domain": "vist", "sequences": [ok]}),                       # 8 neither prompt nor steps
        json.dumps({"id": "r1", "domain": "vist", "prompt": "p", "sequences": [ok]}),        # 9 duplicate id
        json.dumps({"id": "b3", "domain": "vist", "steps": ["a", "b", "c"], "sequences": [   # 10 five bad sequences, one good
            ok,
            {**ok, "id": "missing", "images": ["bad/ok/0.png", "bad/ok/1.png", "nope.png"]},
            {**ok, "id": "short", "images": ["bad/ok/0.png"]},
            {**ok, "id": "votes", "votes": [1, 2]},
            {**ok, "id": "ok"},
            {**ok, "id": "outside", "images": ["../x.png"] * 3},
        ]}),
    ]
    manifest = root / "mirage.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirage")
    manifest = write_handmade(root / "data")
    info = mirage.build(mirage.MirageConfig(out=root / "ds", manifest=manifest, seed=3, progress=False))
    return manifest, info, records.load(root / "ds", verify=True)


def test_majority_vote():
    assert mirage.majority([1, 1, 0]) == "positive"
    assert mirage.majority([0, 1, 0]) == "negative"
    assert mirage.majority([1, 0]) == "tie"
    assert mirage.majority([1, 1, 0, 0]) == "tie"
    assert mirage.majority([]) == "unannotated"
    assert mirage.majority([1]) == "positive"


def test_bad_lines_and_bad_sequences_are_reported_with_path_and_line(handmade):
    manifest, info, _ = handmade
    prompts, skips = mirage.read_mirage(manifest)
    assert [p.id for p in prompts] == ["r1", "r2", "v1", "v2", "v3", "b3"]
    assert [s.id for s in prompts[-1].sequences] == ["ok"]  # a bad sequence skips only itself
    got = [(s.line, s.reason) for s in skips]
    assert [line for line, _ in got] == [6, 7, 8, 9, 10, 10, 10, 10, 10]
    assert all(str(s).startswith(f"{manifest}:{s.line}: ") for s in skips)
    reasons = dict(enumerate(r for _, r in got))
    # the wording is the shared reader's and "field: problem; fix" (was: "malformed manifest line",
    # "'domain' is 'movies'", "duplicate id 'r1' (first on line 1)", "votes must be a list")
    assert reasons[0].startswith("not JSON (")
    assert reasons[1].startswith("domain: 'movies' is not a MIRAGE domain; use one of ['recipes', 'vist']")
    assert "give 'prompt'" in reasons[2]
    assert reasons[3].startswith("id: 'r1' is also on line 1; ")
    assert "'missing'" in reasons[4] and "nope.png" in reasons[4] and "not found" in reasons[4]
    assert "1 image(s) for 3 step(s)" in reasons[5]
    assert ".votes: [1, 2] is not a list of votes; " in reasons[6]
    assert "duplicate sequence id" in reasons[7]
    assert "outside the manifest's folder" in reasons[8]
    assert len(info["skipped"]) == 9 and {s["line"] for s in info["skipped"]} == {6, 7, 8, 9, 10}
    with pytest.raises(BuildError, match="9 bad input"):
        mirage.build(mirage.MirageConfig(out=manifest.parent / "strict", manifest=manifest, strict=True, progress=False))


def test_manifest_bytes_and_field_types_are_located_not_fatal(tmp_path, capsys):
    """The MIRAGE build as a user runs it, on a manifest with a bad byte, a non-object row and a
    mistyped domain among good lines (integer ids, a null prompt and backbone, U+2028 / U+0085 inside
    the texts): the bad lines are located and skipped, the rest is built."""
    root = tmp_path / "data"
    rows = [
        {"id": 42, "domain": "recipes", "prompt": "Bake\u2028bread", "steps": ["Mix.\u0085Stir.", "Knead.", "Bake."],
         "sequences": [seq(root, "42", "g1", 3, [1, 1], backbone=None) | {"id": 1}, seq(root, "42", "g2", 3, [0, 0])]},
        {"id": "v1", "domain": "vist", "prompt": None, "steps": ["We left.", "We hiked.", "We\u2028camped."],
         "sequences": [seq(root, "v1", "x", 3, [1]), seq(root, "v1", "y", 3, [0])]},
    ]
    ok = seq(root, "bad", "ok", 3, [1])
    lines = [json.dumps(rows[0], ensure_ascii=False).encode(),                                               # 1
             b'{"id": "bytes", "domain": "vist", "prompt": "caf\xe9", "sequences": []}',                     # 2 not UTF-8
             b'"just a string"',                                                                              # 3 not an object
             json.dumps({"id": "typed", "domain": 2, "prompt": "p", "sequences": [ok]}).encode(),             # 4 domain an int
             json.dumps(rows[1], ensure_ascii=False).encode()]                                                # 5
    manifest = root / "mirage.jsonl"
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    argv = ["build", "mirage", "--manifest", str(manifest), "--layouts", "P0", "--splits", "train=1.0", "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "ds")]) == 0
    err = capsys.readouterr().err
    info = json.loads((tmp_path / "ds" / "build.json").read_text())
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [2, 3, 4] and {s["path"] for s in info["skipped"]} == {str(manifest)}
    assert skipped[2]["reason"].startswith("not valid UTF-8 at byte ")
    assert skipped[3]["reason"].startswith("not a JSON object (a string)")
    assert skipped[4]["reason"].startswith("domain: a number, not a string; ") and skipped[4]["id"] == "typed"
    assert all(f"{manifest}:{line}: " in err for line in skipped) and "Traceback" not in err
    assert info["counts"]["prompts"]["kept"] == 2 and info["counts"]["prompts"]["skipped_inputs"] == 3
    metas = [json.loads(m) for m in records.load(tmp_path / "ds")["train"]["meta"]]
    assert {m["prompt_id"] for m in metas} == {"42", "v1"}
    prompts = {p.id: p for p in mirage.read_mirage(manifest)[0]}
    assert (prompts["42"].line, prompts["v1"].line) == (1, 5)
    assert prompts["42"].prompt == "Bake\u2028bread" and prompts["42"].steps[0] == "Mix.\u0085Stir." and prompts["v1"].prompt == ""
    assert [(s.id, s.backbone) for s in prompts["42"].sequences] == [("1", None), ("g2", None)]

    assert cli([*argv, "--out", str(tmp_path / "strict"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "3 bad input(s)" in err and f"{manifest}:2: not valid UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "strict").exists()


def test_pairs_are_positives_against_negatives_of_the_same_prompt(handmade):
    _, info, ds = handmade
    pairs = Counter()
    for split in ds:
        for m in ds[split]["meta"]:
            m = json.loads(m)
            pairs[(m["prompt_id"], m["positive"]["id"], m["negative"]["id"])] += 1
            assert m["positive"]["id"] != m["negative"]["id"]
            assert mirage.majority(m["positive"]["votes"]) == "positive" and mirage.majority(m["negative"]["votes"]) == "negative"
            assert m["generator"] == m["negative"]["generator"]
    # a (5 images) against c (3) would let the image count give the answer away: left out, located
    expected = {("r1", "g1", "g2"), ("r1", "g1", "g5"), ("r2", "b", "c"), ("v1", "x", "y")}
    assert set(pairs) == expected and set(pairs.values()) == {len(prism.LAYOUTS)}
    assert info["unequal_pairs"] == [{"path": str(handmade[0]), "line": 2, "id": "r2", "positive": "a", "negative": "c",
                                      "images": [5, 3]}]
    assert {f["id"]: f["reason"] for f in info["filtered"]} == {"v2": "no human-validated positive", "v3": "no negative", "b3": "no negative"}
    seqs = info["counts"]["sequences"]
    assert seqs["recipes"]["gen-g3"] == {"tie": 1} and seqs["recipes"]["gen-g4"] == {"unannotated": 1}
    assert seqs["recipes"]["gen-g2"] == {"negative": 2}
    assert info["counts"]["pairs"] == {"recipes/gen-c": 1, "recipes/gen-g2": 2, "vist/gen-y": 1}


def test_records_show_positive_and_negative_in_the_layout_order(handmade):
    manifest, _, ds = handmade
    prompts = {p.id: p for p in mirage.read_mirage(manifest)[0]}
    layouts = set()
    for split in ds:
        for row in ds[split].cast_column("images", List(ImageFeature(decode=False))):
            m = json.loads(row["meta"])
            p = prompts[m["prompt_id"]]
            by_id = {s.id: [x.read_bytes() for x in s.images] for s in p.sequences}
            pos, neg = by_id[m["positive"]["id"]], by_id[m["negative"]["id"]]
            a, b = (pos, neg) if row["label"] == "A" else (neg, pos)
            got = [im["bytes"] for im in row["images"]]
            texts = [c["text"] for c in row["prompt"][0]["content"] if c["type"] == "text"]
            assert row["task"] == "pairwise" and row["choices"] == ["A", "B"] and row["label"] == m["gold_letter"]
            assert row["perturbation"] == "none" and row["position"] == -1 and row["n_frames"] == len(pos)
            assert row["source"] == f"mirage-{p.domain}"
            assert texts[-1].endswith(mirage.MIRAGE_INSTRUCTION + ("\n" + prism.GRID_NOTE["pairwise"] if row["layout"] == "P6" else ""))
            label = "Task" if p.domain == "recipes" else "Story"
            if p.prompt:
                assert f"{label}: {p.prompt}" in "\n".join(texts)
            if row["layout"] in ("P0", "P1", "P2", "P3"):
                assert got == a + b
            elif row["layout"] == "P4":
                assert got == b + a and m["presentation"] == ("gold_first" if row["label"] == "B" else "gold_second")
            elif row["layout"] == "P5":  # interleaved step by step; a shorter sequence just stops
                assert got == [x for k in range(max(len(a), len(b))) for x in ([a[k]] if k < len(a) else []) + ([b[k]] if k < len(b) else [])]
                if p.steps:
                    assert f"Step 1: {p.steps[0]}" in texts[0]
            else:
                assert len(got) == 2 and all(g.startswith(b"\x89PNG") for g in got)
            layouts.add(row["layout"])
    assert layouts == set(prism.LAYOUTS)


def test_balance_and_splits(handmade):
    _, info, ds = handmade
    prompts_by_split = {split: {json.loads(m)["prompt_id"] for m in ds[split]["meta"]} for split in ds}
    assert sum(len(v) for v in prompts_by_split.values()) == len(set().union(*prompts_by_split.values())) == 3
    for split in ds:
        labels = Counter(ds[split]["label"])
        assert labels["A"] == math.ceil(len(ds[split]) / 2) and labels["B"] == len(ds[split]) // 2
        assert info["counts"]["records"][split]["pairwise_label"] == dict(labels)
        records.validate_records(ds[split].cast_column("images", List(ImageFeature(decode=False))), split=split)


def test_synthetic_manifest_generators_and_votes(tmp_path):
    manifest = mirage.write_synthetic_mirage(tmp_path / "m", 8, seed=2, progress=False)
    again = mirage.write_synthetic_mirage(tmp_path / "m2", 8, seed=2, progress=False)
    assert manifest.read_text() == again.read_text()
    prompts, skips = mirage.read_mirage(manifest)
    assert not skips and [p.domain for p in prompts] == ["recipes", "vist"] * 4
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    for p, row in zip(prompts, rows):
        gold = [str(x) for x in p.sequences[0].images]
        assert [s.generator for s in p.sequences] == list(mirage.SYNTHETIC_GENERATORS)
        assert all(len(s.votes) == 3 for s in p.sequences)
        for s, raw in zip(p.sequences[1:], row["sequences"][1:]):
            shown = [str(x) for x in s.images]
            diff = [k for k in range(len(gold)) if shown[k] != gold[k]]
            assert diff == raw["defect"]["positions"]
            if s.generator == "synth-swap":
                assert len(diff) == 2 and diff[1] == diff[0] + 1 and sorted(shown) == sorted(gold)
            elif s.generator == "synth-outlier":
                assert len(diff) == 1 and shown[diff[0]] not in gold
            else:
                assert len(diff) >= 3 and sorted(shown) == sorted(gold)


def test_cli_synthetic_build_is_deterministic(tmp_path, capsys):
    argv = ["--synthetic", "10", "--layouts", "P0,P6", "--seed", "4", "--no-progress"]
    assert mirage.main(*config.parse(mirage.make_parser(), ["--out", str(tmp_path / "a"), *argv])) == 0
    assert "Dataset written to" in capsys.readouterr().out
    assert mirage.main(*config.parse(mirage.make_parser(), ["--out", str(tmp_path / "b"), *argv])) == 0
    a = json.loads((tmp_path / "a" / "build.json").read_text())
    b = json.loads((tmp_path / "b" / "build.json").read_text())
    assert a["splits"] == b["splits"] and a["counts"] == b["counts"]
    assert set(a["counts"]["sequences"]) == {"recipes", "vist"}
    per_gen = Counter()
    for split, c in a["counts"]["records"].items():
        per_gen.update(c["domain_generator"])
        assert abs(c["pairwise_label"].get("A", 0) - c["pairwise_label"].get("B", 0)) <= 1
    assert sum(per_gen.values()) == 2 * sum(a["counts"]["pairs"].values())
    with pytest.raises(BuildError, match="--layouts"):
        mirage.MirageConfig(out=tmp_path, layouts=("P7",)).check()


def test_cli_takes_a_yaml_config_and_flags_win(tmp_path, capsys):
    """`--config build.yaml` sets the fields, flags override them, an unknown key fails with a did-you-mean."""
    yaml_file = tmp_path / "build.yaml"
    yaml_file.write_text("synthetic: 4\nseed: 9\nlayouts: [P0, P6]\nsplits: train=1.0\nsynthetic_size: 64\n")
    out = tmp_path / "ds"
    assert cli(["build", "mirage", "--config", str(yaml_file), "--out", str(out), "--layouts", "P2", "--seed", "3",
                "--no-progress"]) == 0
    info = json.loads((out / "build.json").read_text())
    args = info["args"]
    # from the YAML file
    assert args["synthetic"] == 4 and args["splits"] == {"train": 1.0} and args["synthetic_size"] == 64
    assert info["counts"]["prompts"]["per_split"] == {"train": info["counts"]["prompts"]["kept"]}
    # from the flags, over the YAML file
    assert info["seed"] == 3 and args["layouts"] == ["P2"] and args["progress"] is False
    ds = records.load(out, verify=True)
    assert list(ds) == ["train"] and set(ds["train"]["layout"]) == {"P2"}
    capsys.readouterr()
    yaml_file.write_text("synthetic: 4\nsynthetic_sise: 64\n")
    assert cli(["build", "mirage", "--config", str(yaml_file), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown key 'synthetic_sise'; did you mean 'synthetic_size'?" in err
    assert not (tmp_path / "bad").exists()
