"""Procedures: step-by-step image sequences, the gold sequences of PRISM and the ordering probe.

:func:`read_procedures` parses a procedure manifest (JSON Lines, one procedure per line,
bad lines become located skips); :func:`load_procedures` is the builders' source step;
:func:`write_procedures` renders the offline synthetic set (six categories whose order
can be checked by eye) in that manifest format; :func:`image_bytes` is what a record
stores for an image. Docs: "concepts/prism-mirage.md", "concepts/ordering-probe.md".
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw
from tqdm.auto import tqdm

from judgetrain.io import atomic_folder, write_rows
from judgetrain.jsonl import inside, json_kind, optional_text, text
from judgetrain.seeding import derive_seed

from .core.common import Skip
from .core.images import check_image
from .core.manifests import nothing_left, read_manifest_lines, report_skips

__all__ = [
    "CATEGORIES",
    "DEFAULT_SOURCE",
    "Procedure",
    "SOURCE",
    "Step",
    "load_procedures",
    "read_procedures",
    "render_procedure",
    "write_procedures",
]

SOURCE = "synthetic-procedures"
DEFAULT_SOURCE = "procedures"
VERSION = "1.0.0"
CATEGORIES = ("pizza", "layered-drink", "block-tower", "polygon-drawing", "plant-growth", "clock")
DEFAULT_STEPS_RANGE = (4, 8)
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
BLOCK_COLORS = {
    "red": (200, 40, 40),
    "blue": (45, 80, 215),
    "green": (40, 150, 60),
    "yellow": (240, 205, 40),
    "purple": (135, 50, 190),
    "orange": (240, 135, 30),
    "cyan": (40, 200, 210),
    "brown": (130, 80, 35),
}
LIQUIDS = {
    "grenadine": (190, 20, 45),
    "orange juice": (250, 150, 30),
    "lemonade": (245, 230, 110),
    "blue curaçao": (30, 110, 220),
    "milk": (250, 250, 245),
    "cola": (70, 35, 20),
    "mint syrup": (60, 190, 90),
    "grape juice": (110, 40, 120),
}
TOPPINGS = ("pepperoni slices", "black olives", "basil leaves", "mushrooms", "green peppers")
TOPPING_NAMES = {
    "pepperoni slices": "pepperoni",
    "black olives": "olive",
    "basil leaves": "basil",
    "mushrooms": "mushroom",
    "green peppers": "pepper",
}
POLYGONS = {4: "square", 5: "pentagon", 6: "hexagon", 7: "heptagon", 8: "octagon", 9: "nonagon", 10: "decagon"}
FLOWER_COLORS = {
    "red": (215, 40, 50),
    "yellow": (245, 210, 40),
    "pink": (240, 120, 170),
    "purple": (140, 70, 200),
    "white": (250, 250, 250),
}


# --------------------------------------------------------------------------- the manifest


@dataclass(frozen=True)
class Step:
    """One step of a procedure: its instruction text and its image file."""

    text: str
    image: Path


@dataclass
class Procedure:
    """A gold procedure: steps in chronological order (``steps[0]`` first)."""

    id: str
    category: str
    steps: list[Step]
    title: str = ""
    source: str = DEFAULT_SOURCE
    manifest: str = ""
    line: int | None = None
    image_bytes_total: int = field(default=0, compare=False)

    @property
    def n(self) -> int:
        return len(self.steps)

    @property
    def texts(self) -> list[str]:
        return [s.text for s in self.steps]

    @property
    def images(self) -> list[Path]:
        return [s.image for s in self.steps]


def read_procedures(path: str | os.PathLike) -> tuple[list[Procedure], list[Skip]]:
    """Parse a procedure manifest with :func:`judgetrain.jsonl.read_jsonl`, one procedure per line::

        {"id": "coin-0042", "category": "make-pizza", "title": "Make a pizza", "source": "coin",
         "steps": [{"text": "Roll out the dough.", "image": "coin-0042/0.jpg"}, ...]}

    ``id``, ``category`` and ``steps`` (non-empty, chronological, each with a non-empty
    ``text`` and an ``image``) are required; ``title`` (shown as "Task: …") and ``source``
    (default :data:`DEFAULT_SOURCE`) are optional, null meaning the default; an integer ``id``
    is taken as its string; other keys are ignored. Image paths are relative to the
    manifest's folder and may not leave it. Every bad line — not UTF-8, not JSON, not an
    object, a missing or mistyped field, a path outside the manifest's folder, a missing or
    unreadable image, a duplicate id — becomes a :class:`Skip` naming the manifest and line
    (``field: problem; fix``); nothing raises except a missing manifest."""
    return read_manifest_lines(
        path, _procedure, what="procedure manifest", noun="procedure", id_hint="a non-empty string naming the procedure"
    )


def _procedure(row: dict, sid: str, path: Path, line: int) -> Procedure:
    """One manifest line as a :class:`Procedure`; ``ValueError("field: problem; fix")`` otherwise."""
    category = text(row, "category", 'name it, e.g. "make-pizza" (semantic outliers come from other categories)')
    title = optional_text(row, "title", "what the procedure achieves, or leave it out")
    source = text(row, "source", 'the dataset\'s name, e.g. "coin", or leave it out', default=DEFAULT_SOURCE)
    raw = row.get("steps")
    fix = 'give a non-empty list of {"text", "image"} objects in chronological order'
    if raw is None:
        raise ValueError(f"steps: missing; {fix}")
    if not isinstance(raw, list):
        raise ValueError(f"steps: {json_kind(raw)}, not an array; {fix}")
    if not raw:
        raise ValueError(f"steps: empty; {fix}")
    steps, total = [], 0
    for k, step in enumerate(raw):
        if not isinstance(step, dict):
            raise ValueError(f'steps[{k}]: {json_kind(step)}, not an object; write {{"text": …, "image": …}}')
        try:
            words = text(step, "text", "the step's instruction, a non-empty string")
        except ValueError as e:
            raise ValueError(f"steps[{k}].{e}") from None
        image = inside(path.parent, step.get("image"), f"steps[{k}].image")
        total += check_image(image, f"steps[{k}].image")
        steps.append(Step(words.strip(), image))
    return Procedure(sid, category, steps, title.strip(), source, str(path), line, total)


def load_procedures(
    manifest: Path | None, synthetic: int, work: Path, *, seed: int, size: int, progress: bool, strict: bool, min_steps: int
) -> tuple[Path, list[Procedure], list[Procedure], list[Skip]]:
    """The builders' source step: read ``manifest``, or first write ``synthetic``
    procedures under ``work/synthetic`` and read those. Returns (manifest, kept,
    too short (< ``min_steps`` steps), skipped). Skips are printed; under
    ``strict`` any of them fails the build, as does having nothing to keep."""
    if manifest is None:
        manifest = write_procedures(work / "synthetic", synthetic, seed=seed, size=size, progress=progress)
    procedures, skips = read_procedures(manifest)
    report_skips(skips, strict)
    kept = [p for p in procedures if p.n >= min_steps]
    short = [p for p in procedures if p.n < min_steps]
    if not kept:
        raise nothing_left(
            manifest,
            "procedure",
            len(procedures),
            skips,
            f"no procedure with {min_steps}+ steps in {manifest} ({len(short)} too short, {len(skips)} skipped)",
        )
    return Path(manifest), kept, short, skips


# --------------------------------------------------------------------------- the synthetic renderer


def _pastel(rng: np.random.Generator) -> tuple[int, int, int]:
    r, g, b = (int(x) for x in rng.integers(215, 250, size=3))
    return r, g, b


def _plan(category: str, n: int, rng: np.random.Generator) -> dict:
    """Everything random about one procedure, drawn once: texts and drawing parameters."""
    p: dict[str, Any] = {"category": category, "n": n, "background": _pastel(rng)}
    if category == "pizza":
        toppings = [TOPPINGS[i] for i in rng.choice(len(TOPPINGS), size=n - 4, replace=False)]
        p["toppings"] = toppings
        p["cheese"] = [
            (float(r), float(a))
            for r, a in zip(np.sqrt(rng.uniform(0, 1, 28)) * 36, rng.uniform(0, 2 * math.pi, 28), strict=True)
        ]
        p["spots"] = [
            [
                (float(r), float(a))
                for r, a in zip(np.sqrt(rng.uniform(0.05, 1, 6)) * 34, rng.uniform(0, 2 * math.pi, 6), strict=True)
            ]
            for _ in toppings
        ]
        p["burn"] = [
            (float(r), float(a))
            for r, a in zip(np.sqrt(rng.uniform(0, 1, 10)) * 36, rng.uniform(0, 2 * math.pi, 10), strict=True)
        ]
        texts = [
            "Roll the dough out into a round pizza base.",
            "Spread tomato sauce over the base.",
            "Sprinkle grated cheese over the sauce.",
        ]
        texts += [f"Add the {t}." for t in toppings]
        texts.append("Bake the pizza until the crust is golden brown.")
        names = [TOPPING_NAMES[t] for t in toppings]
        listed = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
        title = f"Make a {listed} pizza" if listed else "Make a cheese pizza"
    elif category == "layered-drink":
        liquids = [list(LIQUIDS)[i] for i in rng.choice(len(LIQUIDS), size=n, replace=False)]
        p["liquids"] = liquids
        texts = [f"Pour {liquids[0]} into the empty glass."]
        texts += [f"Slowly pour {liquids[k]} on top of the {liquids[k - 1]}." for k in range(1, n)]
        title = f"Make a layered drink with {n} layers"
    elif category == "block-tower":
        colors = [list(BLOCK_COLORS)[i] for i in rng.choice(len(BLOCK_COLORS), size=n, replace=False)]
        p["colors"] = colors
        p["widths"] = [int(w) for w in rng.integers(44, 76, size=n)]
        p["shifts"] = [int(s) for s in rng.integers(-6, 7, size=n)]
        texts = [f"Place the {colors[0]} block on the table."]
        texts += [f"Place the {colors[k]} block on the {colors[k - 1]} block." for k in range(1, n)]
        title = f"Build a tower of {n} blocks"
    elif category == "polygon-drawing":
        shape = POLYGONS[n]
        p["rotation"] = float(rng.uniform(0, 2 * math.pi))
        p["color"] = tuple(int(c) for c in rng.integers(20, 140, size=3))
        texts = [f"Draw the {ORDINALS[k]} side of the {shape}." for k in range(n - 1)]
        texts.append(f"Draw the last side to close the {shape}.")
        title = f"Draw {'an' if shape[0] in 'aeiou' else 'a'} {shape}"
    elif category == "plant-growth":
        flower = list(FLOWER_COLORS)[int(rng.integers(len(FLOWER_COLORS)))]
        p["flower"] = flower
        p["pot"] = tuple(int(c) for c in rng.integers(150, 200, size=3) * np.array([1.0, 0.55, 0.35]))
        texts = ["Fill the pot with soil and sow a seed.", "Water the soil until a sprout appears."]
        texts += [f"Keep watering: the stem grows its {ORDINALS[k]} pair of leaves." for k in range(n - 3)]
        texts.append(f"The plant blooms with a {flower} flower.")
        title = "Grow a flowering plant from a seed"
    elif category == "clock":
        start = int(rng.integers(1, 13))
        p["hours"] = [(start + k - 1) % 12 + 1 for k in range(n)]
        p["face"] = _pastel(rng)
        texts = [f"The clock shows {p['hours'][0]} o'clock."]
        texts += [f"One hour later, the clock shows {h} o'clock." for h in p["hours"][1:]]
        title = f"Watch the clock for {n - 1} hours"
    else:  # pragma: no cover - CATEGORIES is closed
        raise ValueError(f"unknown category {category!r}")
    p["texts"], p["title"] = texts, title
    return p


def _polar(cx: float, cy: float, r: float, a: float) -> tuple[float, float]:
    return cx + r * math.cos(a), cy + r * math.sin(a)


@dataclass(frozen=True)
class _Canvas:
    """Where a state is drawn: the image's ``draw`` handle and its ``scale`` (size / 128),
    so that drawings are written in a 128 × 128 coordinate system at any size."""

    draw: ImageDraw.ImageDraw
    scale: float

    def box(self, x0, y0, x1, y1) -> list[float]:
        s = self.scale
        return [x0 * s, y0 * s, x1 * s, y1 * s]

    def circle(self, cx, cy, r, **kw) -> None:
        self.draw.ellipse(self.box(cx - r, cy - r, cx + r, cy + r), **kw)


def _draw_pizza(c: _Canvas, p: dict, k: int, n: int) -> None:
    """A board and a base; then sauce, cheese, one topping a step; baked (browned) at the last step."""
    d, s = c.draw, c.scale
    box, circle = c.box, c.circle
    d.rounded_rectangle(box(6, 6, 122, 122), radius=10 * s, fill=(170, 120, 70))
    baked = k == n - 1
    circle(64, 64, 50, fill=(200, 130, 60) if baked else (236, 212, 165))
    if k >= 1:
        circle(64, 64, 43, fill=(195, 45, 30))
    if k >= 2:
        for r, a in p["cheese"]:
            x, y = _polar(64, 64, r, a)
            circle(x, y, 4, fill=(250, 226, 120))
    for t, (topping, spots) in enumerate(zip(p["toppings"], p["spots"], strict=True)):
        if k < 3 + t:
            break
        for r, a in spots:
            x, y = _polar(64, 64, r, a)
            if topping.startswith("pepperoni"):
                circle(x, y, 6, fill=(160, 35, 35), outline=(120, 20, 20))
            elif topping.startswith("black"):
                circle(x, y, 4, fill=(25, 25, 25))
                circle(x, y, 1.6, fill=(195, 45, 30))
            elif topping.startswith("basil"):
                d.ellipse(box(x - 6, y - 3, x + 6, y + 3), fill=(35, 130, 45))
            elif topping.startswith("mushrooms"):
                d.pieslice(box(x - 5, y - 5, x + 5, y + 5), 180, 360, fill=(205, 185, 150))
                d.rectangle(box(x - 1.5, y, x + 1.5, y + 4), fill=(225, 210, 180))
            else:
                d.rectangle(box(x - 6, y - 1.5, x + 6, y + 1.5), fill=(60, 160, 50))
    if baked:
        for r, a in p["burn"]:
            x, y = _polar(64, 64, r, a)
            circle(x, y, 2.5, fill=(150, 90, 40))


def _draw_layered_drink(c: _Canvas, p: dict, k: int, n: int) -> None:
    """A glass holding one more liquid layer per step, bottom up."""
    d, s = c.draw, c.scale
    box = c.box
    top, bottom, left, right = 18, 114, 38, 90
    layer = (bottom - top - 4) / n
    for j in range(k + 1):
        y1 = bottom - j * layer
        d.rectangle(box(left, y1 - layer, right, y1), fill=LIQUIDS[p["liquids"][j]])
    w = max(1, round(3 * s))
    d.line(
        [(left * s, top * s), (left * s, bottom * s), (right * s, bottom * s), (right * s, top * s)], fill=(90, 90, 100), width=w
    )


def _draw_block_tower(c: _Canvas, p: dict, k: int, n: int) -> None:
    """One more block per step on the tower, bottom up."""
    d, s = c.draw, c.scale
    box = c.box
    ground = 116
    d.rectangle(box(4, ground, 124, 124), fill=(120, 90, 60))
    height = min(13.0, 100.0 / n)
    for j in range(k + 1):
        w, shift = p["widths"][j], p["shifts"][j]
        y1 = ground - j * height
        d.rectangle(
            box(64 + shift - w / 2, y1 - height, 64 + shift + w / 2, y1),
            fill=BLOCK_COLORS[p["colors"][j]],
            outline=(30, 30, 30),
            width=max(1, round(s)),
        )


def _draw_polygon_drawing(c: _Canvas, p: dict, k: int, n: int) -> None:
    """The polygon's sides drawn up to step ``k``, corner dots and the pencil's tip."""
    d, s = c.draw, c.scale
    circle = c.circle
    pts = [_polar(64 * s, 64 * s, 46 * s, p["rotation"] + 2 * math.pi * i / n) for i in range(n + 1)]
    for i in range(n):  # faint guide dots at every corner, so the empty part is visible too
        circle(pts[i][0] / s, pts[i][1] / s, 2, fill=(170, 170, 170))
    for j in range(k + 1):
        d.line([pts[j], pts[j + 1]], fill=p["color"], width=max(2, round(4 * s)))
    circle(pts[k + 1][0] / s, pts[k + 1][1] / s, 3.5, fill=(220, 60, 60))  # the pencil's tip


def _draw_plant_growth(c: _Canvas, p: dict, k: int, n: int) -> None:
    """A seed in a pot, then a stem growing taller with more leaves; a flower at the last step."""
    d, s = c.draw, c.scale
    box, circle = c.box, c.circle
    d.polygon([(40 * s, 92 * s), (88 * s, 92 * s), (80 * s, 122 * s), (48 * s, 122 * s)], fill=p["pot"])
    d.rectangle(box(40, 88, 88, 94), fill=(95, 60, 35))
    if k == 0:
        d.ellipse(box(61, 84, 67, 89), fill=(120, 85, 40))
    else:
        leaves = max(0, min(k - 1, n - 3))
        height = 10 + (70 * k) / (n - 1)
        top = 88 - height
        d.line([(64 * s, 88 * s), (64 * s, top * s)], fill=(40, 140, 50), width=max(2, round(3 * s)))
        for j in range(leaves):
            y = 82 - (j + 1) * (height - 8) / (leaves + 1)
            d.ellipse(box(64 - 16, y - 4, 64, y + 4), fill=(50, 160, 60))
            d.ellipse(box(64, y - 4, 64 + 16, y + 4), fill=(50, 160, 60))
        if k == n - 1:
            color = FLOWER_COLORS[p["flower"]]
            for a in range(6):
                x, y = _polar(64, top, 7, a * math.pi / 3)
                circle(x, y, 5, fill=color, outline=(120, 120, 120))
            circle(64, top, 4, fill=(240, 190, 40))
        else:
            circle(64, top, 3, fill=(70, 175, 70))  # the growing tip


def _draw_clock(c: _Canvas, p: dict, k: int, n: int) -> None:
    """A clock face whose hour hand shows step ``k``'s hour."""
    d, s = c.draw, c.scale
    circle = c.circle
    circle(64, 64, 52, fill=p["face"], outline=(40, 40, 40), width=max(2, round(3 * s)))
    for h in range(12):
        a = -math.pi / 2 + h * math.pi / 6
        x0, y0 = _polar(64 * s, 64 * s, 44 * s, a)
        x1, y1 = _polar(64 * s, 64 * s, 50 * s, a)
        d.line([(x0, y0), (x1, y1)], fill=(40, 40, 40), width=max(1, round((3 if h % 3 == 0 else 1) * s)))
    hour = p["hours"][k]
    a = -math.pi / 2 + (hour % 12) * math.pi / 6
    d.line([(64 * s, 64 * s), _polar(64 * s, 64 * s, 28 * s, a)], fill=(20, 20, 20), width=max(2, round(5 * s)))
    d.line([(64 * s, 64 * s), (64 * s, 20 * s)], fill=(60, 60, 60), width=max(1, round(2 * s)))
    circle(64, 64, 3, fill=(20, 20, 20))


