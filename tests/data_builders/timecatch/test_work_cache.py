"""TimeCatch's work cache (``OUT.work/sequences/…``) is keyed by everything its result depends on
(issue 35): a build with another seed (which draws the random LPIPS backbone), backbone,
threshold, interval, media content, reading rule or builder version recomputes a sequence's
frames instead of reusing another build's; a build with nothing changed reuses them.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judgetrain import records
from judgetrain.cli import main as cli
from judgetrain.data_builders import timecatch
from judgetrain.data_builders.timecatch import sequences
from judgetrain.perceptual import LpipsDistance


@pytest.fixture(scope="module")
def small_clips(tmp_path_factory) -> Path:
    """Two short, small synthetic clips (64x48 px, 6–7.5 s: five frames at 1.5 s), so LPIPS is quick."""
    from judgetrain.data_builders.synthetic import write_physics_videos

    return write_physics_videos(tmp_path_factory.mktemp("small"), 2, seed=3, size=(64, 48), duration_range_s=(6.0, 7.5),
                                progress=False)


def clips_manifest(tmp_path: Path, small_clips: Path) -> Path:
    """A videos manifest of the small clips, copied under ``tmp_path/clips`` (so they can be changed)."""
    root = tmp_path / "clips"
    root.mkdir()
    rows = [json.loads(line) for line in small_clips.read_text().splitlines()]
    for row in rows:
        shutil.copy(small_clips.parent / row["video"], root / Path(row["video"]).name)
        row["video"] = Path(row["video"]).name
    (root / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "manifest.jsonl"


def same_size(*videos: bytes) -> list[bytes]:
    """MP4 files padded by a top-level ``free`` box (which demuxers skip) to one size."""
    size = max(len(v) for v in videos) + 16
    return [v + (size - len(v)).to_bytes(4, "big") + b"free" + bytes(size - len(v) - 8) for v in videos]


class Cache:
    """One sequence's cached work: :meth:`prime` computes a build's result and marks it; :meth:`reused`
    runs another build over a copy of that marked cache, and only a reuse returns the mark."""

    def __init__(self, seq, tmp_path: Path):
        self.seq, self.tmp, self.runs = seq, tmp_path, 0
        self.networks: dict[tuple, LpipsDistance] = {}

    def run(self, cfg, work: Path) -> dict:
        made = (cfg.lpips_net, cfg.lpips_pretrained, cfg.seed)  # what the build's LpipsDistance is made from
        if made not in self.networks:
            self.networks[made] = LpipsDistance(cfg.lpips_net, pretrained_backbone=cfg.lpips_pretrained, device="cpu", seed=cfg.seed)
        return timecatch.process_sequence(self.seq, cfg, self.networks[made], work)

    def prime(self, cfg) -> None:
        self.primed = self.tmp / "primed"
        shutil.rmtree(self.primed, ignore_errors=True)
        self.run(cfg, self.primed)
        (meta,) = self.primed.rglob("seq.json")
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "mark": True}))

    def reused(self, cfg) -> bool:
        self.runs += 1
        work = self.tmp / f"work-{self.runs}"
        shutil.copytree(self.primed, work)
        return self.run(cfg, work).get("mark") is True


def test_each_input_of_a_cached_sequence_is_in_its_key(tmp_path, small_clips, monkeypatch):
    manifest = clips_manifest(tmp_path, small_clips)
    (seq, other), _ = timecatch.read_manifest(manifest, "videos")
    base = timecatch.TimeCatchConfig(out=tmp_path / "out", videos=manifest, seed=1, lpips_random_backbone=True, progress=False)
    cache = Cache(seq, tmp_path)
    cache.prime(base)
    assert cache.reused(base)  # nothing changed: the cached frames
    assert cache.reused(replace(base, device="cpu", progress=True, keep_work=True, tasks=["frame_detect"]))  # nor here
    changed = {
        "--seed (draws the random backbone)": replace(base, seed=2),
        "--lpips-net": replace(base, lpips_net="squeeze"),
        "--lpips-threshold": replace(base, lpips_threshold=0.2),
        "--interval S": replace(base, interval=["1.0"]),
        "--interval SOURCE=S": replace(base, interval=[f"{seq.source}=3.0"]),
    }
    for what, cfg in changed.items():
        assert not cache.reused(cfg), what
    for name, value in (("VERSION", "0.0.1"), ("DECODE_RULES", "an older decoder")):  # the builder's, the reader's
        with monkeypatch.context() as m:
            m.setattr(sequences, name, value)
            assert not cache.reused(base), name
    # the media by content: another clip written in place, with the same size and modification time
    mine, theirs = same_size(seq.video.read_bytes(), other.video.read_bytes())
    seq.video.write_bytes(mine)
    cache.prime(base)
    stat = seq.video.stat()
    seq.video.write_bytes(theirs)
    os.utime(seq.video, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not cache.reused(base)
    # the backbone's own weights (pretrained or random) are in the key, beside the choice
    distance = cache.networks[(base.lpips_net, False, 1)]
    key = sequences.work_key(seq, base, distance)
    assert key["lpips"]["weights_sha256"] == sequences.network_digest(distance)
    assert sequences.work_key(seq, replace(base, lpips_random_backbone=False), distance) != key


def test_frames_read_again_when_an_image_changes_in_place(tmp_path):
    root = tmp_path / "frames"
    root.mkdir()
    rng = np.random.default_rng(0)
    for k in range(4):  # BMP: same size whatever the pixels, so only the content tells a change
        Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(root / f"{k}.bmp")
    row = {"id": "s", "frames": [f"{k}.bmp" for k in range(4)], "source": "drivelm"}
    (root / "manifest.jsonl").write_text(json.dumps(row) + "\n")
    (seq,), _ = timecatch.read_manifest(root / "manifest.jsonl", "frames")
    base = timecatch.TimeCatchConfig(out=tmp_path / "out", frames=root / "manifest.jsonl", lpips_random_backbone=True,
                                     progress=False)
    cache = Cache(seq, tmp_path)
    cache.prime(base)
    assert cache.reused(base)
    first = seq.frames[0]
    stat = first.stat()
    Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(first)
    os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert first.stat().st_size == stat.st_size
    assert not cache.reused(base)


def test_a_rebuild_with_another_seed_over_kept_work_equals_a_clean_build(tmp_path, small_clips, monkeypatch):
    """The issue's case: a --keep-work build with seed 1, then --seed 2 --overwrite into the same
    folder, gave other records than a clean seed-2 build (seed 1's frames and distances reused)."""
    monkeypatch.chdir(tmp_path)
    manifest = clips_manifest(tmp_path, small_clips)
    # threshold 0 keeps every frame, so what the seed changes is the distances the random backbone measures
    common = ["build", "timecatch", "--videos", str(manifest), "--lpips-random-backbone", "--lpips-threshold", "0",
              "--tasks", "temporal_detect", "--splits", "train=1", "--no-progress"]
    assert cli([*common, "--out", "ds", "--seed", "1", "--keep-work"]) == 0
    assert cli([*common, "--out", "ds", "--seed", "2", "--overwrite"]) == 0
    assert cli([*common, "--out", "clean", "--seed", "2"]) == 0
    rebuilt, clean = records.read_build_info(Path("ds")), records.read_build_info(Path("clean"))
    assert rebuilt["seed"] == 2
    assert rebuilt["splits"] == clean["splits"]


def test_synthetic_clips_of_another_seed_are_not_kept(tmp_path):
    """``--synthetic`` clips live in OUT.work/synthetic under names that say neither seed nor size:
    a seed-2 build over a kept (or killed) seed-1 build's clips made them seed 1's."""
    from judgetrain.data_builders.synthetic import write_frame_folders, write_physics_videos

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    for write, options in ((write_physics_videos, {"duration_range_s": (2.0, 3.0)}), (write_frame_folders, {})):
        shared, clean = tmp_path / write.__name__ / "shared", tmp_path / write.__name__ / "clean"
        write(shared, 2, seed=1, progress=False, **options)
        write(shared, 2, seed=2, progress=False, **options)
        write(clean, 2, seed=2, progress=False, **options)
        assert files(shared) == files(clean)
        write(shared, 2, seed=2, size=(96, 64), progress=False, **options)  # another size: made again too
        assert files(shared) != files(clean)
