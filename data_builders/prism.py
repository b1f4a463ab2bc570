"""PRISM: perturbed procedure sequences for pairwise and pointwise judges (paper 002 §5E, A.1–A.4, B.2).

Protocol, as built here:

1. **Gold sequences**: procedures from a procedure manifest (``--procedures``,
   format in :mod:`.procedures`) or the built-in synthetic procedures
   (``--synthetic N``, default 100, the paper's base set size). Procedures
   with fewer than 4 steps are left out (counted as ``too_short``): semantic
   Type 3 needs three frames to replace and a shuffle needs three to move.
2. **Splits** 70/20/10 train/validation/test **by gold sequence**: every
   record of a gold sequence and of all its negatives is in one split. Exact
   counts ``round(cumulative fraction × N)``; gold sequences are ordered so
   that each category spreads evenly over the list (item j of a category of
   size m sits at (j + ½)/m, ties and the order within a category from a
   seeded hash), then cut.
3. **Negatives** per gold sequence of n frames, drawn from generators seeded by
   (seed, source, id) through hashlib; ``position`` is 0-based:

   ==========================  ==========================================================  ===========================
   perturbation                 negatives per gold                                          ``position``
   ==========================  ==========================================================  ===========================
   ``semantic-1`` (Type 1)      n: one out-of-context image at *each* position 0…n−1        the replaced frame
   ``semantic-2`` (Type 2)      1: two distinct positions, uniformly drawn                  the first replaced frame
   ``semantic-3`` (Type 3)      1: three distinct positions, uniformly drawn                the first replaced frame
   ``swap``                     n−1: every consecutive pair (i, i+1)                        i (the earlier frame)
   ``swap-nonconsecutive``      K = min(``--nonconsecutive-swaps`` (2), #pairs): distinct   i (the earlier frame)
                                pairs (i, j) with j − i ≥ 2, drawn uniformly
   ``shuffle``                  1: a uniform permutation that moves at least 3 frames       the first frame that moved
                                (never the identity, never a single swap)
   ==========================  ==========================================================  ===========================

   Out-of-context images are step images of procedures of *another category*
   in the same split (no image of a validation or test procedure appears in a
   training record); only when the split holds fewer than three such images
   (Type 3 needs three distinct ones) are all procedures used
   (``meta.outlier_pool`` is ``"split"`` or ``"all"``). A Type-2/3 negative
   never uses the same image twice. With the defaults a gold sequence has
   2n + 4 negatives (an even number: see the balance rule).
4. **Pairwise records** (task ``pairwise``, choices ``["A", "B"]``): the gold
   sequence against each negative, once per layout; the label is the letter of
   the gold (coherent) sequence. **A/B order**: at random, as the paper presents
   the pairs, with exact balance — per split and layout a seeded shuffle of as
   many A as B (:func:`balance_letters`), so each split has ⌈N/2⌉ gold-A and
   ⌊N/2⌋ gold-B records and each layout is balanced to within one. ``meta``
   records ``gold_letter`` and ``presentation``: ``gold_first`` when the gold
   sequence's images are shown first, else ``gold_second`` (P4 shows Sequence
   B first, so there the gold is shown first when it is B).
5. **Pointwise records** (task ``pointwise``, choices ``["1", …, "5"]``): the
   gold sequence and every negative alone, scored by the rubric of A.3/A.4
   (:data:`POINTWISE_SCORES`): 5 coherent (``none``); 3 temporal violation
   (``swap``, ``swap-nonconsecutive``, ``shuffle``: every image belongs, the
   order is wrong); 1 any out-of-context image (``semantic-1``/``-2``/``-3``: Figure
   S4 of the paper scores a single outlier 1/5, the minimum). Scores 2 and 4 are
   in the rubric but no construction produces them.
6. **Type-1 positional subset**: records of gold sequences of at most 6
   frames whose negative is ``semantic-1`` (outlier at each position 0–5) or
   ``swap`` (pairs 0-1 … 4-5) carry ``meta.positional_subset = true``, for the
   positional-bias analysis (Tables S4, S17–S20).

**Prompt layouts** (A.2). S = the steps block (``"Task: <title>"`` when the
procedure has a title, then ``"Steps:"`` and the numbered step texts
``"1. …"``), I = the instruction (:data:`PAIRWISE_INSTRUCTION` /
:data:`POINTWISE_INSTRUCTION`; under P6 followed by a sentence on how the grid
reads), A₁…Aₙ / B₁…Bₙ / X₁…Xₙ = the frames of Sequence A / B / the judged
sequence, ``"…"`` = a literal text item; P5's ``"Task: <title>"`` is left out
when there is no title. Adjacent text items are joined into one text item,
separated by a blank line. The record's ``images`` are in the order shown (so
under P4 the B frames come first). The step texts are always the gold
sequence's: only the images differ between A and B.

======  =============================================================================  ================================================
layout  pairwise                                                                       pointwise
======  =============================================================================  ================================================
P0      S, "Sequence A:", A₁…Aₙ, "Sequence B:", B₁…Bₙ, I                                S, "Sequence:", X₁…Xₙ, I
P1      "Sequence A:", A₁…Aₙ, "Sequence B:", B₁…Bₙ, S, I   (images before the steps)   "Sequence:", X₁…Xₙ, S, I
P2      S, "Sequence A:", "Image 1:", A₁, …, "Image n:", Aₙ, "Sequence B:",             S, "Sequence:", "Image 1:", X₁, …, "Image n:", Xₙ, I
        "Image 1:", B₁, …, "Image n:", Bₙ, I   (numbered frames)
P3      S, "Sequence A:", A₁…Aₙ, "Sequence B:", B₁…Bₙ, S, I   (steps repeated after)   S, "Sequence:", X₁…Xₙ, S, I
P4      S, "Sequence B:", B₁…Bₙ, "Sequence A:", A₁…Aₙ, I   (B shown first)             identical to P0, so not emitted
P5      "Task: <title>", then for k = 1…n: "Step k: <text k>", "Sequence A, image k:",   "Task: <title>", then for k = 1…n:
        A_k, "Sequence B, image k:", B_k; then I   (interleaved)                        "Step k: <text k>", X_k; then I
P6      S, "Sequence A:", grid(A), "Sequence B:", grid(B), I   (one image per sequence)  S, "Sequence:", grid(X), I
======  =============================================================================  ================================================

grid(·) is one PNG (:func:`compose_grid`): ⌈√n⌉ columns, row-major, each cell
a numbered band (1…n) above the frame; frames are pasted unscaled and centred
in cells of the largest frame size in the record (frames larger than
``GRID_MAX_CELL`` px are first shrunk to fit), so both grids of a pair have
the same geometry. The instruction templates (A.3) are ours: the paper
describes them (a 5-point rubric anchoring 3 to order violations and 1–2 to
content mismatches; a pairwise prompt that commits to A or B before any
rationale) but its Figure S2 wording is not in the text.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from judgetrain import records
from judgetrain.config import WorkBuildArgs, arg, comma_list
from judgetrain.seeding import derive_seed, rng_for

from .common import BuildError, Fractions, balance_table, builder_parser, finish_summary, save_build, split_table
from .procedures import Procedure, image_bytes, load_procedures

BUILDER = "prism"
VERSION = "1.0.0"
LAYOUTS = ("P0", "P1", "P2", "P3", "P4", "P5", "P6")
POINTWISE_LAYOUTS = tuple(layout for layout in LAYOUTS if layout != "P4")  # P4 = P0 with one sequence (A.2)
MODES = ("pairwise", "pointwise")
SEMANTIC, TEMPORAL = records.SEMANTIC, records.TEMPORAL
PERTURBATIONS = SEMANTIC + TEMPORAL
# Figure S4 / S2: coherent 5, an order violation 3, any out-of-context image 1 (the minimum)
POINTWISE_SCORES = {"none": 5, "swap": 3, "swap-nonconsecutive": 3, "shuffle": 3, "semantic-1": 1, "semantic-2": 1, "semantic-3": 1}
PAIRWISE_CHOICES = ["A", "B"]
POINTWISE_CHOICES = ["1", "2", "3", "4", "5"]
MIN_STEPS = 4
POSITIONAL_SUBSET_MAX_FRAMES = records.POSITIONAL_SUBSET_MAX_FRAMES
DEFAULT_NONCONSECUTIVE = 2
SHUFFLE_MIN_MOVED = 3
DEFAULT_SYNTHETIC = 100
DEFAULT_SPLITS = {"train": 0.7, "validation": 0.2, "test": 0.1}
SPLIT_NAMES = ("train", "validation", "test")
GRID_MAX_CELL = 448
GRID_PAD = 4

PAIRWISE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given the steps of a "
    "process and two image sequences, Sequence A and Sequence B, each meant to illustrate those steps in order. "
    "Decide which sequence better adheres to the described process: every image should show the content of its "
    "step, and the images should follow the chronological order of the steps. Commit to your choice before any "
    "explanation: begin your answer with the letter of the better sequence, A or B."
)
POINTWISE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given the steps of a "
    "process and one image sequence meant to illustrate those steps in order. Rate how well the sequence follows "
    "the described process on this scale:\n"
    "5 - Coherent: every image shows the content of its step, in the correct chronological order.\n"
    "4 - Mostly coherent: the content and the order are right, but some steps are hard to recognise.\n"
    "3 - Order violation: every image belongs to the process, but some images are out of chronological order.\n"
    "2 - Content mismatch: one image is out of context; it does not belong to this process.\n"
    "1 - Severe content mismatch: two or more images are out of context.\n"
    "Commit to your score before any explanation: begin your answer with a single digit from 1 to 5."
)
GRID_NOTE = {
    "pairwise": "Each sequence is shown as one grid image whose numbered cells read left to right, top to bottom.",
    "pointwise": "The sequence is shown as one grid image whose numbered cells read left to right, top to bottom.",
}


def instruction_for(mode: str, layout: str, base: str | None = None) -> str:
    """The instruction text of ``mode`` under ``layout`` (P6 adds how to read the grid)."""
    text = base if base is not None else (PAIRWISE_INSTRUCTION if mode == "pairwise" else POINTWISE_INSTRUCTION)
    return f"{text}\n{GRID_NOTE[mode]}" if layout == "P6" else text


# --------------------------------------------------------------------------- negatives


@dataclass(frozen=True)
class OutlierImage:
    """An out-of-context image: step ``step`` (0-based) of another procedure."""

    procedure_id: str
    step: int
    category: str
    image: str


@dataclass(frozen=True)
class Variant:
    """A gold sequence or one of its negatives, as shown.

    ``order[p]`` is the gold step (0-based) shown at position ``p``, or None
    where an out-of-context image (``outliers``, keyed by position) stands.
    ``position`` is the first touched position (-1 for the gold), ``positions``
    every touched one, ascending; ``key`` names the variant uniquely within its
    gold sequence (``"gold"``, ``"semantic-1@2"``, ``"swap@0-1"``, ``"shuffle"``…)."""

    perturbation: str
    key: str
    order: tuple[int | None, ...]
    position: int = -1
    positions: tuple[int, ...] = ()
    outliers: tuple[tuple[int, OutlierImage], ...] = ()

    @property
    def subset(self) -> str:
        return "gold" if self.perturbation == "none" else "semantic" if self.perturbation in SEMANTIC else "temporal"

    def images(self, gold_images: Sequence) -> list:
        """The images shown, given the gold sequence's images (outliers by their path)."""
        extra = dict(self.outliers)
        return [gold_images[g] if g is not None else extra[p].image for p, g in enumerate(self.order)]


