"""Run the offline quickstart: tiny models, a synthetic TimeCatch set, zero-shot evaluation, a short LoRA run, evaluation of the adapter.

Everything is built locally (no downloads). A tiny random model learns
little; the point is that every stage runs end to end. With a GPU and hub
access the same pipeline takes a real model, e.g.
`judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml --accelerate-config single_gpu --num-processes 1`.
Docs: "get-started/quickstart.md", "reference/commands/quickstart.md".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .config import arg
from .io import write_text
from .models.tiny.folder import DEFAULT_SEED

REPO_RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


@dataclass
class QuickstartConfig:
    """``judgetrain quickstart``'s options."""

    out: Path = arg(Path("quickstart"), "folder for everything the quickstart makes")
    clips: int = arg(24, "synthetic physics clips to build TimeCatch from", minimum=1)
    seed: int = arg(DEFAULT_SEED, "seed of the tiny models, the synthetic clips and training", minimum=0, maximum=2**32 - 1)
    train_steps: int = arg(6, "LoRA steps on the tiny Qwen3-VL (0 to skip training)", minimum=0)
    eval_limit: int = arg(
        60, "validation records scored before and after training, a stratified sample (--sample; 0 for all)", minimum=0
    )
    lpips_random_backbone: bool = arg(
        False, "use an untrained LPIPS backbone when AlexNet's ImageNet weights are not available offline"
    )
    overwrite: bool = arg(
        False,
        "replace what an earlier quickstart with other settings left in --out (a rerun with "
        "the same settings resumes or finds nothing to do; other settings are refused without this)",
    )


def make_parser():
    from .config import make_parser as make_config_parser

    return make_config_parser(
        QuickstartConfig,
        "judgetrain quickstart",
        __doc__.strip().splitlines()[0],
        "examples:\n"
        "  judgetrain quickstart\n"
        "  judgetrain quickstart --out quickstart-small --clips 6 --train-steps 0 --eval-limit 8"
        "   # no training: build and zero-shot only\n",
    )


def _build_models(out: Path, seed: int, overwrite: bool) -> dict[str, Path]:
    """Stage 1: the tiny models of the quickstart's families under ``out / "models"`` (family ->
    checkpoint folder), each listed with its parameter count; folders holding them already are
    kept as they are, other models there are refused unless ``overwrite``."""
    from judgetrain.models import load_model_and_processor
    from judgetrain.models.tiny.builder import QUICKSTART_FAMILIES, build_all

    print(f"[1/5] tiny models of {', '.join(QUICKSTART_FAMILIES)} -> {out / 'models'}")
    models = build_all(out / "models", seed=seed, overwrite=overwrite)
    for family, path in models.items():
        model, _ = load_model_and_processor(path)
        n = sum(p.numel() for p in model.parameters())
        print(f"      {family:<16} {n / 1e3:8.1f}k parameters  {path}")
    return models


def _build_timecatch(cfg: QuickstartConfig, out: Path) -> Path:
    """Stage 2: the synthetic TimeCatch set of ``cfg.clips`` clips under ``out / "timecatch"`` (its
    folder is returned). LPIPS falls back to a random backbone when AlexNet's weights are not
    available offline, and says so."""
    from judgetrain.data_builders.timecatch.command import build, print_summary
    from judgetrain.data_builders.timecatch.config import TimeCatchConfig
    from judgetrain.perceptual import backbone_weights_path

    random_backbone = cfg.lpips_random_backbone
    if not random_backbone and not backbone_weights_path("alex").is_file():
        print(
            f"      note: AlexNet weights for LPIPS are not at {backbone_weights_path('alex')};"
            " using a random backbone for this offline demo (docs: how-to/real-checkpoints.md, 'LPIPS weights')."
        )
        random_backbone = True
    print(f"[2/5] synthetic TimeCatch set from {cfg.clips} physics clips -> {out / 'timecatch'}")
    data = TimeCatchConfig(
        out=out / "timecatch", synthetic=cfg.clips, seed=cfg.seed, lpips_random_backbone=random_backbone, overwrite=cfg.overwrite
    )
    info = build(data)
    print_summary(info, data.out)
    return data.out


