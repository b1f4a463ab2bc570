"""TimeCatch records through the shared visual prefix (``judgetrain.eval.timecatch.grouped``): records
of one sequence that show the same frames in the same order are grouped, scored once per prefix, with
the same scores and answers as scoring every record on its own; records whose renderings differ before
the last image are scored alone; ``--no-shared-prefix`` turns it off without changing a run's identity."""

from __future__ import annotations

import copy
import json

import pytest

from judgetrain import config, records
from judgetrain.eval import timecatch as T
from judgetrain.eval.core import runs
from judgetrain.eval.timecatch.grouped import prefix_groups, score_records

N = 16  # the first validation records: two sequences' worth, every task, both detection layouts
TOL = 1e-5  # float32 on CPU: the prefix pass and the full pass differ in the last bits only


@pytest.fixture(scope="module")
def scorer(tiny_model):
    from judgetrain.scoring import Scorer

    return Scorer.from_pretrained(tiny_model("qwen3-vl"), device="cpu", batch_size=2, progress=False)


@pytest.fixture(scope="module")
def chunk(timecatch_build):
    ds = records.load(timecatch_build[0])["validation"]
    idx = list(range(min(N, len(ds))))
    return [ds[i] for i in idx], records.frame_digests(ds, idx)


def assert_same_scores(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.choices == w.choices and g.num_tokens == w.num_tokens
        assert max(abs(x - y) for x, y in zip(g.raw_logprobs, w.raw_logprobs, strict=True)) <= TOL
        assert max(abs(x - y) for x, y in zip(g.logprobs, w.logprobs, strict=True)) <= TOL
        assert g.prediction == w.prediction


def test_grouped_scores_equal_plain_scores(scorer, chunk):
    items, frames = chunk
    groups, alone = prefix_groups(scorer, items, frames)
    # the lever is exercised: several records share one prefix, and only records with equal frames
    assert any(len(g) > 2 for g in groups), groups
    assert sum(len(g) for g in groups) >= len(items) // 2
    for g in groups:
        assert len({tuple(frames[i]) for i in g}) == 1 and len({items[i]["n_frames"] for i in g}) == 1
    assert sorted([i for g in groups for i in g] + alone) == list(range(len(items)))
    grouped = score_records(scorer, items, frames)
    plain = scorer.score(items, progress=False)
    assert_same_scores(grouped, plain)
    assert_same_scores(score_records(scorer, items, frames, shared_prefix=False), plain)
    # digests computed from the decoded images group the same way
    assert prefix_groups(scorer, items) == (groups, alone)


def test_renderings_that_differ_before_the_last_image_are_scored_alone(scorer, chunk):
    items, frames = chunk
    groups, _ = prefix_groups(scorer, items, frames)
    g = max(groups, key=len)
    members = [copy.deepcopy(items[i]) for i in g]
    # the first record gets text before its images: same frames, another rendering up to the last image
    members[0]["prompt"][0]["content"].insert(0, {"type": "text", "text": "Look closely."})
    # the second gets a label before its last image
    content = members[1]["prompt"][0]["content"]
    last = max(k for k, c in enumerate(content) if c["type"] == "image")
    content.insert(last, {"type": "text", "text": "Last frame:"})
    sub_frames = [frames[i] for i in g]
    groups2, alone2 = prefix_groups(scorer, members, sub_frames)
    assert 0 in alone2 and 1 in alone2 and all(0 not in x and 1 not in x for x in groups2)
    if len(members) > 3:
        assert groups2 == [list(range(2, len(members)))]
    assert_same_scores(score_records(scorer, members, sub_frames), scorer.score(members, progress=False))


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
        "8",
        "--no-progress",
        *extra,
    ]


def test_run_with_and_without_shared_prefix_agree_and_resume_each_other(tiny_model, timecatch_build, tmp_path):
    model, data = tiny_model("qwen3-vl"), timecatch_build[0]
    assert "--no-shared-prefix" in T.make_parser().format_help()
    plain_out, out = tmp_path / "plain", tmp_path / "shared"
    (cfg,) = config.parse(T.make_parser(), _argv(model, data, plain_out, "--no-shared-prefix"))
    assert cfg.shared_prefix is False and T.main(cfg) == 0
    (cfg,) = config.parse(T.make_parser(), _argv(model, data, out))
    assert cfg.shared_prefix is True and T.main(cfg) == 0
    plain, shared = (runs.read_predictions(o / runs.PREDICTIONS) for o in (plain_out, out))
    assert [r["id"] for r in shared] == [r["id"] for r in plain]
    for s, p in zip(shared, plain, strict=True):
        assert max(abs(x - y) for x, y in zip(s["probs"], p["probs"], strict=True)) <= TOL
        assert {k: v for k, v in s.items() if k != "probs"} == {k: v for k, v in p.items() if k != "probs"}
    # not part of the run's identity: a run started without it resumes with it, scoring nothing
    (cfg,) = config.parse(T.make_parser(), _argv(model, data, plain_out))
    assert T.run(cfg)["n_scored"] == 0
    assert (
        json.loads((out / runs.RUN_INFO).read_text())["identity"]
        == json.loads((plain_out / runs.RUN_INFO).read_text())["identity"]
    )
