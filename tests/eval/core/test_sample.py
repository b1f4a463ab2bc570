"""``--sample N``: a seeded, stratified sample of an evaluation's items, recorded in the run identity
and extended by a larger N as ``--limit`` is."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from judgetrain import records
from judgetrain.config import ConfigError
from judgetrain.eval import judge as J
from judgetrain.eval.core import sample as S
from judgetrain.eval.core.runs import RUN_INFO, PredictionsError


@pytest.fixture(scope="module")
def prism_judge(tmp_path_factory):
    """The smoke-test PRISM set of docs/concepts/prism-mirage.md ("`judgetrain eval judge`"): 12 synthetic
    procedures, layouts P0, P4, P6, both modes."""
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("sample") / "prism-judge"
    prism.build(prism.PrismConfig(out=out, synthetic=12, layouts=("P0", "P4", "P6"), progress=False))
    return out


def _strata(ds, idx, *fields):
    return Counter(tuple(ds[i][f] for f in fields) for i in idx)


def test_sample_covers_every_task_layout_and_subset_where_limit_takes_one(prism_judge):
    ds = records.load(prism_judge)["test"]
    everything = J.select(ds)
    first = J.select(ds, limit=16)
    # the first 16 in dataset order: one task, one perturbation (what the issue saw: PRISM-Semantic pairwise only)
    assert len(_strata(ds, first, "task", "perturbation")) == 1

    picked = J.select(ds, sample=16)
    assert len(picked) == 16 and picked == sorted(picked) and set(picked) <= set(everything)
    tasks = _strata(ds, everything, "task")
    assert set(_strata(ds, picked, "task")) == set(tasks)
    # each task in proportion to its size, within one item
    for (task,), n in tasks.items():
        assert abs(_strata(ds, picked, "task")[(task,)] - 16 * n / len(everything)) <= 1
    assert set(_strata(ds, picked, "task", "layout")) == set(_strata(ds, everything, "task", "layout"))
    subsets = {json.loads(ds[i]["meta"])["subset"] for i in picked if ds[i]["task"] == "pairwise"}
    assert subsets == {"semantic", "temporal"}


def test_sample_is_seeded_and_a_larger_one_extends_a_smaller(prism_judge):
    ds = records.load(prism_judge)["test"]
    small, large = J.select(ds, sample=10), J.select(ds, sample=30)
    assert set(small) <= set(large)
    assert J.select(ds, sample=10) == small
    assert J.select(ds, sample=10, sample_seed=1) != small
    assert J.select(ds, sample=10_000) == J.select(ds)
    # filters first, then the sample: every item of the sample is of the layout asked for
    assert {ds[i]["layout"] for i in J.select(ds, layouts=["P4"], sample=5)} == {"P4"}


def test_stratified_order_every_group_before_any_twice_at_each_level():
    strata = [("a", "x")] * 6 + [("a", "y")] * 2 + [("b", "x")] * 1 + [("b", "z")] * 3
    order = S.stratified_order(strata, seed=5)
    assert sorted(order) == list(range(len(strata)))
    assert {strata[p][0] for p in order[:2]} == {"a", "b"}
    # each task's own items: every second-level group before a second of one
    for task in ("a", "b"):
        mine = [strata[p][1] for p in order if strata[p][0] == task]
        groups = set(mine)
        assert set(mine[: len(groups)]) == groups


def test_sample_run_is_resumed_extended_and_its_seed_is_identity(prism_judge, tiny_model, tmp_path):
    model = str(tiny_model("qwen3-vl"))
    out = tmp_path / "run"
    common = {"split": "test", "batch_size": 4, "progress": False}
    first = J.evaluate(model, prism_judge, out, sample=4, **common)
    assert first["n_scored"] == 4
    info = json.loads((out / RUN_INFO).read_text())
    assert info["identity"]["sample"] == {"seed": 0, "strata": list(S.SAMPLE_STRATA)}
    assert info["sample"] == 4 and info["items"]["n"] == 4

    more = J.evaluate(model, prism_judge, out, sample=6, **common)
    assert more["n_scored"] == 2  # the four already scored are kept, only the two new ones are scored
    ds = records.load(prism_judge)["test"]
    ids = [ds[i]["id"] for i in J.select(ds, sample=6)]
    assert json.loads((out / RUN_INFO).read_text())["items"]["ids"] == ids

    with pytest.raises(PredictionsError, match="sample.seed: 0 → 1"):  # another seed is another selection: not resumed into it
        J.evaluate(model, prism_judge, out, sample=6, sample_seed=1, **common)


def test_sample_and_limit_together_are_refused(prism_judge, tmp_path):
    with pytest.raises(ConfigError, match="give one"):
        J.JudgeEvalConfig(model="m", data=prism_judge, out=tmp_path, limit=4, sample=4)
    with pytest.raises(ConfigError, match="sample: 0"):
        J.JudgeEvalConfig(model="m", data=prism_judge, out=tmp_path, sample=0)