def gold_variant(n: int) -> Variant:
    return Variant("none", "gold", tuple(range(n)))


def consecutive_swaps(n: int) -> list[Variant]:
    """Every consecutive swap (i, i+1), i = 0…n−2."""
    out = []
    for i in range(n - 1):
        order = list(range(n))
        order[i], order[i + 1] = order[i + 1], order[i]
        out.append(Variant("swap", f"swap@{i}-{i + 1}", tuple(order), i, (i, i + 1)))
    return out


def nonconsecutive_swaps(n: int, count: int, rng: np.random.Generator) -> list[Variant]:
    """``min(count, #pairs)`` distinct swaps (i, j) with j − i ≥ 2, drawn uniformly
    without replacement from all such pairs; returned in (i, j) order."""
    pairs = [(i, j) for i in range(n) for j in range(i + 2, n)]
    picked = sorted(pairs[k] for k in rng.choice(len(pairs), size=min(count, len(pairs)), replace=False)) if pairs else []
    out = []
    for i, j in picked:
        order = list(range(n))
        order[i], order[j] = order[j], order[i]
        out.append(Variant("swap-nonconsecutive", f"swap-nonconsecutive@{i}-{j}", tuple(order), i, (i, j)))
    return out


def shuffle_variant(n: int, rng: np.random.Generator, min_moved: int = SHUFFLE_MIN_MOVED) -> Variant:
    """A uniform random permutation, redrawn until at least ``min_moved`` frames
    leave their place (so never the identity and never a single swap)."""
    if n < min_moved:
        raise ValueError(f"a shuffle that moves {min_moved} frames needs at least {min_moved} frames, got {n}")
    while True:
        order = [int(x) for x in rng.permutation(n)]
        moved = tuple(p for p, g in enumerate(order) if p != g)
        if len(moved) >= min_moved:
            return Variant("shuffle", "shuffle", tuple(order), moved[0], moved)


