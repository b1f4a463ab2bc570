"""Reward models in `judgetrain eval judge` (`--mode reward`): the pair accuracy, per-kind table, symmetry check and
agreement on hand-worked rows; the command end to end on the tiny Qwen3-VL with a reward adapter (random head) and one
PRISM gold sequence with its perturbations: rows, metrics recomputed by hand, agreement with a generative judge's run,
resume, the errors that name the fix, and the run browser showing both rewards of each pair."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from unittest import mock

import pytest

from judgetrain import records
from judgetrain.cli import main as cli_main
from judgetrain.eval.judge import reward as R, reward_metrics as RM


def _row(rid, gold_id, variant, perturbation, reward, *, check=None, tol=None, layout="P0"):
    return {"id": rid, "task": "pointwise", "source": "s", "layout": layout, "gold_id": gold_id, "variant": variant,
            "perturbation": perturbation, "score": 5 if variant == "gold" else 1, "reward": reward,
            "reward_check": check, "reward_check_tolerance": tol}


HAND_ROWS = [
    _row("g1", "p1", "gold", "none", 2.0, check=2.0005, tol=0.002),  # |Δ| 0.0005 ≤ 0.002
    _row("a", "p1", "swap@0-1", "swap", 1.0),            # gold wins
    _row("b", "p1", "swap@1-2", "swap", 2.0),            # tie
    _row("c", "p1", "shuffle", "shuffle", 3.0, check=3.1, tol=0.003),  # negative wins; |Δ| 0.1 > 0.003
    _row("d", "p1", "semantic-1@0", "semantic-1", 0.5),  # gold wins
    _row("g2", "p2", "gold", "none", -1.0),
    _row("e", "p2", "swap-nonconsecutive@0-2", "swap-nonconsecutive", -2.0),  # gold wins
    _row("f", "p2", "semantic-2@0,1", "semantic-2", 0.0),                      # negative wins
    _row("g", "p2", "semantic-3@0,1,2", "semantic-3", -1.5),                   # gold wins
    _row("h", "p3", "swap@0-1", "swap", 9.0),  # its gold has no row (a stopped run): unpaired, not dropped silently
]


def test_pair_accuracy_per_kind_and_symmetry_hand_worked(rates):
    m = RM.compute_reward_metrics(HAND_ROWS)
    assert (m["n_pairs"], m["n_unpaired"]) == (7, 1)
    a = m["all"]
    assert (a["n"], a["correct"], a["ties"]) == (7, 4, 1)  # a, d, e, g won; b tied; c, f lost
    assert a["accuracy"] == pytest.approx(4 / 7) and a["ci95"] == pytest.approx(rates.wilson(4, 7))
    assert a["tie_rate"] == pytest.approx(1 / 7)
    kinds = m["by_perturbation"]
    assert list(kinds) == ["swap", "swap-nonconsecutive", "shuffle", "semantic-1", "semantic-2", "semantic-3"]
    table = {k: (c["correct"], c["ties"], c["n"]) for k, c in kinds.items()}
    assert table == {"swap": (1, 1, 2), "swap-nonconsecutive": (1, 0, 1), "shuffle": (0, 0, 1), "semantic-1": (1, 0, 1),
                     "semantic-2": (0, 0, 1), "semantic-3": (1, 0, 1)}
    assert m["mean_reward"] == pytest.approx({"gold": 0.5, "negative": (1 + 2 + 3 + 0.5 - 2 + 0 - 1.5) / 7})
    s = m["symmetry"]
    assert (s["n_checked"], s["n_failed"], s["passed"], s["worst_id"]) == (2, 1, False, "c")
    assert s["max_abs_diff"] == pytest.approx(0.1)
    fine = RM.symmetry_check(HAND_ROWS[:2])
    assert fine["passed"] is True and fine["max_abs_diff"] == pytest.approx(0.0005)
    assert RM.symmetry_check(HAND_ROWS[1:3])["passed"] is None  # nothing re-scored: not run, not passed


def test_agreement_with_a_judge_hand_worked():
    pairs_by_id = {"a": ["s", "p1", "swap@0-1", "P0"], "b": ["s", "p1", "swap@1-2", "P0"], "c": ["s", "p1", "shuffle", "P0"]}
    judge = [
        {"pair_key": pairs_by_id["a"], "valid": True, "correct": True},   # both prefer the gold: agree
        {"pair_key": pairs_by_id["a"], "valid": True, "correct": False},  # its twin, answered the other way: disagree
        {"pair_key": pairs_by_id["c"], "valid": True, "correct": False},  # both prefer the negative: agree
        {"pair_key": pairs_by_id["b"], "valid": True, "correct": True},   # the reward tied: undecided
        {"pair_key": pairs_by_id["c"], "valid": False, "correct": False},  # invalid answer: undecided
        {"pair_key": ["s", "p9", "swap@0-1", "P0"], "valid": True, "correct": True},  # no such pair here
    ]
    a = RM.compute_reward_metrics(HAND_ROWS, judge_rows=judge)["agreement"]
    assert (a["agree"]["k"], a["agree"]["n"]) == (2, 3)
    assert (a["reward_accuracy"]["k"], a["judge_accuracy"]["k"]) == (2, 1)
    assert (a["n_reward_tie"], a["n_judge_invalid"], a["n_judge_unmatched"]) == (1, 1, 1)
    assert a["n_pairs_unjudged"] == 7 - 3  # pairs a, b, c were judged


class _BatchDependentScorer:
    """A broken reward scorer of this test's own: each reward leaks the size of its batch."""

    dtype = "float32"

    def score(self, items, batch_size=None):
        return [float(len(r["prompt"])) + 0.1 * len(items) for r in items]


