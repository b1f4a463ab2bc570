"""TimeCatch stores frames as a viewer sees them and when they were shown (issue 35): a video's
display matrix and a photo's EXIF orientation are applied, and a variable-frame-rate video is
sampled at the frames nearest each sampling time by their presentation timestamps.

The media are made here offline: MP4s with PyAV (explicit ``pts`` in a 1/1000 s time base; the
display matrix through ``VideoStream.set_display_rotation``), PNGs with Pillow's EXIF writer.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from PIL import Image

from judgetrain import records
from judgetrain.data_builders import timecatch
from judgetrain.video import mp4_codec

av = pytest.importorskip("av")

W, H = 64, 48
ORIENTATION = 0x0112  # the EXIF tag


def frame(k: int) -> np.ndarray:
    """Frame k: a flat grey of its own level, and a white block top left (so turns show)."""
    img = np.full((H, W, 3), 20 + 23 * k, np.uint8)
    img[: H // 2, : W // 4] = 255
    return img


def write_video(path, frames, times_ms, rotation=None):
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream(mp4_codec(), rate=10)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        if rotation is not None:
            stream.set_display_rotation(rotation)
        for rgb, t in zip(frames, times_ms, strict=True):
            f = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            f.pts, f.time_base = t, Fraction(1, 1000)
            container.mux(stream.encode(f))
        container.mux(stream.encode(None))


def _build(tmp_path, rows, kind, **options):
    manifest = tmp_path / "media" / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = timecatch.TimeCatchConfig(out=tmp_path / "out", **{kind: manifest}, lpips_random_backbone=True, lpips_threshold=0.0,
                                    tasks=["temporal_detect"], splits={"train": 1.0}, progress=False, **options)
    info = timecatch.build(cfg)
    gold = {}
    for r in records.load(cfg.out)["train"]:
        if r["perturbation"] == "none":
            gold[json.loads(r["meta"])["sequence_id"]] = (json.loads(r["meta"]), [np.asarray(im) for im in r["images"]])
    return info, gold


def close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and float(np.abs(a.astype(int) - b).mean()) < 8


def test_video_frames_are_sampled_by_timestamp_and_stored_upright(tmp_path):
    (tmp_path / "media").mkdir()
    # variable frame rate: the average rate (2 fps) puts frame 4 at 2 s; it was shown at 1.9 s
    times_ms = [0, 400, 700, 1750, 1900, 2600, 3050, 3900, 4100, 5000]
    write_video(tmp_path / "media" / "vfr.mp4", [frame(k) for k in range(10)], times_ms)
    write_video(tmp_path / "media" / "portrait.mp4", [frame(k) for k in range(5)], [0, 1000, 2000, 3000, 4000], rotation=90)
    rows = [{"id": "vfr", "video": "vfr.mp4", "source": "phone"}, {"id": "portrait", "video": "portrait.mp4", "source": "phone"}]
    _, gold = _build(tmp_path, rows, "videos", interval=["1.0"])

    meta, images = gold["vfr"]
    times = [Fraction(t, 1000) for t in times_ms]
    want = [min(range(10), key=lambda i: (abs(times[i] - k), i)) for k in range(6)]  # nearest 0, 1, …, 5 s; ties: earlier
    assert meta["source_frame_indices"] == want
    assert meta["times_s"] == [float(times[i]) for i in want]
    assert all(close(im, frame(i)) for im, i in zip(images, want, strict=True))

    meta, images = gold["portrait"]
    assert meta["source_frame_indices"] == [0, 1, 2, 3, 4]
    assert all(close(im, np.rot90(frame(k))) for k, im in enumerate(images))  # turned as the matrix says


@pytest.mark.parametrize(("tag", "turns"), [(6, -1), (8, 1), (3, 2)])  # EXIF: 6 = turn 90° clockwise to show
def test_frame_folders_apply_the_exif_orientation(tmp_path, tag, turns):
    (tmp_path / "media").mkdir()
    names = []
    for k in range(4):
        exif = Image.Exif()
        exif[ORIENTATION] = tag
        Image.fromarray(frame(k)).save(tmp_path / "media" / f"{k}.png", exif=exif)
        names.append(f"{k}.png")
    _, gold = _build(tmp_path, [{"id": "photos", "frames": names, "source": "phone"}], "frames")
    _, images = gold["photos"]
    assert all(close(im, np.rot90(frame(k), k=turns)) for k, im in enumerate(images))
