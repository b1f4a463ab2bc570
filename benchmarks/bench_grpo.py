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
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "summary.md").write_text(_table(summary))
    print(_table(summary))
    return summary


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
