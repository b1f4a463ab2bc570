"""Pruning benchmark: the same trial configurations swept with the median pruner and without.

    python benchmarks/bench_sweep.py [--trials 10] [--max-steps 12] [--eval-steps 2] [--out benchmarks/out/sweep]

Draws ``--trials`` configurations from ``recipes/spaces/tiny.yaml`` once (a
seeded random sampler), enqueues the same list into two studies and runs both
through `judgetrain sweep` on the tiny Qwen3-VL and a synthetic PRISM set
(objective: validation loss): one with ``--pruner median`` and one with
``--pruner none``. Reports the training steps every trial ran (from its
trainer state), the saving, and the best objective of each; writes
``summary.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python benchmarks/bench_sweep.py --trials 10 --max-steps 12\n")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=12)
    p.add_argument("--eval-steps", type=int, default=2)
    p.add_argument("--startup-trials", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "sweep")
    args = p.parse_args(argv)

    import optuna

    from judgetrain import sweep
    from judgetrain.data_builders import prism
    from judgetrain.models.tiny import build_tiny

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    model = build_tiny("qwen3-vl", out / "model", seed=args.seed)
    data = out / "prism"
    if not (data / "build.json").is_file():
        prism.build(prism.PrismConfig(out=data, synthetic=12, seed=args.seed, layouts=("P0",), modes=("pairwise",),
                                      synthetic_size=64, progress=False))
    recipe = yaml.safe_load((REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml").read_text())
    recipe.update(model_name_or_path=str(model), datasets=[str(data)], max_steps=args.max_steps, eval_steps=args.eval_steps)
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    space = sweep.SearchSpace.load(REPO / "recipes" / "spaces" / "tiny.yaml")
    draw = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=args.seed))
    configs = [space.suggest(draw.ask()) for _ in range(args.trials)]
    (out / "configs.yaml").write_text(yaml.safe_dump(configs))

    summary: dict = {"trials": args.trials, "max_steps": args.max_steps, "eval_steps": args.eval_steps, "runs": {}}
    for pruner in ("median", "none"):
        storage = f"journal:{out / pruner}.journal"
        Path(storage.removeprefix("journal:")).unlink(missing_ok=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "judgetrain", "sweep", str(out / "recipe.yaml"), "--space",
                        str(REPO / "recipes" / "spaces" / "tiny.yaml"), "--trials", str(args.trials), "--storage", storage,
                        "--study", pruner, "--out", str(out / pruner), "--objective", "eval_loss", "--pruner", pruner,
                        "--startup-trials", str(args.startup_trials), "--enqueue", str(out / "configs.yaml")], check=True)
        study = optuna.load_study(study_name=pruner, storage=sweep.storage_from_url(storage, heartbeat_interval=None))
        steps = [json.loads((out / pruner / f"trial-{t.number:04d}" / "trainer_state.json").read_text())["global_step"]
                 for t in study.trials]
        complete = [t for t in study.trials if t.state.name == "COMPLETE"]
        summary["runs"][pruner] = {
            "seconds": round(time.monotonic() - t0, 1), "trial_steps": sum(steps), "steps_per_trial": steps,
            "pruned": sum(t.state.name == "PRUNED" for t in study.trials),
            "best_value": min(t.value for t in complete), "best_params": min(complete, key=lambda t: t.value).params,
        }
    on, off = summary["runs"]["median"], summary["runs"]["none"]
    summary["steps_saved"] = 1 - on["trial_steps"] / off["trial_steps"]
    summary["time_saved"] = 1 - on["seconds"] / off["seconds"]
    summary["same_best"] = on["best_params"] == off["best_params"]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"} | {
        p: {k: v for k, v in r.items() if k != "steps_per_trial"} for p, r in summary["runs"].items()}, indent=2))
    print(f"summary written to {out / 'summary.json'}")
    return summary


if __name__ == "__main__":
    main()
