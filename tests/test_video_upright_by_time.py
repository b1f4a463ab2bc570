"""Videos are decoded as a player shows them and sampled by time (issue 35).

A phone's portrait video stores its frames sideways plus a display matrix ("rotate 90"); a
variable-frame-rate video stamps each frame with its own presentation time. Both are written
here, offline, with PyAV: the display matrix through ``VideoStream.set_display_rotation``
(counter-clockwise degrees, then the mirrors, as PyAV documents it and reads it back through
``VideoFrame.rotation``), the timestamps as explicit ``pts`` in a 1/1000 s time base.
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest

from judgetrain.video import FrameCache, VideoDecodeError, decode_frames, frames_every, mp4_codec

av = pytest.importorskip("av")

W, H = 64, 48  # LPIPS (alex) takes 31 px and up on each side


def _level(k: int) -> int:
    return 20 + 23 * k  # frame k is a flat grey of this level: recognisable after compression


def _pattern() -> np.ndarray:
    """A frame whose orientation shows: a white block top left, a grey one bottom right."""
    img = np.zeros((H, W, 3), np.uint8)
    img[: H // 2, : W // 4] = 255
    img[H // 2 :, 3 * W // 4 :] = 128
    return img


def write_video(path, frames, times_ms=None, *, rotation=None, hflip=False, matrix=None):
    """An MP4 of ``frames`` at ``times_ms`` (default 10 fps), with a display rotation or matrix."""
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream(mp4_codec(), rate=10)
        stream.width, stream.height, stream.pix_fmt = frames[0].shape[1], frames[0].shape[0], "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        if rotation is not None:
            stream.set_display_rotation(rotation, hflip=hflip)
        if matrix is not None:
            stream.set_display_matrix(matrix)
        for k, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts, frame.time_base = (times_ms[k] if times_ms else 100 * k), Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def nearest(times: list[Fraction], target: Fraction) -> int:
    """The index of the frame nearest ``target`` (the earlier one on a tie), by brute force, exactly."""
    return min(range(len(times)), key=lambda i: (abs(times[i] - target), i))


# A variable-frame-rate clip: frames bunch up and spread out (the average rate is 2 fps, but
# the frame the average puts at 1.5 s is stamped 1.9 s); 3.9 and 4.1 s tie around 4.0 s.
VFR_MS = [0, 400, 700, 1750, 1900, 2600, 3050, 3900, 4100, 5000]


def test_variable_frame_rate_is_sampled_by_presentation_time(tmp_path):
    path = write_video(tmp_path / "vfr.mp4", [np.full((H, W, 3), _level(k), np.uint8) for k in range(len(VFR_MS))], VFR_MS)
    times = [Fraction(t, 1000) for t in VFR_MS]
    for interval in (1.0, 1.5, 0.3):
        got = frames_every(path, interval)
        targets = [k * Fraction(interval) for k in range(int(times[-1] / Fraction(interval)) + 1)]
        want = [nearest(times, t) for t in targets]
        assert got.indices == want, interval
        assert got.times_s == pytest.approx([float(times[i]) for i in want])  # the frame's own time, not index / average fps
        assert [round(float(f.mean())) for f in got.frames] == pytest.approx([_level(i) for i in want], abs=3)
        assert got.n_frames == len(VFR_MS)


def test_constant_frame_rate_sampling_is_the_frame_nearest_each_time(tmp_path):
    # 10 fps: the frames nearest 0, 0.25, 0.5, … s are every 2.5th frame, a tie each second one
    path = write_video(tmp_path / "cfr.mp4", [np.full((H, W, 3), _level(k % 10), np.uint8) for k in range(23)])
    got = frames_every(path, 0.25)
    times = [Fraction(k, 10) for k in range(23)]
    assert got.indices == [nearest(times, k * Fraction(1, 4)) for k in range(9)]
    assert got.fps == 10.0


@pytest.mark.parametrize(("rotation", "hflip"), [(90, False), (-90, False), (180, False), (0, True), (90, True)])
def test_display_matrix_turns_every_decoded_frame_upright(tmp_path, rotation, hflip):
    img = _pattern()
    path = write_video(tmp_path / "turned.mp4", [img] * 4, rotation=rotation, hflip=hflip)
    shown = np.rot90(img, k=rotation // 90)  # what a player shows: turned counter-clockwise, then mirrored
    shown = shown[:, ::-1] if hflip else shown

    def close(a, b):
        return a.shape == b.shape and float(np.abs(a.astype(int) - b).mean()) < 8

    by_index = decode_frames(path, [0, 3])
    by_time = frames_every(path, 0.1).frames
    resized = decode_frames(path, [1], max_side=32)[0]
    assert all(close(f, shown) for f in [*by_index, *by_time])
    assert not close(by_index[0], img)  # the stored (sideways) frame is not what is returned
    assert resized.shape[:2] == (shown.shape[0] // 2, shown.shape[1] // 2)


def test_a_display_matrix_at_an_odd_angle_is_a_located_error(tmp_path):
    c = round(65536 * 0.7071)
    path = write_video(tmp_path / "tilted.mp4", [_pattern()] * 2, matrix=[c, -c, 0, c, c, 0, 0, 0, 1 << 30])
    with pytest.raises(VideoDecodeError, match=r"tilted\.mp4: its display matrix turns the picture by -?45\.0°"):
        frames_every(path, 1.0)


def same_size_videos(tmp_path, *contents) -> list[bytes]:
    """MP4 bytes of each list of frames, padded by a top-level ``free`` box (which demuxers skip) to one size."""
    data = [write_video(tmp_path / f"v{k}.mp4", frames).read_bytes() for k, frames in enumerate(contents)]
    size = max(len(d) for d in data) + 16
    return [d + (size - len(d)).to_bytes(4, "big") + b"free" + bytes(size - len(d) - 8) for d in data]


def test_frame_cache_files_are_keyed_by_content(tmp_path):
    old, new = same_size_videos(
        tmp_path, [np.full((H, W, 3), _level(k), np.uint8) for k in range(3)], [np.full((H, W, 3), _level(9 - k), np.uint8) for k in range(3)]
    )
    video, cache_dir = tmp_path / "clip.mp4", tmp_path / "cache"
    video.write_bytes(old)
    first, again = FrameCache(None, cache_dir=cache_dir), FrameCache(None, cache_dir=cache_dir)
    first.get(video, [0, 2])
    again.get(video, [0, 2])
    assert (first.decodes, again.decodes) == (1, 0)  # the same file: read from the cache's files
    stat = video.stat()
    video.write_bytes(new)  # replaced in place: same path, size and modification time, other frames
    os.utime(video, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    third = FrameCache(None, cache_dir=cache_dir)
    frames = third.get(video, [0, 2])
    assert third.decodes == 1
    assert [round(float(f.mean())) for f in frames] == pytest.approx([_level(9), _level(7)], abs=3)
