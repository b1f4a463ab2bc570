"""Consistency tuning (paper 001 App. C, issue 17): the view records, the objectives on
hand-worked posteriors, the trainer against TRL's own SFT loss and the scoring engine's
posteriors, the seven recipes, and one arm trained end to end from a synthetic video-MCQ set.
Tiny models, float32, CPU; the real TRL / PEFT / transformers code throughout."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import yaml

from judgetrain import records
from judgetrain.consistency import (
    BATCH_KEYS,
    ConsistencyConfig,
    ConsistencyTrainer,
    ViewDataError,
    ViewGroupCollator,
    ViewGroups,
    content_log_posteriors,
    js_to_mixture,
    pseudo_label,
)
from judgetrain.data_builders.consistency_views import ConsistencyViewsConfig, build, gold_letter
from judgetrain.mcq import LETTERS, orderings, to_content
from judgetrain.train import consistency_problems
from judgetrain.video import phase_indices, probe

REPO = Path(__file__).resolve().parents[2]
TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen25vl-consistency-lora.yaml"


@pytest.fixture(scope="module")
def tiny_qwen(tiny_model):
    return tiny_model("qwen2.5-vl")


@pytest.fixture(scope="module")
def views(clips, tmp_path_factory):
    """The three hand-written PhaseFusion questions (3, 4 and 2 options) as 2 phases × 3 orderings of 2 frames
    (ordering 1 happens to keep every gold letter in place; ordering 2 moves all three)."""
    out = tmp_path_factory.mktemp("views") / "ds"
    info = build(ConsistencyViewsConfig(manifest=clips, out=out, budget=2, phases=2, orderings=3, splits="train=1.0",
                                        progress=False))
    return out, info


# --------------------------------------------------------------------------- the objectives on hand-worked posteriors


def letters_for(content_probs, perm, shift=0.0):
    """Letter logits (slot order) that give ``content_probs`` when slot j shows option perm[j] (plus any constant)."""
    return [math.log(content_probs[c]) + shift for c in perm]


def batch_of(rows):
    """(letter logits, slot of content, group) tensors, padded to the most options with -inf / -1."""
    width = max(len(p) for _, p, _ in rows)
    logits = torch.full((len(rows), width), float("-inf"))
    slot_of = torch.full((len(rows), width), -1, dtype=torch.long)
    for r, (probs, perm, _) in enumerate(rows):
        logits[r, :len(perm)] = torch.tensor(letters_for(probs, perm, shift=3.0 * r))
        for slot, content in enumerate(perm):
            slot_of[r, content] = slot
    return logits, slot_of, torch.tensor([g for _, _, g in rows])


def test_js_to_mixture_equals_the_hand_computation():
    """Question 0: views (.5, .25, .25) and (.25, .5, .25), the second shown in the order [2, 0, 1];
    m = (.375, .375, .25). Question 1 (two options, padded to three): (.9, .1) and (.6, .4), m = (.75, .25)."""
    logits, slot_of, group = batch_of([([.5, .25, .25], [0, 1, 2], 0), ([.25, .5, .25], [2, 0, 1], 0),
                                       ([.9, .1], [0, 1], 1), ([.6, .4], [1, 0], 1)])
    logp = content_log_posteriors(logits, slot_of)
    torch.testing.assert_close(logp[1, :3].exp(), torch.tensor([.25, .5, .25]))  # back in option order
    assert math.isinf(logp[2, 2]) and logp[2, 2] < 0  # no third option
    q0 = 0.5 * ((.5 * math.log(.5 / .375) + .25 * math.log(.25 / .375) + .25 * math.log(.25 / .25))
                + (.25 * math.log(.25 / .375) + .5 * math.log(.5 / .375) + .25 * math.log(.25 / .25)))
    q1 = 0.5 * ((.9 * math.log(.9 / .75) + .1 * math.log(.1 / .25)) + (.6 * math.log(.6 / .75) + .4 * math.log(.4 / .25)))
    assert round(q0, 7) == 0.0424748 and round(q1, 7) == 0.0632878
    torch.testing.assert_close(js_to_mixture(logp, group, 2), torch.tensor([q0, q1]), atol=1e-6, rtol=0)


def test_pseudo_label_gate_turns_on_at_tau():
    """Views (.6, .3, .1) and (.4, .4, .2) (the second shown as [1, 2, 0]): m = (.5, .35, .15), target option 0;
    the term is ½(−log .6 − log .4) when max m = .5 ≥ τ, and 0 above it."""
    logits, slot_of, group = batch_of([([.6, .3, .1], [0, 1, 2], 0), ([.4, .4, .2], [1, 2, 0], 0)])
    logp = content_log_posteriors(logits, slot_of)
    on, gate_on, target = pseudo_label(logp, group, 1, tau=0.499)
    off, gate_off, _ = pseudo_label(logp, group, 1, tau=0.501)
    assert target.tolist() == [0] and gate_on.tolist() == [True] and gate_off.tolist() == [False]
    assert abs(on.item() - 0.5 * (-math.log(.6) - math.log(.4))) < 1e-6 and round(0.5 * (-math.log(.6) - math.log(.4)), 6) == 0.713558
    assert off.tolist() == [0.0]


def test_the_gradient_reaches_every_view_and_detaching_the_mixture_changes_none():
    torch.manual_seed(0)
    logits = torch.randn(6, 4, dtype=torch.float64)
    slot_of = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2], [0, 1, 2, -1], [2, 0, 1, -1], [1, 2, 0, -1]])
    group = torch.tensor([0, 0, 0, 1, 1, 1])
    grads = {}
    for detach in (True, False):
        x = logits.clone().requires_grad_(True)
        js_to_mixture(content_log_posteriors(x, slot_of), group, 2, detach_mixture=detach).sum().backward()
        grads[detach] = x.grad
    torch.testing.assert_close(grads[True], grads[False], atol=1e-6, rtol=1e-6)  # the path through m adds nothing
    assert (grads[True][:, :3].abs().sum(-1) > 1e-4).all(), "every view's letters get a gradient"
    assert (grads[True][3:, 3] == 0).all(), "a letter the question does not have gets none"
    x = logits.clone().requires_grad_(True)
    pseudo_label(content_log_posteriors(x, slot_of), group, 2, tau=0.0)[0].sum().backward()
    assert (x.grad[:, :3].abs().sum(-1) > 1e-4).all()


def test_the_consistency_fields_are_checked_together(tmp_path):
    from judgetrain.train import DataArguments

    def problems(**kw):
        data = DataArguments(datasets=["d"], mixture_weights=kw.pop("mixture_weights", None))
        return consistency_problems(data, ConsistencyConfig(output_dir=str(tmp_path), bf16=False, report_to="none", **kw))

    assert problems() == [] and problems(consistency_objective="js", consistency_lambda=0.0) == []
    assert problems(consistency_objective="pseudo_label", consistency_lambda=1.0, consistency_tau=0.7) == []
    assert problems(consistency_lambda=1.0) == ["consistency_lambda: set, but consistency_objective is none; set "
                                                "`consistency_objective: js` or `pseudo_label`, or drop it"]
    assert problems(consistency_objective="kl")[0].startswith("consistency_objective: 'kl' is not an objective")
    assert [p.split(":")[0] for p in problems(consistency_objective="js", consistency_tau=0.7)] == ["consistency_lambda", "consistency_tau"]
    assert problems(consistency_objective="pseudo_label", consistency_lambda=-1.0, consistency_tau=1.5) == [
        "consistency_lambda: -1.0 must be a finite number ≥ 0",
        "consistency_tau: 1.5 must be in (0, 1]: the gate compares it with a probability"]
    assert [p.split(":")[0] for p in problems(consistency_objective="js", consistency_lambda=1.0, packing=True,
                                              mixture_weights=[1.0], train_sampling_strategy="group_by_length")] == [
        "packing", "mixture_weights", "train_sampling_strategy"]


# --------------------------------------------------------------------------- the view records


def option_lines(record) -> dict[str, str]:
    text = record["prompt"][-1]["content"][-1]["text"]
    return {line[0]: line[3:] for line in text.splitlines() if len(line) > 3 and line[1:3] == ". " and line[0] in LETTERS}


def test_each_views_gold_letter_is_the_slot_showing_the_gold_option(views, clips):
    """Slot j shows option perm[j], so the gold letter is the slot whose option is `answer`: a mapping
    through perm instead of its inverse, or a letter one off, fails here."""
    assert [gold_letter([2, 0, 1], c) for c in range(3)] == ["B", "C", "A"]
    assert [gold_letter([1, 2, 3, 0], c) for c in range(4)] == ["D", "A", "B", "C"]
    manifest = {q["id"]: q for q in map(json.loads, clips.read_text().splitlines())}
    ds = records.load(views[0])["train"]
    moved = 0
    for r in ds:
        meta = json.loads(r["meta"])
        q = manifest[meta["group"]]
        shown = option_lines(r)
        assert list(shown) == list(LETTERS[:len(q["options"])]) == r["choices"]
        assert [shown[LETTERS[j]] for j in range(len(shown))] == [q["options"][c] for c in meta["perm"]]
        assert shown[r["label"]] == q["options"][q["answer"]] and r["completion"][0]["content"][0]["text"] == r["label"]
        assert meta["answer"] == q["answer"] and r["task"] == "video_mcq"
        moved += r["label"] != LETTERS[q["answer"]]
    assert moved > 0, "some ordering moved the gold option to another letter"


def test_views_are_phase_grids_times_orderings_and_each_video_is_decoded_once(views, clips, tmp_path):
    out, info = views
    ds = records.load(out)["train"]
    metas = [json.loads(m) for m in ds["meta"]]
    assert len(ds) == 3 * 6 and info["counts"]["records"]["train"]["questions"] == 3
    assert [m["view"] for m in metas] == list(range(6)) * 3 and [m["group"] for m in metas] == ["pf-0"] * 6 + ["pf-1"] * 6 + ["pf-2"] * 6
    for r, m in zip(ds, metas, strict=True):
        frames = probe(clips.parent / m["video"]).n_frames
        assert m["frames"] == phase_indices(frames, 2, m["phase"], 2) and len(r["images"]) == r["n_frames"] == 2
        assert m["view"] == m["phase"] * 3 + m["ordering"] and r["id"] == f"{m['group']}:v{m['view']}"
        assert max(r["images"][0].size) <= 360
    assert [m["perm"] for m in metas[6:12]] == orderings("pf-1", 4, 3) * 2  # eval phasefusion's orderings 0, 1, 2
    # two questions on one video and one on another: two decoding passes; a missing video is counted, not dropped
    lines = [json.loads(x) for x in clips.read_text().splitlines()]
    lines.insert(1, {**lines[0], "id": "pf-0b", "question": "Which object is leftmost at the end?"})
    lines.append({**lines[2], "id": "pf-missing", "video": "videos/none.mp4"})
    (clips.parent / "two.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines[:2] + lines[-1:]))
    # keep_work: the work folder stays, frames and all, as a killed build leaves it
    info = build(ConsistencyViewsConfig(manifest=clips.parent / "two.jsonl", out=tmp_path / "two", budget=2, phases=2, orderings=1,
                                        splits="train=1.0", progress=False, keep_work=True))
    assert info["counts"]["decoding"] == {"decode_passes": 1, "videos": 2, "resumed_questions": 0}
    assert [(s["id"], s["line"]) for s in info["skipped"]] == [("pf-missing", 3)] and "no such video file" in info["skipped"][0]["reason"]
    again = build(ConsistencyViewsConfig(manifest=clips.parent / "two.jsonl", out=tmp_path / "again", budget=2, phases=2,
                                         orderings=1, splits="train=1.0", progress=False))
    assert again["splits"] == info["splits"]  # same inputs, same bytes
    # run again where the first build ran (its work folder holds the frames, as after a kill): nothing is decoded
    shutil.rmtree(tmp_path / "two")  # killed before its records were saved (a finished build is a no-op)
    resumed = build(ConsistencyViewsConfig(manifest=clips.parent / "two.jsonl", out=tmp_path / "two", budget=2, phases=2,
                                           orderings=1, splits="train=1.0", progress=False, keep_work=True))
    assert resumed["counts"]["decoding"] == {"decode_passes": 0, "videos": 2, "resumed_questions": 2}
    assert resumed["splits"] == info["splits"]
    # other settings: the frames are decoded again
    other = build(ConsistencyViewsConfig(manifest=clips.parent / "two.jsonl", out=tmp_path / "two", budget=3, phases=2,
                                         orderings=1, splits="train=1.0", progress=False, overwrite=True))
    assert other["counts"]["decoding"] == {"decode_passes": 1, "videos": 2, "resumed_questions": 0}


def test_groups_keep_every_view_and_refuse_a_cut_question(views, tiny_qwen):
    from judgetrain.compat.trl import vision_collator
    from judgetrain.models import load_model_and_processor

    ds = records.load(views[0])["train"]
    groups = ViewGroups(ds)
    assert len(groups) == 3 and [len(g.records) for g in groups] == [6, 6, 6] and groups[1].group == "pf-1"
    with pytest.raises(ViewDataError, match=r"question 'pf-2' has views \[0, 1, 2, 3, 4\] of 0..5; .*max_train_samples"):
        ViewGroups(ds.select(range(17)))
    _, processor = load_model_and_processor(str(tiny_qwen), dtype="float32")
    collate = ViewGroupCollator(vision_collator(processor, completion_only_loss=True), processor)
    batch = collate([groups[1], groups[2]])
    assert batch["consistency_group"].tolist() == [0] * 6 + [1] * 6 and batch["consistency_view"].tolist() == list(range(6)) * 2
    assert batch["consistency_answer"].tolist() == [3] * 6 + [0] * 6
    first = (batch["labels"] != -100).int().argmax(-1)
    gold_slot = batch["consistency_slot_of_content"].gather(-1, batch["consistency_answer"][:, None])[:, 0]
    gold_ids = batch["consistency_letter_ids"].gather(-1, gold_slot[:, None])[:, 0]
    assert torch.equal(batch["input_ids"][torch.arange(12), first], gold_ids), "the completion starts with the gold letter's token"
    assert batch["consistency_letter_ids"][6:, 2:].eq(-1).all() and batch["consistency_slot_of_content"][6:, 2:].eq(-1).all()
    # pf-1's ordering 1 shows the options [2, 0, 1, 3]: option 0 in slot B, 1 in C, 2 in A, 3 in D
    assert batch["consistency_slot_of_content"][1].tolist() == [1, 2, 0, 3]
    letters = processor.tokenizer.convert_tokens_to_ids(list("ABCD"))
    assert batch["consistency_letter_ids"][0].tolist() == letters


# --------------------------------------------------------------------------- the trainer


def trainer_pair(tiny_qwen, ds, tmp_path, **consistency):
    """SFTTrainer and ConsistencyTrainer on the same records, each with its own copy of the
    tiny model and the same seeded LoRA (dropout 0, so train mode is deterministic)."""
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    from judgetrain.models import get_family, load_model_and_processor

    common = {"output_dir": str(tmp_path), "bf16": False, "report_to": "none", "per_device_train_batch_size": 2, "seed": 0,
              "dataloader_num_workers": 0}
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=get_family("qwen2.5-vl").lora_target_regex,
                      task_type="CAUSAL_LM")
    out = []
    for cls, args in ((SFTTrainer, SFTConfig(**common)), (ConsistencyTrainer, ConsistencyConfig(**common, **consistency))):
        model, processor = load_model_and_processor(str(tiny_qwen), dtype="float32")
        trainer = cls(model=model, args=args, train_dataset=ds, processing_class=processor, peft_config=lora)
        trainer.model.train()
        out.append(trainer)
    return out


def loss_and_grads(trainer, batch):
    trainer.model.zero_grad()
    labels = batch["labels"][..., 1:]
    loss = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=labels.ne(-100).sum())
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.requires_grad}


def engine_posteriors(trainer, group) -> list[list[float]]:
    """Each view's content-space posterior from the scoring engine (eval mode), the definition eval phasefusion uses."""
    from judgetrain.scoring import score

    scores = score(trainer.model, trainer.processing_class, list(group.records), batch_size=4, progress=False)
    trainer.model.train()
    return [to_content(s.probs, json.loads(r["meta"])["perm"]) for s, r in zip(scores, group.records, strict=True)]


