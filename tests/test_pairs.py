"""The pair and twin structure GRPO and the reward models read (judgetrain.pairs): a gold sequence's
pointwise record against each of its perturbations under the same layout, named as the pairwise
record of the same two sequences is named; records that do not pair refused, naming them."""

from __future__ import annotations

import json

import pytest

from judgetrain import records
from judgetrain.pairs import PairError, pair_key, question_group, sequence_pairs


def columns(ds):
    return ds["task"], ds["source"], ds["layout"], ds["perturbation"], ds["meta"], ds["id"]


def test_each_gold_pairs_with_each_of_its_perturbations_under_its_own_layout():
    meta = [{"gold_id": "g1", "variant": "gold", "score": 5}, {"gold_id": "g1", "variant": "swap@0-1", "score": 3},
            {"gold_id": "g1", "variant": "gold", "score": 5}, {"gold_id": "g1", "variant": "shuffle", "score": 1},
            {"gold_id": "g2", "variant": "semantic-1@2", "score": 1}, {"gold_id": "g2", "variant": "gold", "score": 5}]
    layouts = ["P0", "P0", "P2", "P2", "P0", "P0"]
    perturbations = ["none", "swap", "none", "shuffle", "semantic-1", "none"]
    pairs = sequence_pairs(["pointwise"] * 6, ["s"] * 6, layouts, perturbations, [json.dumps(m) for m in meta],
                           [f"r{i}" for i in range(6)])
    assert [(p.chosen, p.rejected, p.perturbation) for p in pairs] == [(0, 1, "swap"), (2, 3, "shuffle"),
                                                                       (5, 4, "semantic-1")]
    assert [(p.chosen_score, p.rejected_score) for p in pairs] == [(5, 3), (5, 1), (5, 1)]
    assert pairs[1].key == ("s", "g1", "shuffle", "P2")


def test_records_that_do_not_pair_are_named_with_the_fix():
    meta = [{"gold_id": "g1", "variant": "swap@0-1"}, {"gold_id": "g2", "variant": "gold"}]
    with pytest.raises(PairError) as e:
        sequence_pairs(["pointwise", "pairwise"], ["s", "s"], ["P0", "P0"], ["swap", "none"], meta, ["r0", "r1"],
                       where="train")
    text = str(e.value)
    assert "train: record 'r1' is 'pairwise'" in text and "gold sequence 'g1' (s, layout P0) has no gold" in text
    assert "judgetrain build prism --modes pointwise" in text


def test_a_pointwise_pair_and_the_pairwise_item_of_the_same_two_sequences_share_a_key(tmp_path):
    from judgetrain.data_builders import prism

    prism.build(prism.PrismConfig(out=tmp_path / "p", synthetic=4, layouts=("P0",), modes=("pairwise", "pointwise"),
                                  synthetic_size=64, splits={"train": 1.0}, twins=True, progress=False))
    ds = records.load(tmp_path / "p")["train"]
    pointwise = ds.filter(lambda t: t == "pointwise", input_columns="task")
    pairwise = ds.filter(lambda t: t == "pairwise", input_columns="task")
    pairs = sequence_pairs(*columns(pointwise))
    items = {pair_key(r["source"], r["layout"], r["meta"]) for r in pairwise}
    assert {p.key for p in pairs} == items and len(pairs) == len(pairwise) // 2  # each item and its twin: one pair
    twin = pairwise[1]
    assert question_group("pairwise", twin["meta"]) == (f"twin:{json.loads(twin['meta'])['twin']}", 2)
