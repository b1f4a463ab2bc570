"""Evaluation cost at real-model widths (issue #27, part 1): TimeCatch and PhaseFusion scoring
at Qwen2.5-VL-7B and Qwen3-VL-8B widths, every configuration side by side in one run.

    python benchmarks/bench_eval.py --threads 1                                  # CPU: 1 decoder + 1 ViT layer, ~3 min
    python benchmarks/bench_eval.py --device cuda --dtype bfloat16 --layers full --vision-layers full \\
        --frame-size 360 --items 32 --batch-size 8 --real-vocab               # GPU, full depth

Models are random weights at the released checkpoints' widths
(``judgetrain.models.tiny.random_real_width``: hidden and MLP sizes, query / KV heads, ViT
depth and width, patch size, DeepStack / window attention) with the tiny tokenizer and
processor, so nothing is downloaded; ``--layers`` / ``--vision-layers`` cut the decoder and ViT
depth (each layer costs the same, so a few layers keep the real proportions) and
``--real-vocab`` resizes the embedding and head to the checkpoint's vocabulary (151,936 /
152,064 rows; ~5 GB more in float32, so off by default on a CPU). Per model, interleaved over
``--repeats`` (best of), after one untimed warm-up run that also counts the work:

1. **TimeCatch** items as a build makes them (six records a sequence of ``--timecatch-frames``
   frames, sharing their frames; lengths vary): the plain engine one at a time vs the engine with
   every lever (``Scorer.score`` at ``--batch-size``, batches of similar lengths longest first,
   each distinct frame through the vision tower once); goal >= 3x; and the levers one by one:
   input-order vs length-sorted batches (``judgetrain.scoring.lengths``), then frames encoded per
   item vs once per call (``judgetrain.scoring.vision``);
2. **orderings**: one ``--frames``-frame grid under 1 ordering vs ``--orderings`` orderings with
   the shared visual prefix (``score_shared_prefix``); goal <= 1.2x;
3. **PhaseFusion** ``--phases`` x ``--budget`` frames (the phase grids in one batch, one decode
   of the clip) vs one pass over the union grid, decoding included; goal <= 0.8x;

4. **shared prefix** (``judgetrain.eval.timecatch.grouped``, what ``eval timecatch`` does by default):
   the TimeCatch items, the records that show one frame order scored on one visual prefix vs every
   record on its own (the engine with every lever above); goal > 1x;

and once, **LPIPS** on ``--lpips-pairs`` consecutive frame pairs: the builder's filter path (each
frame's features once) vs one network call per pair; goal >= 5x; and, at each of
``--lpips-batch-sides``, the filter path with batches chosen by frame pixels
(``LpipsDistance.frames_per_batch``) vs the old fixed batch of 32 frames; goal >= 1x. Each lever's
ratio row names the test that holds its results equal (``EQUALITY``).

Each configuration reports seconds (process CPU time on a CPU, which other jobs on a shared
machine do not inflate; wall time on CUDA, synchronised; wall time is printed beside it),
items/s, peak memory (CPU: peak RSS above the start of the run, sampled every 2 ms; CUDA:
``torch.cuda.max_memory_allocated`` above the allocation before it), the tokens run through the
decoder (real ones, and slots: padding included, which the model computes too), the ViT patches,
and the model FLOPs the run computes (2 x parameters x token slots for the decoder layers and ViT,
plus attention 4 x layers x heads x head_dim x query x key slot pairs; the head only at the scored
positions). Beside each measured ratio it prints its goal and the **FLOP ratio**:
what the ratio would be if time followed the model's arithmetic exactly. A measured ratio near
its FLOP ratio is the model's cost; the excess (measured / FLOP ratio) is ours.
Writes benchmarks/out/bench_eval.json. README: benchmarks/README.md, "Evaluation cost at real
widths".
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ARCHS = ("qwen2.5-vl-7b", "qwen3-vl-8b")  # the default pair; --arch qwen3-vl-2b too (the smoke test's)
REAL_VOCAB = {"qwen2.5-vl-7b": 152064, "qwen3-vl-8b": 151936, "qwen3-vl-2b": 151936}
GOALS = {  # ratio key: (comparison, goal as text, predicate)
    "orderings": ("K orderings vs 1 ordering", "<= 1.2x", lambda r: r <= 1.2),
    "batching": ("batched vs one-at-a-time (speed-up)", ">= 3x", lambda r: r >= 3.0),
    "sorting": ("length-sorted vs input-order batches (speed-up)", "> 1x", lambda r: r > 1.0),
    "sharing": ("frames shared across a call's items (speed-up)", "> 1x", lambda r: r > 1.0),
    "phasefusion": ("PhaseFusion SxB vs one union pass, incl. decoding", "<= 0.8x", lambda r: r <= 0.8),
    "lpips": ("LPIPS features once vs per pair (speed-up)", ">= 5x", lambda r: r >= 5.0),
    "prefix": ("TimeCatch: one prefix per frame order (speed-up)", "> 1x", lambda r: r > 1.0),
    "lpips_batch": ("LPIPS filter, batch by pixels vs 32 (speed-up)", ">= 1x", lambda r: r >= 1.0),
}
EQUALITY = {  # the test that holds each lever's results equal to the path it replaces
    "prefix": "tests/eval/timecatch/test_shared_prefix.py::test_grouped_scores_equal_plain_scores",
    "lpips_batch": "tests/test_perceptual.py::test_distances_do_not_depend_on_the_batch",
}


class Meter:
    """Seconds, wall seconds and peak memory of one call. CPU: process CPU time and the peak
    RSS above the RSS at the start (a thread samples it every 2 ms); CUDA: synchronised wall
    time and ``max_memory_allocated`` above the allocation at the start."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.device = device

    def __call__(self, fn):
        import psutil

        proc, peak, stop = psutil.Process(), [0], threading.Event()
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            base = torch.cuda.memory_allocated(self.device)
        else:
            base = proc.memory_info().rss

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], proc.memory_info().rss)
                    stop.wait(0.002)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
        t_cpu, t_wall = time.process_time(), time.perf_counter()
        out = fn()
        if self.cuda:
            torch.cuda.synchronize(self.device)
        wall, cpu = time.perf_counter() - t_wall, time.process_time() - t_cpu
        if self.cuda:
            peak_bytes = torch.cuda.max_memory_allocated(self.device) - base
        else:
            stop.set()
            sampler.join()
            peak_bytes = max(peak[0], proc.memory_info().rss) - base
        return out, (wall if self.cuda else cpu), wall, max(0, peak_bytes)


