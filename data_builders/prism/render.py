"""Layout parts → a task record: text parts merged, images loaded in the order shown,
and the P6 grid (one PNG per sequence: ⌈√n⌉ columns, row-major, numbered cells of the
record's largest frame, frames over ``GRID_MAX_CELL`` px shrunk to fit). PRISM, MIRAGE
and the ordering probe render through :func:`layout_record`.
Docs: "concepts/prism-mirage.md", "concepts/ordering-probe.md"."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from judgetrain import records

GRID_MAX_CELL = 448
GRID_PAD = 4


@lru_cache(maxsize=8)
def _font(size: int):
    return ImageFont.load_default(size=size)


def grid_geometry(n: int, cell: tuple[int, int]) -> dict:
    """Columns, rows, label band height and canvas size of an ``n``-frame grid with ``cell`` = (w, h)."""
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    band = max(18, cell[1] // 7)
    width = cols * cell[0] + (cols + 1) * GRID_PAD
    height = rows * (band + cell[1]) + (rows + 1) * GRID_PAD
    return {"cols": cols, "rows": rows, "band": band, "size": (width, height)}


def grid_cell_box(n: int, k: int, cell: tuple[int, int]) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of frame ``k``'s (0-based) cell area, below its number band."""
    g = grid_geometry(n, cell)
    col, row = k % g["cols"], k // g["cols"]
    x0 = GRID_PAD + col * (cell[0] + GRID_PAD)
    y0 = GRID_PAD + row * (g["band"] + cell[1] + GRID_PAD) + g["band"]
    return x0, y0, x0 + cell[0], y0 + cell[1]


def grid_cell_size(images: Iterable[Image.Image]) -> tuple[int, int]:
    """The cell size for ``images``: the largest width and height, at most GRID_MAX_CELL."""
    ims = list(images)
    return min(GRID_MAX_CELL, max(im.width for im in ims)), min(GRID_MAX_CELL, max(im.height for im in ims))


def compose_grid(images: Sequence[Image.Image], cell: tuple[int, int] | None = None) -> Image.Image:
    """One RGB image of ``images`` in numbered cells (⌈√n⌉ columns, row-major,
    numbers 1…n in a band above each frame). Frames are pasted unscaled,
    centred in their cell (shrunk to fit only when larger than the cell)."""
    cell = cell or grid_cell_size(images)
    n = len(images)
    g = grid_geometry(n, cell)
    canvas = Image.new("RGB", g["size"], (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    font = _font(max(10, round(g["band"] * 0.75)))
    for k, im in enumerate(images):
        im = im.convert("RGB")
        if im.width > cell[0] or im.height > cell[1]:
            im = im.copy()
            im.thumbnail(cell, Image.Resampling.LANCZOS)
        x0, y0, x1, y1 = grid_cell_box(n, k, cell)
        canvas.paste(im, (x0 + (cell[0] - im.width) // 2, y0 + (cell[1] - im.height) // 2))
        label = str(k + 1)
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        tx = x0 + (cell[0] - (right - left)) // 2 - left
        ty = y0 - g["band"] + (g["band"] - (bottom - top)) // 2 - top
        draw.text((tx, ty), label, fill=(0, 0, 0), font=font)
    return canvas


def _png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def materialize(parts: Sequence[tuple[str, Any]], load: Callable[[Any], bytes]) -> tuple[list[dict], list[bytes]]:
    """Turn layout parts into (prompt content, image bytes in the order shown).
    ``load(x)`` gives the bytes of image ``x``; grids share one cell size per record."""
    grids = [x for kind, xs in parts if kind == "grid" for x in xs]
    cell = None
    if grids:
        decoded = {x: Image.open(io.BytesIO(load(x))) for x in dict.fromkeys(grids)}
        cell = grid_cell_size(decoded.values())
    content: list[dict] = []
    images: list[bytes] = []
    for kind, value in parts:
        if kind == "text":
            if content and content[-1]["type"] == "text":
                content[-1]["text"] += "\n\n" + value
            else:
                content.append({"type": "text", "text": value})
            continue
        images.append(load(value) if kind == "image" else _png(compose_grid([decoded[x] for x in value], cell)))
        content.append({"type": "image", "text": None})
    return content, images


def layout_record(parts: Sequence[tuple[str, Any]], load: Callable[[Any], bytes], **fields: Any) -> dict:
    """A task record (``records.make_record``) whose user message is ``parts``
    in order, rather than make_record's images-then-instruction."""
    content, images = materialize(parts, load)
    rec = records.make_record(images=[{"bytes": b, "path": None} for b in images], instruction="", **fields)
    rec["prompt"] = [{"role": "user", "content": content}]
    return rec
