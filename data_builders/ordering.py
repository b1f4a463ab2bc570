"""``judgetrain build ordering-probe``: the chronological-ordering probe (paper 002 App. G).
A procedure's k images (4 by default: the steps nearest to evenly spaced) are shown in a
shuffled order that is never the identity, with no text but their labels (``Image A:`` …)
and the instruction; the answer is the labels in chronological order (``B-D-A-C``, or
``2, 4, 1, 3`` with ``--labels numbers``). One ``test`` split (a zero-shot probe);
:func:`parse_ordering` reads a numbered answer strictly, the metrics are
``judgetrain.eval.core.metrics.ordering_metrics``. Docs: "reference/commands/build-ordering-probe.md", "concepts/ordering-probe.md"."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from PIL import Image

from judgetrain import records
from judgetrain.config import arg
from judgetrain.seeding import rng_for

from .core.args import WorkBuildArgs
from .core.common import BuildError, builder_parser, finish_summary, save_build
from .core.images import image_bytes
from .core.outfolder import already_built
from .core.steps import (
    PROCEDURES_HELP,
    arrow_split,
    build_info,
    check_common,
    config_json,
    fresh_arrow_cache,
    procedure_sources,
    settle_source,
    too_short,
    work_dirs,
)
from .prism.negatives import shuffle_variant
from .prism.render import layout_record
from .procedures import Procedure, Step, load_procedures

BUILDER = "ordering-probe"
VERSION = "1.0.0"
LAYOUT = "G"
SPLIT = "test"
DEFAULT_N_IMAGES = 4
DEFAULT_SYNTHETIC = 24
ORDERING_INSTRUCTION = (
    "These {n} images, numbered 1 to {n} in the order shown, show the steps of one process in a shuffled order. "
    "Using only what the images show, put them in chronological order. Reply with only the {n} image numbers in "
    "chronological order, separated by commas."
)
# Paper 002 App. G: the shown images are labelled A, B, C, D and the answer is e.g. B-D-A-C.
LETTERED_INSTRUCTION = (
    "These {n} images, labelled {first} to {last} in the order shown, show the steps of one process in a shuffled "
    "order. Using only what the images show, put them in chronological order. Reply with only the {n} image letters "
    "in chronological order, separated by hyphens (for example {example})."
)
LABELS = ("letters", "numbers")
IMAGE_SIZE = 448  # App. G: every image resized to 448 x 448

# An answer line: n numbers (each optionally written "Image k" or "#k") separated by
# commas, semicolons, whitespace, hyphens, dashes or arrows.
_NUMBER = r"(?:image\s*|#)?\d+"
_ANSWER = re.compile(rf"{_NUMBER}(?:\s*(?:,|;|->|→|—|–|-|>|\s)\s*{_NUMBER})*", re.IGNORECASE)
_MARKER = re.compile(r"(?:final\s+)?(?:answer|order|ordering)\s*:", re.IGNORECASE)


# --------------------------------------------------------------------------- answers and metrics


def format_ordering(order: Sequence[int], letters: bool = False) -> str:
    """``[2, 4, 1, 3]`` → ``"2, 4, 1, 3"``, or with ``letters`` ``"B-D-A-C"`` (the answer formats)."""
    if letters:
        return "-".join(chr(ord("A") + int(x) - 1) for x in order)
    return ", ".join(str(int(x)) for x in order)


def resized(load, size: int):
    """``load`` (path → image bytes) with every image resized to ``size`` × ``size``
    (bicubic, stored as PNG); ``size`` 0 keeps the bytes as they are."""
    if not size:
        return load

    def load_resized(path: str) -> bytes:
        with Image.open(io.BytesIO(load(path))) as im:
            buf = io.BytesIO()
            im.convert("RGB").resize((size, size), Image.Resampling.BICUBIC).save(buf, format="PNG")
            return buf.getvalue()

    return load_resized


def gold_order(shown: Sequence[int]) -> list[int]:
    """The answer for a display order: ``shown[p]`` is the chronological rank
    (0-based) of the image at display position ``p``; returns, for rank
    0, 1, …, the 1-based number of the image holding it."""
    where = {rank: p for p, rank in enumerate(shown)}
    return [where[r] + 1 for r in range(len(shown))]


def parse_ordering(text: str, n: int) -> list[int] | None:
    """The image numbers (1-based, chronological) a model answered, or None.

    Rules: markdown emphasis (``*``, ``_``, backticks) is ignored; if the text
    has ``answer:``, ``order:``, ``ordering:`` or ``final answer:`` (any case),
    the answer is the first non-empty line after the last such marker,
    otherwise the last non-empty line. That line must hold nothing but the
    numbers and separators (optionally inside brackets, optionally ending with
    a period), and the numbers must be a permutation of 1…n; anything else is
    None (never guessed)."""
    if not isinstance(text, str) or n < 1:
        return None
    text = re.sub(r"[*_`]", "", text)
    markers = list(_MARKER.finditer(text))
    tail = text[markers[-1].end() :] if markers else text
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    if not lines:
        return None
    line = lines[0] if markers else lines[-1]
    line = line.rstrip(".").strip()
    if len(line) >= 2 and line[0] + line[-1] in ("[]", "()", "{}"):
        line = line[1:-1].strip()
    if not _ANSWER.fullmatch(line):
        return None
    numbers = [int(x) for x in re.findall(r"\d+", line)]
    return numbers if sorted(numbers) == list(range(1, n + 1)) else None


# --------------------------------------------------------------------------- records


def select_steps(n_steps: int, k: int) -> list[int]:
    """``k`` of ``n_steps`` step indices (0-based), nearest to evenly spaced:
    ``round(i·(n−1)/(k−1))`` with halves rounded up; first and last always in."""
    if not 2 <= k <= n_steps:
        raise ValueError(f"cannot pick {k} of {n_steps} steps (need 2 <= k <= n)")
    return [(2 * i * (n_steps - 1) + (k - 1)) // (2 * (k - 1)) for i in range(k)]


def probe_record(
    proc: Procedure, *, seed: int, n_images: int, labels: str = "letters", image_size: int = IMAGE_SIZE, load=image_bytes
) -> dict:
    """The ordering record of one procedure: ``labels`` ``letters``
    (App. G: "Image A:" …, answer ``B-D-A-C``) or ``numbers`` ("Image 1:" …, answer
    ``2, 4, 1, 3``); images resized to ``image_size`` px square (0: as they are).
    Task ``ordering``, ``choices`` [] (free form), ``label`` = ``completion`` = the
    answer, ``perturbation`` ``shuffle``, ``position`` the first shown position (0-based)
    whose image is not the step of that rank, ``layout`` ``G``, ``meta`` with the
    permutation (``shown_order``, ``gold_order``) and the steps used."""
    k = proc.n if n_images == 0 else n_images
    steps = select_steps(proc.n, k)
    variant = shuffle_variant(k, rng_for(seed, "ordering-probe", proc.source, proc.id), min_moved=2)
    shown = [rank for rank in variant.order if rank is not None]  # a shuffle has no outliers: every rank is set
    answer = gold_order(shown)
    letters = labels == "letters"
    names = [chr(ord("A") + p) if letters else str(p + 1) for p in range(k)]
    parts = []
    for name, rank in zip(names, shown, strict=True):
        parts += [("text", f"Image {name}:"), ("image", str(proc.images[steps[rank]]))]
    instruction = (
        LETTERED_INSTRUCTION.format(n=k, first=names[0], last=names[-1], example=format_ordering(list(range(k, 0, -1)), True))
        if letters
        else ORDERING_INSTRUCTION.format(n=k)
    )
    parts.append(("text", instruction))
    label = format_ordering(answer, letters)
    meta = {
        "procedure_id": proc.id,
        "category": proc.category,
        "title": proc.title,
        "steps_used": steps,
        "shown_order": shown,
        "gold_order": answer,
        "labels": labels,
        "image_size": image_size,
        "step_texts": [proc.texts[s] for s in steps],
        "procedure_steps": proc.n,
    }
    return layout_record(
        parts,
        resized(load, image_size),
        id=records.make_id(BUILDER, seed, proc.source, proc.id, k, prefix="order-"),
        task="ordering",
        answer=label,
        choices=[],
        label=label,
        source=proc.source,
        perturbation="shuffle",
        position=next(p for p, rank in enumerate(shown) if p != rank),
        n_frames=k,
        layout=LAYOUT,
        meta=meta,
    )


def _generate(items_json: str, cfg_json: str):
    from tqdm.auto import tqdm

    cfg = json.loads(cfg_json)
    for d in tqdm(json.loads(items_json), desc=BUILDER, unit="seq", disable=not cfg["progress"]):
        proc = Procedure(
            d["id"],
            d["category"],
            [Step(t, Path(p)) for t, p in zip(d["texts"], d["images"], strict=True)],
            d["title"],
            d["source"],
        )
        yield probe_record(proc, seed=cfg["seed"], n_images=cfg["n_images"], labels=cfg["labels"], image_size=cfg["image_size"])


@dataclass(kw_only=True)
class OrderingConfig(WorkBuildArgs):
    """``judgetrain build ordering-probe``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(
        None, f"generate N synthetic procedures (the source when no manifest is given: {DEFAULT_SYNTHETIC})", metavar="N"
    )
    procedures: Path | None = arg(None, PROCEDURES_HELP, metavar="MANIFEST")
    n_images: int = arg(
        DEFAULT_N_IMAGES, "images per instance, evenly spaced steps (4 as in the paper; 0 = every step)", metavar="K"
    )
    synthetic_size: int = arg(128, "side of the synthetic step images in pixels", metavar="PX")
    labels: str = arg(
        "letters",
        "how the shown images are named: letters (A, B, …; answer B-D-A-C, paper 002 App. G) "
        "or numbers (1, 2, …; answer 2, 4, 1, 3)",
    )
    image_size: int = arg(IMAGE_SIZE, "resize every image to PX x PX (App. G: 448); 0 keeps each image's own size", metavar="PX")

    def __post_init__(self) -> None:
        settle_source(self, "procedures", DEFAULT_SYNTHETIC)

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = check_common(self.procedures, self.synthetic, {SPLIT: 1.0}, self.synthetic_size, manifest_flag="--procedures")
        if self.labels not in LABELS:
            problems.append(f"--labels {self.labels!r}: choose letters (paper 002 App. G) or numbers")
        if self.image_size < 0:
            problems.append(f"--image-size {self.image_size}: give a side in pixels, or 0 to keep each image's size")
        if self.labels == "letters" and max(self.n_images, 0) > 26:
            problems.append(f"--n-images {self.n_images}: letters name at most 26 images; use --labels numbers")
        if self.n_images != 0 and self.n_images < 2:
            problems.append(
                f"--n-images {self.n_images}: give at least 2 images per instance (the paper uses 4), or 0 for every step"
            )
        if problems:
            raise BuildError("invalid ordering-probe build options:\n" + "\n".join(f"  - {p}" for p in problems))


