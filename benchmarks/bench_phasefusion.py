"""PhaseFusion cost benchmark (paper 001 Table 1 / S8): what the orderings, the phases and the
decoding cost, measured side by side in one run.

    python benchmarks/bench_phasefusion.py [--budget 8] [--phases 3] [--orderings 10] [--repeats 5]
    python benchmarks/bench_phasefusion.py --arch qwen3-vl-8b --layers 4,3 --parts phases --repeats 3
    python benchmarks/bench_phasefusion.py --arch qwen3-vl-8b --device cuda --dtype bfloat16
    python benchmarks/bench_phasefusion.py --model /path/to/Qwen3-VL-8B-Instruct --device cuda --dtype bfloat16

By default it builds the tiny Qwen3-VL (judgetrain.models.tiny) into a temporary folder;
--arch qwen3-vl-8b builds random weights at Qwen3-VL-8B's real widths in memory
(``random_real_width``; --layers TEXT,VISION cuts the depth, default the real 36,27, so
a CPU can run a few real-width layers in the real vision:decoder proportion);
--model scores a real checkpoint. One synthetic physics clip (640x360, 8 fps) is
decoded once (frames resized to at most 360 px, App. A), then, interleaved over the repeats:

1. **orderings**: one b-frame grid under 1 ordering and under K orderings with the shared
   visual prefix (``score_shared_prefix``), against the naive K full prompts (one pass each,
   and batched); the shared and naive scores must agree to 1e-4 in fp32;
2. **phases**: PhaseFusion S×b (the S phase grids in one batch) against one pass over the
   S·b union grid, under K orderings and under the identity ordering alone (Table 1's
   setting), with the tokens each arm runs through the decoder and its visual-prefix
   attention units (S·b², the paper's cost unit);
3. **decoding**: every grid of single, fusion, union and dense(4b) at two origins from one
   decoding pass (``FrameCache``) against one decoding pass per grid.

--parts picks among orderings, phases and decoding (default all three). Medians of the
repeats, in process CPU time on CPU (robust to other jobs on a shared machine;
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


def _decoder_attention_seconds(model, configs, device) -> dict[str, float]:
    """Per configuration, the seconds spent in the decoder's attention (vision tower
    excluded) on one run, through ``AttentionInterface``: a wrapper around transformers'
    own SDPA attention, selected with ``set_attn_implementation`` (masks as for SDPA) and
    switched back afterwards."""
    # the imports transformers' "Attention interface" page shows for wrapping its SDPA attention and mask
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import sdpa_mask

    from judgetrain.compat.transformers import attention_implementation

    spent = [0.0]
    cuda = device.type == "cuda"
    clock = time.perf_counter if cuda else time.process_time

    def timed_sdpa(module, *args, **kwargs):
        if "Vision" in type(module).__name__:
            return sdpa_attention_forward(module, *args, **kwargs)
        if cuda:
            torch.cuda.synchronize(device)
        t0 = clock()
        out = sdpa_attention_forward(module, *args, **kwargs)
        if cuda:
            torch.cuda.synchronize(device)
        spent[0] += clock() - t0
        return out

    AttentionInterface.register("judgetrain_timed_sdpa", timed_sdpa)
    AttentionMaskInterface.register("judgetrain_timed_sdpa", sdpa_mask)
    before = attention_implementation(model)
    model.set_attn_implementation("judgetrain_timed_sdpa")
    try:
        out = {}
        for name, fn in configs.items():
            spent[0] = 0.0
            fn()
            out[name] = spent[0]
        return out
    finally:
        model.set_attn_implementation(before)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a checkpoint folder (default: the tiny Qwen3-VL, built here)")
    p.add_argument("--arch", default=None, help="random weights at a real checkpoint's widths instead: qwen3-vl-8b")
    p.add_argument("--layers", default=None, metavar="TEXT,VISION",
                   help="with --arch: decoder and ViT depth (default: the real ones, 36,27 for qwen3-vl-8b)")
    p.add_argument("--parts", default="orderings,phases,decoding",
                   help="comma list of orderings, phases, decoding (default: all)")
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
    parts = set(args.parts.split(","))
    if not parts or parts - {"orderings", "phases", "decoding"}:
        p.error(f"--parts takes a comma list of orderings, phases, decoding; got {args.parts!r}")
    if args.model and args.arch:
        p.error("--model and --arch exclude each other: score a checkpoint, or random weights at its widths")
    layers = None
    if args.layers is not None:
        try:
            layers = tuple(int(x) for x in args.layers.split(","))
            assert len(layers) == 2 and min(layers) >= 1
        except (ValueError, AssertionError):
            p.error(f"--layers takes TEXT,VISION depths >= 1, e.g. 4,3; got {args.layers!r}")
        if not args.arch:
            p.error("--layers needs --arch")
    torch.set_num_threads(args.threads)

    from judgetrain.data_builders.synthetic import write_physics_videos
    from judgetrain.eval.phasefusion import parse_arms
    from judgetrain.mcq import mcq_prompt, orderings
    from judgetrain.scoring import PrefixGroup, Scorer, score
    from judgetrain.video import FrameCache, decode_frames, probe

    tmp = Path(tempfile.mkdtemp(prefix="bench-pf-"))
    model_path = None
    if args.arch:
        model_name = f"random {args.arch} widths" + (f", {layers[0]} decoder / {layers[1]} ViT layers" if layers else "")
    elif args.model is None:
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
    for _ in range(args.repeats if "decoding" in parts else 1):
        cache = FrameCache()
        t0 = time.process_time()
        frames = dict(zip(union, cache.get(video, union)))
        dec_once.append(time.process_time() - t0)
        t0 = time.process_time()
        for views in plan:
            for v in views:
                if "decoding" in parts:
                    decode_frames(video, v, max_side=360)
        dec_per_grid.append(time.process_time() - t0)
    assert cache.decodes == 1
    images = {i: Image.fromarray(a) for i, a in frames.items()}
    n_grids = sum(len(views) for views in plan)

    if args.arch:
        from transformers import AutoImageProcessor, AutoProcessor

        from judgetrain.models.tiny import random_real_width

        model, processor = random_real_width(args.arch, text_layers=layers and layers[0], vision_layers=layers and layers[1],
                                             dtype=args.dtype, device=args.device)
        processor.save_pretrained(tmp / "processor")  # reloaded with the per-frame pixel budget, as load_model_... does
        image_processor = AutoImageProcessor.from_pretrained(tmp / "processor", max_pixels=args.max_pixels)
        processor = AutoProcessor.from_pretrained(tmp / "processor", image_processor=image_processor)
        scorer = Scorer(model, processor, batch_size=s_count, progress=False)
    else:
        scorer = Scorer.from_pretrained(model_path, device=args.device, dtype=args.dtype, batch_size=s_count,
                                        progress=False, max_pixels=args.max_pixels)
    dev = scorer.device
    options = ["The red ball", "The blue cube", "The green cylinder", "The yellow ball", "None of them"]
    question = "Which object touches the floor first?"
    perms = orderings("bench-q", len(options), k_count)
    letters = list("ABCDE")

    def group(view, ks):
        return PrefixGroup([images[i] for i in view], [mcq_prompt(question, options, perms[k], len(view)) for k in ks], letters)

    phase0 = grids["phase"].indices(info.n_frames, info.fps, Fraction(0), b)
    dense = grids["union"].indices(info.n_frames, info.fps, Fraction(0), b)[0]
    one_name = "1 ordering, shared prefix"
    k_name, naive_name = f"{k_count} orderings, shared prefix", f"{k_count} orderings, naive (one pass each)"
    fusion_k, union_k = f"PhaseFusion {s_count}x{b}f, {k_count} orderings", f"union {s_count * b}f, {k_count} orderings"
    fusion_1, union_1 = f"PhaseFusion {s_count}x{b}f, identity ordering", f"union {s_count * b}f, identity ordering"
    naive_items = [(g, group(phase0[0], [0]).images, letters) for g in group(phase0[0], range(k_count)).prompts]
    configs = {one_name: lambda: scorer.score_shared_prefix([group(phase0[0], [0])])}
    if "orderings" in parts:
        configs[k_name] = lambda: scorer.score_shared_prefix([group(phase0[0], range(k_count))])
        configs[naive_name] = lambda: score(scorer.model, scorer.processor, naive_items, batch_size=1, progress=False)
        configs[f"{k_count} orderings, naive (batched)"] = lambda: score(
            scorer.model, scorer.processor, naive_items, batch_size=k_count, progress=False)
    if "phases" in parts:
        configs[fusion_k] = lambda: scorer.score_shared_prefix([group(v, range(k_count)) for v in phase0])
        configs[union_k] = lambda: scorer.score_shared_prefix([group(dense, range(k_count))])
        configs[fusion_1] = lambda: scorer.score_shared_prefix([group(v, [0]) for v in phase0])
        configs[union_1] = lambda: scorer.score_shared_prefix([group(dense, [0])])
    units = {fusion_k: s_count * b * b, fusion_1: s_count * b * b, union_k: (s_count * b) ** 2,
             union_1: (s_count * b) ** 2} if "phases" in parts else {}

    # Tokens through the decoder per configuration (pads excluded), counted on one untimed run.
    counted: list[int] = []

    def count_tokens(_module, _args, kwargs):
        embeds, mask = kwargs.get("inputs_embeds"), kwargs.get("attention_mask")
        if embeds is not None and mask is not None and mask.dim() == 2:
            counted.append(int(mask[:, -embeds.shape[1]:].sum()))

    base = scorer.model.get_base_model() if hasattr(scorer.model, "get_base_model") else scorer.model
    hook = base.model.language_model.register_forward_pre_hook(count_tokens, with_kwargs=True)
    tokens = {}
    for name, fn in configs.items():
        counted.clear()
        fn()  # also the warm-up
        tokens[name] = sum(counted)
    hook.remove()

    # Seconds inside the decoder's attention per configuration (the paper's cost case:
    # S short prefixes attend over S*b^2 frame pairs, the union over (S*b)^2), on one more
    # untimed run through a registered attention function that wraps the model's own
    # SDPA and times only the decoder's calls.
    attn_seconds = _decoder_attention_seconds(scorer.model, configs, dev)

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
    max_diff = None
    if "orderings" in parts:
        shared = [s.raw_logprobs for s in results[k_name][0]]
        naive = [s.raw_logprobs for s in results[naive_name]]
        max_diff = float(np.abs(np.array(shared) - np.array(naive)).max())
        if args.dtype == "float32" and max_diff > 1e-4:
            raise SystemExit(f"shared-prefix and naive scores differ by {max_diff:.2e} (> 1e-4)")

    med = {name: float(np.median(v)) for name, v in times.items()}
    one = med[one_name]
    ratios = {}
    if "orderings" in parts:
        ratios["orderings_shared_vs_one"] = med[k_name] / one
        ratios["orderings_naive_vs_one"] = med[naive_name] / one
        ratios["orderings_naive_batched_vs_one"] = med[f"{k_count} orderings, naive (batched)"] / one
    if "phases" in parts:
        ratios["fusion_vs_union"] = med[fusion_k] / med[union_k]
        ratios["fusion_vs_union_identity_ordering"] = med[fusion_1] / med[union_1]
        ratios["fusion_vs_union_decoder_tokens"] = tokens[fusion_k] / tokens[union_k]
        ratios["fusion_vs_union_decoder_tokens_identity_ordering"] = tokens[fusion_1] / tokens[union_1]
        ratios["fusion_vs_union_attention_units"] = units[fusion_k] / units[union_k]
        ratios["fusion_vs_union_decoder_attention_s"] = attn_seconds[fusion_k] / attn_seconds[union_k]
        ratios["fusion_vs_union_decoder_attention_s_identity_ordering"] = attn_seconds[fusion_1] / attn_seconds[union_1]
    if "decoding" in parts:
        ratios["decode_once_vs_per_grid"] = float(np.median(dec_once) / np.median(dec_per_grid))
    report = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "cpu": platform.machine(), "cuda": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "model": model_name, "video": {"n_frames": info.n_frames, "fps": info.fps, "size": [info.width, info.height],
                                       "frame_after_resize": list(frames[union[0]].shape),
                                       "visual_tokens_per_frame": tokens_per_frame},
        "clock": "process CPU time" if dev.type == "cpu" else "wall time (CUDA synchronised)",
        "median_s": med, "decoder_attention_s": attn_seconds, "decoder_tokens": tokens, "visual_prefix_attention_units": units, "peak_memory_bytes": peaks,
        "ratios": ratios, "max_abs_diff_shared_vs_naive": max_diff,
        "decoding": None if "decoding" not in parts else {"grids": n_grids, "distinct_frames": len(union), "decoding_passes_with_cache": cache.decodes,
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
    t.add_column("decoder attention s", justify="right")
    t.add_column("decoder tokens", justify="right")
    t.add_column("attention units", justify="right")
    t.add_column("peak MiB", justify="right")
    for name, v in med.items():
        t.add_row(name, f"{v:.4f}", f"{v / one:.2f}", f"{attn_seconds[name]:.4f}", str(tokens[name]), str(units.get(name, "")),
                  "–" if peaks[name] is None else f"{peaks[name] / 2**20:.0f}")
    Console(width=150).print(t)
    if "decoding" in parts:
        print(f"decoding: {n_grids} grids, {len(union)} distinct frames: one pass {np.median(dec_once):.3f} s vs one per "
              f"grid {np.median(dec_per_grid):.3f} s")
    print(f"ratios {json.dumps({k: round(v, 3) for k, v in ratios.items()})}")
    print(f"Results written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
