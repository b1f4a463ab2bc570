"""PhaseFusion cost benchmark (paper 001 Table 1 / S8): what the orderings, the phases and the
decoding cost, measured side by side in one run.

    python benchmarks/bench_phasefusion.py [--budget 8] [--phases 3] [--orderings 10] [--repeats 5]
    python benchmarks/bench_phasefusion.py --model /path/to/Qwen3-VL-8B-Instruct --device cuda --dtype bfloat16

By default it builds the tiny Qwen3-VL (judgetrain.models.tiny) into a temporary folder;
--model scores a real checkpoint instead. One synthetic physics clip (640x360, 8 fps) is
decoded once (frames resized to at most 360 px, App. A), then, interleaved over the repeats:

1. **orderings**: one b-frame grid under 1 ordering and under K orderings with the shared
   visual prefix (``score_shared_prefix``), against the naive K full prompts (one pass each,
   and batched); the shared and naive scores must agree to 1e-4 in fp32;
2. **phases**: PhaseFusion S×b (the S phase grids in one batch, K orderings) against one
   pass over the S·b union grid and a single b-frame pass, both with K orderings;
3. **decoding**: every grid of single, fusion, union and dense(4b) at two origins from one
   decoding pass (``FrameCache``) against one decoding pass per grid.

Medians of the repeats, in process CPU time on CPU (robust to other jobs on a shared machine;
one torch thread) and wall time on CUDA, where the peak memory of each configuration is
recorded too. Prints a table and writes benchmarks/out/phasefusion.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def _timed(fn, device):
    """(result, seconds, peak CUDA bytes). On CPU the seconds are this process's CPU time
    (one torch thread), which other jobs on a shared machine do not inflate; on CUDA wall time."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    clock = time.perf_counter if cuda else time.process_time
    t0 = clock()
    out = fn()
    if cuda:
        torch.cuda.synchronize(device)
    return out, clock() - t0, (torch.cuda.max_memory_allocated(device) if cuda else None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a checkpoint folder (default: the tiny Qwen3-VL, built here)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--budget", type=int, default=8)
    p.add_argument("--phases", type=int, default=3)
    p.add_argument("--orderings", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: stable CPU timings)")
    p.add_argument("--max-pixels", type=int, default=360 * 360,
                   help="per-frame pixel budget of the processor (default 360·360: a 360x202 frame keeps its size, "
                        "about 66 visual tokens, as in a real Qwen3-VL; the tiny checkpoint alone caps frames at 128x128)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "phasefusion.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    from judgetrain.data_builders.synthetic import write_physics_videos
    from judgetrain.eval.phasefusion import mcq_prompt, orderings, parse_arms
    from judgetrain.scoring import PrefixGroup, Scorer, score
    from judgetrain.video import FrameCache, decode_frames, probe

    tmp = Path(tempfile.mkdtemp(prefix="bench-pf-"))
    if args.model is None:
        from judgetrain.models.tiny import build_tiny

        build_tiny("qwen3-vl", tmp / "tiny", seed=0)
        model_path, model_name = tmp / "tiny", "tiny qwen3-vl (judgetrain.models.tiny, seed 0)"
    else:
        model_path, model_name = Path(args.model), args.model
    write_physics_videos(tmp / "clip", 1, seed=0, size=(640, 360), duration_range_s=(12.0, 12.0), progress=False)
    video = tmp / "clip" / "videos" / "physics-00000.mp4"
    info = probe(video)
    b, s_count, k_count = args.budget, args.phases, args.orderings
    _, grids = parse_arms(f"single,fusion,union,dense{4 * b}", b, s_count)
    origins = [Fraction(0), Fraction(1, 2 * s_count)]
    plan = [g.indices(info.n_frames, info.fps, o, b) for o in origins for g in grids.values()]
    union = sorted({i for views in plan for v in views for i in v})

    # 3. decoding: once for the union vs once per grid (decoded first: the frames feed the rest)
    dec_once, dec_per_grid = [], []
    for _ in range(args.repeats):
        cache = FrameCache()
        t0 = time.process_time()
        frames = dict(zip(union, cache.get(video, union)))
        dec_once.append(time.process_time() - t0)
        t0 = time.process_time()
        for views in plan:
            for v in views:
                decode_frames(video, v, max_side=360)
        dec_per_grid.append(time.process_time() - t0)
    assert cache.decodes == 1
    images = {i: Image.fromarray(a) for i, a in frames.items()}
    n_grids = sum(len(views) for views in plan)

    scorer = Scorer.from_pretrained(model_path, device=args.device, dtype=args.dtype, batch_size=s_count, progress=False,
                                    max_pixels=args.max_pixels)
    dev = scorer.device
    options = ["The red ball", "The blue cube", "The green cylinder", "The yellow ball", "None of them"]
    question = "Which object touches the floor first?"
    perms = orderings("bench-q", len(options), k_count)
    letters = list("ABCDE")

    def group(view, ks):
        return PrefixGroup([images[i] for i in view], [mcq_prompt(question, options, perms[k], len(view)) for k in ks], letters)

    phase0 = grids["phase"].indices(info.n_frames, info.fps, Fraction(0), b)
    dense = grids["union"].indices(info.n_frames, info.fps, Fraction(0), b)[0]
    configs = {
        "1 ordering, shared prefix": lambda: scorer.score_shared_prefix([group(phase0[0], [0])]),
        f"{k_count} orderings, shared prefix": lambda: scorer.score_shared_prefix([group(phase0[0], range(k_count))]),
        f"{k_count} orderings, naive (one pass each)": lambda: score(
            scorer.model, scorer.processor, [(g, group(phase0[0], [0]).images, letters) for g in group(phase0[0], range(k_count)).prompts],
            batch_size=1, progress=False),
        f"{k_count} orderings, naive (batched)": lambda: score(
            scorer.model, scorer.processor, [(g, group(phase0[0], [0]).images, letters) for g in group(phase0[0], range(k_count)).prompts],
            batch_size=k_count, progress=False),
        f"PhaseFusion {s_count}x{b}f, {k_count} orderings": lambda: scorer.score_shared_prefix(
            [group(v, range(k_count)) for v in phase0]),
        f"union {s_count * b}f, {k_count} orderings": lambda: scorer.score_shared_prefix([group(dense, range(k_count))]),
    }
    configs[next(iter(configs))]()  # warm-up
    one = scorer.processor.image_processor(images=[images[phase0[0][0]]], return_tensors="pt")
    tokens_per_frame = int(one["image_grid_thw"].prod()) // 4 if "image_grid_thw" in one else None  # 2x2 patches merge
    times: dict[str, list[float]] = {name: [] for name in configs}
    peaks: dict[str, int | None] = {}
    results = {}
    for _ in range(args.repeats):
        for name, fn in configs.items():
            out, dt, peak = _timed(fn, dev)
            times[name].append(dt)
            peaks[name] = max(peaks.get(name) or 0, peak) if peak is not None else None
            results[name] = out
    shared = [s.raw_logprobs for s in results[f"{k_count} orderings, shared prefix"][0]]
    naive = [s.raw_logprobs for s in results[f"{k_count} orderings, naive (one pass each)"]]
    max_diff = float(np.abs(np.array(shared) - np.array(naive)).max())
    if args.dtype == "float32" and max_diff > 1e-4:
        raise SystemExit(f"shared-prefix and naive scores differ by {max_diff:.2e} (> 1e-4)")

    med = {name: float(np.median(v)) for name, v in times.items()}
    one = med["1 ordering, shared prefix"]
    ratios = {
        "orderings_shared_vs_one": med[f"{k_count} orderings, shared prefix"] / one,
        "orderings_naive_vs_one": med[f"{k_count} orderings, naive (one pass each)"] / one,
        "orderings_naive_batched_vs_one": med[f"{k_count} orderings, naive (batched)"] / one,
        "fusion_vs_union": med[f"PhaseFusion {s_count}x{b}f, {k_count} orderings"] / med[f"union {s_count * b}f, {k_count} orderings"],
        "fusion_vs_single": med[f"PhaseFusion {s_count}x{b}f, {k_count} orderings"] / med[f"{k_count} orderings, shared prefix"],
        "decode_once_vs_per_grid": float(np.median(dec_once) / np.median(dec_per_grid)),
    }
    report = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "cpu": platform.machine(), "cuda": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "model": model_name, "video": {"n_frames": info.n_frames, "fps": info.fps, "size": [info.width, info.height],
                                       "frame_after_resize": list(frames[union[0]].shape),
                                       "visual_tokens_per_frame": tokens_per_frame},
        "clock": "process CPU time" if dev.type == "cpu" else "wall time (CUDA synchronised)",
        "median_s": med, "peak_memory_bytes": peaks, "ratios": ratios, "max_abs_diff_shared_vs_naive": max_diff,
        "decoding": {"grids": n_grids, "distinct_frames": len(union), "decoding_passes_with_cache": cache.decodes,
                     "median_s_once": float(np.median(dec_once)), "median_s_per_grid": float(np.median(dec_per_grid))},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"PhaseFusion cost, {model_name}, {dev} ({args.repeats} repeats, medians)")
    t.add_column("configuration")
    t.add_column("CPU s" if dev.type == "cpu" else "s", justify="right")
    t.add_column("× 1 ordering", justify="right")
    t.add_column("peak MiB", justify="right")
    for name, v in med.items():
        t.add_row(name, f"{v:.4f}", f"{v / one:.2f}", "–" if peaks[name] is None else f"{peaks[name] / 2**20:.0f}")
    Console().print(t)
    print(f"decoding: {n_grids} grids, {len(union)} distinct frames: one pass {np.median(dec_once):.3f} s vs one per grid "
          f"{np.median(dec_per_grid):.3f} s; ratios {json.dumps({k: round(v, 3) for k, v in ratios.items()})}")
    print(f"Results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
