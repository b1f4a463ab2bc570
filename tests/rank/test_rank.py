"""`judgetrain score` and judgetrain.rank: candidates shown to a reward model exactly as PRISM's pointwise
records show a sequence, ranked within their groups (ranks and picks follow the rewards), the rewards
those of the scoring engine on the same records, bad manifest lines named, and a rerun that finds the
ranking there or is refused for another one. The reward model is a tiny one made without training: a
LoRA and a random head saved as `judgetrain train` saves a reward run."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from judgetrain import cli
from judgetrain.rank import (
    Candidate,
    RewardModelScorer,
    candidate_record,
    candidate_records,
    choose_layout,
    rank_rewards,
    rank_sequences,
    read_candidates,
    write_candidates,
)


@pytest.fixture(scope="module")
def reward_run(tiny_model, tmp_path_factory):
    """A reward model folder: the tiny Qwen3-VL, a LoRA and a scalar head with random weights (seeded)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import REWARD_HEAD, get_family, load_reward_model

    model, _ = load_reward_model(tiny_model("qwen3-vl"), dtype="float32")
    torch.manual_seed(0)  # the LoRA's random initialisation: the same reward model every session
    peft = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=4, target_modules=get_family("qwen3-vl").lora_target_regex,
                                            init_lora_weights=False))
    with torch.no_grad():
        head = getattr(peft.base_model.model, REWARD_HEAD).modules_to_save["default"].weight
        head.copy_(torch.randn(head.shape, generator=torch.Generator().manual_seed(0)))
    folder = tmp_path_factory.mktemp("reward") / "rm"
    peft.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """Two synthetic procedures, four candidate orders each (gold, swap, shuffle, reversed)."""
    return write_candidates(tmp_path_factory.mktemp("candidates"), 2, seed=1, size=64, progress=False)


@pytest.fixture(scope="module")
def scored(reward_run, manifest, tmp_path_factory):
    out = tmp_path_factory.mktemp("scored") / "out"
    assert cli.main(["score", "--reward-model", str(reward_run), "--sequences", str(manifest), "--out", str(out),
                     "--no-progress", "--dtype", "float32"]) == 0
    return out


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_ranks_and_picks_follow_the_rewards_and_the_rewards_are_the_engines(scored, reward_run, manifest):
    from judgetrain.models import load_reward_model
    from judgetrain.scoring import reward_scores

    got = rows(scored / "scores.jsonl")
    candidates = read_candidates(manifest)
    assert [r["id"] for r in got] == [c.id for c in candidates]
    assert len({r["reward"] for r in got}) == len(got)  # a random head: the ranking is not decided by ties
    for r in got:
        group = [o["reward"] for o in got if o["group"] == r["group"]]
        assert r["rank"] == 1 + sum(x > r["reward"] for x in group)
        assert r["best"] == (r["reward"] == max(group)) and r["group_size"] == len(group) == 4
        assert r["layout"] == "P0" and r["reward_model"] == str(reward_run) and len(r["adapter_sha256"]) == 64
    best = rows(scored / "best.jsonl")
    assert [b["group"] for b in best] == list(dict.fromkeys(c.group for c in candidates))
    assert all(b["reward"] == max(r["reward"] for r in got if r["group"] == b["group"]) for b in best)
    model, processor = load_reward_model(reward_run, dtype="float32")
    engine = reward_scores(model, processor, candidate_records(candidates, "P0"), batch_size=1, progress=False)
    assert [r["reward"] for r in got] == pytest.approx(engine, abs=1e-4)
    ranking = (scored / "ranking.md").read_text()
    assert all(f"★ {b['id']}" in ranking for b in best)
    info = json.loads((scored / "run.json").read_text())
    assert info["finished"] and info["identity"]["layout"] == "P0" and info["candidates"] == 8


