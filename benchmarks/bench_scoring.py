"""Scoring-engine benchmark: batched vs one-at-a-time constrained scoring, and multi-token
choices with prefix reuse vs one full forward pass per choice, measured side by side in one run.

    python benchmarks/bench_scoring.py [--items 32] [--frames 8] [--repeats 3] [--device cpu]
    python benchmarks/bench_scoring.py --model /path/to/Qwen3-VL-2B-Instruct --device cuda --dtype bfloat16

By default it builds tiny models of each family (judgetrain.models.tiny) into a temporary
folder; --model scores a real checkpoint instead. Items are synthetic TimeCatch-like records
(n frames of 64x64 noise): a yes/no question for the batching comparison and "which two
frames were swapped" with every pair "i and j" as a choice (multi-token) for the prefix
comparison. Both sides of each comparison must agree to 1e-4 (fp32) or the run fails.
Prints a table and writes benchmarks/out/scoring.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def _records(n: int, frames: int, task: str, seed: int = 0) -> list[dict]:
    from judgetrain import records

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        images = [Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8), "RGB") for _ in range(frames)]
        if task == "temporal_detect":
            choices, text = ["yes", "no"], "Has any pair of neighbouring images been swapped? Reply with only 'yes' or 'no'."
        else:
            choices = [f"{a} and {b}" for a, b in itertools.combinations(range(1, frames + 1), 2)]
            text = "Which two images were swapped? Reply with the two image numbers in the form 'i and j'."
        text = f"You are given a sequence of {frames} images. " + text + " Scene " * int(rng.integers(0, 12))
        out.append(records.make_record(id=f"b{i}", task=task, images=images, instruction=text, answer=choices[0],
                                       choices=choices, label=choices[0], source="bench", perturbation="none",
                                       position=-1, n_frames=frames, layout="A", meta={}))
    return out


def _full_pass_per_choice(model, processor, item: dict, prefill: str | None) -> list[float]:
    """The naive way: render prompt + choice, process and run a whole forward pass for every choice."""
    from judgetrain.scoring import render_prompt

    text = render_prompt(processor, item["prompt"], prefill)
    tok = processor.tokenizer
    n_prompt = len(tok(text, add_special_tokens=False)["input_ids"])
    out = []
    for choice in item["choices"]:
        n = len(tok(text + choice, add_special_tokens=False)["input_ids"]) - n_prompt
        inputs = processor(text=[text + choice], images=[item["images"]], return_tensors="pt").to(model.device)
        inputs = {k: v.to(model.dtype) if v.is_floating_point() else v for k, v in inputs.items()}
        with torch.inference_mode():
            logp = model(**inputs).logits[0].float().log_softmax(-1)
        ids = inputs["input_ids"][0]
        length = ids.shape[0]
        out.append(sum(float(logp[length - n - 1 + k, ids[length - n + k]]) for k in range(n)))
    return out


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _interleaved(fns: dict, repeats: int) -> tuple[dict[str, float], dict[str, object]]:
    """Best (minimum) seconds of each function over ``repeats`` rounds, the functions taking
    turns within a round so that a change in machine load hits all of them alike. The minimum,
    not the median: on a shared machine other processes only ever add time."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for key, fn in fns.items():
            _sync()
            t = time.perf_counter()
            results[key] = fn()
            _sync()
            times[key].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}, results