def test_lambda_zero_is_exactly_the_plain_sft_loss_and_gradients(views, tiny_qwen, tmp_path):
    ds = records.load(views[0])["train"]
    sft, ct = trainer_pair(tiny_qwen, ds, tmp_path, consistency_objective="js", consistency_lambda=0.0)
    items = [ct.train_dataset[0], ct.train_dataset[1]]
    batch = ct.data_collator(items)
    plain = sft.data_collator([dict(r) for g in items for r in g.records])
    assert set(batch) - set(plain) == set(BATCH_KEYS) and all(torch.equal(plain[k], batch[k]) for k in plain)
    loss_sft, grads_sft = loss_and_grads(sft, plain)
    loss_ct, grads_ct = loss_and_grads(ct, batch)
    assert torch.equal(loss_sft, loss_ct) and grads_sft.keys() == grads_ct.keys() and len(grads_sft) > 0
    assert all(torch.equal(grads_sft[k], grads_ct[k]) for k in grads_sft)
    assert any(g.abs().sum() > 0 for g in grads_sft.values())


@pytest.mark.parametrize("objective", ["js", "pseudo_label"])
def test_the_term_is_the_scoring_engines_posteriors_and_is_logged(objective, views, tiny_qwen, tmp_path):
    """loss(λ = 2) − loss(λ = 0) = 2 · the term computed by hand from the scoring engine's posteriors;
    evaluation returns the cross-entropy alone; the logged metrics are the same numbers."""
    import numpy as np

    ds = records.load(views[0])["train"]
    extra = {"consistency_tau": 0.3} if objective == "pseudo_label" else {}
    _, ct = trainer_pair(tiny_qwen, ds, tmp_path, consistency_objective=objective, consistency_lambda=2.0, **extra)
    items = [ct.train_dataset[0], ct.train_dataset[2]]  # 3 and 2 options: padded letters
    batch = ct.data_collator(items)
    loss, grads = loss_and_grads(ct, batch)
    ct.args.consistency_lambda = 0.0
    ce, grads_ce = loss_and_grads(ct, batch)
    terms, agree, hits, top = [], [], [], []
    for g in items:
        p = np.array(engine_posteriors(ct, g))
        m = p.mean(0)
        if objective == "js":
            terms.append(float(np.mean([(q * np.log(q / m)).sum() for q in p])))
        else:
            hits.append(float(m.max() >= 0.3))
            terms.append(hits[-1] * float(np.mean(-np.log(p[:, m.argmax()]))))
        agree.append(float(len(set(p.argmax(1))) == 1))
        top += list(p.max(1))
    expected = float(np.mean(terms))
    assert expected > 1e-4
    assert abs((loss - ce).item() - 2.0 * expected) < 1e-5 * max(1.0, expected)
    assert any(not torch.equal(grads[k], grads_ce[k]) for k in grads), "the term reaches the adapter"
    ct.model.eval()
    with torch.no_grad():
        assert torch.allclose(ct.compute_loss(ct.model, dict(batch)), ce, atol=1e-6)  # evaluation: the cross-entropy alone
    ct.model.train()
    ct.log({})
    logged = ct.state.log_history[-1]
    assert abs(logged["consistency/term"] - expected) < 1e-5 and logged["consistency/agreement"] == np.mean(agree)
    assert abs(logged["consistency/view_max_prob"] - np.mean(top)) < 1e-5
    assert ("consistency/gate_hit_rate" in logged) == (objective == "pseudo_label")
    if objective == "pseudo_label":
        assert logged["consistency/gate_hit_rate"] == np.mean(hits)


