"""TimeCatch builder benchmark: throughput on synthetic videos and LPIPS three ways
(per pair, pairs batched, the filter's features once per frame), side by side in one run.

    python benchmarks/bench_builder.py [--clips 16] [--repeats 3] [--device cpu] [--threads N]

Prints a table and writes benchmarks/out/builder.json. Figures go in
benchmarks/README.md with the machine they were measured on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


def _machine_busy_s() -> float | None:
    """CPU seconds all processes have used since boot (Linux ``/proc/stat``); None elsewhere."""
    try:
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="example:\n  python benchmarks/bench_builder.py --clips 16",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clips", type=int, default=16)
    p.add_argument("--pairs", type=int, default=32, help="frame pairs for the LPIPS comparison")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", default=None)
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default torch's; 1 is steadier on a machine shared with other jobs)")
    p.add_argument("--memory-clips", default="8,32",
                   help="clip counts for the peak-memory comparison of whole builds ('' to skip)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "builder.json")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from judgetrain.data_builders import timecatch
    from judgetrain.data_builders.synthetic import write_physics_videos
    from judgetrain.perceptual import LpipsDistance, backbone_weights_path, filter_near_duplicates, quantize
    from judgetrain.video import decode_frames, probe

    pretrained = backbone_weights_path("alex").is_file()  # same compute either way; only the weights differ
    distance = LpipsDistance(pretrained_backbone=pretrained, device=args.device)
    results: dict = {"machine": {"python": platform.python_version(), "torch": torch.__version__,
                                 "threads": torch.get_num_threads(),
                                 "cpu": platform.processor() or platform.machine(), "device": str(distance.device),
                                 "lpips_backbone": "alexnet-imagenet" if pretrained else "alexnet-random"}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        manifest = write_physics_videos(tmp / "clips", args.clips, seed=0, long_fraction=0.25, progress=False)
        results["synthesis_s_per_clip"] = (time.perf_counter() - t) / args.clips

        # 1. per-sequence work: decode + subsample + LPIPS filter (what a build spends its time on)
        seqs, _ = timecatch.read_manifest(manifest, "videos")
        cfg = timecatch.TimeCatchConfig(out=tmp / "ds", lpips_random_backbone=not pretrained)
        decoded = sum(probe(s.video).n_frames for s in seqs)
        t = time.perf_counter()
        sampled = 0
        for s in seqs:
            done = timecatch.process_sequence(s, cfg, distance, tmp / "work")
            sampled += done["n_sampled"]
        dt = time.perf_counter() - t
        results["per_sequence"] = {"videos": len(seqs), "decoded_frames": decoded, "sampled_frames": sampled, "seconds": dt,
                                   "decoded_frames_per_s": decoded / dt, "sampled_frames_per_s": sampled / dt}

        # 2. LPIPS on the same consecutive pairs, interleaved repeats: one forward per pair (2 backbone
        # passes a pair), the pairs batched (the same passes, fewer calls), and the filter's path (threshold 0:
        # every consecutive distance taken, each frame's features computed once: pairs + 1 passes)
        frames = []
        for s in seqs:
            info = probe(s.video)
            frames += decode_frames(s.video, range(0, info.n_frames, 12))
            if len(frames) > args.pairs:
                break
        seq = frames[: args.pairs + 1]
        a, b = seq[:-1], seq[1:]
        distance(a[:2], b[:2])  # warm-up
        filter_near_duplicates(seq[:3], distance, 0.0)
        batched, single, once = [], [], []
        # Other jobs' CPU during the timed runs, in cores: on a shared 2-core machine a busy neighbour
        # stalls multi-threaded small calls (per pair most), and the ratios then say little.
        busy0, own0, wall0 = _machine_busy_s(), time.process_time(), time.perf_counter()
        for _ in range(args.repeats):
            t = time.perf_counter()
            d_batch = distance(a, b)
            batched.append(time.perf_counter() - t)
            t = time.perf_counter()
            d_single = np.array([distance([x], [y])[0] for x, y in zip(a, b, strict=True)])
            single.append(time.perf_counter() - t)
            t = time.perf_counter()
            kept, d_once = filter_near_duplicates(seq, distance, 0.0)
            once.append(time.perf_counter() - t)
        assert np.allclose(d_batch, d_single, atol=1e-12), "batched and per-pair LPIPS disagree"
        assert kept == list(range(len(seq))) and d_once == [quantize(d) for d in d_single], \
            "the filter's features-once distances differ from per-pair LPIPS"
        single_s = statistics.median(single)
        busy1 = _machine_busy_s()
        others = None if busy0 is None or busy1 is None else \
            max(0.0, (busy1 - busy0 - (time.process_time() - own0)) / (time.perf_counter() - wall0))
        results["lpips"] = {"pairs": len(a), "frame_size": list(a[0].shape), "batch_size": distance.frames_per_batch(a, per_item=2),
                            "batched_s": statistics.median(batched), "per_pair_s": single_s,
                            "features_once_s": statistics.median(once),
                            "speedup": single_s / statistics.median(batched),
                            "features_once_speedup": single_s / statistics.median(once),
                            "backbone_passes": {"per_pair": 2 * len(a), "batched": 2 * len(a), "features_once": len(seq)},
                            "other_jobs_cpu_cores": others}

        # 3. peak memory of whole builds (CLI, own process) for growing numbers of clips: should stay flat
        results["peak_rss_mb"] = {}
        for n in [int(x) for x in args.memory_clips.split(",") if x]:
            cmd = [sys.executable, "-m", "judgetrain", "build", "timecatch", "--out", str(tmp / f"mem{n}"),
                   "--synthetic", str(n), "--no-progress"] + ([] if pretrained else ["--lpips-random-backbone"])
            probe_rss = ("import resource, subprocess, sys; "
                         "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
                         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
            done = subprocess.run([sys.executable, "-c", probe_rss, *cmd], capture_output=True, text=True, check=True)
            rss_kb = int(done.stdout)
            results["peak_rss_mb"][n] = rss_kb / 1024

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    r, lp = results["per_sequence"], results["lpips"]
    print(f"machine: {results['machine']}")
    print(f"synthesis:        {results['synthesis_s_per_clip']:.3f} s per clip")
    print(f"per-sequence work: {r['decoded_frames_per_s']:.0f} decoded frames/s, "
          f"{r['sampled_frames_per_s']:.1f} sampled frames/s "
          f"({r['videos']} videos, {r['seconds']:.1f} s)")
    print(f"LPIPS, {lp['pairs']} pairs of {lp['frame_size']}: per pair {lp['per_pair_s']:.3f} s, "
          f"batched {lp['batched_s']:.3f} s ({lp['speedup']:.1f}x), filter with features once per frame "
          f"{lp['features_once_s']:.3f} s ({lp['features_once_speedup']:.1f}x faster than per pair)")
    if lp["other_jobs_cpu_cores"] is not None:
        print(f"  other jobs used {lp['other_jobs_cpu_cores']:.2f} CPU cores during the LPIPS runs")
    for n, mb in results["peak_rss_mb"].items():
        print(f"peak memory of a whole build from {n} clips: {mb:.0f} MB")
    print(f"written to {args.out}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