# every category's drawing of the state after step k (0-based) of n
_DRAWERS = {
    "pizza": _draw_pizza,
    "layered-drink": _draw_layered_drink,
    "block-tower": _draw_block_tower,
    "polygon-drawing": _draw_polygon_drawing,
    "plant-growth": _draw_plant_growth,
    "clock": _draw_clock,
}


def _draw_state(p: dict, k: int, size: int) -> Image.Image:
    """The image after step ``k`` (0-based): the cumulative state of the procedure."""
    s = size / 128.0
    img = Image.new("RGB", (size, size), p["background"])
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, size - 1, size - 1], outline=(150, 150, 150), width=max(1, round(2 * s)))
    draw = _DRAWERS.get(p["category"])
    if draw is not None:
        draw(_Canvas(d, s), p, k, p["n"])
    return img


def render_procedure(
    seed: int, index: int, *, size: int = 128, steps_range=DEFAULT_STEPS_RANGE
) -> tuple[dict, list[Image.Image]]:
    """Synthetic procedure ``index`` of ``seed``: ``(info, images)`` where info
    holds ``id`` (``proc-<index:05d>``), ``category`` (``CATEGORIES[index % 6]``),
    ``title`` and ``texts`` (one per step), and ``images`` are RGB ``size``² PIL
    images, one per step, each showing the *cumulative* state after its step (a pizza
    topped, a drink poured layer by layer, a block tower, a polygon drawn side by side, a
    plant growing, a clock advancing an hour a step), so a later step's image always holds
    visibly more, or a later hour. Round-robin categories: any six consecutive indices cover
    all of them, so semantic outliers always exist. The step count and every colour,
    position and parameter come from a generator seeded by (seed, index) through hashlib."""
    lo, hi = steps_range
    if not 4 <= lo <= hi <= 8:
        raise ValueError(f"steps_range={steps_range}: need 4 <= min <= max <= 8 (the renderer draws at most 8 steps)")
    if size < 64:
        raise ValueError(f"size={size}: images must be at least 64 pixels wide")
    rng = np.random.default_rng(derive_seed("procedures", seed, index))
    category = CATEGORIES[index % len(CATEGORIES)]
    n = int(rng.integers(lo, hi + 1))
    p = _plan(category, n, rng)
    info = {"id": f"proc-{index:05d}", "category": category, "title": p["title"], "texts": p["texts"]}
    return info, [_draw_state(p, k, size) for k in range(n)]