class WorkCounter:
    """Counts, while attached, the decoder tokens (attention-mask ones of the new positions) and
    slots (every new position, padding included), the query x key pairs of decoder attention (real,
    and slots), the ViT patches, from forward hooks on the model's own modules."""

    def __init__(self, model):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.decoder, self.visual = base.model.language_model, base.model.visual
        self.n = {"decoder_tokens": 0, "decoder_slots": 0, "attention_pairs": 0, "attention_slot_pairs": 0,
                  "vit_patches": 0, "vit_attention_pairs": 0}
        self.hooks: list = []

    def _decoder(self, _module, _args, kwargs) -> None:
        embeds, mask = kwargs.get("inputs_embeds"), kwargs.get("attention_mask")
        if embeds is None or mask is None or mask.dim() != 2:
            return
        new = mask[:, -embeds.shape[1]:].sum(-1).long()
        self.n["decoder_tokens"] += int(new.sum())
        self.n["attention_pairs"] += int((new * mask.sum(-1).long()).sum())
        self.n["decoder_slots"] += embeds.shape[0] * embeds.shape[1]
        self.n["attention_slot_pairs"] += embeds.shape[0] * embeds.shape[1] * mask.shape[1]

    def _vision(self, _module, args, kwargs) -> None:
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        if grid is None:
            return
        per_image = grid.prod(-1).long()
        self.n["vit_patches"] += int(per_image.sum())
        self.n["vit_attention_pairs"] += int((per_image**2).sum())  # full attention within each image (upper bound)

    def __enter__(self):
        self.n = dict.fromkeys(self.n, 0)
        self.hooks = [self.decoder.register_forward_pre_hook(self._decoder, with_kwargs=True),
                      self.visual.register_forward_pre_hook(self._vision, with_kwargs=True)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self.hooks:
            h.remove()


def model_flops(model, n: dict[str, int]) -> float:
    """Forward FLOPs the counted work computes: 2 x weights x token slots (decoder layers, padding
    included; ViT blocks per patch, its patch mergers per merged token, a quarter of the patches)
    + 4 x layers x heads x head_dim x attention slot pairs (decoder) and pairs (ViT, unpadded). The
    head is left out: the engine computes logits at the scored positions only."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    text, vision = base.config.text_config, base.config.vision_config
    p_dec = sum(p.numel() for p in base.model.language_model.layers.parameters())
    vit = dict(base.model.visual.named_parameters())
    p_merger = sum(p.numel() for name, p in vit.items() if "merger" in name)
    p_vit = sum(p.numel() for p in vit.values()) - p_merger + p_merger / vision.spatial_merge_size**2
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    dec_attn = 4 * text.num_hidden_layers * text.num_attention_heads * head_dim * n["attention_slot_pairs"]
    vit_attn = 4 * vision.depth * vision.hidden_size * n["vit_attention_pairs"]
    return 2.0 * p_dec * n["decoder_slots"] + 2.0 * p_vit * n["vit_patches"] + dec_attn + vit_attn


def _depth(value: str, name: str) -> int | None:
    if value == "full":
        return None
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"{name} takes a depth >= 1 or 'full'; got {value!r}")
    return int(value)


def build_scorer(arch: str, args, tmp: Path):
    """Random weights at ``arch``'s widths, its processor reloaded with the per-frame pixel
    budget ``--frame-size``² (as ``load_model_and_processor`` does for a checkpoint)."""
    from transformers import AutoImageProcessor, AutoProcessor

    from judgetrain.models.tiny import random_real_width
    from judgetrain.scoring import Scorer

    model, processor = random_real_width(arch, text_layers=_depth(args.layers, "--layers"),
                                         vision_layers=_depth(args.vision_layers, "--vision-layers"),
                                         dtype=args.dtype, device=args.device)
    if args.real_vocab:
        model.resize_token_embeddings(REAL_VOCAB[arch], mean_resizing=False)
    folder = tmp / f"processor-{arch}"
    processor.save_pretrained(folder)
    image_processor = AutoImageProcessor.from_pretrained(folder, max_pixels=args.frame_size**2,
                                                         min_pixels=min(args.frame_size**2, 32 * 32))
    processor = AutoProcessor.from_pretrained(folder, image_processor=image_processor)
    return Scorer(model, processor, batch_size=args.batch_size, progress=False)


def timecatch_items(n: int, frames_range: tuple[int, int], size: int, seed: int = 0) -> list[tuple]:
    """``n`` TimeCatch-like items, six a sequence as the builder makes them (temporal detection on
    the gold and the swapped order, swap localization, frame-noise detection on the gold and the
    noisy sequence, noise localization), so records share their frames; a sequence has
    ``frames_range[0]``..``frames_range[1]`` noise frames (drawn per sequence). Every image is a
    fresh object, as decoded from a dataset row."""
    rng = np.random.default_rng(seed)
    items: list[tuple] = []
    lo, hi = frames_range
    while len(items) < n:
        k = int(rng.integers(lo, hi + 1))
        frames = [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(k + 1)]  # the last: noise
        gold, swapped = list(range(k)), [1, 0, *range(2, k)] if k > 1 else [0]
        noisy = [*range(k - 1), k]
        scene = " Scene" * int(rng.integers(0, 8))
        swap_q = f"Has any pair of these {k} neighbouring images been swapped? Reply yes or no.{scene}"
        noise_q = f"Is one of these {k} images pure noise? Reply yes or no.{scene}"
        for order, text, choices in [
                (gold, swap_q, ["yes", "no"]), (swapped, swap_q, ["yes", "no"]),
                (swapped, f"Which two of these {k} images were swapped? Reply with their numbers.{scene}",
                 ["1 and 2", "2 and 3"]),
                (gold, noise_q, ["yes", "no"]), (noisy, noise_q, ["yes", "no"]),
                (noisy, f"Which of these {k} images is pure noise? Reply with its number.{scene}",
                 [str(j + 1) for j in range(k)])]:
            prompt = [{"role": "user", "content": [{"type": "image"}] * k + [{"type": "text", "text": text}]}]
            items.append((prompt, [Image.fromarray(frames[i], "RGB") for i in order], choices))
    return items[:n]


def write_clip(tmp: Path) -> Path:
    from judgetrain.data_builders.synthetic import write_physics_videos

    write_physics_videos(tmp / "clip", 1, seed=0, size=(320, 180), duration_range_s=(12.0, 12.0), progress=False)
    return tmp / "clip" / "videos" / "physics-00000.mp4"


def configurations(scorer, args, video: Path) -> tuple[dict[str, tuple[str, int, object]], dict[str, tuple[str, str]]]:
    """``{name: (part, items the call scores, zero-argument call)}`` and ``{ratio key: (name, name)}``:
    the ratio is the first's seconds over the second's."""
    from judgetrain.eval.timecatch.grouped import score_records
    from judgetrain.mcq import mcq_prompt, orderings
    from judgetrain.scoring import PrefixGroup, Scorer
    from judgetrain.video import FrameCache, phase_indices, probe

    items = timecatch_items(args.items, args.timecatch_frames, args.frame_size)
    def engine(batch_size: int, sort: bool, share: bool) -> Scorer:
        return Scorer(scorer.model, scorer.processor, scorer.family, batch_size=batch_size, prefill=scorer.prefill,
                      progress=False, sort_by_length=sort, share_images=share)

    single, unsorted = engine(1, False, False), engine(args.batch_size, False, False)
    sorted_ = engine(args.batch_size, True, False)
    options = ["The red ball", "The blue cube", "The green cylinder", "The yellow ball", "None of them"]
    question, letters = "Which object touches the floor first?", list("ABCDE")
    perms = orderings("bench-q", len(options), args.orderings)
    n_frames = probe(video).n_frames
    b, s = args.budget, args.phases
    phases = [phase_indices(n_frames, b, phase=k, phases=s) for k in range(s)]
    union = phase_indices(n_frames, s * b)

    def group(images, ks):
        return PrefixGroup(images, [mcq_prompt(question, options, perms[k], len(images)) for k in ks], letters)

    def decoded(grids):  # one decoding pass of the clip for every grid of the arm
        wanted = sorted({i for g in grids for i in g})
        frames = dict(zip(wanted, FrameCache(max_side=args.frame_size).get(video, wanted), strict=True))
        return [[Image.fromarray(frames[i]) for i in g] for g in grids]

    grid = [Image.fromarray(f)
            for f in FrameCache(max_side=args.frame_size).get(video, phase_indices(n_frames, args.frames))]
    k, bs = args.orderings, args.batch_size
    configs = {
        "timecatch, one at a time": ("batching", len(items), lambda: single.score(items)),
        f"timecatch, batched ({bs}), input order": ("batching", len(items), lambda: unsorted.score(items)),
        f"timecatch, batched ({bs}), length-sorted": ("batching", len(items), lambda: sorted_.score(items)),
        f"timecatch, batched ({bs}), sorted, shared frames": ("batching", len(items), lambda: scorer.score(items)),
        "1 ordering, shared prefix": ("orderings", 1, lambda: scorer.score_shared_prefix([group(grid, [0])])),
        f"{k} orderings, shared prefix": ("orderings", 1, lambda: scorer.score_shared_prefix([group(grid, range(k))])),
        f"PhaseFusion {s}x{b}f + decode": ("phasefusion", 1, lambda: scorer.score_shared_prefix(
            [group(g, [0]) for g in decoded(phases)])),
        f"union {s * b}f + decode": ("phasefusion", 1, lambda: scorer.score_shared_prefix(
            [group(decoded([union])[0], [0])])),
        # part "batching": its scores are checked against one-at-a-time with the other TimeCatch arms
        "timecatch, shared prefix per frame order": ("batching", len(items), lambda: score_records(scorer, items)),
    }
    names = list(configs)
    ratios = {"batching": (names[0], names[3]), "sorting": (names[1], names[2]), "sharing": (names[2], names[3]),
              "orderings": (names[5], names[4]), "phasefusion": (names[6], names[7]), "prefix": (names[3], names[8])}
    return configs, ratios


def bench_arch(arch: str, args, tmp: Path, video: Path) -> dict:
    scorer = build_scorer(arch, args, tmp)
    meter, counter = Meter(scorer.device), WorkCounter(scorer.model)
    configs, pairs = configurations(scorer, args, video)
    work, flops, results = {}, {}, {}
    for name, (_, _, fn) in configs.items():  # warm-up, counting the work
        with counter:
            results[name] = fn()
        work[name], flops[name] = dict(counter.n), model_flops(scorer.model, counter.n)
    best: dict[str, tuple] = {}
    for _ in range(args.repeats):
        for name, (_, _, fn) in configs.items():
            out, sec, wall, peak = meter(fn)
            prev = best.get(name)
            best[name] = (min(sec, prev[0]) if prev else sec, min(wall, prev[1]) if prev else wall,
                          max(peak, prev[2]) if prev else peak)
    names = list(configs)
    first, *others = [results[n] for n in names if configs[n][0] == "batching"]  # every TimeCatch arm agrees
    diff = max(abs(x - y) for other in others for p, q in zip(first, other, strict=True)
               for x, y in zip(p.raw_logprobs, q.raw_logprobs, strict=True))
    tol = 1e-4 if scorer.dtype == torch.float32 else 5e-2
    if diff > tol:
        raise SystemExit(f"{arch}: batched and one-at-a-time scores differ by {diff:.2e} (> {tol})")
    rows = {name: {"part": configs[name][0], "items": configs[name][1], "seconds": best[name][0],
                   "wall_seconds": best[name][1], "items_per_s": configs[name][1] / best[name][0],
                   "peak_memory_mb": best[name][2] / 2**20, "model_flops": flops[name],
                   "padding": 1 - work[name]["decoder_tokens"] / max(work[name]["decoder_slots"], 1), **work[name]}
            for name in names}
    ratios = {}
    for key, (x, y) in pairs.items():
        speedup = GOALS[key][0].endswith("(speed-up)")
        measured, flop = rows[x]["seconds"] / rows[y]["seconds"], flops[x] / flops[y]
        ratios[key] = {"of": f"{x} / {y}" if not speedup else f"{x} / {y} (speed-up)", "measured": measured,
                       "flop_ratio": flop, "ours": measured / flop, "goal": GOALS[key][1], "met": GOALS[key][2](measured),
                       **({"equality_test": EQUALITY[key]} if key in EQUALITY else {})}
    cfg = scorer.model.config
    return {"arch": arch, "decoder_layers": cfg.text_config.num_hidden_layers, "vit_layers": cfg.vision_config.depth,
            "vocab": scorer.model.get_input_embeddings().weight.shape[0], "dtype": str(scorer.dtype).removeprefix("torch."),
            "max_abs_diff_batched_vs_single": diff, "configurations": rows, "ratios": ratios}


def bench_lpips(args) -> dict:
    """LPIPS distances of ``--lpips-pairs`` consecutive frame pairs of ``--frame-size``, best of the
    repeats: the builder's near-duplicate filter end to end (``filter_near_duplicates``, threshold 0
    so every consecutive distance is taken; the backbone runs once per frame, in batches) vs one
    ``LPIPS.forward`` per pair (2 backbone passes a pair), and, beside them, the pairs batched
    through ``LPIPS.forward``. All must agree: the filter's stored (6-place) values equal the
    per-pair distances rounded."""
    from judgetrain.perceptual import LpipsDistance, backbone_weights_path, filter_near_duplicates, quantize

    pretrained = backbone_weights_path("alex").is_file()  # same compute either way; only the weights differ
    distance = LpipsDistance(pretrained_backbone=pretrained, device=args.device)
    rng = np.random.default_rng(1)
    side = args.frame_size
    frames = [rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(args.lpips_pairs + 1)]
    a, b = frames[:-1], frames[1:]
    meter = Meter(distance.device)
    distance(a[:2], b[:2])  # warm-up
    filter_near_duplicates(frames[:3], distance, 0.0)
    features_once, pairs_batched, single = [], [], []
    for _ in range(args.repeats):
        (_, d_filter), t, *_ = meter(lambda: filter_near_duplicates(frames, distance, 0.0))
        features_once.append(t)
        d_batch, t, *_ = meter(lambda: distance(a, b))
        pairs_batched.append(t)
        d_single, t, *_ = meter(lambda: np.array([distance([x], [y])[0] for x, y in zip(a, b, strict=True)]))
        single.append(t)
    if not np.allclose(d_batch, d_single, atol=1e-6) or d_filter != [quantize(d) for d in d_single]:
        raise SystemExit("filter, batched and per-pair LPIPS distances disagree")
    batch = [lpips_batch_lever(side, args, meter, pretrained) for side in args.lpips_batch_sides]
    pairs = len(a)
    measured = min(single) / min(features_once)
    # backbone passes, 2 a pair per pair vs 1 a frame (the 1x1-conv head's arithmetic is small beside them)
    flop = 2 * pairs / (pairs + 1)
    return {"pairs": pairs, "frame_size": args.frame_size, "batch_size": distance.frames_per_batch(frames),
            "backbone": "alexnet-imagenet" if pretrained else "alexnet-random",
            "batched_s": min(features_once), "per_pair_s": min(single), "pairs_batched_s": min(pairs_batched),
            "pairs_batched_speedup": min(single) / min(pairs_batched),
            "backbone_passes": {"batched": pairs + 1, "per_pair": 2 * pairs, "pairs_batched": 2 * pairs}, "batch": batch,
            "ratio": {"of": "per pair / filter path, features once per frame (speed-up)", "measured": measured,
                      "flop_ratio": flop, "ours": measured / flop, "goal": GOALS["lpips"][1],
                      "met": GOALS["lpips"][2](measured)}}


def lpips_batch_lever(side: int, args, meter, pretrained: bool) -> dict:
    """The filter path (``filter_near_duplicates``, threshold 0) on ``--lpips-pairs`` + 1 frames of
    ``side``²: batches of 32 frames (the old fixed default) vs batches chosen by frame pixels (the
    default now), best of the repeats; both must give the same kept frames and distances."""
    from judgetrain.perceptual import LpipsDistance, filter_near_duplicates

    rng = np.random.default_rng(side)
    frames = [rng.integers(0, 256, (side, side, 3), dtype=np.uint8) for _ in range(args.lpips_pairs + 1)]
    arms = {"fixed": LpipsDistance(pretrained_backbone=pretrained, device=args.device, batch_size=32),
            "pixels": LpipsDistance(pretrained_backbone=pretrained, device=args.device)}
    times: dict[str, list[float]] = {k: [] for k in arms}
    out = {}
    for d in arms.values():
        filter_near_duplicates(frames[:3], d, 0.0)  # warm-up
    for _ in range(args.repeats):
        for k, d in arms.items():
            out[k], t, *_ = meter(lambda d=d: filter_near_duplicates(frames, d, 0.0))
            times[k].append(t)
    if out["fixed"] != out["pixels"]:
        raise SystemExit(f"LPIPS at {side}²: batches of 32 and batches by pixels disagree")
    measured = min(times["fixed"]) / min(times["pixels"])
    return {"frame_size": side, "frames": len(frames), "batch_by_pixels": arms["pixels"].frames_per_batch(frames),
            "batch_pixels": arms["pixels"].batch_pixels, "fixed_32_s": min(times["fixed"]), "by_pixels_s": min(times["pixels"]),
            "ratio": {"of": f"batch 32 / batch by pixels at {side}² (speed-up)", "measured": measured, "flop_ratio": 1.0,
                      "ours": measured, "goal": GOALS["lpips_batch"][1], "met": GOALS["lpips_batch"][2](measured),
                      "equality_test": EQUALITY["lpips_batch"]}}


def print_report(report: dict) -> None:
    clock = "CPU s" if report["machine"]["device"] == "cpu" else "s"
    for m in report["models"]:
        print(f"\n{m['arch']} widths, {m['decoder_layers']} decoder / {m['vit_layers']} ViT layers, vocab {m['vocab']}, "
              f"{m['dtype']} (batched vs one-at-a-time max |diff| {m['max_abs_diff_batched_vs_single']:.1e})")
        head = (f"  {'configuration':<48} {clock:>8} {'wall s':>8} {'items/s':>8} {'peak MB':>8} {'dec tok':>7} "
                f"{'padding':>7} {'ViT patch':>9} {'GFLOP':>8}")
        print(head)
        for name, r in m["configurations"].items():
            print(f"  {name:<48} {r['seconds']:>8.3f} {r['wall_seconds']:>8.3f} {r['items_per_s']:>8.2f} "
                  f"{r['peak_memory_mb']:>8.0f} {r['decoder_tokens']:>7} {r['padding']:>7.1%} {r['vit_patches']:>9} "
                  f"{r['model_flops'] / 1e9:>8.1f}")
    print("\nratios (measured | FLOP ratio | ours = measured / FLOP ratio | goal)")
    lines = [(m["arch"], key, r) for m in report["models"] for key, r in m["ratios"].items()]
    if report.get("lpips"):
        lines.append(("LPIPS", "lpips", report["lpips"]["ratio"]))
        for b in report["lpips"]["batch"]:
            print(f"  LPIPS filter {b['frame_size']}², {b['frames']} frames: batch 32 {b['fixed_32_s']:.3f} s, "
                  f"batch by pixels ({b['batch_by_pixels']} frames) {b['by_pixels_s']:.3f} s")
            lines.append((f"LPIPS {b['frame_size']}²", "lpips_batch", b["ratio"]))
    for arch, key, r in lines:
        test = f" | equal: {r['equality_test']}" if "equality_test" in r else ""
        print(f"  {arch:<14} {GOALS[key][0]:<50} {r['measured']:>6.2f}x | {r['flop_ratio']:>5.2f}x | {r['ours']:>5.2f} | "
              f"goal {r['goal']} {'met' if r['met'] else 'NOT met'}{test}")


def _frames_range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition(",")
    if not (lo.isdigit() and (hi or lo).isdigit()) or not 1 <= int(lo) <= int(hi or lo):
        raise argparse.ArgumentTypeError(f"takes LO,HI with 1 <= LO <= HI (or one count), got {text!r}")
    return int(lo), int(hi or lo)


def _sides(text: str) -> tuple[int, ...]:
    parts = [p for p in text.split(",") if p]
    if not parts or not all(p.isdigit() and int(p) >= 8 for p in parts):
        raise argparse.ArgumentTypeError(f"takes frame sides >= 8, comma-separated, got {text!r}")
    return tuple(int(p) for p in parts)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--arch", action="append", choices=sorted(REAL_VOCAB),
                   help="real widths to measure (repeatable; default qwen2.5-vl-7b and qwen3-vl-8b)")
    p.add_argument("--layers", default="1", help="decoder layers kept, or 'full' (default 1: a CPU)")
    p.add_argument("--vision-layers", default="1", help="ViT layers kept, or 'full' (default 1)")
    p.add_argument("--real-vocab", action="store_true", help="embedding and head at the checkpoint's vocabulary size")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: steady CPU-time figures)")
    p.add_argument("--items", type=int, default=12, help="TimeCatch items")
    p.add_argument("--frames", type=int, default=8, help="frames per ordering grid")
    p.add_argument("--timecatch-frames", type=_frames_range, default=(4, 16), metavar="LO,HI",
                   help="frames per TimeCatch item, drawn per item (default 4,16: TimeCatch's two sets)")
    p.add_argument("--frame-size", type=int, default=96,
                   help="frame side in pixels (the processor's pixel budget is its square)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--orderings", type=int, default=10)
    p.add_argument("--budget", type=int, default=8, help="frames per PhaseFusion phase grid")
    p.add_argument("--phases", type=int, default=3)
    p.add_argument("--lpips-pairs", type=int, default=16, help="LPIPS frame pairs (0: skip)")
    p.add_argument("--lpips-batch-sides", type=_sides, default=(64, 448), metavar="S,S",
                   help="frame sides of the LPIPS batch lever (batch 32 vs by pixels), default 64,448")
    p.add_argument("--repeats", type=int, default=1, help="timed runs per configuration after the warm-up (best of)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "bench_eval.json")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from judgetrain.io import write_json

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    report: dict = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                                "threads": torch.get_num_threads(), "cpu": platform.machine(), "device": device.type,
                                "cuda": torch.cuda.get_device_name(device) if device.type == "cuda" else None},
                    "clock": "process CPU time" if device.type == "cpu" else "wall time (CUDA synchronised)",
                    "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "models": []}
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
        video = write_clip(Path(tmp))
        for arch in args.arch or ARCHS:
            report["models"].append(bench_arch(arch, args, Path(tmp), video))
            if device.type == "cuda":
                torch.cuda.empty_cache()
    report["lpips"] = bench_lpips(args) if args.lpips_pairs else None
    print(f"machine: {report['machine']}; clock: {report['clock']}")
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.out, report)
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    raise SystemExit(main())
