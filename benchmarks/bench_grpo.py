"""GRPO from an SFT warm-up, side by side: SFT only, SFT + GRPO with the correct reward, and SFT + GRPO with
the correct and the order-consistency rewards, on PRISM pairwise twins, evaluated on held-out twins.

    python benchmarks/bench_grpo.py [--procedures 24] [--sft-steps 20] [--grpo-steps 40] [--out benchmarks/out/grpo]

One run, offline, on the tiny random Qwen3-VL (`judgetrain.models.tiny`, seed ``--seed``): a synthetic
PRISM set built with ``--twins`` (every pairwise item also shown the other way round), split by
procedure into train and test; a short SFT warm-up (``recipes/tiny/qwen3vl-prism-pairwise-lora.yaml``,
which teaches the answer's form, a letter); then two GRPO runs from its adapter (``--init_adapter``,
``recipes/tiny/qwen3vl-prism-grpo.yaml``) with the same seed, steps and batches, one rewarded for the
right letter alone, one also for agreeing with itself across the twins. Every arm is scored with
``judgetrain eval judge`` (constrained A/B scoring) on the test twins and ``judgetrain eval bias``
gives its presentation-flip rate (pairs whose preference changes when the two sequences swap places).
Reports, per arm: accuracy and flip rate with n and 95% intervals, and for the GRPO arms the mean
correct (and consistency) reward of the first and last quarter of the steps; writes ``summary.json``
and ``summary.md`` to ``--out``. Every command it runs is printed, so each arm can be rerun alone.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ARMS = ("sft", "grpo-correct", "grpo-consistency")


def _run(argv: list[str]) -> None:
    print("$ " + " ".join(shlex.quote(a) for a in argv), flush=True)
    subprocess.run(argv, check=True, cwd=REPO)


def _train(recipe: str, out: Path, *extra: str) -> None:
    if (out / "adapter_model.safetensors").is_file():
        return
    _run([str(BIN / "judgetrain"), "train", str(REPO / "recipes" / "tiny" / recipe), "--output_dir", str(out), *extra])


def _rewards(run: Path) -> dict[str, list[float]]:
    """Each reward's mean at each logged step of a GRPO run."""
    history = json.loads((run / "trainer_state.json").read_text())["log_history"]
    series: dict[str, list[float]] = {}
    for h in history:
        for key, value in h.items():
            if key.startswith("rewards/") and key.endswith("/mean"):
                series.setdefault(key.split("/")[1], []).append(value)
    return series


