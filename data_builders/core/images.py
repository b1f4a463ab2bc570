"""The images a record stores: a file checked by decoding it whole, any Pillow mode as 8-bit
RGB and upright (its EXIF orientation applied), and the bytes kept for a file (the source's own
bytes when it is already an upright RGB PNG or JPEG, so a record's image is byte-identical to it).
Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

__all__ = ["DECODE_ERRORS", "IMAGE_RULES", "KEPT_FORMATS", "check_image", "image_bytes", "image_problem", "to_rgb", "upright"]

KEPT_FORMATS = ("PNG", "JPEG")  # stored as they are; anything else is converted once to PNG
# What Pillow raises on a file it cannot decode: OSError (truncated, unidentified), ValueError and
# SyntaxError (bad headers of some formats), the decompression-bomb error, and its warning when
# warnings are errors (python -W error)
DECODE_ERRORS = (
    OSError,
    ValueError,
    SyntaxError,
    RecursionError,
    MemoryError,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)
# How a file becomes the pixels a record shows: part of every cache key over read images (TimeCatch's
# OUT.work/), so that frames read by an earlier rule (sideways, EXIF orientation not applied) are read again.
IMAGE_RULES = "pillow; EXIF orientation applied; to_rgb"
# What reading a malformed EXIF block may raise, besides DECODE_ERRORS
_EXIF_ERRORS = (*DECODE_ERRORS, struct.error, KeyError, IndexError, TypeError)


def image_problem(path: Path) -> str | None:
    """Why ``path`` is not an image file Pillow will decode, from the file system and the header
    alone (a folder, a missing file, a header claiming more pixels than Pillow decodes), or None."""
    if path.is_dir():
        return "a folder, not an image file; give the path of the image file"
    if not path.is_file():
        return "file not found; fix the path or put the image there"
    try:
        with Image.open(path):
            pass
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        return f"too large to decode ({str(e).rstrip('.')}); shrink or replace the image, or drop the line"
    except DECODE_ERRORS:
        return None  # the decoder says what is wrong (check_image, or the builder's own reading)
    return None


def check_image(path: Path, what: str) -> int:
    """Fully decode the image at ``path`` (so a truncated file is caught here,
    not mid-build); return its size in bytes. Raises ValueError saying why."""
    problem = image_problem(path)
    if problem:
        raise ValueError(f"{what}: {path}: {problem}")
    try:
        with Image.open(path) as im:
            im.load()
            upright(im)  # a malformed orientation tag fails here, with the line, not mid-build
    except DECODE_ERRORS as e:
        raise ValueError(f"{what}: unreadable image {path} ({e}); replace the file or drop the line") from None
    return path.stat().st_size


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation tag of ``im`` (1…8; 1 when it has none)."""
    try:
        return int(im.getexif().get(Image.ExifTags.Base.Orientation, 1) or 1)
    except _EXIF_ERRORS as e:
        raise ValueError(f"malformed EXIF data ({type(e).__name__}: {e})") from None


def upright(im: Image.Image) -> Image.Image:
    """``im`` turned and mirrored as its EXIF orientation tag says (``PIL.ImageOps.exif_transpose``,
    as a phone's portrait photo is shown), the tag then removed; ``im`` itself when it has no tag
    or tag 1. Raises ``ValueError`` for a malformed EXIF block."""
    if _orientation(im) == 1:
        return im
    try:
        turned = ImageOps.exif_transpose(im)
    except _EXIF_ERRORS as e:
        raise ValueError(f"malformed EXIF data ({type(e).__name__}: {e})") from None
    return turned if turned is not None else im


def to_rgb(im: Image.Image) -> Image.Image:
    """``im`` as 8-bit RGB and upright (:func:`upright`): 16- and 32-bit integer images scaled to
    0…255 (Pillow's own conversion clips them), palette, grey, CMYK and alpha images converted."""
    im = upright(im)
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.clip(np.asarray(im, dtype=np.int64), 0, None)
        top = int(arr.max())
        # 16-bit samples keep their 8 most significant bits; wider "I" images are scaled by their maximum
        scaled = arr >> 8 if top <= 65535 else arr * 255 // top
        return Image.fromarray(scaled.astype(np.uint8)).convert("RGB")
    if im.mode == "F":
        return Image.fromarray(np.clip(np.asarray(im), 0, 255).astype(np.uint8)).convert("RGB")
    if im.mode == "P" and "transparency" in im.info:
        im = im.convert("RGBA")
    return im.convert("RGB")


def image_bytes(path: str | os.PathLike) -> bytes:
    """The bytes a record stores for an image file: the file itself when it is an
    8-bit RGB PNG or JPEG with no EXIF turn (no re-encoding, so a record's image is byte-identical
    to the source), else the image converted once by :func:`to_rgb` (upright, RGB) and stored as
    PNG, so every layout shows the same upright RGB pixels."""
    data = Path(path).read_bytes()
    with Image.open(io.BytesIO(data)) as im:
        if im.format in KEPT_FORMATS and im.mode == "RGB" and _orientation(im) == 1:
            return data
        buf = io.BytesIO()
        to_rgb(im).save(buf, format="PNG")
        return buf.getvalue()