def _train_lora(cfg: QuickstartConfig, model: Path, data: Path, run_dir: Path) -> None:
    """Stage 4: ``cfg.train_steps`` LoRA steps of the tiny recipe (:data:`REPO_RECIPE`) on ``model``
    and the TimeCatch set ``data``, the run written to ``run_dir``."""
    from judgetrain.train.run import main as train

    print(
        f"[4/5] LoRA on the tiny Qwen3-VL, {cfg.train_steps} steps ({REPO_RECIPE.relative_to(REPO_RECIPE.parents[2])}) -> {run_dir}"
    )
    train(
        [
            "--config",
            str(REPO_RECIPE),
            "--model_name_or_path",
            str(model),
            "--datasets",
            str(data),
            "--output_dir",
            str(run_dir),
            "--max_steps",
            str(cfg.train_steps),
            "--seed",
            str(cfg.seed),
            *(["--overwrite"] if cfg.overwrite else []),
        ]
    )


def _report(runs: list[Path], names: list[str], results: Path, out: Path, t0: float) -> None:
    """The comparison of the evaluated ``runs`` (``results / "comparison.md"``, printed), the run
    browser (``results / "view"``), and where everything is; ``t0``: the quickstart's start
    (:func:`time.perf_counter`)."""
    from judgetrain.eval.core.compare import compare
    from judgetrain.eval.view.page import write_view

    table = compare(runs, names)["markdown"]
    write_text(results / "comparison.md", table + "\n")
    print("\nAccuracy (%) per task and source, and the change after training:\n" + table)
    print(
        f"\nReports: {results / 'zero-shot' / 'report.md'}"
        + (f" and {results / 'lora' / 'report.md'}" if len(runs) > 1 else "")
        + f"; comparison: {results / 'comparison.md'}"
    )
    page = write_view(runs, results / "view", names, progress=False)  # the run browser: frames, prompts, posteriors
    print(f"quickstart finished in {time.perf_counter() - t0:.0f} s; everything is under {out}")
    print(
        "A tiny random model scores near chance (the Random row), before and after a few LoRA steps: this run shows\n"
        "that every stage works end to end, not a judge. On a machine with hub access and a GPU, the same pipeline\n"
        "with a real model:\n"
        "  judgetrain eval timecatch --model Qwen/Qwen3-VL-2B-Instruct --data quickstart/timecatch --split validation --out results/qw3-2b\n"
        "  judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml --accelerate-config single_gpu --num-processes 1"
    )
    print(f"\nRun page (every item's frames, prompt and posterior; open it in a browser): {page}")


def main(cfg: QuickstartConfig) -> int:
    out = cfg.out.resolve()
    t0 = time.perf_counter()
    models = _build_models(out, cfg.seed, cfg.overwrite)
    data = _build_timecatch(cfg, out)

    from judgetrain.eval.timecatch.command import evaluate

    limit = cfg.eval_limit or None
    results = out / "results"
    print(f"[3/5] zero-shot evaluation of the tiny Qwen3-VL on the validation split -> {results / 'zero-shot'}")
    evaluate(
        str(models["qwen3-vl"]),
        data,
        results / "zero-shot",
        split="validation",
        sample=limit,
        progress=False,
        overwrite=cfg.overwrite,
    )
    runs, names = [results / "zero-shot"], ["zero-shot"]
    if cfg.train_steps and REPO_RECIPE.is_file():
        run_dir = out / "runs" / "tiny-qwen3vl-timecatch"
        _train_lora(cfg, models["qwen3-vl"], data, run_dir)
        print(f"[5/5] evaluation of the adapter -> {results / 'lora'}")
        evaluate(
            str(models["qwen3-vl"]),
            data,
            results / "lora",
            adapter=str(run_dir),
            split="validation",
            sample=limit,
            progress=False,
            overwrite=cfg.overwrite,
        )
        runs.append(results / "lora")
        names.append("lora")
    else:
        why = "--train-steps 0" if not cfg.train_steps else f"the tiny recipe {REPO_RECIPE} is not here (run from a checkout)"
        print(f"[4/5] [5/5] training skipped: {why}")
    _report(runs, names, results, out, t0)
    return 0