def _quarters(values: list[float]) -> tuple[float, float]:
    k = max(1, len(values) // 4)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def _evaluate(arm: str, adapter: Path, model: Path, data: Path, out: Path) -> dict:
    results = out / f"eval-{arm}"
    if not (results / "metrics.json").is_file():
        _run([str(BIN / "judgetrain"), "eval", "judge", "--model", str(model), "--adapter", str(adapter), "--data", str(data),
              "--split", "test", "--tasks", "pairwise", "--out", str(results)])
    _run([str(BIN / "judgetrain"), "eval", "bias", str(results), "--out", str(out / f"bias-{arm}")])
    pairwise = json.loads((results / "metrics.json").read_text())["pairwise"]["all"]
    (bias_run,) = json.loads((out / f"bias-{arm}" / "bias.json").read_text())["runs"].values()
    flips = bias_run.get("presentation_flips")
    return {"accuracy": pairwise["accuracy"], "accuracy_ci95": pairwise["accuracy_ci95"], "n": pairwise["n"], "flips": flips}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python benchmarks/bench_grpo.py --procedures 24 --sft-steps 20 --grpo-steps 40\n")
    p.add_argument("--procedures", type=int, default=24, help="synthetic PRISM procedures (gold sequences)")
    p.add_argument("--sft-steps", type=int, default=20)
    p.add_argument("--grpo-steps", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timecatch-clips", type=int, default=160, help="synthetic clips of the frame-noise detection part (0: skip it)")
    p.add_argument("--timecatch-sft-steps", type=int, default=8)
    p.add_argument("--timecatch-grpo-steps", type=int, default=40)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "grpo")
    args = p.parse_args(argv)

    from judgetrain.data_builders import prism
    from judgetrain.models.tiny import build_tiny

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = out / "models" / "qwen3-vl"
    if not (model / "config.json").is_file():
        build_tiny("qwen3-vl", model, seed=args.seed)
    data = out / "prism-twins"
    if not (data / "build.json").is_file():
        prism.build(prism.PrismConfig(out=data, synthetic=args.procedures, seed=args.seed, layouts=("P0",), modes=("pairwise",),
                                      synthetic_size=64, splits={"train": 0.75, "test": 0.25}, twins=True, progress=False))
    common = ["--model_name_or_path", str(model), "--datasets", str(data), "--seed", str(args.seed)]
    runs = {arm: out / arm for arm in ARMS}
    _train("qwen3vl-prism-pairwise-lora.yaml", runs["sft"], *common, "--max_steps", str(args.sft_steps),
           "--eval_strategy", "no", "--eval_split", "null")
    grpo = [*common, "--init_adapter", str(runs["sft"]), "--max_steps", str(args.grpo_steps), "--save_strategy", "no"]
    _train("qwen3vl-prism-grpo.yaml", runs["grpo-correct"], *grpo, "--rewards", "correct", "--consistency_weight", "null")
    _train("qwen3vl-prism-grpo.yaml", runs["grpo-consistency"], *grpo)

    summary: dict = {"settings": vars(args) | {"out": str(out)}, "arms": {}}
    for arm in ARMS:
        row = _evaluate(arm, runs[arm], model, data, out)
        if arm != "sft":
            row["rewards"] = {name: dict(zip(("first_quarter", "last_quarter"), _quarters(v), strict=True))
                              for name, v in _rewards(runs[arm]).items()}
        summary["arms"][arm] = row
    if args.timecatch_clips:
        summary["timecatch"] = _timecatch(args, model, out)
    text = _table(summary) + (_timecatch_table(summary["timecatch"]) if args.timecatch_clips else "")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(text)
    print(text)
    return summary


# ----------------------------------------------------------------------------- a task the tiny model learns


def _timecatch(args, model: Path, out: Path) -> dict:
    """Frame-noise detection (TimeCatch frame_detect, yes/no), which the tiny model learns when fully fine-tuned
    (benchmarks/README.md, "Pipeline proof"): a short full SFT warm-up, then GRPO from that model with the correct
    reward (sampling biased toward the tokens of "yes" and "no", which the tiny model does not write by chance);
    both scored by `judgetrain eval timecatch` on the validation sequences."""
    from judgetrain.data_builders import timecatch

    data = out / "timecatch"
    if not (data / "build.json").is_file():
        timecatch.build(timecatch.TimeCatchConfig(out=data, synthetic=args.timecatch_clips, seed=args.seed,
                                                  lpips_random_backbone=True, tasks=("frame_detect",), subsets=("main",),
                                                  progress=False))
    full = ["--use_peft", "false", "--freeze_vision_tower", "false", "--freeze_projector", "false", "--datasets", str(data),
            "--seed", str(args.seed), "--eval_strategy", "no", "--eval_split", "null"]
    sft, grpo = out / "tc-sft", out / "tc-sft-grpo"
    _train("qwen3vl-timecatch-lora.yaml", sft, *full, "--model_name_or_path", str(model), "--max_steps",
           str(args.timecatch_sft_steps), "--per_device_train_batch_size", "8", "--effective_batch_size", "8",
           "--save_strategy", "no")
    _train("qwen3vl-prism-grpo.yaml", grpo, *full, "--model_name_or_path", str(sft), "--tasks", "frame_detect",
           "--rewards", "correct", "--consistency_weight", "null", "--num_generations", "4",
           "--per_device_train_batch_size", "16", "--effective_batch_size", "16", "--max_steps", str(args.timecatch_grpo_steps),
           "--generation_kwargs", json.dumps({"sequence_bias": [[[308], 30.0], [[284], 30.0]]}), "--save_strategy", "no")
    rows = {}
    for arm, folder in (("sft", sft), ("sft+grpo", grpo)):
        results = out / f"eval-tc-{arm}"
        if not (results / "predictions.jsonl").is_file():
            _run([str(BIN / "judgetrain"), "eval", "timecatch", "--model", str(folder), "--data", str(data), "--split",
                  "validation", "--out", str(results)])
        preds = [json.loads(line) for line in (results / "predictions.jsonl").read_text().splitlines() if line.strip()]
        correct = sum(bool(r.get("correct")) for r in preds)
        from judgetrain.eval.core.metrics import ci95

        rows[arm] = {"accuracy": correct / len(preds), "ci95": ci95(correct, len(preds)), "n": len(preds)}
    reward = _rewards(grpo).get("correct", [])
    rows["sft+grpo"]["correct_reward"] = dict(zip(("first_quarter", "last_quarter"), _quarters(reward), strict=True))
    rows["sft+grpo"]["correct_reward_per_step"] = reward
    return rows


def _timecatch_table(rows: dict) -> str:
    lines = ["", "| frame-noise detection | accuracy % [95% CI] (n) | correct reward, first → last quarter of GRPO |",
             "| --- | --- | --- |"]
    for arm, row in rows.items():
        r = row.get("correct_reward")
        trend = "—" if r is None else f"{r['first_quarter']:.3f} → {r['last_quarter']:.3f}"
        lines.append(f"| {arm} | {_pct(row['accuracy'])} [{_pct(row['ci95'][0])}, {_pct(row['ci95'][1])}] ({row['n']}) | {trend} |")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _table(summary: dict) -> str:
    lines = ["| arm | accuracy % [95% CI] (n) | flip rate % [95% CI] (pairs) | correct reward, first → last quarter | "
             "consistency reward, first → last quarter |", "| --- | --- | --- | --- | --- |"]
    for arm, row in summary["arms"].items():
        lo, hi = row["accuracy_ci95"]
        flips = row["flips"] or {}
        interval = flips.get("ci95") or [None, None]
        rewards = row.get("rewards", {})

        def trend(name: str, rewards: dict = rewards) -> str:
            r = rewards.get(name)
            return "—" if r is None else f"{r['first_quarter']:.3f} → {r['last_quarter']:.3f}"

        lines.append(f"| {arm} | {_pct(row['accuracy'])} [{_pct(lo)}, {_pct(hi)}] ({row['n']}) | "
                     f"{_pct(flips.get('rate'))} [{_pct(interval[0])}, {_pct(interval[1])}] ({flips.get('n', '—')}) | "
                     f"{trend('correct')} | {trend('consistency')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