PROTOCOL = {
    "step_selection": "round(i*(n-1)/(k-1)), halves up",
    "shuffle": "uniform, never the identity",
    "answer_format": "image numbers in chronological order, comma-separated, e.g. '2, 4, 1, 3'",
    "prompt_text": "image labels 'Image k:' and the instruction only (no step texts)",
}


def record_counts(ds) -> dict:
    """``build.json``'s ``counts.records``: the test split's total, images per instance, sources and first moved positions."""
    cols = ds.select_columns(["n_frames", "source", "position"]).to_dict()
    return {
        SPLIT: {
            "total": len(ds),
            "n_images": {str(k): v for k, v in sorted(Counter(cols["n_frames"]).items())},
            "source": dict(sorted(Counter(cols["source"]).items())),
            "first_moved_position": {str(k): v for k, v in sorted(Counter(cols["position"]).items())},
        }
    }


def build(cfg: OrderingConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    import datasets

    cfg.check()
    if (done := already_built(cfg, BUILDER, VERSION)) is not None:  # same build: nothing to do; another: refused
        return done
    out, work = work_dirs(cfg)
    min_steps = max(2, cfg.n_images)
    manifest, kept, short, skips = load_procedures(
        cfg.procedures,
        cfg.synthetic or DEFAULT_SYNTHETIC,
        work,
        seed=cfg.seed,
        size=cfg.synthetic_size,
        progress=cfg.progress,
        strict=cfg.strict,
        min_steps=min_steps,
    )
    items = [
        {
            "id": p.id,
            "category": p.category,
            "title": p.title,
            "source": p.source,
            "texts": p.texts,
            "images": [str(x) for x in p.images],
        }
        for p in sorted(kept, key=lambda p: (p.source, p.id))
    ]
    cfg_json = config_json(cfg, "procedures")
    items_json = json.dumps(items, sort_keys=True)
    ds = arrow_split(
        _generate,
        fresh_arrow_cache(work),
        records.make_id(BUILDER, cfg_json, items_json),
        items_json=items_json,
        cfg_json=cfg_json,
    )
    counts = {
        "records": record_counts(ds),
        "sequences": {
            "kept": len(kept),
            "too_short": len(short),
            "skipped": len(skips),
            "per_category": dict(sorted(Counter(p.category for p in kept).items())),
        },
    }
    info = build_info(
        BUILDER,
        VERSION,
        cfg,
        cfg_json,
        protocol={"n_images": cfg.n_images or "all steps", **PROTOCOL},
        sources=procedure_sources(manifest, kept + short),
        counts=counts,
        filtered=too_short(short, min_steps),
        skipped=[asdict(s) for s in skips],
    )
    return save_build(datasets.DatasetDict({SPLIT: ds}), out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(
        OrderingConfig,
        "ordering-probe",
        "Build the chronological-ordering probe (paper 002 App. G): shuffled procedure images, answer their order.",
        ["--out data/ordering --synthetic 12", "--out data/ordering-all --synthetic 12 --n-images 0   # every step"],
    )


def print_summary(info: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    seq = info["counts"]["sequences"]
    console.print(f"Ordering probe: {seq['kept']} sequence(s), {seq['too_short']} too short, {seq['skipped']} skipped")
    t = Table(title="Instances per category")
    t.add_column("category")
    t.add_column("instances", justify="right")
    for c, n in seq["per_category"].items():
        t.add_row(c, str(n))
    console.print(t)
    finish_summary(console, info, out)


def main(cfg: OrderingConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