# --------------------------------------------------------------------------- recipes and end to end


ARMS = {"js-lambda0": ("js", 0.0, None), "js-lambda1": ("js", 1.0, None), "js-lambda3": ("js", 3.0, None),
        "js-lambda10": ("js", 10.0, None), "pl-tau07-lambda1": ("pseudo_label", 1.0, 0.7),
        "pl-tau07-lambda2": ("pseudo_label", 2.0, 0.7), "pl-tau09-lambda1": ("pseudo_label", 1.0, 0.9)}


def test_the_seven_arms_are_the_papers_and_differ_only_in_the_objective():
    recipes = {name: yaml.safe_load((REPO / "recipes" / "qwen25vl-7b" / f"consistency-{name}.yaml").read_text()) for name in ARMS}
    assert sorted(p.stem for p in (REPO / "recipes" / "qwen25vl-7b").glob("consistency-*.yaml")) == sorted(f"consistency-{a}" for a in ARMS)
    for name, r in recipes.items():
        assert (r["consistency_objective"], r["consistency_lambda"], r.get("consistency_tau")) == ARMS[name]
        assert (r["model_name_or_path"], r["lora_r"], r["lora_alpha"], r["lora_dropout"], r["learning_rate"], r["num_train_epochs"],
                r["effective_batch_size"], r["max_frames"], r["bf16"], r["gradient_checkpointing"], r["seed"], r["freeze_vision_tower"]) == (
            "Qwen/Qwen2.5-VL-7B-Instruct", 16, 32, 0.05, 1e-4, 1, 16, 8, True, True, 0, True)
        assert r.get("lora_target_modules") is None and r["packing"] is False and r["output_dir"].endswith(name)
    shared = [{k: v for k, v in r.items() if not k.startswith("consistency_") and k not in ("output_dir", "run_name")}
              for r in recipes.values()]
    assert all(s == shared[0] for s in shared)
    twin = yaml.safe_load(TINY_RECIPE.read_text())
    assert twin["family"] == "qwen2.5-vl" and twin["consistency_objective"] == "js" and twin["bf16"] is False