def write_procedures(
    out_dir: str | os.PathLike, n: int, seed: int = 0, *, size: int = 128, steps_range=DEFAULT_STEPS_RANGE, progress: bool = True
) -> Path:
    """Write ``n`` synthetic procedures to ``out_dir/images/<id>/step-<k>.png``
    and ``out_dir/manifest.jsonl`` (the manifest format of this module, with
    ``source`` = :data:`SOURCE`). Resumable: a procedure folder whose
    ``procedure.json`` matches (seed, index, size, steps range, version) and holds
    every step image is kept; a folder appears complete or not at all (written under a
    temporary name, then renamed) and the manifest is written atomically. Returns the manifest path."""
    if n < 1:
        raise ValueError(f"n={n}: give the number of procedures to generate (at least 1)")
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for index in tqdm(range(n), desc=SOURCE, unit="procedure", disable=not progress):
        pid = f"proc-{index:05d}"
        folder = out_dir / "images" / pid
        key = {"seed": seed, "index": index, "size": size, "steps_range": list(steps_range), "version": VERSION}
        info = None
        marker = folder / "procedure.json"
        if marker.is_file():
            cached = json.loads(marker.read_text())
            if cached.get("key") == key and all((folder / f"step-{k:02d}.png").is_file() for k in range(len(cached["texts"]))):
                info = cached
        if info is None:
            info, images = render_procedure(seed, index, size=size, steps_range=steps_range)
            info = {**info, "key": key}
            with atomic_folder(folder) as tmp:  # the folder appears complete or not at all
                for k, im in enumerate(images):
                    im.save(tmp / f"step-{k:02d}.png")
                (tmp / "procedure.json").write_text(json.dumps(info, sort_keys=True))
        rows.append(
            {
                "id": pid,
                "category": info["category"],
                "title": info["title"],
                "source": SOURCE,
                "steps": [{"text": t, "image": f"images/{pid}/step-{k:02d}.png"} for k, t in enumerate(info["texts"])],
            }
        )
    manifest = out_dir / "manifest.jsonl"
    write_rows(manifest, rows)
    return manifest