def bench_model(name: str, path: Path, args) -> dict:
    from judgetrain.scoring import Scorer

    scorer = Scorer.from_pretrained(path, device=args.device, dtype=args.dtype, batch_size=args.batch_size, progress=False)
    model, processor = scorer.model, scorer.processor
    yes_no = _records(args.items, args.frames, "temporal_detect")
    pairs = _records(args.pair_items, args.frames, "temporal_localize", seed=1)
    single = Scorer(model, processor, scorer.family, batch_size=1, progress=False)
    scorer.score(yes_no[: args.batch_size])  # warm-up, at the batch shapes measured below
    scorer.score(pairs[:1])
    _full_pass_per_choice(model, processor, pairs[0], scorer.prefill)

    # 1. batched vs one at a time: same items, same engine, only batch_size differs
    t, r = _interleaved({"batched": lambda: scorer.score(yes_no), "single": lambda: single.score(yes_no)}, args.repeats)
    t_batched, t_single = t["batched"], t["single"]
    diff_batch = max(abs(a - b) for x, y in zip(r["batched"], r["single"]) for a, b in zip(x.raw_logprobs, y.raw_logprobs))

    # 2. multi-token choices: prefix encoded once + one pass over all continuations vs a full pass per choice
    n_choices = len(pairs[0]["choices"])
    t, r = _interleaved({"prefix1": lambda: single.score(pairs), "prefixb": lambda: scorer.score(pairs),
                         "full": lambda: [_full_pass_per_choice(model, processor, it, scorer.prefill) for it in pairs]},
                        args.repeats)
    t_prefix1, t_prefixb, t_full = t["prefix1"], t["prefixb"], t["full"]
    diff_prefix = max(abs(a - b) for x, y in zip(r["prefix1"], r["full"]) for a, b in zip(x.raw_logprobs, y))
    tol = 1e-4 if scorer.dtype == torch.float32 else 5e-2
    if diff_batch > tol or diff_prefix > tol:
        raise SystemExit(f"{name}: results disagree (batched {diff_batch:.2e}, prefix {diff_prefix:.2e}; tolerance {tol})")

    visual = int((processor(text=[scorer.render(yes_no[0]["prompt"])], images=[yes_no[0]["images"]],
                           return_tensors="pt")["input_ids"] == processor.tokenizer.convert_tokens_to_ids(scorer.family.image_token)).sum())
    return {
        "family": scorer.family.name, "model": str(path) if args.model else "tiny (judgetrain.models.tiny, seed 0)", "dtype": str(scorer.dtype).removeprefix("torch."),
        "device": str(scorer.device), "frames": args.frames, "visual_tokens_per_item": visual,
        "batching": {"items": len(yes_no), "batch_size": args.batch_size, "batched_s": t_batched, "one_at_a_time_s": t_single,
                     "batched_items_per_s": len(yes_no) / t_batched, "one_at_a_time_items_per_s": len(yes_no) / t_single,
                     "speedup": t_single / t_batched, "max_abs_diff": diff_batch},
        "prefix_reuse": {"items": len(pairs), "choices_per_item": n_choices, "prefix_one_item_per_batch_s": t_prefix1,
                         "prefix_batched_s": t_prefixb, "full_pass_per_choice_s": t_full,
                         "speedup_one_item_per_batch": t_full / t_prefix1, "speedup_batched": t_full / t_prefixb,
                         "max_abs_diff": diff_prefix},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="example:\n  python benchmarks/bench_scoring.py --items 32 --repeats 3")
    p.add_argument("--items", type=int, default=32, help="yes/no items for the batching comparison")
    p.add_argument("--pair-items", type=int, default=4, help="'i and j' items for the prefix comparison")
    p.add_argument("--frames", type=int, default=8, help="images per item (pairs: frames*(frames-1)/2 choices)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--family", action="append", help="tiny family to build and measure (repeatable; default all)")
    p.add_argument("--model", type=Path, help="a real checkpoint folder instead of the tiny models")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice); 1 gives steadier "
                   "figures on a CPU shared with other jobs, where spinning OpenMP threads stall each other")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "scoring.json")
    args = p.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    from judgetrain.models import FAMILIES
    from judgetrain.models.tiny import build_tiny

    results: dict = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                                 "threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(),
                                 "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None},
                     "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            targets = [(args.model.name, args.model)]
        else:
            targets = [(f, build_tiny(f, Path(tmp) / f)) for f in (args.family or list(FAMILIES))]
        for name, path in targets:
            results["models"].append(bench_model(name, path, args))

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"machine: {results['machine']}")
    head = (f"{'model':<16} {'vis tok':>7} | {'batched':>9} {'1-by-1':>9} {'ratio':>6} | {'choices':>7} "
            f"{'prefix':>9} {'prefix bs':>9} {'full/ch':>9} {'ratio':>6} {'ratio bs':>8}")
    print(head)
    print("-" * len(head))
    for r in results["models"]:
        b, x = r["batching"], r["prefix_reuse"]
        print(f"{r['family']:<16} {r['visual_tokens_per_item']:>7} | {b['batched_s']:>8.3f}s {b['one_at_a_time_s']:>8.3f}s "
              f"{b['speedup']:>5.1f}x | {x['choices_per_item']:>7} {x['prefix_one_item_per_batch_s']:>8.3f}s "
              f"{x['prefix_batched_s']:>8.3f}s {x['full_pass_per_choice_s']:>8.3f}s {x['speedup_one_item_per_batch']:>5.1f}x "
              f"{x['speedup_batched']:>7.1f}x")
    print(f"batched: {args.items} yes/no items, batch size {args.batch_size}; prefix: {args.pair_items} items, every pair as a "
          "choice; 'prefix' = one item per batch, 'prefix bs' = batched; best of "
          f"{args.repeats} runs. Written to {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