def test_symmetry_check_catches_a_batch_dependent_scorer():
    items = [{"id": f"r{i}", "task": "pointwise", "source": "s", "layout": "P0", "perturbation": "none", "position": -1,
              "n_frames": 4, "label": "5", "meta": "{}", "prompt": [{"role": "user", "content": []}]} for i in range(4)]
    rows = R.reward_rows(_BatchDependentScorer(), items)
    assert rows[0]["reward_check"] is not None and all(r["reward_check"] is None for r in rows[1:])
    assert RM.symmetry_check(rows)["passed"] is False  # in a batch of 4 vs of 2: 0.2 apart, tolerance 1e-3


# --------------------------------------------------------------------------- end to end on the tiny Qwen3-VL


@pytest.fixture(scope="module")
def reward_adapter(tiny_model, tmp_path_factory):
    """A reward adapter (LoRA + a scalar head drawn at random, seed 0) on the tiny Qwen3-VL, saved as training saves it."""
    import torch
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import get_family
    from judgetrain.models.reward import is_reward_adapter, load_reward_model

    torch.manual_seed(0)
    model, _ = load_reward_model(tiny_model("qwen3-vl"), dtype="float32")
    peft_model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", target_modules=get_family("qwen3-vl").lora_target_regex, r=4))
    for name, p in peft_model.named_parameters():
        if "score" in name:
            torch.nn.init.normal_(p)
    out = tmp_path_factory.mktemp("reward") / "run"
    peft_model.save_pretrained(out)
    assert is_reward_adapter(out)
    return out


@pytest.fixture(scope="module")
def one_gold(prism_build, tmp_path_factory):
    """The shortest gold sequence of the session's PRISM build: its pointwise records (gold + negatives) and its pairwise ones."""
    import datasets

    ds = records.load(prism_build)["test"]
    metas = [json.loads(m) for m in ds["meta"]]
    gold = min((m["gold_id"] for m in metas), key=lambda g: min(n for n, m in zip(ds["n_frames"], metas) if m["gold_id"] == g))
    keep = [i for i, m in enumerate(metas) if m["gold_id"] == gold]
    out = tmp_path_factory.mktemp("one-gold") / "prism"
    records.save(datasets.DatasetDict({"test": ds.select(keep)}), out, {"builder": "prism"})
    tasks = [ds["task"][i] for i in keep]
    return out, tasks.count("pointwise"), tasks.count("pairwise")


def _judge(*argv):
    argv = ["eval", "judge", "--split", "test", "--batch-size", "4", "--no-progress", *map(str, argv)]
    with mock.patch.object(sys, "argv", ["judgetrain", *argv]):
        return cli_main(argv)