def consistency_run(argv: list[str], tmp_path: Path, **overrides):
    """What ``judgetrain.train.setup`` builds for a consistency recipe, from its pieces: the recipe's
    consistency fields set aside, setup() for the model, LoRA and checked records, then the
    ConsistencyTrainer made from them as setup makes its SFTTrainer, with setup's training arguments
    (every field as parsed) plus the consistency fields."""
    from judgetrain import train

    recipe = yaml.safe_load(Path(argv[argv.index("--config") + 1]).read_text())
    consistency = {f.name: recipe.pop(f.name) for f in fields(ConsistencyConfig) if f.name.startswith("consistency_") and f.name in recipe}
    consistency.update(overrides)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    argv = [a if a != str(TINY_RECIPE) else str(tmp_path / "recipe.yaml") for a in argv]
    run = train.setup(argv)
    args = ConsistencyConfig(**{**{f.name: getattr(run.training_args, f.name) for f in fields(run.training_args) if f.init},
                                **consistency})
    evaluation = run.trainer.eval_dataset
    trainer = ConsistencyTrainer(model=run.trainer.model, args=args, train_dataset=run.trainer.train_dataset, eval_dataset=evaluation,
                                 processing_class=run.processor)
    return run, trainer


def test_one_arm_trains_end_to_end_from_a_synthetic_video_mcq_set(tiny_qwen, tmp_path):
    """`judgetrain build video-mcq --synthetic` → `build consistency-views` → the pseudo-label arm of the
    tiny recipe: it trains (every trainable weight of the adapter that gets a gradient moves), evaluates
    and logs the consistency metrics at every logging step, and saves an adapter."""
    from judgetrain.data_builders.video_mcq import SyntheticConfig, build_synthetic

    build_synthetic(SyntheticConfig(out=tmp_path / "vmcq", synthetic=4, seed=5, frames=24, size=(64, 48), progress=False))
    build(ConsistencyViewsConfig(manifest=tmp_path / "vmcq" / "manifest.jsonl", out=tmp_path / "views", budget=2, phases=2,
                                 orderings=2, splits="train=0.5,validation=0.5", progress=False))
    run, trainer = consistency_run(["--config", str(TINY_RECIPE), "--model_name_or_path", str(tiny_qwen), "--datasets",
                                    str(tmp_path / "views"), "--output_dir", str(tmp_path / "out"), "--max_steps", "2",
                                    "--eval_steps", "2", "--save_strategy", "no", "--effective_batch_size", "2"], tmp_path,
                                   consistency_objective="pseudo_label", consistency_tau=0.3)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    history = trainer.state.log_history
    steps = [h for h in history if "loss" in h]
    assert len(steps) == 2 and all({"consistency/term", "consistency/agreement", "consistency/gate_hit_rate",
                                    "consistency/view_max_prob", "consistency/view3_max_prob"} <= set(h) for h in steps)
    assert any("eval_consistency/term" in h and "eval_loss" in h for h in history)
    moved = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(before[n], p)]
    assert any("lora_B" in n for n in moved)
    trainer.save_model(str(tmp_path / "out"))
    assert (tmp_path / "out" / "adapter_model.safetensors").is_file()


