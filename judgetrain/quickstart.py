"""Run the offline quickstart: tiny models, a synthetic TimeCatch set, and a short LoRA run.

Everything is built locally (no downloads). A tiny random model learns
little; the point is that every stage runs end to end. With a GPU and hub
access the same pipeline takes a real model, e.g.
`judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml --accelerate-config zero3`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

REPO_RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.strip().splitlines()[0]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "example:\n  judgetrain quickstart --out quickstart --clips 24\n"
    p.add_argument("--out", type=Path, default=Path("quickstart"), help="folder for everything the quickstart makes")
    p.add_argument("--clips", type=int, default=24, help="synthetic physics clips to build TimeCatch from")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--train-steps", type=int, default=6, help="LoRA steps on the tiny Qwen3-VL (0 to skip training)")
    p.add_argument("--lpips-random-backbone", action="store_true",
                   help="use an untrained LPIPS backbone when AlexNet's ImageNet weights are not available offline")


def main(args: argparse.Namespace) -> int:
    from judgetrain.data_builders import timecatch
    from judgetrain.models import load_model_and_processor
    from judgetrain.models.tiny import build_all
    from judgetrain.perceptual import backbone_weights_path

    out = args.out.resolve()
    t0 = time.perf_counter()
    print(f"[1/3] tiny models of every family -> {out / 'models'}")
    models = build_all(out / "models", seed=args.seed)
    for family, path in models.items():
        model, _ = load_model_and_processor(path)
        n = sum(p.numel() for p in model.parameters())
        print(f"      {family:<16} {n / 1e3:8.1f}k parameters  {path}")

    random_backbone = args.lpips_random_backbone
    if not random_backbone and not backbone_weights_path("alex").is_file():
        print(f"      note: AlexNet weights for LPIPS are not at {backbone_weights_path('alex')};"
              " using a random backbone for this offline demo (see README, 'LPIPS weights').")
        random_backbone = True
    print(f"[2/3] synthetic TimeCatch set from {args.clips} physics clips -> {out / 'timecatch'}")
    cfg = timecatch.TimeCatchConfig(out=out / "timecatch", synthetic=args.clips, seed=args.seed, lpips_pretrained=not random_backbone)
    info = timecatch.build(cfg)
    timecatch.print_summary(info, cfg.out)

    if args.train_steps and REPO_RECIPE.is_file():
        from judgetrain import train

        run_dir = out / "runs" / "tiny-qwen3vl-timecatch"
        print(f"[3/3] LoRA on the tiny Qwen3-VL, {args.train_steps} steps ({REPO_RECIPE.relative_to(REPO_RECIPE.parents[2])}) -> {run_dir}")
        train.main(["--config", str(REPO_RECIPE), "--model_name_or_path", str(models["qwen3-vl"]), "--datasets", str(cfg.out),
                    "--output_dir", str(run_dir), "--max_steps", str(args.train_steps), "--seed", str(args.seed)])
    elif args.train_steps:
        print(f"[3/3] skipped: the tiny recipe {REPO_RECIPE} is not here (run the quickstart from a checkout)")
    print(f"quickstart finished in {time.perf_counter() - t0:.0f} s; everything is under {out}")
    print("A tiny random model learns little: this shows the pipeline runs end to end. With a GPU and hub access, train a real judge:\n"
          "  judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml --accelerate-config zero3")
    return 0