@pytest.fixture(scope="module")
def judge_run(tiny_model, one_gold, tmp_path_factory):
    out = tmp_path_factory.mktemp("judge") / "gen"
    assert _judge("--model", tiny_model("qwen3-vl"), "--data", one_gold[0], "--out", out, "--tasks", "pairwise") == 0
    return out


@pytest.fixture(scope="module")
def reward_run(reward_adapter, one_gold, judge_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("reward-run") / "rm"
    assert _judge("--model", reward_adapter, "--data", one_gold[0], "--out", out, "--tasks", "pointwise",
                  "--agree-with", judge_run) == 0
    return out


def _rows(run):
    return [json.loads(line) for line in (Path(run) / "predictions.jsonl").read_text().splitlines()]


def test_reward_run_scores_each_record_once_and_reports_pairs(reward_run, one_gold, judge_run, rates):
    rows, n_point, n_pair = _rows(reward_run), one_gold[1], one_gold[2]
    assert len(rows) == n_point and len({r["id"] for r in rows}) == n_point
    assert all(r["method"] == "reward" and isinstance(r["reward"], float) and r["frames"] for r in rows)
    info = json.loads((reward_run / "run.json").read_text())
    assert info["mode"] == "reward" and info["identity"]["model"]["adapter"]["files"]  # the adapter by content
    m = json.loads((reward_run / "metrics.json").read_text())["reward"]
    gold = next(r for r in rows if r["variant"] == "gold")
    negatives = [r for r in rows if r is not gold]
    won = sum(gold["reward"] > r["reward"] for r in negatives)
    assert (m["n_pairs"], m["all"]["correct"], m["all"]["n"]) == (n_point - 1, won, n_point - 1)
    for kind, c in m["by_perturbation"].items():
        mine = [r for r in negatives if r["perturbation"] == kind]
        assert (c["n"], c["correct"]) == (len(mine), sum(gold["reward"] > r["reward"] for r in mine))
    assert m["symmetry"]["passed"] is True and m["symmetry"]["n_checked"] >= 1
    # agreement by hand: the judge's pairwise record names its pair by (gold_id, variant)
    ds = records.load(one_gold[0])["test"]
    variant = {rid: json.loads(meta)["variant"] for rid, meta in zip(ds["id"], ds["meta"])}
    reward_of = {r["variant"]: r["reward"] for r in negatives}
    judged = [r for r in _rows(judge_run) if r["valid"]]
    agree = sum((gold["reward"] > reward_of[variant[r["id"]]]) == r["correct"] for r in judged)
    assert (m["agreement"]["agree"]["k"], m["agreement"]["agree"]["n"]) == (agree, n_pair)
    md = (reward_run / "report.md").read_text()
    assert "## Symmetry check" in md and "**passed**" in md and "## Agreement with the generative judge" in md
    assert rates.check(md) >= 3


def test_rewards_equal_the_engines_and_resume_rescores_only_what_is_missing(reward_run, reward_adapter, one_gold, judge_run,
                                                                           tmp_path):
    import shutil

    from judgetrain.models.reward import load_reward_model
    from judgetrain.scoring import reward_scores

    rows = _rows(reward_run)
    ds = records.load(one_gold[0])["test"]
    items = [r for r in ds if r["task"] == "pointwise"]
    model, processor = load_reward_model(reward_adapter, dtype="float32")
    fresh = reward_scores(model, processor, items, batch_size=4, progress=False)
    assert [r["id"] for r in rows] == [r["id"] for r in items]
    assert [r["reward"] for r in rows] == pytest.approx(fresh, abs=1e-4)
    # a run killed mid-write: half its lines and a partial one
    out = tmp_path / "rm"
    shutil.copytree(reward_run, out)
    lines = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    argv = ["--model", reward_adapter, "--data", one_gold[0], "--out", out, "--tasks", "pointwise", "--agree-with", judge_run]
    assert _judge(*argv) == 0
    again = _rows(out)
    assert [r["id"] for r in again] == [r["id"] for r in rows]
    assert [r["reward"] for r in again] == pytest.approx([r["reward"] for r in rows], abs=1e-4)
    before = (out / "predictions.jsonl").read_text()
    assert _judge(*argv) == 0 and (out / "predictions.jsonl").read_text() == before  # finished: nothing rescored


def test_reward_runs_refuse_what_cannot_be_paired_naming_the_fix(reward_adapter, one_gold, tiny_model, judge_run, reward_run,
                                                                 tmp_path, capsys):
    data = one_gold[0]
    assert _judge("--model", reward_adapter, "--data", data, "--out", tmp_path / "a") == 2
    assert "pass --tasks pointwise" in capsys.readouterr().err
    assert _judge("--model", reward_adapter, "--data", data, "--out", tmp_path / "b", "--tasks", "pointwise",
                  "--subsets", "PRISM-Temporal") == 2  # the negatives without their gold sequence
    err = capsys.readouterr().err
    assert "has no gold pointwise record" in err and "add PRISM-Coherent" in err
    assert _judge("--model", reward_adapter, "--data", data, "--out", tmp_path / "c", "--mode", "rationale") == 2
    assert "leave --mode out, or pass --mode reward" in capsys.readouterr().err
    assert _judge("--model", tiny_model("qwen3-vl"), "--data", data, "--out", tmp_path / "d", "--agree-with", judge_run) == 2
    assert "only a reward model's run" in capsys.readouterr().err
    assert _judge("--model", reward_adapter, "--data", data, "--out", tmp_path / "e", "--tasks", "pointwise",
                  "--agree-with", reward_run) == 2  # a reward run is no generative judge to agree with
    assert "not a generative judge's" in capsys.readouterr().err
    assert not any((tmp_path / x / "predictions.jsonl").exists() for x in "abcde")


def test_run_browser_shows_both_rewards_of_each_pair(reward_run, tmp_path):
    from judgetrain.eval.view.items import load_run

    rows = {r["id"]: r for r in _rows(reward_run)}
    run = load_run(reward_run)
    m = json.loads((reward_run / "metrics.json").read_text())["reward"]
    assert len(run["items"]) == m["n_pairs"]
    for it in run["items"]:
        gold, neg = rows[it["extra"]["gold record"]], rows[it["id"]]
        assert it["extra"]["reward (gold)"] == f"{gold['reward']:.6f}"
        assert it["extra"]["reward (negative)"] == f"{neg['reward']:.6f}"
        won = "gold" if gold["reward"] > neg["reward"] else ("negative" if neg["reward"] > gold["reward"] else "tie")
        assert it["pred"] == won and it["correct"] == (won == "gold")
        assert [g["refs"] for g in it["frames"]] == [[("sha256", h) for h in r["frames"]] for r in (gold, neg)]
    out = tmp_path / "view"
    assert cli_main(["eval", "view", str(reward_run), "--out", str(out), "--no-progress"]) == 0
    detail = "".join(p.read_text() for p in (out / "data").glob("detail-*.js"))
    first = run["items"][0]
    assert first["extra"]["reward (gold)"] in detail and first["extra"]["reward (negative)"] in detail
    assert "Pair accuracy" in (out / "data" / "meta.js").read_text()  # the report, with its per-kind table


def test_base_plus_adapter_scores_as_the_run_folder_and_a_new_head_ties_everything(reward_run, reward_adapter, one_gold,
                                                                                 tiny_model, tmp_path):
    base = tiny_model("qwen3-vl")
    out = tmp_path / "adapter"
    assert _judge("--model", base, "--adapter", reward_adapter, "--data", one_gold[0], "--out", out, "--tasks", "pointwise") == 0
    assert json.loads((out / "run.json").read_text())["mode"] == "reward"  # the default for a reward adapter
    assert [r["reward"] for r in _rows(out)] == pytest.approx([r["reward"] for r in _rows(reward_run)], abs=1e-5)
    # a base with a new head (zero-initialised): every reward equal, every pair a tie, none won
    fresh = tmp_path / "head"
    assert _judge("--model", base, "--mode", "reward", "--data", one_gold[0], "--out", fresh, "--tasks", "pointwise") == 0
    m = json.loads((fresh / "metrics.json").read_text())["reward"]["all"]
    assert (m["correct"], m["ties"]) == (0, m["n"])
