"""Run-browser benchmark: how long `judgetrain eval view` takes to write the page set of a large run.

    python benchmarks/bench_view.py [--items 20000] [--images 600] [--frames 6]

Writes a synthetic TimeCatch-like run folder (``--items`` prediction rows, each with a rendered
prompt of about 1 kB and ``--frames`` frames drawn from ``--images`` distinct 160x120 noise PNGs,
as TimeCatch's tasks share the frames of their sequences), makes the thumbnails of the
images (timed: thumbnails per second), then times the page set written three times: cold
(thumbnails linked in from the store), again into the same folder (all present) and into a
new folder. Prints a table and writes benchmarks/out/view.json.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from judgetrain.eval.view.page import write_view
from judgetrain.eval.view.thumbs import Thumbs
from judgetrain.io import write_json, write_rows, write_text

TASKS = ("temporal_detect", "temporal_localize", "frame_detect", "frame_localize")


def synthetic_run(folder: Path, n_items: int, n_images: int, n_frames: int, seed: int = 0) -> list[bytes]:
    """A run folder of ``n_items`` rows; returns the encoded images its frames name."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(n_images):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)).save(buf, format="PNG")
        images.append(buf.getvalue())
    hashes = [hashlib.sha256(b).hexdigest() for b in images]
    rows = []
    for i in range(n_items):
        probs = rng.dirichlet(np.ones(2)).tolist()
        pred = ["yes", "no"][int(np.argmax(probs))]
        gold = ["yes", "no"][i % 2]
        start = int(rng.integers(0, n_images - n_frames))
        rows.append({"id": f"tc-{i:06d}", "task": TASKS[i % 4], "source": f"source-{i % 3}", "label": gold,
                     "prediction": pred, "correct": pred == gold, "choices": ["yes", "no"], "probs": probs,
                     "prompt_text": "<|im_start|>user\n" + "<|vision_start|><|image_pad|><|vision_end|>" * n_frames
                                    + "Was any frame swapped? " * 40 + "<|im_end|>\n<|im_start|>assistant\n",
                     "frames": hashes[start:start + n_frames]})
    folder.mkdir(parents=True, exist_ok=True)
    write_rows(folder / "predictions.jsonl", rows)
    write_json(folder / "run.json", {"evaluation": "timecatch", "model": "synthetic", "items": {"n": n_items}})
    write_text(folder / "report.md", "# TimeCatch\n\n| task | accuracy |\n|---|---:|\n| all | 50.0 |\n")
    return images


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--images", type=int, default=600)
    ap.add_argument("--frames", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        images = synthetic_run(tmp / "run", args.items, args.images, args.frames)
        store = Thumbs(tmp / "warm", tmp / "store")
        t0 = time.perf_counter()
        for data in images:
            store.put_bytes(data)
        thumbs_s = time.perf_counter() - t0
        times = {}
        for label, out in (("cold (thumbnails linked from the store)", "page"), ("again, same folder", "page"),
                           ("new folder", "page2")):
            t0 = time.perf_counter()
            write_view([tmp / "run"], tmp / out, progress=False, store=tmp / "store")
            times[label] = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in (tmp / "page" / "data").iterdir())
    result = {"items": args.items, "images": args.images, "frames": args.frames,
              "thumbnails_per_s": args.images / thumbs_s, "page_s": times, "data_mb": size / 1e6,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    print(f"thumbnails: {args.images} in {thumbs_s:.2f} s ({result['thumbnails_per_s']:.0f}/s)")
    for label, s in times.items():
        print(f"page set of {args.items} items, {label}: {s:.2f} s")
    print(f"data files: {result['data_mb']:.1f} MB")
    out = Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    write_json(out / "view.json", result)


if __name__ == "__main__":
    main()
