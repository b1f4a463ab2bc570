"""Run the offline quickstart: tiny models of every family and a synthetic TimeCatch set.

Everything is built locally (no downloads). Later steps (training, evaluation)
extend this as they land.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.strip().splitlines()[0]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "example:\n  judgetrain quickstart --out quickstart --clips 24\n"
    p.add_argument("--out", type=Path, default=Path("quickstart"), help="folder for everything the quickstart makes")
    p.add_argument("--clips", type=int, default=24, help="synthetic physics clips to build TimeCatch from")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--lpips-random-backbone", action="store_true",
                   help="use an untrained LPIPS backbone when AlexNet's ImageNet weights are not available offline")


def main(args: argparse.Namespace) -> int:
    from judgetrain.data_builders import timecatch
    from judgetrain.models import load_model_and_processor
    from judgetrain.models.tiny import build_all
    from judgetrain.perceptual import backbone_weights_path

    out = args.out.resolve()
    t0 = time.perf_counter()
    print(f"[1/2] tiny models of every family -> {out / 'models'}")
    for family, path in build_all(out / "models", seed=args.seed).items():
        model, processor = load_model_and_processor(path)
        n = sum(p.numel() for p in model.parameters())
        print(f"      {family:<16} {n / 1e3:8.1f}k parameters  {path}")

    random_backbone = args.lpips_random_backbone
    if not random_backbone and not backbone_weights_path("alex").is_file():
        print(f"      note: AlexNet weights for LPIPS are not at {backbone_weights_path('alex')};"
              " using a random backbone for this offline demo (see README, 'LPIPS weights').")
        random_backbone = True
    print(f"[2/2] synthetic TimeCatch set from {args.clips} physics clips -> {out / 'timecatch'}")
    cfg = timecatch.TimeCatchConfig(out=out / "timecatch", synthetic=args.clips, seed=args.seed, lpips_pretrained=not random_backbone)
    info = timecatch.build(cfg)
    timecatch.print_summary(info, cfg.out)
    print(f"quickstart finished in {time.perf_counter() - t0:.0f} s; everything is under {out}")
    return 0