def test_judgetrain_train_runs_a_consistency_recipe_and_records_the_objective(views, tiny_qwen, tmp_path):
    """Through `judgetrain.train` itself: the recipe's consistency fields choose ConsistencyTrainer, the
    steps log the consistency metrics, the saved recipe (what the model card reruns) keeps them, and a
    resume that changes the objective's strength is refused (the steps it trained had another loss)."""
    from judgetrain import train

    out = tmp_path / "out"
    argv = ["--config", str(TINY_RECIPE), "--model_name_or_path", str(tiny_qwen), "--datasets", str(views[0]),
            "--output_dir", str(out), "--max_steps", "1", "--eval_strategy", "no", "--save_steps", "1", "--consistency_lambda", "3"]
    run = train.setup(argv)
    assert type(run.trainer) is ConsistencyTrainer and len(run.trainer.train_dataset) == 3
    train.train_and_save(run)
    assert "consistency/term" in run.trainer.state.log_history[0]
    saved = yaml.safe_load((out / "judgetrain_recipe.yaml").read_text())
    assert (saved["consistency_objective"], saved["consistency_lambda"]) == ("js", 3.0) and "consistency_tau" not in saved
    problems = train.check_config(*train.parse([*argv, "--resume_from_checkpoint", "auto", "--consistency_lambda", "1"]), world_size=1)
    assert [p.split(" (")[0] for p in problems] == [f"consistency_lambda: {out / 'checkpoint-1'} was trained with 3.0, this resume "
                                                    "asks for 1.0"]


