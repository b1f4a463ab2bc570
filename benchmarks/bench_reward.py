"""A reward model against the SFT generative judge, side by side: pairwise accuracy on the same held-out
PRISM items, their agreement, and each one's scoring throughput, in one run.

    python benchmarks/bench_reward.py [--procedures 32] [--steps 300] [--repeats 5] [--out benchmarks/out/reward]

One run, offline, on the tiny random Qwen3-VL (`judgetrain.models.tiny`, seed ``--seed``): a synthetic
PRISM set with pairwise and pointwise records (``--twins``: every pairwise item also shown the other way
round), split by procedure into train and test (held out). Two arms train on the train split with the same
seed, steps, learning rate, LoRA and batch (4 gold-versus-negative comparisons a step):

- **reward**: ``recipes/tiny/qwen3vl-prism-reward.yaml``, Bradley–Terry on the pointwise pairs (each gold
  sequence's record against each of its perturbations; a pair is one training row);
- **judge**: ``recipes/tiny/qwen3vl-prism-pairwise-lora.yaml``, SFT on the pairwise records (answer A or B).

Both are then scored in this process on the test split, on the same items: every (gold, negative) pair of
the test pointwise records (``judgetrain.pairs.sequence_pairs``) and the two pairwise presentations that
show the same two sequences (``pair_key``). The reward model is right on a pair when the gold sequence's
reward is higher (a tie counts as wrong); the judge is right on a presentation when its constrained A/B
choice (``judgetrain.scoring.Scorer.score``) is the gold letter. Reported: each one's accuracy with n and a
95% Wilson interval, per perturbation kind too (the judge per presentation, n = 2 × pairs, and per pair
with both presentations right); their agreement per presentation (both pick the same sequence); as a
reference for the reward model, the accuracy range of ``--null-heads`` random linear heads on the untrained
model's features (the test pairs share gold sequences, so they are not independent); and the scoring
throughput, timed with ``time.perf_counter`` around each full pass over the test items after a warm-up,
interleaved, best and median of ``--repeats``: the reward model in sequences/s (a pointwise record is one
sequence), the judge in pairs/s (prompts/s) and the equivalent sequences/s (a pairwise prompt shows two),
with the engine's default image sharing and without it. Writes ``summary.json``, ``summary.md`` and
``items.jsonl`` to ``--out``; every command it runs is printed. A rerun into the same ``--out`` reuses the
model, data and trained arms there (made with the same ``--procedures``, ``--steps``, ``--learning-rate``
and ``--seed``, else it stops) and redoes the scoring.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
KINDS = ("semantic-1", "semantic-2", "semantic-3", "swap", "swap-nonconsecutive", "shuffle")


def _run(argv: list[str]) -> None:
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    subprocess.run(argv, check=True, cwd=REPO)


def _train(recipe: str, out: Path, *extra: str) -> None:
    if (out / "adapter_model.safetensors").is_file():
        return
    _run([str(BIN / "judgetrain"), "train", str(REPO / "recipes" / "tiny" / recipe), "--output_dir", str(out), *extra])


def _losses(run: Path) -> dict[str, Any]:
    """The mean training loss of the first and of the last quarter of the logged steps, and the training time."""
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    loss = [h["loss"] for h in history if "loss" in h]
    k = max(1, len(loss) // 4)
    runtime = next((h["train_runtime"] for h in history if "train_runtime" in h), None)
    return {
        "first_quarter": sum(loss[:k]) / k,
        "last_quarter": sum(loss[-k:]) / k,
        "steps_logged": len(loss),
        "train_runtime_s": runtime,
    }


def _cell(correct: int, n: int) -> dict[str, Any]:
    from judgetrain.eval.core.metrics import ci95

    return {"accuracy": correct / n if n else None, "correct": correct, "n": n, "ci95": ci95(correct, n)}


def _timed(fn) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python benchmarks/bench_reward.py --procedures 32 --steps 300 --out benchmarks/out/reward\n",
    )
    p.add_argument("--procedures", type=int, default=32, help="synthetic PRISM procedures (gold sequences)")
    p.add_argument("--steps", type=int, default=300, help="training steps of each arm (4 comparisons a step)")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=8, help="items per forward pass when scoring, both arms")
    p.add_argument("--repeats", type=int, default=5, help="timed passes over the test items per arm (best and median reported)")
    p.add_argument("--threads", type=int, default=1, help="torch threads while scoring (1: steadier timings on a shared CPU)")
    p.add_argument("--null-heads", type=int, default=1000, help="random linear heads on the untrained model (a reference)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "reward")
    args = p.parse_args(argv)

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # a rerun reuses the model, data and trained arms it finds in --out (only scoring is redone), so they
    # must have been made with these settings
    made = {k: getattr(args, k) for k in ("procedures", "steps", "learning_rate", "seed")}
    stamp = out / "trained_with.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != made:
        raise SystemExit(
            f"{out} holds a run made with {stamp.read_text().strip()}, not {json.dumps(made)}: "
            "pass another --out, or delete that folder"
        )
    stamp.write_text(json.dumps(made) + "\n")
    model = out / "models" / "qwen3-vl"
    # fmt: off
    if not (model / "config.json").is_file():
        _run([sys.executable, "-m", "judgetrain.models.tiny", "--out", str(out / "models"), "--family", "qwen3-vl",
              "--seed", str(args.seed)])
    data = out / "prism"
    if not (data / "build.json").is_file():
        _run([str(BIN / "judgetrain"), "build", "prism", "--out", str(data), "--synthetic", str(args.procedures),
              "--layouts", "P0", "--modes", "pairwise,pointwise", "--splits", "train=0.75,test=0.25", "--twins",
              "--synthetic_size", "64", "--seed", str(args.seed), "--no-progress"])
    # the same seed, steps, learning rate, LoRA (r 8, no dropout) and batch for both arms: 2 rows a micro-batch,
    # 4 a step, a row being one pair (reward) or one pairwise prompt (judge): 4 gold-vs-negative comparisons a step
    common = ["--model_name_or_path", str(model), "--datasets", str(data), "--seed", str(args.seed),
              "--max_steps", str(args.steps), "--learning_rate", str(args.learning_rate), "--lr_scheduler_type", "constant",
              "--per_device_train_batch_size", "2", "--effective_batch_size", "4",
              "--lora_r", "8", "--lora_alpha", "16", "--lora_dropout", "0.0",
              "--eval_strategy", "no", "--eval_split", "null", "--save_strategy", "no"]
    # fmt: on
    runs = {"reward": out / "reward", "judge": out / "judge"}
    _train("qwen3vl-prism-reward.yaml", runs["reward"], *common)
    _train("qwen3vl-prism-pairwise-lora.yaml", runs["judge"], *common)

    summary: dict = {"settings": vars(args) | {"out": str(out)}}
    summary.update(_evaluate(args, model, data, runs))
    summary["training_loss"] = {arm: _losses(run) for arm, run in runs.items()}
    text = _render(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(text)
    print(text)
    return summary


def _evaluate(args, model: Path, data: Path, runs: dict[str, Path]) -> dict:
    """Both arms on the test split's pairs: accuracy, agreement and throughput."""
    import torch

    from judgetrain import records
    from judgetrain.models import load_reward_model
    from judgetrain.pairs import pair_key, sequence_pairs
    from judgetrain.scoring import Scorer, reward_scores

    test = records.load(data)["test"]
    # decoded once, before any clock starts: both arms time scoring, not PNG decoding
    pointwise = [r for r in test if r["task"] == "pointwise"]
    pairwise = [r for r in test if r["task"] == "pairwise"]
    pairs = sequence_pairs(
        [r["task"] for r in pointwise],
        [r["source"] for r in pointwise],
        [r["layout"] for r in pointwise],
        [r["perturbation"] for r in pointwise],
        [r["meta"] for r in pointwise],
        [r["id"] for r in pointwise],
    )
    shown: dict[tuple, list[int]] = {pair.key: [] for pair in pairs}
    for i, r in enumerate(pairwise):
        key = pair_key(r["source"], r["layout"], r["meta"])
        if key not in shown:
            raise SystemExit(f"pairwise test record {r['id']} ({key}) has no pointwise pair: the build does not match")
        shown[key].append(i)
    if any(len(v) != 2 for v in shown.values()):
        raise SystemExit("every test pair should be shown by exactly two pairwise records (the item and its twin)")

    torch.set_num_threads(args.threads)
    reward_model, reward_processor = load_reward_model(runs["reward"], dtype="float32")
    reward_untrained, _ = load_reward_model(model, dtype="float32")
    load = {"dtype": "float32", "device": "cpu", "batch_size": args.batch_size, "progress": False}
    judge = Scorer.from_pretrained(model, runs["judge"], **load)
    judge_untrained = Scorer.from_pretrained(model, **load)
    # the engine's default shares each distinct image's vision pass across a call (a gold sequence's frames
    # recur in every pair it is in); without sharing, each prompt costs what it would alone
    judge_plain = Scorer(
        judge.model, judge.processor, judge.family, batch_size=args.batch_size, progress=False, share_images=False
    )

    timed = {
        "reward": lambda: reward_scores(reward_model, reward_processor, pointwise, batch_size=args.batch_size, progress=False),
        "judge": lambda: judge.score(pairwise),
        "judge_no_image_sharing": lambda: judge_plain.score(pairwise),
    }
    warm = min(args.batch_size, len(pairwise))
    reward_scores(reward_model, reward_processor, pointwise[:warm], batch_size=args.batch_size, progress=False)
    judge.score(pairwise[:warm])
    judge_plain.score(pairwise[:warm])
    seconds: dict[str, list[float]] = {name: [] for name in timed}
    results: dict[str, Any] = {}
    for _ in range(args.repeats):  # interleaved, so a busy moment of the shared machine hits every arm alike
        for name, fn in timed.items():
            result, dt = _timed(fn)
            seconds[name].append(dt)
            results.setdefault(name, result)
    null = _random_heads(reward_untrained, reward_processor, pointwise, args)
    untrained_choices = judge_untrained.score(pairwise)

    rows = []
    for pair in pairs:
        gold, negative = results["reward"][pair.chosen], results["reward"][pair.rejected]
        for i in shown[pair.key]:
            record, scored = pairwise[i], results["judge"][i]
            gold_letter = record["label"]
            rows.append(
                {
                    "key": list(pair.key),
                    "kind": pair.perturbation,
                    "presentation": json.loads(record["meta"])["presentation"],
                    "reward_gold": gold,
                    "reward_negative": negative,
                    "reward_correct": gold > negative,
                    "judge_choice": scored.prediction,
                    "gold_letter": gold_letter,
                    "judge_correct": scored.prediction == gold_letter,
                    "judge_p_gold": scored.probs[record["choices"].index(gold_letter)],
                    "null_correct": (null[pair.chosen] > null[pair.rejected]).tolist(),
                    "untrained_judge_correct": untrained_choices[i].prediction == gold_letter,
                    "untrained_judge_choice": untrained_choices[i].prediction,
                }
            )
    (Path(args.out).resolve() / "items.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "null_correct"}) + "\n" for r in rows)
    )

    def cells(select) -> dict:
        sub = [r for r in rows if select(r)]
        per_pair = sub[::2]  # each pair's two presentations are adjacent; the reward is one score per pair
        both = [a["judge_correct"] and b["judge_correct"] for a, b in zip(sub[::2], sub[1::2], strict=True)]
        return {
            "pairs": len(per_pair),
            "reward": _cell(sum(r["reward_correct"] for r in per_pair), len(per_pair))
            | {
                "ties": sum(r["reward_gold"] == r["reward_negative"] for r in per_pair),
                "mean_margin": statistics.fmean(r["reward_gold"] - r["reward_negative"] for r in per_pair) if per_pair else None,
            },
            "judge": _cell(sum(r["judge_correct"] for r in sub), len(sub))
            | {"mean_p_gold": statistics.fmean(r["judge_p_gold"] for r in sub) if sub else None},
            "judge_both_presentations": _cell(sum(both), len(both)),
            "agreement": _cell(sum(r["reward_correct"] == r["judge_correct"] for r in sub), len(sub)),
            "random_heads": _null_cell([r["null_correct"] for r in per_pair], sum(r["reward_correct"] for r in per_pair)),
            "untrained_judge": _cell(sum(r["untrained_judge_correct"] for r in sub), len(sub)),
        }

    n_seq, n_prompts = len(pointwise), len(pairwise)

    def rate(name: str, items: int) -> dict:
        v = seconds[name]
        return {"seconds": v, "per_s_best": items / min(v), "per_s_median": items / statistics.median(v)}

    tokens = {"reward": _mean_tokens(reward_processor, pointwise), "judge": _mean_tokens(judge.processor, pairwise)}
    throughput = {"reward": {"sequences": n_seq, "mean_tokens": tokens["reward"], "sequences_per_s": rate("reward", n_seq)}}
    for name in ("judge", "judge_no_image_sharing"):
        throughput[name] = {
            "pairs": n_prompts,
            "mean_tokens": tokens["judge"],
            "pairs_per_s": rate(name, n_prompts),
            "sequences_per_s": rate(name, 2 * n_prompts),
        }
    letters = Counter(r["judge_choice"] for r in rows)
    return {
        "test": {
            "pointwise_records": n_seq,
            "pairwise_records": n_prompts,
            "pairs": len(pairs),
            "golds": len({p.chosen for p in pairs}),
        },
        "accuracy": {"all": cells(lambda r: True)} | {k: cells(lambda r, k=k: r["kind"] == k) for k in KINDS},
        "judge_letters": dict(letters),
        "untrained_judge_letters": dict(Counter(r["untrained_judge_choice"] for r in rows)),
        "contingency": dict(
            Counter(
                f"reward {'right' if r['reward_correct'] else 'wrong'}, judge {'right' if r['judge_correct'] else 'wrong'}"
                for r in rows
            )
        ),
        "throughput": throughput,
        "machine": {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": "cpu"},
    }


def _mean_tokens(processor: Any, items: list[dict]) -> float:
    """The mean length of the items' prompts in tokens, image tokens included, as the models see them."""
    from judgetrain.scoring.prompts import render_prompt

    lengths = [
        len(processor(text=[render_prompt(processor, r["prompt"], None)], images=r["images"])["input_ids"][0]) for r in items
    ]
    return sum(lengths) / len(lengths)


def _random_heads(base: Any, processor: Any, pointwise: list[dict], args) -> Any:
    """``[sequences, heads]`` rewards of ``--null-heads`` random linear heads (standard normal, seeded) on the
    untrained model's last-token hidden state: what an arbitrary readout of the same features scores, a
    reference for the trained model's accuracy that keeps the pairs' dependence (a test gold sequence is in
    every pair of its negatives, so pairs are not independent and a Wilson interval is too narrow)."""
    import numpy as np
    import torch

    from judgetrain.scoring import reward_scores

    hidden = base.config.get_text_config().hidden_size
    weight = torch.randn(args.null_heads, hidden, generator=torch.Generator().manual_seed(args.seed))
    base.score = torch.nn.Linear(hidden, args.null_heads, bias=False)
    with torch.no_grad():
        base.score.weight.copy_(weight)
    pooled: list[Any] = []  # the model's pooled logits, [batch, heads], batch by batch in input order
    handle = base.register_forward_hook(lambda _module, _inputs, output: pooled.append(output.logits.detach()))
    try:
        first = reward_scores(base, processor, pointwise, batch_size=args.batch_size, progress=False, sort_by_length=False)
    finally:
        handle.remove()
    rewards = torch.cat(pooled).numpy()
    if not np.allclose(rewards[:, 0], first):  # the hook saw every batch, in input order
        raise RuntimeError("random-head rewards are not aligned with their sequences")
    return rewards


def _null_cell(correct: list[list[bool]], trained: int) -> dict[str, Any]:
    """The accuracy of each random head on these pairs: its 2.5, 50 and 97.5 percentiles, and the share of heads
    scoring at least ``trained`` pairs right (a one-sided p-value of the trained model against them)."""
    import numpy as np

    if not correct:
        return {"n": 0}
    acc = np.asarray(correct, dtype=float).mean(axis=0)
    lo, mid, hi = (float(x) for x in np.percentile(acc, [2.5, 50, 97.5]))
    return {
        "n": len(correct),
        "p2_5": lo,
        "median": mid,
        "p97_5": hi,
        "share_at_least_trained": float((acc * len(correct) >= trained - 1e-9).mean()),
    }


def _null(cell: dict) -> str:
    if not cell["n"]:
        return "—"
    return f"{_pct(cell['p2_5'])}–{_pct(cell['p97_5'])} (p {cell['share_at_least_trained']:.3f})"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _acc(cell: dict) -> str:
    lo, hi = cell["ci95"] or (None, None)
    return f"{_pct(cell['accuracy'])} [{_pct(lo)}, {_pct(hi)}] ({cell['n']})"


def _render(summary: dict) -> str:
    lines = [
        "| items | reward model: gold > negative, % [95% CI] (pairs) | random heads, 95% range (share ≥ trained) | generative judge: gold "
        "letter, % [95% CI] (presentations) | judge, both presentations right (pairs) | agreement (presentations) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kind, c in summary["accuracy"].items():
        if c["pairs"]:
            lines.append(
                f"| {kind} | {_acc(c['reward'])} | {_null(c['random_heads'])} | {_acc(c['judge'])} | "
                f"{_acc(c['judge_both_presentations'])} | {_acc(c['agreement'])} |"
            )
    t, s = summary["throughput"], summary["settings"]
    lines += [
        "",
        f"| scoring the test split (batch {s['batch_size']}, {s['threads']} thread(s), best / median of {s['repeats']}) "
        "| items/s | sequences/s |",
        "| --- | --- | --- |",
        f"| reward model ({t['reward']['sequences']} sequences, one a prompt; {t['reward']['mean_tokens']:.0f} tokens) | {_rate(t['reward']['sequences_per_s'])} | "
        f"{_rate(t['reward']['sequences_per_s'])} |",
    ]
    for name, label in (("judge", "generative judge, A/B"), ("judge_no_image_sharing", "same, images not shared across prompts")):
        lines.append(
            f"| {label} ({t[name]['pairs']} prompts, two sequences each; {t[name]['mean_tokens']:.0f} tokens) | {_rate(t[name]['pairs_per_s'])} | "
            f"{_rate(t[name]['sequences_per_s'])} |"
        )
    a = summary["accuracy"]["all"]
    loss = summary["training_loss"]
    lines += [
        "",
        f"reward: ties {a['reward']['ties']}, mean margin (gold − negative) {a['reward']['mean_margin']:.4g}; "
        f"judge: letters {summary['judge_letters']}, mean P(gold letter) {a['judge']['mean_p_gold']:.3f}; untrained judge: "
        f"{_acc(a['untrained_judge'])}, letters {summary['untrained_judge_letters']}",
        f"per presentation: {summary['contingency']}",
        "training, loss of the first → last quarter of the steps (train_runtime): "
        + "; ".join(
            f"{arm} {v['first_quarter']:.4f} → {v['last_quarter']:.4f} ({v['train_runtime_s']:.1f} s)" for arm, v in loss.items()
        ),
    ]
    return "\n".join(lines) + "\n"


def _rate(r: dict) -> str:
    return f"{r['per_s_best']:.1f} / {r['per_s_median']:.1f}"


if __name__ == "__main__":
    main()
