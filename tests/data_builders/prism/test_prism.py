"""PRISM builder and the procedure source: perturbations, layouts, rubric, balance, splits, bad input."""

from __future__ import annotations

import io
import json
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from datasets import Image as ImageFeature, List
from PIL import Image

from judgetrain import config, records
from judgetrain.cli import main as cli
from judgetrain.data_builders import prism
from judgetrain.data_builders.core import BuildError, assign_splits
from judgetrain.data_builders.procedures import (
    CATEGORIES,
    Procedure,
    Step,
    read_procedures,
    render_procedure,
    write_procedures,
)
from judgetrain.seeding import derive_seed

# id, category, steps, title: three categories, lengths 3 (too short) to 7
HANDMADE = [
    ("a1", "alpha", 4, "Alpha one"),
    ("a2", "alpha", 7, "Alpha two"),
    ("b1", "beta", 5, ""),
    ("b2", "beta", 6, "Beta two"),
    ("c1", "gamma", 4, "Gamma one"),
    ("c2", "gamma", 5, "Gamma two"),
    ("c3", "gamma", 3, "Too short"),
]


def write_handmade(root: Path, spec=HANDMADE, size=32) -> Path:
    """A procedure manifest whose every image is unique seeded noise (so bytes identify it)."""
    rows = []
    for i, (pid, cat, n, title) in enumerate(spec):
        (root / pid).mkdir(parents=True, exist_ok=True)
        steps = []
        for k in range(n):
            arr = np.random.default_rng([i, k]).integers(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(arr).save(root / pid / f"{k}.png")
            steps.append({"text": f"{pid} step {k + 1}.", "image": f"{pid}/{k}.png"})
        row = {"id": pid, "category": cat, "steps": steps, "source": "handmade"}
        if title:
            row["title"] = title
        rows.append(row)
    manifest = root / "procedures.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def proc(pid: str, cat: str, n: int) -> Procedure:
    return Procedure(pid, cat, [Step(f"{pid} {k}", Path(f"/x/{pid}/{k}.png")) for k in range(n)])


@pytest.fixture(scope="module")
def handmade(tmp_path_factory):
    root = tmp_path_factory.mktemp("handmade")
    manifest = write_handmade(root / "data")
    out = root / "prism"
    info = prism.build(prism.PrismConfig(out=out, procedures=manifest, seed=5, progress=False))
    return manifest, out, info, records.load(out, verify=True)


def raw(ds):
    """The rows with images as stored bytes (no decoding)."""
    return ds.cast_column("images", List(ImageFeature(decode=False)))


# --------------------------------------------------------------------------- negatives on hand-made sequences


def test_consecutive_swaps_every_adjacent_pair():
    vs = prism.consecutive_swaps(5)
    assert [v.key for v in vs] == ["swap@0-1", "swap@1-2", "swap@2-3", "swap@3-4"]
    assert [v.position for v in vs] == [0, 1, 2, 3]
    assert vs[2].order == (0, 1, 3, 2, 4) and vs[2].positions == (2, 3)
    assert vs[0].images(["p", "q", "r", "s", "t"]) == ["q", "p", "r", "s", "t"]


def test_nonconsecutive_swaps_are_distinct_far_pairs():
    rng = np.random.default_rng(0)
    for n in range(4, 9):
        vs = prism.nonconsecutive_swaps(n, 2, rng)
        assert len(vs) == 2 and len({v.key for v in vs}) == 2
        for v in vs:
            i, j = v.positions
            assert j - i >= 2 and v.position == i
            expected = list(range(n))
            expected[i], expected[j] = j, i
            assert list(v.order) == expected
    # n = 4 has exactly three such pairs; asking for more gives all of them
    assert sorted(v.positions for v in prism.nonconsecutive_swaps(4, 10, rng)) == [(0, 2), (0, 3), (1, 3)]


def test_shuffle_is_never_identity_nor_a_single_swap():
    for seed in range(300):
        n = 4 + seed % 5
        v = prism.shuffle_variant(n, np.random.default_rng(seed))
        moved = [p for p, g in enumerate(v.order) if p != g]
        assert sorted(v.order) == list(range(n))
        assert len(moved) >= 3 and v.position == moved[0] and list(v.positions) == moved


def test_semantic_outliers_come_from_other_categories_at_the_right_positions():
    gold = proc("g", "cooking", 5)
    others = [proc("h", "cooking", 4), proc("x", "garden", 4), proc("y", "clocks", 3)]
    pool = prism.outlier_pool(gold, [gold, *others])
    assert {o.category for o in pool} == {"garden", "clocks"} and len(pool) == 7
    gold_images = [str(s.image) for s in gold.steps]
    type1 = prism.semantic_variants(5, 1, pool, np.random.default_rng(1))
    assert [v.position for v in type1] == [0, 1, 2, 3, 4]  # one outlier at every position
    for p, v in enumerate(type1):
        shown = v.images(gold_images)
        assert [k for k in range(5) if shown[k] != gold_images[k]] == [p]
        assert shown[p] == v.outliers[0][1].image and "/g/" not in shown[p]
    for k in (2, 3):
        (v,) = prism.semantic_variants(5, k, pool, np.random.default_rng(k))
        shown = v.images(gold_images)
        replaced = [i for i in range(5) if shown[i] != gold_images[i]]
        assert replaced == list(v.positions) and len(replaced) == k and v.position == replaced[0]
        assert len({shown[i] for i in replaced}) == k  # never the same image twice
        assert all(o.category != "cooking" for _, o in v.outliers)
        assert v.perturbation == f"semantic-{k}" and v.subset == "semantic"


def test_negatives_per_gold_are_2n_plus_4_with_unique_keys():
    pool = prism.outlier_pool(proc("g", "a", 4), [proc("x", "b", 8)])
    for n in range(4, 9):
        vs = prism.make_negatives(proc("g", "a", n), pool, seed=3)
        assert len(vs) == 2 * n + 4
        assert len({v.key for v in vs}) == len(vs)
        assert Counter(v.perturbation for v in vs) == {"semantic-1": n, "semantic-2": 1, "semantic-3": 1, "swap": n - 1,
                                                       "swap-nonconsecutive": 2, "shuffle": 1}
    again = prism.make_negatives(proc("g", "a", 6), pool, seed=3)
    assert again == prism.make_negatives(proc("g", "a", 6), pool, seed=3)
    assert again != prism.make_negatives(proc("g", "a", 6), pool, seed=4)


# --------------------------------------------------------------------------- splits, balance, grid


def test_splits_are_exact_and_spread_categories():
    items = [(f"p{i}", CATEGORIES[i % 6]) for i in range(100)]
    split = assign_splits(items, {"train": 0.7, "validation": 0.2, "test": 0.1}, seed=1)
    assert Counter(split.values()) == {"train": 70, "validation": 20, "test": 10}
    per = Counter((split[k], c) for k, c in items)
    assert all(per[("test", c)] >= 1 for c in CATEGORIES) and all(per[("train", c)] >= 11 for c in CATEGORIES)
    items = [(f"q{i}", "x") for i in range(7)]  # round(4.9) = 5, round(6.3) = 6
    assert Counter(assign_splits(items, {"train": 0.7, "validation": 0.2, "test": 0.1}, seed=0).values()) == {"train": 5, "validation": 1, "test": 1}


def test_balance_letters_are_a_seeded_shuffle_of_a_balanced_list():
    rng = np.random.default_rng(0)
    items = [((i, s), (f"P{s % 7}", s)) for s in range(23) for i in range(int(rng.integers(1, 6)))]
    letters = prism.balance_letters(items, seed=9)
    counts = Counter(letters.values())
    assert counts["A"] == math.ceil(len(items) / 2) and counts["B"] == len(items) // 2
    assert prism.balance_letters(list(reversed(items)), seed=9) == letters  # the records' order does not matter
    other = prism.balance_letters(items, seed=10)
    assert other != letters and Counter(other.values()) == counts
    per_layout = defaultdict(Counter)
    for key, stratum in items:
        per_layout[stratum[0]][letters[key]] += 1
    assert all(abs(c["A"] - c["B"]) <= 1 for c in per_layout.values())
    # random, not an alternation: in the dealing order some neighbours share a letter
    dealt = [letters[k] for k in sorted(letters, key=lambda k: derive_seed(9, "presentation", json.dumps(k)))]
    assert any(a == b for a, b in zip(dealt, dealt[1:]))
    assert Counter(prism.balance_letters(items[:7], seed=9).values()) == {"A": 4, "B": 3}
    assert prism.presentation("A", "P0") == "gold_first" and prism.presentation("A", "P4") == "gold_second"
    assert prism.presentation("B", "P4") == "gold_first"


def test_grid_cells_hold_the_frames_unscaled_in_order():
    frames = [Image.fromarray(np.random.default_rng(k).integers(0, 256, (30, 40, 3), dtype=np.uint8)) for k in range(5)]
    grid = prism.compose_grid(frames)
    g = prism.grid_geometry(5, (40, 30))
    assert (g["cols"], g["rows"]) == (3, 2) and grid.size == g["size"]
    arr = np.asarray(grid)
    for k, f in enumerate(frames):
        x0, y0, x1, y1 = prism.grid_cell_box(5, k, (40, 30))
        assert np.array_equal(arr[y0:y1, x0:x1], np.asarray(f))
        band = arr[y0 - g["band"]:y0, x0:x1]
        assert (band < 128).any()  # the number is drawn above the frame
    assert (arr[prism.grid_cell_box(5, 5, (40, 30))[1]:, -44:] == 255).all()  # the sixth cell is empty


# --------------------------------------------------------------------------- the build


def expected_parts(task, layout, title, steps, seqs, instruction):
    """The layout table of the docstring, written out independently: a list of
    ("text", s) / ("image", path) / ("grid", [paths]) with texts merged by a blank line."""
    S = "\n".join(([f"Task: {title}"] if title else []) + ["Steps:"] + [f"{k}. {t}" for k, t in enumerate(steps, 1)])
    parts = []
    if task == "pairwise":
        A, B = seqs
        def block(letter, seq, numbered=False):
            out = [("text", f"Sequence {letter}:")]
            for k, x in enumerate(seq, 1):
                out += ([("text", f"Image {k}:")] if numbered else []) + [("image", x)]
            return out
        parts = {
            "P0": [("text", S), *block("A", A), *block("B", B)],
            "P1": [*block("A", A), *block("B", B), ("text", S)],
            "P2": [("text", S), *block("A", A, True), *block("B", B, True)],
            "P3": [("text", S), *block("A", A), *block("B", B), ("text", S)],
            "P4": [("text", S), *block("B", B), *block("A", A)],
            "P5": ([("text", f"Task: {title}")] if title else []) + [x for k in range(len(steps)) for x in (
                ("text", f"Step {k + 1}: {steps[k]}"), ("text", f"Sequence A, image {k + 1}:"), ("image", A[k]),
                ("text", f"Sequence B, image {k + 1}:"), ("image", B[k]))],
            "P6": [("text", S), ("text", "Sequence A:"), ("grid", A), ("text", "Sequence B:"), ("grid", B)],
        }[layout]
    else:
        (X,) = seqs
        imgs = [("image", x) for x in X]
        parts = {
            "P0": [("text", S), ("text", "Sequence:"), *imgs],
            "P1": [("text", "Sequence:"), *imgs, ("text", S)],
            "P2": [("text", S), ("text", "Sequence:")] + [y for k, x in enumerate(X, 1) for y in (("text", f"Image {k}:"), ("image", x))],
            "P3": [("text", S), ("text", "Sequence:"), *imgs, ("text", S)],
            "P5": ([("text", f"Task: {title}")] if title else []) + [y for k in range(len(steps)) for y in (("text", f"Step {k + 1}: {steps[k]}"), ("image", X[k]))],
            "P6": [("text", S), ("text", "Sequence:"), ("grid", X)],
        }[layout]
    parts = parts + [("text", instruction)]
    merged = []
    for kind, v in parts:
        if kind == "text" and merged and merged[-1][0] == "text":
            merged[-1] = ("text", merged[-1][1] + "\n\n" + v)
        else:
            merged.append((kind, v))
    return merged


def test_every_layout_shows_the_right_images_and_text(handmade):
    manifest, out, _, ds = handmade
    procs = {p.id: p for p in read_procedures(manifest)[0]}
    seen = Counter()
    for split in ds:
        for row in raw(ds[split]):
            meta = json.loads(row["meta"])
            gold = procs[meta["gold_id"]]
            gold_imgs = [str(s.image) for s in gold.steps]
            outliers = {o["position"]: str(procs[o["procedure_id"]].steps[o["step"]].image) for o in meta.get("outliers", [])}
            shown = [gold_imgs[g] if g is not None else outliers[p] for p, g in enumerate(meta["frame_order"])]
            if row["task"] == "pairwise":
                seqs = (gold_imgs, shown) if row["label"] == "A" else (shown, gold_imgs)
                instruction = prism.PAIRWISE_INSTRUCTION
            else:
                seqs = (shown,)
                instruction = prism.POINTWISE_INSTRUCTION
            if row["layout"] == "P6":
                instruction += "\n" + prism.GRID_NOTE[row["task"]]
            want = expected_parts(row["task"], row["layout"], gold.title, gold.texts, seqs, instruction)
            content = row["prompt"][0]["content"]
            assert [c["type"] for c in content] == ["text" if k == "text" else "image" for k, _ in want], row["id"]
            images = iter(row["images"])
            for c, (kind, value) in zip(content, want):
                if kind == "text":
                    assert c["text"] == value
                elif kind == "image":
                    assert next(images)["bytes"] == Path(value).read_bytes()
                else:
                    grid = np.asarray(Image.open(io.BytesIO(next(images)["bytes"])))
                    for k, path in enumerate(value):
                        x0, y0, x1, y1 = prism.grid_cell_box(len(value), k, (32, 32))
                        assert np.array_equal(grid[y0:y1, x0:x1], np.asarray(Image.open(path).convert("RGB")))
            assert next(images, None) is None
            assert row["completion"][0]["content"][0]["text"] == row["label"]
            seen[(row["task"], row["layout"])] += 1
    assert set(seen) == {("pairwise", x) for x in prism.LAYOUTS} | {("pointwise", x) for x in prism.POINTWISE_LAYOUTS}


def test_perturbation_fields_follow_the_protocol(handmade):
    manifest, _, info, ds = handmade
    procs = {p.id: p for p in read_procedures(manifest)[0]}
    per_gold = defaultdict(set)
    for split in ds:
        cols = ds[split].select_columns(["task", "perturbation", "position", "n_frames", "label", "meta", "source", "choices"]).to_dict()
        for task, pert, pos, n, label, meta, source, choices in zip(*cols.values()):
            meta = json.loads(meta)
            gold = procs[meta["gold_id"]]
            assert n == gold.n and source == "handmade"
            order = meta["frame_order"]
            moved = [p for p, g in enumerate(order) if g != p]
            assert pos == (moved[0] if moved else -1) and meta["positions"] == moved
            if pert.startswith("semantic"):
                k = int(pert[-1])
                assert [p for p, g in enumerate(order) if g is None] == moved and len(moved) == k
                assert all(procs[o["procedure_id"]].category != gold.category for o in meta["outliers"])
            elif pert == "swap":
                assert moved == [pos, pos + 1] and meta["swapped_frames"] == [pos + 1, pos + 2]
            elif pert == "swap-nonconsecutive":
                assert len(moved) == 2 and moved[1] - moved[0] >= 2
            elif pert == "shuffle":
                assert sorted(order) == list(range(n)) and len(moved) >= 3
            if task == "pointwise":
                assert choices == ["1", "2", "3", "4", "5"]
                assert label == {"none": "5", "swap": "3", "swap-nonconsecutive": "3", "shuffle": "3",
                                 "semantic-1": "1", "semantic-2": "1", "semantic-3": "1"}[pert]
            else:
                assert choices == ["A", "B"] and pert != "none" and label == meta["gold_letter"]
            assert meta["positional_subset"] == (n <= 6 and pert in ("semantic-1", "swap"))
            if meta["positional_subset"]:
                per_gold[(meta["gold_id"], pert)].add(pos)
    for (gid, pert), positions in per_gold.items():
        n = procs[gid].n
        assert positions == set(range(n if pert == "semantic-1" else n - 1))
    assert info["counts"]["sequences"]["too_short"] == 1 and info["filtered"][0]["id"] == "c3"


def test_pairwise_balance_is_exact_per_split_and_layout(handmade):
    _, _, info, ds = handmade
    for split in ds:
        cols = ds[split].select_columns(["task", "label", "layout", "meta"]).to_dict()
        per_layout = defaultdict(Counter)
        pres = Counter()
        for task, label, layout, meta in zip(cols["task"], cols["label"], cols["layout"], cols["meta"]):
            if task == "pairwise":
                per_layout[layout][label] += 1
                meta = json.loads(meta)
                pres[meta["presentation"]] += 1
                assert meta["presentation"] == prism.presentation(label, layout)
        total = sum(per_layout.values(), Counter())
        assert total["A"] == total["B"] > 0 and pres["gold_first"] == pres["gold_second"]
        assert all(c["A"] == c["B"] for c in per_layout.values())
        assert info["counts"]["records"][split]["pairwise_label"] == {"A": total["A"], "B": total["B"]}


def test_splits_never_leak_a_gold_sequence(handmade):
    manifest, _, info, ds = handmade
    procs = {p.id: p for p in read_procedures(manifest)[0]}
    golds = {split: set(json.loads(m)["gold_id"] for m in ds[split]["meta"]) for split in ds}
    assert sum(len(g) for g in golds.values()) == len(set().union(*golds.values())) == 6
    assert {s: len(g) for s, g in golds.items()} == {"train": 4, "validation": 1, "test": 1}
    assert info["counts"]["sequences"]["outlier_pool"] == {"all": 2, "split": 4}  # both branches below are exercised
    for split in ds:
        for m in ds[split]["meta"]:
            m = json.loads(m)
            if m.get("outlier_pool") == "split":  # outlier images from procedures of the same split
                assert all(o["procedure_id"] in golds[split] for o in m["outliers"])
            elif m.get("outlier_pool") == "all":  # only when the split lacks three other-category images
                assert sum(procs[g].n for g in golds[split] if procs[g].category != m["category"]) < 3
    ids = [i for split in ds for i in ds[split]["id"]]
    assert len(ids) == len(set(ids))
    for split in ds:
        records.validate_records(raw(ds[split]), split=split)


def test_same_seed_same_hashes(tmp_path):
    manifest = write_handmade(tmp_path / "data", HANDMADE[:4])
    cfg = dict(procedures=manifest, layouts=("P0", "P5", "P6"), progress=False)
    a = prism.build(prism.PrismConfig(out=tmp_path / "a", seed=1, **cfg))
    b = prism.build(prism.PrismConfig(out=tmp_path / "b", seed=1, **cfg))
    c = prism.build(prism.PrismConfig(out=tmp_path / "c", seed=2, **cfg))
    assert a["splits"] == b["splits"]
    assert a["splits"] != c["splits"]
    assert not (tmp_path / "a.work").exists()


def test_bad_manifest_lines_are_reported_with_path_and_line(tmp_path):
    manifest = write_handmade(tmp_path, HANDMADE[:2])
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
    good = {"text": "t", "image": "a1/0.png"}
    lines = manifest.read_text().splitlines() + [
        "{not json",                                                                               # 3
        json.dumps({"id": "x1", "steps": [good]}),                                                 # 4 no category
        json.dumps({"id": "a1", "category": "alpha", "steps": [good]}),                            # 5 duplicate
        json.dumps({"id": "x2", "category": "c", "steps": [{"text": "t", "image": "nope.png"}]}),  # 6 missing image
        json.dumps({"id": "x3", "category": "c", "steps": [{"text": "t", "image": "corrupt.png"}]}),  # 7 unreadable
        json.dumps({"id": "x4", "category": "c", "steps": [{"text": "t", "image": "../out.png"}]}),   # 8 outside
        json.dumps({"id": "x5", "category": "c", "steps": [{"text": "", "image": "a1/0.png"}]}),      # 9 empty text
        json.dumps({"id": "x6", "category": "c", "steps": "a1/0.png"}),                            # 10 steps not a list
        "",
        json.dumps({"id": "ok", "category": "c", "steps": [good] * 4}),                            # 12 fine
    ]
    manifest.write_text("\n".join(lines) + "\n")
    procedures, skips = read_procedures(manifest)
    assert [p.id for p in procedures] == ["a1", "a2", "ok"]
    by_line = {s.line: s for s in skips}
    assert sorted(by_line) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert all(s.path == str(manifest) and str(s).startswith(f"{manifest}:{s.line}: ") for s in skips)
    assert by_line[3].reason.startswith("not JSON (")  # was "malformed manifest line": now the shared reader's wording
    assert by_line[4].reason.startswith("category: missing; ")  # was "missing 'category'": now "field: problem; fix"
    assert by_line[5].reason.startswith("id: 'a1' is also on line 1; ")  # was "duplicate id 'a1' (first on line 1)"
    assert "nope.png" in by_line[6].reason and "not found" in by_line[6].reason
    assert "corrupt.png" in by_line[7].reason and "unreadable image" in by_line[7].reason
    assert "outside the manifest's folder" in by_line[8].reason
    assert "steps[0].text" in by_line[9].reason and "non-empty list" in by_line[10].reason

    info = prism.build(prism.PrismConfig(out=tmp_path / "ds", procedures=manifest, layouts=("P0",), modes=("pairwise",), progress=False))
    assert sorted(s["line"] for s in info["skipped"]) == [3, 4, 5, 6, 7, 8, 9, 10]
    assert info["counts"]["sequences"] == {**info["counts"]["sequences"], "kept": 3, "too_short": 0, "skipped": 8}
    with pytest.raises(BuildError, match="8 bad input"):
        prism.build(prism.PrismConfig(out=tmp_path / "strict", procedures=manifest, strict=True, progress=False))
    assert not (tmp_path / "strict").exists()


def test_manifest_bytes_and_field_types_are_located_not_fatal(tmp_path, capsys):
    """The PRISM build as a user runs it, on a manifest with a bad byte, a non-object row and a
    mistyped category among good lines (one with an integer id, a null title and U+2028 / U+0085
    inside a step text): the bad lines are located and skipped, the rest is built."""
    manifest = write_handmade(tmp_path / "data", HANDMADE[:5])
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[4] |= {"id": 7, "title": None}
    rows[4]["steps"][0]["text"] = "Open\u2028the box\u0085slowly."
    good = {"text": "t", "image": "a1/0.png"}
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in rows]                              # 1-5
    lines += [b'{"id": "bad-bytes", "category": "caf\xe9", "steps": []}',                            # 6 not UTF-8
              b'"a string"',                                                                         # 7 not an object
              json.dumps({"id": "typed", "category": 5, "steps": [good] * 4}).encode(),              # 8 category an int
              json.dumps({"id": "after", "category": "gamma", "steps": [good] * 4}).encode()]        # 9 fine
    manifest.write_bytes(b"\n".join(lines) + b"\n")
    assert "\u2028".encode() in manifest.read_bytes()
    out = tmp_path / "ds"
    argv = ["build", "prism", "--procedures", str(manifest), "--layouts", "P0", "--modes", "pairwise", "--no-progress"]
    assert cli([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    info = json.loads((out / "build.json").read_text())
    skipped = {s["line"]: s for s in info["skipped"]}
    assert sorted(skipped) == [6, 7, 8] and all(s["path"] == str(manifest) for s in info["skipped"])
    assert skipped[6]["reason"].startswith("not valid UTF-8 at byte ") and skipped[6]["id"] is None
    assert skipped[7]["reason"].startswith("not a JSON object (a string)")
    assert skipped[8]["reason"].startswith("category: a number, not a string; ") and skipped[8]["id"] == "typed"
    for line in (6, 7, 8):
        assert f"{manifest}:{line}: " in err
    assert "Traceback" not in err
    assert {s["id"] for s in info["sources"][1:]} == {"a1", "a2", "b1", "b2", "7", "after"}
    assert info["counts"]["sequences"]["skipped"] == 3
    metas = [json.loads(m) for split in records.load(out).values() for m in split["meta"]]
    assert {m["title"] for m in metas if m["gold_id"] == "7"} == {""}
    procs = {p.id: p for p in read_procedures(manifest)[0]}
    assert procs["7"].line == 5 and procs["after"].line == 9 and procs["7"].steps[0].text == "Open\u2028the box\u0085slowly."

    assert cli([*argv, "--out", str(tmp_path / "strict"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "3 bad input(s)" in err and f"{manifest}:6: not valid UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "strict").exists()


def test_semantic_outliers_need_two_categories(tmp_path):
    manifest = write_handmade(tmp_path, [("a1", "alpha", 4, ""), ("a2", "alpha", 5, "")])
    with pytest.raises(BuildError, match="another category"):
        prism.build(prism.PrismConfig(out=tmp_path / "ds", procedures=manifest, progress=False))
    info = prism.build(prism.PrismConfig(out=tmp_path / "ds", procedures=manifest, perturbations=("swap", "shuffle"),
                                         layouts=("P1",), splits={"train": 1.0}, progress=False))
    assert info["counts"]["records"]["train"]["perturbation"] == {"none": 2, "shuffle": 4, "swap": 14}


def test_options_are_checked_together(tmp_path):
    cfg = prism.PrismConfig(out=tmp_path, procedures=Path("m.jsonl"), synthetic=3, layouts=("P9",), modes=("all",),
                            perturbations=("flip",), nonconsecutive_swaps=-1, splits={"train": 0.5, "dev": 0.2})
    with pytest.raises(BuildError) as e:
        cfg.check()
    msg = str(e.value)
    for needle in ("give only one source", "--layouts", "--modes", "--perturbations", "--nonconsecutive-swaps", "unknown split", "sum to 1"):
        assert needle in msg
    # `both`, as --help offers it, is every mode
    assert prism.PrismConfig(out=tmp_path, synthetic=3, modes=("both",)).modes == ["pairwise", "pointwise"]


# --------------------------------------------------------------------------- the synthetic source and the CLI


def test_synthetic_procedures_are_deterministic_and_resumable(tmp_path):
    a = write_procedures(tmp_path / "a", 7, seed=3, progress=False)
    b = write_procedures(tmp_path / "b", 7, seed=3, progress=False)
    pa, skips = read_procedures(a)
    assert not skips and [p.category for p in pa] == [CATEGORIES[i % 6] for i in range(7)]
    assert a.read_text() == b.read_text().replace(str(tmp_path / "b"), str(tmp_path / "a"))
    for p, q in zip(pa, read_procedures(b)[0]):
        assert 4 <= p.n <= 8 and p.title and all(s.text for s in p.steps)
        assert [s.image.read_bytes() for s in p.steps] == [s.image.read_bytes() for s in q.steps]
        frames = [np.asarray(Image.open(s.image)) for s in p.steps]
        assert frames[0].shape == (128, 128, 3)
        assert all((f != g).any() for f, g in zip(frames, frames[1:]))  # every step changes the picture
    victim = pa[2].steps[1].image
    keep = pa[0].steps[0].image
    mtime = keep.stat().st_mtime_ns
    victim.unlink()
    write_procedures(tmp_path / "a", 7, seed=3, progress=False)
    assert victim.read_bytes() == pa[2].steps[1].image.read_bytes() and keep.stat().st_mtime_ns == mtime
    info, images = render_procedure(3, 2)
    assert [np.asarray(im).tobytes() for im in images] == [np.asarray(Image.open(s.image)).tobytes() for s in pa[2].steps]
    assert info["texts"] == pa[2].texts


def test_cli_builds_from_the_synthetic_source(tmp_path, capsys):
    (cfg,) = config.parse(prism.make_parser(), [
        "--out", str(tmp_path / "ds"), "--synthetic", "6", "--layouts", "P0,P4", "--modes", "pairwise",
        "--perturbations", "swap,semantic-1", "--splits", "train=0.5,validation=0.5", "--no-progress"])
    assert prism.main(cfg) == 0
    printed = capsys.readouterr().out
    assert f"Dataset written to {tmp_path / 'ds'}" in printed and "Pairwise balance" in printed
    info = json.loads((tmp_path / "ds" / "build.json").read_text())
    assert info["builder"] == "prism" and info["args"]["layouts"] == ["P0", "P4"]
    ds = records.load(tmp_path / "ds", verify=True)
    assert set(ds) == {"train", "validation"} and set(ds["train"]["source"]) == {"synthetic-procedures"}
    assert set(ds["train"]["perturbation"]) == {"swap", "semantic-1"} and set(ds["train"]["task"]) == {"pairwise"}
    with pytest.raises(BuildError, match="NAME=FRACTION"):
        config.parse(prism.make_parser(), ["--out", "x", "--splits", "train"])


def test_cli_takes_a_yaml_config_and_flags_win(tmp_path, capsys):
    """`--config build.yaml` sets the fields, flags override them, an unknown key fails with a did-you-mean."""
    yaml_file = tmp_path / "build.yaml"
    yaml_file.write_text("synthetic: 4\nseed: 9\nlayouts: [P0, P6]\nmodes: [pairwise]\nperturbations: [swap, shuffle]\n"
                         "splits: {train: 0.5, validation: 0.5}\nsynthetic_size: 64\nnonconsecutive_swaps: 1\n")
    out = tmp_path / "ds"
    assert cli(["build", "prism", "--config", str(yaml_file), "--out", str(out), "--layouts", "P1",
                "--perturbations", "shuffle", "--no-progress"]) == 0
    info = json.loads((out / "build.json").read_text())
    args = info["args"]
    # from the YAML file
    assert args["synthetic"] == 4 and info["seed"] == 9 and args["modes"] == ["pairwise"] and args["synthetic_size"] == 64
    assert args["splits"] == {"train": 0.5, "validation": 0.5} and args["nonconsecutive_swaps"] == 1
    # from the flags, over the YAML file
    assert args["layouts"] == ["P1"] and args["perturbations"] == ["shuffle"] and args["progress"] is False
    ds = records.load(out, verify=True)
    assert set(ds) == {"train", "validation"} and sum(len(ds[s]) for s in ds) == 4
    assert {x for s in ds for x in ds[s]["layout"]} == {"P1"} and {x for s in ds for x in ds[s]["perturbation"]} == {"shuffle"}
    capsys.readouterr()
    yaml_file.write_text("synthetic: 4\nlayout: [P0]\n")
    assert cli(["build", "prism", "--config", str(yaml_file), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown key 'layout'; did you mean 'layouts'?" in err
    assert not (tmp_path / "bad").exists()


def test_every_layout_renders_through_a_real_processor(handmade, tmp_path):
    """LLaVA-OneVision (the paper's judge backbone): one image placeholder per
    image in every layout, interleaved text included, and the model runs on it."""
    import torch

    from judgetrain.models import get_family, load_model_and_processor
    from judgetrain.models.tiny import build_tiny

    _, _, _, ds = handmade
    rows = {}
    for row in ds["test"]:
        rows.setdefault((row["task"], row["layout"]), row)
    assert len(rows) == len(prism.LAYOUTS) + len(prism.POINTWISE_LAYOUTS)
    model, processor = load_model_and_processor(build_tiny("llava-onevision", tmp_path / "tiny"), dtype="float32")
    image_token = processor.tokenizer.convert_tokens_to_ids(get_family("llava-onevision").image_token)
    for row in rows.values():
        text = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        assert text.rstrip().endswith(row["label"] + "<|im_end|>")
        inputs = processor(text=[text], images=[row["images"]], return_tensors="pt")
        with torch.no_grad():
            features = model.get_image_features(**{k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")})
        assert len(features.pooler_output) == len(row["images"])
        assert int((inputs["input_ids"] == image_token).sum()) == sum(f.shape[0] for f in features.pooler_output)


def test_a_capped_nonconsecutive_count_is_said_not_silent(tmp_path, capsys):
    out = tmp_path / "p"
    assert cli(["build", "prism", "--out", str(out), "--synthetic", "12", "--seed", "5", "--perturbations",
                "swap-nonconsecutive", "--nonconsecutive-swaps", "4", "--layouts", "P0", "--modes", "pairwise",
                "--no-progress"]) == 0
    info = records.read_build_info(out)
    capped = info["counts"]["sequences"]["nonconsecutive_capped"]
    steps = Counter(s["steps"] for s in info["sources"][1:])
    assert capped["asked"] == 4 and capped["by_steps"] == {"4": {"sequences": steps[4], "swaps": 3}} and steps[4] > 0
    assert f"--nonconsecutive-swaps 4: {steps[4]} sequence(s) of 4 steps have only 3 pair(s)" in capsys.readouterr().out
    per_gold = Counter(json.loads(m)["gold_id"] for split in records.load(out).values() for m in split["meta"])
    assert sorted(set(per_gold.values())) == [3, 4]


def test_16_bit_cmyk_and_palette_images_are_rgb_in_every_layout(tmp_path):
    import io as _io

    from judgetrain.data_builders.core import image_bytes

    root = tmp_path / "m"
    root.mkdir()
    rng = np.random.default_rng(0)
    rows = []
    for k, cat in enumerate(["a", "b", "c"]):
        steps = []
        for i in range(4):
            name = f"{cat}{i}"
            if i == 0:  # 16-bit grey: 0x8000 must read as 128, not be clipped to 255
                Image.fromarray(np.full((16, 16), 0x8000, dtype=np.uint16)).save(root / f"{name}.png")
                steps.append({"text": f"step {i}", "image": f"{name}.png"})
            elif i == 1:
                Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).convert("CMYK").save(root / f"{name}.jpg")
                steps.append({"text": f"step {i}", "image": f"{name}.jpg"})
            elif i == 2:
                Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).convert("P").save(root / f"{name}.png")
                steps.append({"text": f"step {i}", "image": f"{name}.png"})
            else:
                Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(root / f"{name}.png")
                steps.append({"text": f"step {i}", "image": f"{name}.png"})
        rows.append({"id": f"p{k}", "category": cat, "steps": steps})
    (root / "procedures.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    grey = Image.open(_io.BytesIO(image_bytes(root / "a0.png")))
    assert grey.mode == "RGB" and np.asarray(grey)[0, 0].tolist() == [128, 128, 128]
    out = tmp_path / "ds"
    assert cli(["build", "prism", "--out", str(out), "--procedures", str(root / "procedures.jsonl"), "--layouts", "P0,P6",
                "--perturbations", "swap", "--splits", "train=1", "--no-progress"]) == 0
    ds = records.load(out)["train"].cast_column("images", List(ImageFeature(decode=False)))
    modes = Counter(Image.open(_io.BytesIO(im["bytes"])).mode for row in ds for im in row["images"])
    assert set(modes) == {"RGB"} and sum(modes.values()) > 0
