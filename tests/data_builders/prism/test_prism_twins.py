"""`judgetrain build prism --twins` and `build mirage --twins`: every pairwise item also shown the other
way round, right after it, in the same split, `meta.twin` naming the pair; without the option the
records are the same as before, byte for byte. GRPO's consistency reward and `eval bias`'s
presentation-flip rate compare such twins."""

from __future__ import annotations

import json
from collections import defaultdict

from judgetrain import records
from judgetrain.data_builders import mirage, prism
from judgetrain.records import image_digest


def _twins(dd) -> dict[str, list[tuple[str, dict]]]:
    """Per split, the pairwise rows grouped by meta.twin (checking each pair's two rows are consecutive)."""
    found: dict[str, list] = {}
    for split, ds in dd.items():
        rows = [r for r in records.stored_rows(ds) if r["task"] == "pairwise"]
        groups: dict[str, list] = defaultdict(list)
        for i, r in enumerate(rows):
            groups[json.loads(r["meta"])["twin"]].append((i, r))
        assert all(len(g) == 2 and g[1][0] == g[0][0] + 1 for g in groups.values())
        found[split] = list(groups.values())
    return found


def _check_pair(a, b) -> None:
    ma, mb = json.loads(a["meta"]), json.loads(b["meta"])
    assert ma["twin"] == mb["twin"] == a["id"] != b["id"]
    assert {ma["gold_letter"], mb["gold_letter"]} == {"A", "B"} and a["label"] == ma["gold_letter"] and b["label"] == mb["gold_letter"]
    assert {ma["presentation"], mb["presentation"]} == {"gold_first", "gold_second"}
    half = len(a["images"]) // 2  # P0: Sequence A's images, then Sequence B's
    ia, ib = [image_digest(x) for x in a["images"]], [image_digest(x) for x in b["images"]]
    assert ia[:half] == ib[half:] and ia[half:] == ib[:half] and ia != ib  # the same two sequences, swapped
    assert a["prompt"] != b["prompt"] or ia != ib


def test_prism_twins_swap_the_two_sequences_and_leave_the_plain_build_unchanged(tmp_path):
    cfg = dict(synthetic=3, layouts=("P0",), synthetic_size=64, splits={"train": 0.5, "test": 0.5}, progress=False)
    prism.build(prism.PrismConfig(out=tmp_path / "plain", seed=1, **cfg))
    prism.build(prism.PrismConfig(out=tmp_path / "twins", seed=1, twins=True, **cfg))
    plain, twins = records.load(tmp_path / "plain"), records.load(tmp_path / "twins")
    for split in plain:
        p_rows = [r for r in records.stored_rows(plain[split]) if r["task"] == "pairwise"]
        t_rows = [r for r in records.stored_rows(twins[split]) if r["task"] == "pairwise"]
        assert len(t_rows) == 2 * len(p_rows) and p_rows
        assert all("twin" not in json.loads(r["meta"]) for r in p_rows)
        for before, (first, second) in zip(p_rows, zip(t_rows[::2], t_rows[1::2], strict=True), strict=True):
            assert first["id"] == before["id"] and first["label"] == before["label"] and first["prompt"] == before["prompt"]
            _check_pair(first, second)
        pointwise = [r["id"] for r in plain[split] if r["task"] == "pointwise"]
        assert pointwise == [r["id"] for r in twins[split] if r["task"] == "pointwise"]
    assert all(len(pairs) for pairs in _twins(twins).values())
    again = prism.build(prism.PrismConfig(out=tmp_path / "again", seed=1, twins=True, **cfg))
    assert again["splits"] == records.read_build_info(tmp_path / "twins")["splits"]  # seeded: the same records


def test_mirage_twins_swap_the_two_sequences(tmp_path):
    cfg = dict(synthetic=4, synthetic_size=64, layouts=("P0",), progress=False)
    mirage.build(mirage.MirageConfig(out=tmp_path / "plain", seed=2, **cfg))
    mirage.build(mirage.MirageConfig(out=tmp_path / "twins", seed=2, twins=True, **cfg))
    plain, twins = records.load(tmp_path / "plain"), records.load(tmp_path / "twins")
    for split in plain:
        p_rows, t_rows = list(records.stored_rows(plain[split])), list(records.stored_rows(twins[split]))
        assert len(t_rows) == 2 * len(p_rows) and all("twin" not in json.loads(r["meta"]) for r in p_rows)
        for before, (first, second) in zip(p_rows, zip(t_rows[::2], t_rows[1::2], strict=True), strict=True):
            assert first["id"] == before["id"] and first["prompt"] == before["prompt"]
            _check_pair(first, second)
    _twins(twins)


def test_prism_twins_balance_letters_and_presentations_in_every_layout(tmp_path):
    """P4 shows Sequence B first, so there the presentation is not the letter: with --twins both are
    exactly balanced per layout, and each pair still has one gold_first and one gold_second record."""
    cfg = dict(synthetic=3, layouts=("P0", "P4"), synthetic_size=64, splits={"train": 1.0}, progress=False, twins=True)
    prism.build(prism.PrismConfig(out=tmp_path / "twins", seed=3, **cfg))
    rows = [r for r in records.stored_rows(records.load(tmp_path / "twins")["train"]) if r["task"] == "pairwise"]
    for layout in ("P0", "P4"):
        metas = [json.loads(r["meta"]) for r in rows if r["layout"] == layout]
        assert metas and sum(m["gold_letter"] == "A" for m in metas) * 2 == len(metas)
        assert sum(m["presentation"] == "gold_first" for m in metas) * 2 == len(metas)
        assert all(
            m["presentation"] == ("gold_first" if (m["gold_letter"] == "A") != (layout == "P4") else "gold_second")
            for m in metas
        )
    for pairs in _twins(records.load(tmp_path / "twins")).values():
        for (_, a), (_, b) in pairs:
            _check_pair(a, b)