@pytest.mark.slow
def test_two_ddp_processes_equal_one_process_on_the_same_global_batch(tiny_qwen, tmp_path):
    """Two DDP processes of one question each against one process of one question with two
    accumulation steps (the same two questions per optimizer step): the same weights at every step
    (tests/train/ddp_probe.py), the same losses and the same logged consistency term, because the term is
    a mean over each micro-batch's questions scaled as the Trainer scales the cross-entropy."""
    import os
    import subprocess
    import sys

    from safetensors.torch import load_file

    from judgetrain.data_builders.video_mcq import SyntheticConfig, build_synthetic

    build_synthetic(SyntheticConfig(out=tmp_path / "vmcq", synthetic=6, seed=5, frames=24, size=(64, 48), progress=False))
    build(ConsistencyViewsConfig(manifest=tmp_path / "vmcq" / "manifest.jsonl", out=tmp_path / "views", budget=2, phases=2,
                                 orderings=2, splits="train=1.0", progress=False))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    probe, bin_dir = REPO / "tests" / "train" / "ddp_probe.py", Path(sys.executable).parent

    def launch(name, *cmd, extra_env=None):
        argv = [str(tmp_path / name / "probe"), "--config", str(TINY_RECIPE), "--model_name_or_path", str(tiny_qwen),
                "--datasets", str(tmp_path / "views"), "--output_dir", str(tmp_path / name / "out"), "--max_steps", "3",
                "--save_steps", "3", "--eval_strategy", "no", "--lora_dropout", "0", "--learning_rate", "1e-2",
                "--per_device_train_batch_size", "1", "--effective_batch_size", "2", "--consistency_lambda", "3"]
        done = subprocess.run([*cmd, str(probe), *argv], capture_output=True, text=True, env={**env, **(extra_env or {})},
                              timeout=900, cwd=REPO)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
        return json.loads((tmp_path / name / "out" / "trainer_state.json").read_text())["log_history"]

    ddp = launch("ddp", str(bin_dir / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", extra_env={"ACCELERATE_USE_CPU": "1"})
    one = launch("one", sys.executable)
    for rank in ("rank0", "rank1"):
        assert json.loads((tmp_path / "ddp" / "probe" / rank / "state.json").read_text()) == {
            "distributed_type": "DistributedType.MULTI_CPU", "num_processes": 2}
    for step in range(4):
        rank0, rank1, single = (load_file(tmp_path / name / "probe" / rank / f"step{step}.safetensors")
                                for name, rank in (("ddp", "rank0"), ("ddp", "rank1"), ("one", "rank0")))
        assert all(torch.equal(rank0[k], rank1[k]) for k in rank0), f"the ranks' weights differ after step {step}"
        for k in rank0:
            torch.testing.assert_close(rank0[k], single[k], atol=1e-5, rtol=1e-5, msg=f"step {step}: {k}")
    for key in ("loss", "consistency/term", "consistency/agreement", "consistency/view_max_prob"):
        a, b = ([h[key] for h in history if key in h] for history in (ddp, one))
        assert len(a) == 3
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-5, msg=key)


@pytest.mark.parametrize("arm", [pytest.param(a, marks=() if a in ("js-lambda10", "pl-tau09-lambda1") else pytest.mark.slow)
                                 for a in ARMS])
def test_each_arm_recipe_dry_runs_on_the_tiny_model(arm, views, tiny_qwen, tmp_path):
    """The recipe as written (gradient checkpointing, its objective, λ and τ) for one step on the tiny
    Qwen2.5-VL and view records; two arms by default, all seven with the slow tests (they differ only
    in the consistency fields, see above)."""
    from judgetrain import train

    recipe = REPO / "recipes" / "qwen25vl-7b" / f"consistency-{arm}.yaml"
    run = train.setup(["--config", str(recipe), "--model_name_or_path", str(tiny_qwen), "--datasets", str(views[0]),
                       "--output_dir", str(tmp_path / "o"), "--dtype", "float32", "--report_to", "none", "--bf16", "false",
                       "--max_steps", "1", "--effective_batch_size", "2", "--save_strategy", "no"])
    assert type(run.trainer) is ConsistencyTrainer and run.training_args.gradient_accumulation_steps == 2
    assert (run.training_args.consistency_objective, run.training_args.consistency_lambda) == ARMS[arm][:2]
    run.trainer.train()
    assert run.trainer.state.global_step == 1 and "consistency/term" in run.trainer.state.log_history[0]