def test_a_rerun_finds_the_ranking_and_another_is_refused_unless_overwrite(scored, reward_run, manifest, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(scored, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    argv = ["score", "--reward-model", str(reward_run), "--sequences", str(manifest), "--out", str(out), "--no-progress",
            "--dtype", "float32"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Nothing to do" in printed and str(out / "scores.jsonl") in printed
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert cli.main([*argv[:-2], "--dtype", "auto"]) == 0  # the tiny checkpoint is float32: "auto" loads the same
    assert "Nothing to do" in capsys.readouterr().out
    assert cli.main([*argv, "--layout", "P2"]) == 2
    err = capsys.readouterr().err
    assert "layout: 'P0' → 'P2'" in err and "--overwrite" in err and "Traceback" not in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert cli.main([*argv, "--layout", "P2", "--overwrite"]) == 0
    assert {r["layout"] for r in rows(out / "scores.jsonl")} == {"P2"}


def test_an_unfinished_ranking_is_scored_again_and_a_busy_folder_is_refused(scored, reward_run, manifest, tmp_path,
                                                                             capsys, writer_lock):
    out = tmp_path / "out"
    shutil.copytree(scored, out)
    info = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**info, "finished": None}))  # as a run killed while writing leaves it
    (out / "best.jsonl").unlink()
    argv = ["score", "--reward-model", str(reward_run), "--sequences", str(manifest), "--out", str(out), "--no-progress",
            "--dtype", "float32"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    assert "Scoring 8 candidates" in capsys.readouterr().out
    assert rows(out / "best.jsonl") == rows(scored / "best.jsonl")
    assert json.loads((out / "run.json").read_text())["finished"]
    holder = writer_lock.hold(out)
    assert cli.main([*argv, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert f"process {holder.pid}" in err and "--wait" in err
    writer_lock.release()


def test_every_bad_manifest_line_is_named_with_its_field_before_any_model_loads(manifest, reward_run, tmp_path, capsys):
    root = manifest.parent
    frame = "procedures/images/proc-00000/step-00.png"
    lines = [
        '{"id": "a", "group": "g", "frames": ["%s"]}' % frame,
        "{not json",
        '{"id": "b", "frames": ["%s"]}' % frame,
        '{"id": "c", "group": "g", "frames": "%s"}' % frame,
        '{"id": "d", "group": "g", "frames": ["procedures/missing.png"]}',
        '{"id": "e", "group": "g", "frames": ["../outside.png"]}',
        '{"id": "a", "group": "g", "frames": ["%s"]}' % frame,
        '{"id": "f", "group": "g", "frames": ["%s"], "steps": ["one", 2]}' % frame,
    ]
    bad = root / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert cli.main(["score", "--reward-model", str(reward_run), "--sequences", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    for line, field in [(2, "not JSON"), (3, "group: missing"), (4, "frames: a string, not an array"),
                        (5, "frames[0]:"), (6, "frames[0]: '../outside.png' points outside"),
                        (7, "id: 'a' is already used on line 1"), (8, "steps[1]: a number")]:
        assert f"{bad}:{line}: {field}" in err
    assert "missing.png: no such image file" in err and "Traceback" not in err
    assert not out.exists()


def test_a_folder_that_is_no_reward_model_is_refused_with_the_way_to_make_one(manifest, tmp_path, capsys):
    generative = tmp_path / "judge"
    generative.mkdir()
    (generative / "adapter_config.json").write_text(json.dumps({"task_type": "CAUSAL_LM", "peft_type": "LORA"}))
    merged = tmp_path / "merged"  # what `judgetrain merge` makes of a reward run
    merged.mkdir()
    (merged / "config.json").write_text(json.dumps({"architectures": ["Qwen3VLRewardModel"], "model_type": "qwen3_vl"}))
    for folder, why in [(generative, "generative judge's"), (tmp_path / "nothing", "no such folder"),
                        (merged, "merged reward model")]:
        assert cli.main(["score", "--reward-model", str(folder), "--sequences", str(manifest), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert why in err and "method: reward" in err


def test_ranks_share_the_better_rank_on_ties_and_one_pick_per_group():
    ranked = rank_rewards(["a", "b", "c", "d", "e"], ["g", "g", "g", "g", "h"], [1.0, 3.0, 3.0, 0.5, -2.0])
    assert [r.rank for r in ranked] == [3, 1, 1, 4, 1]
    assert [r.best for r in ranked] == [False, True, False, False, True]
    assert [r.group_size for r in ranked] == [4, 4, 4, 4, 1]


def test_the_scorer_is_a_reward_function_over_paths_images_and_candidates(reward_run, manifest, monkeypatch):
    from judgetrain.rank import scorer as scorer_module

    scorer = RewardModelScorer(reward_run, dtype="float32", batch_size=2)
    assert scorer.layout == "P0"
    c = read_candidates(manifest)[:3]
    as_images = [Image.open(f).convert("RGB") for f in c[1].frames]
    rewards = scorer([c[0], {"frames": [str(f) for f in c[1].frames], "title": c[1].title, "steps": list(c[1].steps)},
                      {"frames": as_images, "title": c[1].title, "steps": list(c[1].steps)}, list(c[2].frames)])
    alone = scorer([c[0]])
    assert rewards[1] == pytest.approx(rewards[2], abs=1e-5)  # a path and its decoded image are one frame
    assert rewards[0] == pytest.approx(alone[0], abs=1e-4)  # scored alone: the batch does not matter
    ranked = rank_sequences(scorer, c)
    assert [r.id for r in ranked] == [x.id for x in c]
    assert [r.reward for r in ranked] == pytest.approx(scorer(c), abs=1e-4)
    monkeypatch.setattr(scorer_module, "CHUNK", 2)  # a manifest larger than a chunk: rewards in input order all the same
    assert scorer(c) == pytest.approx([r.reward for r in ranked], abs=1e-4)


def test_a_candidate_is_shown_as_prism_shows_the_same_sequence(manifest, tmp_path):
    """The gold candidate's prompt and images are those of the PRISM pointwise record of its procedure."""
    from judgetrain.data_builders import prism

    out = tmp_path / "prism"
    prism.build(prism.PrismConfig(out=out, procedures=manifest.parent / "procedures" / "manifest.jsonl",
                                  layouts=("P0", "P2", "P6"), modes=("pointwise",), splits={"test": 1.0}, progress=False))
    import datasets

    built = datasets.load_from_disk(str(out))["test"]
    gold = {c.group: c for c in read_candidates(manifest) if c.id.endswith("-gold")}
    seen = 0
    for rec in built:
        meta = json.loads(rec["meta"])
        if rec["perturbation"] != "none":
            continue
        mine = candidate_record(gold[meta["gold_id"]], rec["layout"])
        assert mine["prompt"] == rec["prompt"]
        assert [im.tobytes() for im in mine["images"]] == [im.convert("RGB").tobytes() for im in rec["images"]]
        seen += 1
    assert seen == 2 * 3


def test_auto_layout_is_the_runs_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert choose_layout("auto", run)[0] == "P0"
    data = tmp_path / "data"
    data.mkdir()
    (data / "build.json").write_text(json.dumps({"args": {"layouts": ["P2", "P4", "P6"]}}))
    (run / "judgetrain_recipe.yaml").write_text(f"datasets: [{data}]\nlayouts: null\n")
    assert choose_layout("auto", run) == ("P2", "the reward model trained on P2, P6")
    (run / "judgetrain_recipe.yaml").write_text(f"datasets: [{data}]\nlayouts: [P6]\n")
    assert choose_layout("auto", run / "checkpoint-2")[0] == "P6"  # a checkpoint reads its run's recipe
    assert choose_layout("P3", run)[0] == "P3"


def test_a_candidate_made_in_code_needs_frames():
    with pytest.raises(ValueError, match="no frames"):
        candidate_record(Candidate("x", "g", ()), "P0")