def semantic_variants(n: int, k: int, pool: Sequence[OutlierImage], rng: np.random.Generator) -> list[Variant]:
    """Type k semantic outliers. k = 1: one variant per position 0…n−1, each with
    an image drawn uniformly from ``pool``; k ≥ 2: one variant, k distinct
    positions and k distinct pool images, drawn uniformly."""
    if not pool:
        raise ValueError("no out-of-context images to draw from (the pool is empty)")
    if k == 1:
        picks = [((p,), (int(rng.integers(len(pool))),)) for p in range(n)]
    else:
        if len(pool) < k or n < k:
            raise ValueError(f"semantic-{k} needs {k} frames and {k} distinct out-of-context images (have {n} and {len(pool)})")
        positions = tuple(sorted(int(p) for p in rng.choice(n, size=k, replace=False)))
        picks = [(positions, tuple(int(i) for i in rng.choice(len(pool), size=k, replace=False)))]
    out = []
    for positions, images in picks:
        order = tuple(None if p in positions else p for p in range(n))
        outliers = tuple((p, pool[i]) for p, i in zip(positions, images))
        key = f"semantic-{k}@{','.join(map(str, positions))}"
        out.append(Variant(f"semantic-{k}", key, order, positions[0], positions, outliers))
    return out


def outlier_pool(gold: Procedure, candidates: Iterable[Procedure]) -> list[OutlierImage]:
    """Every step image of the ``candidates`` of another category than ``gold``, in (id, step) order."""
    pool = []
    for proc in sorted(candidates, key=lambda p: p.id):
        if proc.category != gold.category:
            pool += [OutlierImage(proc.id, k, proc.category, str(s.image)) for k, s in enumerate(proc.steps)]
    return pool


