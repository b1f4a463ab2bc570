"""Thumbnails of the frames the run browser shows, made once and content-addressed.

A frame's thumbnail is ``thumbs/<key>.jpg``: ``key`` is the sha256 of the image's bytes (a
record's image, as ``predictions.jsonl``'s ``frames`` names it) or, for a video frame, of the
video's sha256 (:func:`judgetrain.identity.sha256_file`), the frame index and the size. Each is
made once into a shared store (``<judgetrain cache>/thumbs``, :func:`judgetrain.identity.cache_dir`)
and linked (copied where a link cannot be made) into every page folder that shows it, so a
second run on the same items, or another ``--out``, makes none. Every file is written
atomically (:mod:`judgetrain.io`).
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.identity import cache_dir, sha256_file
from judgetrain.io import atomic_path, write_bytes

__all__ = ["THUMB_SIDE", "Thumbs", "jpeg", "resolve_frames", "video_key"]

THUMB_SIDE = 256  # longest side in pixels; never upscaled


def video_key(video: str | os.PathLike, index: int, side: int = THUMB_SIDE) -> str:
    """The thumbnail key of frame ``index`` (0-based) of ``video``, by the video's content."""
    return hashlib.sha256(f"video:{sha256_file(video)}:{index}:{side}".encode()).hexdigest()


def jpeg(image: Any, side: int = THUMB_SIDE) -> bytes:
    """``image`` (PIL, or an RGB array) as a JPEG whose longest side is at most ``side``."""
    from PIL import Image

    im = Image.fromarray(image) if not isinstance(image, Image.Image) else image
    im = im.convert("RGB")
    im.thumbnail((side, side))
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


class Thumbs:
    """The thumbnails of one page folder ``out`` (``out/thumbs``), made into the shared ``store``."""

    def __init__(self, out: str | os.PathLike, store: str | os.PathLike | None = None, side: int = THUMB_SIDE):
        self.folder = Path(out) / "thumbs"
        self.store = Path(store) if store is not None else cache_dir() / "thumbs"
        self.side = side
        self.made = 0  # thumbnails made in this call (not found in the store)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.store.mkdir(parents=True, exist_ok=True)

    def name(self, key: str) -> str:
        """The page-relative path of thumbnail ``key``."""
        return f"thumbs/{key}.jpg"

    def have(self, key: str) -> bool:
        """Whether ``key`` is in the page folder, linking it in from the store when it is there."""
        target = self.folder / f"{key}.jpg"
        if target.is_file():
            return True
        source = self.store / f"{key}.jpg"
        if not source.is_file():
            return False
        with atomic_path(target) as tmp:
            try:
                os.link(source, tmp)
            except OSError:  # another file system: a copy
                shutil.copyfile(source, tmp)
        return True

    def put(self, key: str, image: Any) -> None:
        """Make thumbnail ``key`` from ``image`` (PIL or array) into the store and the page folder."""
        write_bytes(self.store / f"{key}.jpg", jpeg(image, self.side))
        self.made += 1
        self.have(key)

    def put_bytes(self, data: bytes, key: str | None = None) -> str:
        """The thumbnail of an encoded image (its key: the sha256 of ``data``), made if missing."""
        from PIL import Image

        key = key or hashlib.sha256(data).hexdigest()
        if not self.have(key):
            self.put(key, Image.open(io.BytesIO(data)))
        return key

    def put_video(self, video: str | os.PathLike, indices: Iterable[int]) -> dict[int, str]:
        """The thumbnail keys of frames ``indices`` of ``video``; the missing ones are decoded in one pass."""
        from judgetrain.video import decode_frames

        keys = {i: video_key(video, i, self.side) for i in sorted(set(indices))}
        todo = [i for i, k in keys.items() if not self.have(k)]
        if todo:
            for i, frame in zip(todo, decode_frames(video, todo, max_side=self.side), strict=True):
                self.put(keys[i], frame)
        return keys


def resolve_frames(
    items: Sequence[dict[str, Any]],
    thumbs: Thumbs,
    images: Mapping[str, bytes] | None = None,
    progress: bool = True,
    desc: str = "thumbnails",
) -> list[str]:
    """Replace every frame ref of ``items`` (see :mod:`.items`) by its thumbnail's page path
    (``None`` where the frame cannot be had), making what is missing. ``images``: encoded
    images by sha256, for ``("sha256", hex)`` refs whose thumbnail is in neither folder.
    Returns what could not be shown, one line each."""
    from tqdm.auto import tqdm

    problems: list[str] = []
    videos: dict[str, set[int]] = {}
    refs = [ref for it in items for group in it.get("frames") or [] for ref in group["refs"]]
    for ref in refs:
        if ref and ref[0] == "video":
            videos.setdefault(ref[1], set()).add(ref[2])
    video_keys: dict[tuple[str, int], str | None] = {}
    for video, indices in tqdm(videos.items(), desc=f"{desc} (videos)", unit="video", disable=not progress or not videos):
        try:
            video_keys.update({(video, i): k for i, k in thumbs.put_video(video, indices).items()})
        except (OSError, RuntimeError, ValueError) as e:
            problems.append(f"{video}: {e}")
    done: dict[Any, str | None] = {}
    for it in tqdm(items, desc=desc, unit="item", disable=not progress):
        for group in it.get("frames") or []:
            group["thumbs"] = [_one(ref, thumbs, images, video_keys, done, problems) for ref in group.pop("refs")]
    return problems


def _one(
    ref: Any,
    thumbs: Thumbs,
    images: Mapping[str, bytes] | None,
    video_keys: Mapping[tuple[str, int], str | None],
    done: dict[Any, str | None],
    problems: list[str],
) -> str | None:
    kind = ref[0]
    if kind == "video":
        key = video_keys.get((ref[1], ref[2]))
        return thumbs.name(key) if key else None
    if kind == "image":  # an older run's dataset image: by its bytes
        image = ref[1]
        data = image.get("bytes") if image.get("bytes") is not None else Path(image["path"]).read_bytes()
        return thumbs.name(thumbs.put_bytes(data))
    key = ref[1]
    if key not in done:
        if thumbs.have(key):
            done[key] = thumbs.name(key)
        elif images is not None and key in images:
            done[key] = thumbs.name(thumbs.put_bytes(images[key], key))
        else:
            problems.append(f"frame {key[:12]}…: not in the dataset the run names")
            done[key] = None
    return done[key]