def make_negatives(gold: Procedure, pool: Sequence[OutlierImage], *, seed: int, perturbations: Sequence[str] = PERTURBATIONS,
                   nonconsecutive: int = DEFAULT_NONCONSECUTIVE) -> list[Variant]:
    """Every negative of ``gold`` (in :data:`PERTURBATIONS` order), each kind drawn
    from its own generator seeded by (seed, kind, source, id)."""
    n, out = gold.n, []

    def rng(kind: str) -> np.random.Generator:
        return rng_for(seed, "prism", kind, gold.source, gold.id)

    for kind in PERTURBATIONS:
        if kind not in perturbations:
            continue
        if kind in SEMANTIC:
            out += semantic_variants(n, int(kind[-1]), pool, rng(kind))
        elif kind == "swap":
            out += consecutive_swaps(n)
        elif kind == "swap-nonconsecutive":
            out += nonconsecutive_swaps(n, nonconsecutive, rng(kind))
        else:
            out.append(shuffle_variant(n, rng(kind)))
    return out


# --------------------------------------------------------------------------- splits and presentation order


def assign_splits(items: Sequence[tuple[str, str]], fractions: dict[str, float], seed: int, salt: str = "split") -> dict[str, str]:
    """Split ``(key, stratum)`` items with exact counts: split s gets
    ``round(cum_s × N) − round(cum_{s−1} × N)`` items, in the order of
    ``fractions``. Items are first ordered so that every stratum spreads
    evenly (item j of a stratum of m sits at (j + ½)/m; within a stratum and
    between strata the order comes from a seeded hash), so each split holds
    about its share of every stratum."""
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for key, stratum in items:
        by_stratum[stratum].append(key)
    ranked = []
    for stratum, keys in by_stratum.items():
        keys.sort(key=lambda k: derive_seed(seed, salt, stratum, k))
        ranked += [((j + 0.5) / len(keys), derive_seed(seed, salt, "stratum", stratum), k) for j, k in enumerate(keys)]
    ranked.sort()
    names, n = list(fractions), len(ranked)
    out, start, cum = {}, 0, 0.0
    for name in names:
        cum += fractions[name]
        end = n if name == names[-1] else round(cum * n)
        for _, _, key in ranked[start:end]:
            out[key] = name
        start = end
    return out


def balance_letters(items: Sequence[tuple[Hashable, tuple]], seed: int, salt: str = "presentation") -> dict[Hashable, str]:
    """The gold letter of each pairwise record ``(key, stratum)`` of one split, at
    random as paper 002 presents them, with exact balance. Per layout (``stratum[0]``)
    a list of as many A as B is shuffled by a generator seeded from (``seed``, ``salt``,
    layout) and dealt to the layout's records in a seeded hash order of their keys; a
    layout with an odd count gets one extra letter, A and B in turn across layouts. So
    the split holds ⌈N/2⌉ A and ⌊N/2⌋ B, every layout is balanced to within one, and the
    same records and seed give the same letters."""
    by_layout: dict[Any, list] = defaultdict(list)
    for key, stratum in items:
        by_layout[stratum[0]].append(key)
    out: dict[Hashable, str] = {}
    extra = "AB"
    for layout in sorted(by_layout, key=str):
        keys = sorted(by_layout[layout], key=lambda k: derive_seed(seed, salt, json.dumps(k, default=str)))
        n = len(keys)
        letters = ["A", "B"] * (n // 2) + ([extra[0]] if n % 2 else [])
        if n % 2:
            extra = extra[::-1]
        order = rng_for(seed, salt, "letters", str(layout)).permutation(n)
        out.update({key: letters[i] for key, i in zip(keys, order)})
    return out


def presentation(gold_letter: str, layout: str) -> str:
    """``gold_first`` when the gold sequence's images are shown first (P4 shows B first)."""
    return "gold_first" if (gold_letter == "A") != (layout == "P4") else "gold_second"


# --------------------------------------------------------------------------- layouts


def steps_block(title: str, steps: Sequence[str], title_label: str = "Task") -> str:
    """``"Task: <title>"`` (if any), then ``"Steps:"`` and ``"k. <text>"`` lines (if any)."""
    lines = [f"{title_label}: {title}"] if title else []
    if steps:
        lines.append("Steps:")
        lines += [f"{k}. {t}" for k, t in enumerate(steps, start=1)]
    return "\n".join(lines)


def _numbered(seq: Sequence) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, im in enumerate(seq, start=1):
        out += [("text", f"Image {k}:"), ("image", im)]
    return out


def pairwise_parts(layout: str, title: str, steps: Sequence[str], seq_a: Sequence, seq_b: Sequence, instruction: str,
                   title_label: str = "Task") -> list[tuple[str, Any]]:
    """The prompt of a pairwise record as parts ``("text", str)``, ``("image", x)``
    or ``("grid", [x, …])``, per the layout table of the module docstring;
    ``instruction`` is the last part. Under P5 the sequences may differ in
    length (MIRAGE): step k shows the k-th image of each sequence that has one."""
    S = ("text", steps_block(title, steps, title_label))
    A, B = ("text", "Sequence A:"), ("text", "Sequence B:")
    imgs_a, imgs_b = [("image", x) for x in seq_a], [("image", x) for x in seq_b]
    if layout == "P0":
        parts = [S, A, *imgs_a, B, *imgs_b]
    elif layout == "P1":
        parts = [A, *imgs_a, B, *imgs_b, S]
    elif layout == "P2":
        parts = [S, A, *_numbered(seq_a), B, *_numbered(seq_b)]
    elif layout == "P3":
        parts = [S, A, *imgs_a, B, *imgs_b, S]
    elif layout == "P4":
        parts = [S, B, *imgs_b, A, *imgs_a]
    elif layout == "P5":
        parts = [("text", f"{title_label}: {title}")] if title else []
        for k in range(max(len(seq_a), len(seq_b), len(steps))):
            parts.append(("text", f"Step {k + 1}: {steps[k]}" if k < len(steps) else f"Step {k + 1}:"))
            if k < len(seq_a):
                parts += [("text", f"Sequence A, image {k + 1}:"), ("image", seq_a[k])]
            if k < len(seq_b):
                parts += [("text", f"Sequence B, image {k + 1}:"), ("image", seq_b[k])]
    elif layout == "P6":
        parts = [S, A, ("grid", list(seq_a)), B, ("grid", list(seq_b))]
    else:
        raise ValueError(f"unknown layout {layout!r}; choose from {list(LAYOUTS)}")
    return [p for p in parts if p != ("text", "")] + [("text", instruction)]


def pointwise_parts(layout: str, title: str, steps: Sequence[str], seq: Sequence, instruction: str,
                    title_label: str = "Task") -> list[tuple[str, Any]]:
    """The prompt of a pointwise record as parts (see :func:`pairwise_parts`);
    P4 is P0 (one sequence), per the layout table."""
    S, X = ("text", steps_block(title, steps, title_label)), ("text", "Sequence:")
    imgs = [("image", x) for x in seq]
    if layout in ("P0", "P4"):
        parts = [S, X, *imgs]
    elif layout == "P1":
        parts = [X, *imgs, S]
    elif layout == "P2":
        parts = [S, X, *_numbered(seq)]
    elif layout == "P3":
        parts = [S, X, *imgs, S]
    elif layout == "P5":
        parts = [("text", f"{title_label}: {title}")] if title else []
        for k in range(max(len(seq), len(steps))):
            parts.append(("text", f"Step {k + 1}: {steps[k]}" if k < len(steps) else f"Step {k + 1}:"))
            if k < len(seq):
                parts.append(("image", seq[k]))
    elif layout == "P6":
        parts = [S, X, ("grid", list(seq))]
    else:
        raise ValueError(f"unknown layout {layout!r}; choose from {list(LAYOUTS)}")
    return [p for p in parts if p != ("text", "")] + [("text", instruction)]


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
            im.thumbnail(cell, Image.LANCZOS)
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


# --------------------------------------------------------------------------- the build


PROCEDURES_HELP = 'procedure manifest, JSON Lines: {"id", "category", "title"?, "source"?, "steps": [{"text", "image"}, ...]}'


@dataclass(kw_only=True)
class PrismConfig(WorkBuildArgs):
    """``judgetrain build prism``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(None, f"generate N synthetic procedures (the source when no manifest is given: {DEFAULT_SYNTHETIC})",
                                metavar="N")
    procedures: Path | None = arg(None, PROCEDURES_HELP, metavar="MANIFEST")
    layouts: list[str] = arg(list(LAYOUTS), "prompt layouts from " + ",".join(LAYOUTS) + " (space- or comma-separated; default: all)")
    modes: list[str] = arg(list(MODES), "pairwise, pointwise or both (space- or comma-separated)")
    perturbations: list[str] = arg(list(PERTURBATIONS), "negative kinds from " + ",".join(PERTURBATIONS) + " (space- or comma-separated)")
    nonconsecutive_swaps: int = arg(DEFAULT_NONCONSECUTIVE, "non-consecutive swaps per gold sequence (distinct pairs i, j with j-i >= 2)",
                                    metavar="K")
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by gold sequence")
    synthetic_size: int = arg(128, "side of the synthetic step images in pixels", metavar="PX")

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        if self.procedures is not None:
            self.procedures = Path(self.procedures)
        elif self.synthetic is None:
            self.synthetic = DEFAULT_SYNTHETIC
        self.layouts, self.modes = comma_list(self.layouts), comma_list(self.modes)
        self.perturbations = comma_list(self.perturbations)
        self.splits = Fractions(self.splits)

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = check_common(self.procedures, self.synthetic, self.splits, self.synthetic_size, manifest_flag="--procedures")
        bad = [x for x in self.layouts if x not in LAYOUTS]
        if bad or not self.layouts:
            problems.append(f"--layouts: unknown {bad}; choose one or more of {list(LAYOUTS)}" if bad else "--layouts: give at least one layout")
        bad = [x for x in self.modes if x not in MODES]
        if bad or not self.modes:
            problems.append(f"--modes: unknown {bad}; choose from {list(MODES)}" if bad else "--modes: give at least one of pairwise, pointwise")
        if tuple(self.modes) == ("pointwise",) and set(self.layouts) == {"P4"}:
            problems.append("--layouts P4 with --modes pointwise: pointwise P4 is P0 and is not emitted; add another layout")
        bad = [x for x in self.perturbations if x not in PERTURBATIONS]
        if bad or not self.perturbations:
            problems.append(f"--perturbations: unknown {bad}; choose from {list(PERTURBATIONS)}" if bad else "--perturbations: give at least one")
        if self.nonconsecutive_swaps < 0:
            problems.append(f"--nonconsecutive-swaps {self.nonconsecutive_swaps}: must be 0 or more")
        if problems:
            raise BuildError("invalid PRISM build options:\n" + "\n".join(f"  - {p}" for p in problems))


def check_common(manifest, synthetic, splits, synthetic_size, *, manifest_flag: str) -> list[str]:
    """Problems with the options every procedure-based builder shares."""
    problems = []
    if manifest is not None and synthetic is not None:
        problems.append(f"{manifest_flag} / --synthetic: give only one source")
    if synthetic is not None and synthetic < 1:
        problems.append(f"--synthetic {synthetic}: give the number of synthetic sequences to generate (at least 1)")
    if synthetic_size < 64:
        problems.append(f"--synthetic-size {synthetic_size}: images must be at least 64 pixels wide")
    bad = [s for s in splits if s not in SPLIT_NAMES]
    if bad:
        problems.append(f"--splits: unknown split {bad}; use names from {list(SPLIT_NAMES)}")
    if not splits or any(v < 0 for v in splits.values()) or not math.isclose(sum(splits.values()), 1.0, abs_tol=1e-6):
        problems.append(f"--splits {splits}: fractions must be non-negative and sum to 1")
    return problems


def _variant_json(v: Variant, pool_kind: str | None) -> dict:
    return {
        "perturbation": v.perturbation, "key": v.key, "order": list(v.order), "position": v.position,
        "positions": list(v.positions), "outliers": [[p, asdict(o)] for p, o in v.outliers], "outlier_pool": pool_kind,
    }


def _variant_from_json(d: dict) -> Variant:
    return Variant(d["perturbation"], d["key"], tuple(d["order"]), d["position"], tuple(d["positions"]),
                   tuple((p, OutlierImage(**o)) for p, o in d["outliers"]))


def _meta(gold: dict, v: Variant, pool_kind: str | None) -> dict:
    meta = {
        "gold_id": gold["id"], "category": gold["category"], "title": gold["title"], "subset": v.subset,
        "variant": v.key, "positions": list(v.positions), "frame_order": list(v.order),
        "positional_subset": gold["n"] <= POSITIONAL_SUBSET_MAX_FRAMES and v.perturbation in ("semantic-1", "swap"),
    }
    if v.outliers:
        meta["outliers"] = [{"position": p, "procedure_id": o.procedure_id, "step": o.step, "category": o.category} for p, o in v.outliers]
        meta["outlier_pool"] = pool_kind
    if v.perturbation in ("swap", "swap-nonconsecutive"):
        meta["swapped_frames"] = [p + 1 for p in v.positions]
    return meta


def _generate(plans_json: str, cfg_json: str):
    """Records of the plans (one per gold sequence) in plan order."""
    from tqdm.auto import tqdm

    cfg = json.loads(cfg_json)
    plans = json.loads(plans_json)
    for plan in tqdm(plans, desc=f"{BUILDER} {plans[0]['split'] if plans else ''}", unit="gold", disable=not cfg["progress"]):
        gold = plan["gold"]
        cache: dict[str, bytes] = {}

        def load(path: str) -> bytes:
            if path not in cache:
                cache[path] = image_bytes(path)
            return cache[path]

        variants = {d["key"]: (_variant_from_json(d), d["outlier_pool"]) for d in plan["variants"]}
        gold_v = gold_variant(gold["n"])
        for task, key, layout, letter in plan["records"]:
            v, pool_kind = variants[key] if key != "gold" else (gold_v, None)
            meta = _meta(gold, v, pool_kind)
            shown = v.images(gold["images"])
            common = dict(source=gold["source"], perturbation=v.perturbation, position=v.position, n_frames=gold["n"], layout=layout,
                          id=records.make_id(BUILDER, cfg["seed"], gold["source"], gold["id"], task, key, layout, prefix="prism-"))
            if task == "pairwise":
                gold_imgs = gold["images"]
                seq_a, seq_b = (gold_imgs, shown) if letter == "A" else (shown, gold_imgs)
                parts = pairwise_parts(layout, gold["title"], gold["texts"], seq_a, seq_b, instruction_for("pairwise", layout))
                meta.update(gold_letter=letter, presentation=presentation(letter, layout))
                yield layout_record(parts, load, task="pairwise", answer=letter, choices=PAIRWISE_CHOICES, label=letter, meta=meta, **common)
            else:
                score = str(POINTWISE_SCORES[v.perturbation])
                parts = pointwise_parts(layout, gold["title"], gold["texts"], shown, instruction_for("pointwise", layout))
                meta["score"] = int(score)
                yield layout_record(parts, load, task="pointwise", answer=score, choices=POINTWISE_CHOICES, label=score, meta=meta, **common)


def _procedure_json(p: Procedure) -> dict:
    return {"id": p.id, "category": p.category, "title": p.title, "source": p.source, "n": p.n,
            "texts": p.texts, "images": [str(x) for x in p.images]}


def _datasets(plans_by_split: dict[str, list[dict]], cfg_json: str, work: Path, split_order: Sequence[str]):
    import datasets

    arrow_cache = work / "arrow"
    shutil.rmtree(arrow_cache, ignore_errors=True)
    splits = {}
    for name in split_order:
        plans = plans_by_split.get(name)
        if not plans:
            continue
        plans_json = json.dumps(plans, sort_keys=True)
        splits[name] = datasets.Dataset.from_generator(
            _generate, features=records.FEATURES, cache_dir=str(arrow_cache),
            gen_kwargs={"plans_json": plans_json, "cfg_json": cfg_json},
            fingerprint=records.make_id(BUILDER, name, cfg_json, plans_json),
        )
    return datasets.DatasetDict(splits)


def record_counts(dataset) -> dict:
    """Counts per split: total, task, perturbation, layout, task/perturbation,
    pairwise labels and presentation, pointwise labels, positional subset."""
    out = {}
    for name, ds in dataset.items():
        cols = ds.select_columns(["task", "perturbation", "layout", "label", "meta"]).to_dict()
        metas = [json.loads(m) for m in cols["meta"]]
        pair = [i for i, t in enumerate(cols["task"]) if t == "pairwise"]
        point = [i for i, t in enumerate(cols["task"]) if t == "pointwise"]
        out[name] = {
            "total": len(ds),
            "task": dict(sorted(Counter(cols["task"]).items())),
            "perturbation": dict(sorted(Counter(cols["perturbation"]).items())),
            "layout": dict(sorted(Counter(cols["layout"]).items())),
            "task_perturbation": dict(sorted(Counter(f"{t}/{p}" for t, p in zip(cols["task"], cols["perturbation"])).items())),
            "pairwise_label": dict(sorted(Counter(cols["label"][i] for i in pair).items())),
            "pairwise_presentation": dict(sorted(Counter(metas[i]["presentation"] for i in pair).items())),
            "pointwise_label": dict(sorted(Counter(cols["label"][i] for i in point).items())),
            "positional_subset": sum(bool(m.get("positional_subset")) for m in metas),
        }
    return out


def build(cfg: PrismConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    cfg.check()
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    manifest, kept, short, skips = load_procedures(cfg.procedures, cfg.synthetic or DEFAULT_SYNTHETIC, work, seed=cfg.seed,
                                                   size=cfg.synthetic_size, progress=cfg.progress, strict=cfg.strict, min_steps=MIN_STEPS)
    categories = sorted({p.category for p in kept})
    if any(p in SEMANTIC for p in cfg.perturbations) and len(categories) < 2:
        raise BuildError(f"semantic outliers are images from another category, but every usable procedure is in {categories}; "
                         f"add procedures of other categories or leave semantic-1/2/3 out of --perturbations")

    split_of = assign_splits([(p.id, p.category) for p in kept], cfg.splits, cfg.seed, "prism-split")
    by_split: dict[str, list[Procedure]] = defaultdict(list)
    for p in kept:
        by_split[split_of[p.id]].append(p)
    plans_by_split: dict[str, list[dict]] = {}
    pool_counts: Counter = Counter()
    capped: dict[str, dict[str, int]] = {}  # steps -> sequences that got fewer non-consecutive swaps, and how many
    for name, golds in by_split.items():
        plans, pairwise_items = [], []
        for gold in sorted(golds, key=lambda p: p.id):
            pool, pool_kind = outlier_pool(gold, golds), "split"
            if len(pool) < 3:  # Type 3 needs three distinct images; fall back to every other-category image
                pool, pool_kind = outlier_pool(gold, kept), "all"
            negatives = make_negatives(gold, pool, seed=cfg.seed, perturbations=cfg.perturbations, nonconsecutive=cfg.nonconsecutive_swaps)
            if "swap-nonconsecutive" in cfg.perturbations:
                got = sum(v.perturbation == "swap-nonconsecutive" for v in negatives)
                if got < cfg.nonconsecutive_swaps:  # fewer pairs (i, j), j - i >= 2, than asked: say so, never silently
                    capped[str(gold.n)] = {"sequences": capped.get(str(gold.n), {}).get("sequences", 0) + 1, "swaps": got}
            if any(v.outliers for v in negatives):
                pool_counts[pool_kind] += 1
            recs: list[list] = []
            if "pairwise" in cfg.modes:
                for v in negatives:
                    for layout in cfg.layouts:
                        recs.append(["pairwise", v.key, layout, None])
                        pairwise_items.append(((gold.id, v.key, layout), (layout, v.perturbation, v.position)))
            if "pointwise" in cfg.modes:
                recs += [["pointwise", v.key, layout, None] for v in [gold_variant(gold.n), *negatives]
                         for layout in cfg.layouts if layout in POINTWISE_LAYOUTS]
            plans.append({"split": name, "gold": _procedure_json(gold), "records": recs,
                          "variants": [_variant_json(v, pool_kind if v.outliers else None) for v in negatives]})
        letters = balance_letters(pairwise_items, cfg.seed, f"prism-presentation-{name}")
        for plan in plans:
            for rec in plan["records"]:
                if rec[0] == "pairwise":
                    rec[3] = letters[(plan["gold"]["id"], rec[1], rec[2])]
        plans_by_split[name] = plans

    cfg_json = json.dumps({**asdict(cfg), "out": str(cfg.out), "procedures": str(cfg.procedures) if cfg.procedures else None})
    dataset = _datasets(plans_by_split, cfg_json, work, [*cfg.splits])

    lengths = Counter(p.n for p in kept)
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "seed": cfg.seed,
        "args": json.loads(cfg_json),
        "protocol": {
            "min_steps": MIN_STEPS,
            "pointwise_scores": POINTWISE_SCORES,
            "pointwise_layouts": [x for x in cfg.layouts if x in POINTWISE_LAYOUTS],
            "nonconsecutive_swaps": cfg.nonconsecutive_swaps,
            "shuffle_min_moved": SHUFFLE_MIN_MOVED,
            "positional_subset": f"semantic-1 and swap negatives of gold sequences of at most {POSITIONAL_SUBSET_MAX_FRAMES} frames",
            "balance": "per split and layout: gold letters drawn at random from a seeded shuffle of as many A as B",
            "splits": cfg.splits,
        },
        "sources": [{"path": str(manifest), "bytes": manifest.stat().st_size}]
        + [{"id": p.id, "category": p.category, "steps": p.n, "bytes": p.image_bytes_total} for p in sorted(kept + short, key=lambda p: p.id)],
        "counts": {
            "records": record_counts(dataset),
            "sequences": {
                "kept": len(kept), "too_short": len(short), "skipped": len(skips),
                "per_split": {name: len(by_split.get(name, [])) for name in cfg.splits},
                "per_category": {c: dict(sorted(Counter(split_of[p.id] for p in kept if p.category == c).items())) for c in categories},
                "outlier_pool": dict(sorted(pool_counts.items())),
                "nonconsecutive_capped": {"asked": cfg.nonconsecutive_swaps, "by_steps": dict(sorted(capped.items()))}
                if capped else None,
            },
            "length_histogram": {str(k): v for k, v in sorted(lengths.items())},
        },
        "filtered": [{"id": p.id, "reason": f"{p.n} step(s) (< {MIN_STEPS})"} for p in short],
        "skipped": [asdict(s) for s in skips],
    }
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(PrismConfig, "prism",
                          "Build PRISM (paper 002 §5E): perturbed procedure sequences as pairwise and pointwise judge records.",
                          ["--out data/prism --synthetic 100",
                           "--out data/prism-coin --procedures coin/procedures.jsonl --layouts P0,P6 --modes pairwise"])


def print_summary(info: dict, out: Path, *, title: str = "PRISM") -> None:
    """Records per split by task / perturbation and by layout, pairwise A/B balance."""
    from rich.console import Console

    console = Console()
    counts = info["counts"]["records"]
    seq = info["counts"]["sequences"]
    console.print(f"{title}: {seq['kept']} gold sequence(s) kept, {seq.get('too_short', 0)} too short, {seq['skipped']} skipped; "
                  + ", ".join(f"{s} {n}" for s, n in seq["per_split"].items()))
    capped = seq.get("nonconsecutive_capped")
    for steps, c in (capped or {}).get("by_steps", {}).items():
        console.print(f"[yellow]--nonconsecutive-swaps {capped['asked']}: {c['sequences']} sequence(s) of {steps} steps have only "
                      f"{c['swaps']} pair(s) i, j with j - i >= 2, so they got {c['swaps']} (build.json: "
                      "counts.sequences.nonconsecutive_capped)[/yellow]")
    console.print(split_table("Records per task / perturbation and split", "task / perturbation", counts, "task_perturbation"))
    console.print(split_table("Records per layout and split", "layout", counts, "layout", total=True))
    console.print(balance_table(counts))
    finish_summary(console, info, out)


def main(cfg: PrismConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
