"""MIRAGE's source: the manifest of prompts (one per line, with its generated sequences and
their human votes; the fields in :class:`MiragePrompt`), its reader, and the synthetic
manifest that stands in for it offline (paper 002 §5E, C.2).
Docs: "concepts/prism-mirage.md"."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from judgetrain.io import write_rows
from judgetrain.jsonl import inside, json_kind, optional_text, text
from judgetrain.seeding import rng_for

from ..core.common import BuildError, Skip
from ..core.images import check_image
from ..core.manifests import read_manifest_lines
from ..prism.negatives import consecutive_swaps, shuffle_variant
from ..procedures import read_procedures, write_procedures

__all__ = ["DEFAULT_SYNTHETIC", "DOMAINS", "MiragePrompt", "MirageSequence", "majority", "read_mirage", "write_synthetic_mirage"]

DOMAINS = ("recipes", "vist")
DEFAULT_SYNTHETIC = 48
SYNTHETIC_GENERATORS = ("synth-faithful", "synth-swap", "synth-outlier", "synth-shuffle")
SYNTHETIC_ANNOTATORS = 3
# P(an annotator calls the sequence valid): faithful output / faulty output
SYNTHETIC_P_VALID, SYNTHETIC_P_VALID_FAULTY = 0.9, 0.1


@dataclass
class MirageSequence:
    """One generated image sequence and its human votes (1 = valid)."""

    id: str
    generator: str
    images: list[Path]
    votes: list[int]
    backbone: str | None = None

    @property
    def verdict(self) -> str:
        """``positive`` / ``negative`` by majority vote; ``tie``; ``unannotated`` (no votes)."""
        return majority(self.votes)


@dataclass
class MiragePrompt:
    """One prompt (a recipe or a story) with the sequences generated for it: one manifest line.

    The line (JSON, paths relative to the manifest's folder and never outside it) holds ``id``
    (unique), ``domain`` (``recipes``: procedural, or ``vist``: narrative) and ``sequences``,
    and at least one of ``prompt`` (the text the sequences were generated from) and ``steps``
    (one text per image, in order); ``source`` defaults to ``mirage-<domain>``. Per sequence:
    ``generator`` and ``images`` (exactly one per step when ``steps`` is given) are required,
    ``id`` defaults to ``seq-<index>`` and is unique within the prompt, ``backbone`` is
    optional, ``votes`` (required) holds one vote per annotator, ``1``/``true`` = coherent,
    ``0``/``false`` = not (an empty list: not annotated). Other keys are ignored; a null
    optional field is its default, an integer ``id`` is taken as its string."""

    id: str
    domain: str
    prompt: str
    steps: list[str]
    sequences: list[MirageSequence]
    source: str
    manifest: str = ""
    line: int | None = None
    image_bytes_total: int = field(default=0, compare=False)


def majority(votes: list[int]) -> str:
    """Majority over annotators: more 1s → ``positive``, more 0s → ``negative``,
    equal counts → ``tie``, no votes → ``unannotated``."""
    if not votes:
        return "unannotated"
    yes = sum(votes)
    no = len(votes) - yes
    return "positive" if yes > no else "negative" if no > yes else "tie"


def _votes(raw, where: str) -> list[int]:
    if not isinstance(raw, list) or not all(isinstance(v, bool) or v in (0, 1) for v in raw):
        raise ValueError(
            f"{where}.votes: {raw!r} is not a list of votes; give one vote per annotator, 1/true (valid) or 0/false (not valid)"
        )
    return [int(v) for v in raw]


def read_mirage(path: str | os.PathLike) -> tuple[list[MiragePrompt], list[Skip]]:
    """Parse a MIRAGE manifest (fields: :class:`MiragePrompt`) through the shared manifest
    loop. Bad lines and bad sequences become :class:`Skip` entries naming ``path:line`` and
    ``field: problem; fix``; nothing raises except a missing manifest."""
    return read_manifest_lines(
        path, _mirage_prompt, what="MIRAGE manifest", noun="prompt", id_hint="a non-empty string naming the prompt", partial=True
    )


def _mirage_prompt(row: dict, pid: str, path: Path, line: int) -> tuple[MiragePrompt, list[str]]:
    """One manifest line as a prompt with its good sequences, and why each bad sequence was
    left out; ``ValueError("field: problem; fix")`` when the line itself is unusable."""
    domains = f"use one of {list(DOMAINS)}"
    domain = text(row, "domain", domains)
    if domain not in DOMAINS:
        raise ValueError(f"domain: {domain!r} is not a MIRAGE domain; {domains}")
    prompt = optional_text(row, "prompt", "the text the sequences were generated from, or leave it out")
    steps = row.get("steps")
    steps = [] if steps is None else steps
    if not isinstance(steps, list):
        raise ValueError(f"steps: {json_kind(steps)}, not an array; give one non-empty string per image, or leave it out")
    for j, step in enumerate(steps):
        if not isinstance(step, str) or not step.strip():
            raise ValueError(f"steps[{j}]: {step!r} is not a step text; give one non-empty string per image")
    if not prompt.strip() and not steps:
        raise ValueError(
            "prompt: missing and no steps; give 'prompt' (the generation prompt) or 'steps' (one text per image), or both"
        )
    source = text(row, "source", "a non-empty string, or leave it out", default=f"mirage-{domain}")
    raw = row.get("sequences")
    if not isinstance(raw, list) or not raw:
        what = "missing" if raw is None else "empty" if raw == [] else f"{json_kind(raw)}, not an array"
        raise ValueError(f'sequences: {what}; give a non-empty list of {{"generator", "images", "votes"}} objects')
    steps = [s.strip() for s in steps]
    sequences: list[MirageSequence] = []
    bad: list[str] = []
    total = 0
    for k, seq in enumerate(raw):
        try:
            sequence, size = _mirage_sequence(seq, k, steps, path.parent, {s.id for s in sequences})
        except ValueError as e:
            bad.append(str(e))
            continue
        total += size
        sequences.append(sequence)
    return MiragePrompt(pid, domain, prompt.strip(), steps, sequences, source, str(path), line, total), bad


def _mirage_sequence(seq, k: int, steps: list[str], root: Path, taken: set[str]) -> tuple[MirageSequence, int]:
    """``sequences[k]`` of a prompt and its image bytes; ``ValueError("sequences[k].field: problem; fix")``."""
    where = f"sequences[{k}]"
    if not isinstance(seq, dict):
        raise ValueError(f'{where}: {json_kind(seq)}, not an object; write {{"generator", "images", "votes"}}')
    try:
        sid = text(seq, "id", "a name unique within the prompt, or leave it out", default=f"seq-{k}", ids=True)
        generator = text(seq, "generator", 'name the pipeline that produced it, e.g. "GILL"')
        backbone = optional_text(seq, "backbone", 'e.g. "FLUX.1", or leave it out') or None
    except ValueError as e:
        raise ValueError(f"{where}.{e}") from None
    where = f"sequences[{k}] (id {sid!r})"
    if sid in taken:
        raise ValueError(f"{where}.id: duplicate sequence id within the prompt; give every sequence its own id")
    images = seq.get("images")
    if not isinstance(images, list) or not images:
        raise ValueError(f"{where}.images: {images!r} is not a list of paths; give the image paths in order")
    if steps and len(images) != len(steps):
        raise ValueError(f"{where}.images: {len(images)} image(s) for {len(steps)} step(s); give one image per step")
    votes = _votes(seq.get("votes", None), where)
    paths = [inside(root, im, f"{where}.images[{i}]") for i, im in enumerate(images)]
    size = sum(check_image(p, f"{where}.images[{i}]") for i, p in enumerate(paths))
    return MirageSequence(sid, generator, paths, votes, backbone), size


# --------------------------------------------------------------------------- synthetic manifest


def write_synthetic_mirage(out_dir: str | os.PathLike, n: int, seed: int = 0, *, size: int = 128, progress: bool = True) -> Path:
    """Write ``n`` synthetic prompts as ``out_dir/mirage.jsonl`` (tests, quickstart): each
    synthetic procedure (:mod:`judgetrain.data_builders.procedures`) is a prompt, alternately ``recipes`` and
    ``vist``, "generated" by four pipelines — a faithful one (the gold images) and three
    faulty ones (a consecutive swap, one out-of-context frame, a shuffle) — each judged by
    three simulated annotators who call a faithful sequence valid with probability 0.9 and
    a faulty one with probability 0.1. The images are the procedure images in
    ``out_dir/procedures/``; deterministic in ``seed``, resumable like
    :func:`judgetrain.data_builders.procedures.write_procedures`. Sequences carry an extra ``defect`` key (what
    the faulty generator did), which the reader ignores. Returns the manifest path."""
    out_dir = Path(out_dir)
    procedures, skips = read_procedures(write_procedures(out_dir / "procedures", n, seed, size=size, progress=progress))
    if skips:  # pragma: no cover - our own writer's output always reads back
        raise BuildError(f"synthetic procedures failed to read back: {skips[0]}")
    rows = []
    for index, proc in enumerate(procedures):
        domain = DOMAINS[index % len(DOMAINS)]
        rel = [str(p.relative_to(out_dir.resolve())) for p in proc.images]
        others = [(q, k) for q in procedures if q.category != proc.category for k in range(q.n)]
        sequences = []
        for gen in SYNTHETIC_GENERATORS:
            rng = rng_for(seed, "synthetic-mirage", proc.id, gen)
            images, defect = list(rel), None
            if gen == "synth-swap":
                v = consecutive_swaps(proc.n)[int(rng.integers(proc.n - 1))]
                images, defect = v.images(rel), {"perturbation": "swap", "positions": list(v.positions)}
            elif gen == "synth-outlier" and others:
                p = int(rng.integers(proc.n))
                q, k = others[int(rng.integers(len(others)))]
                images[p] = str(q.images[k].relative_to(out_dir.resolve()))
                defect = {"perturbation": "semantic-1", "positions": [p], "outlier": f"{q.id}/{k}"}
            elif gen == "synth-shuffle":
                v = shuffle_variant(proc.n, rng)
                images, defect = v.images(rel), {"perturbation": "shuffle", "positions": list(v.positions)}
            p_valid = SYNTHETIC_P_VALID if defect is None else SYNTHETIC_P_VALID_FAULTY
            votes = [int(x) for x in (rng.random(SYNTHETIC_ANNOTATORS) < p_valid)]
            sequences.append(
                {"id": gen, "generator": gen, "backbone": "synthetic", "images": images, "votes": votes, "defect": defect}
            )
        rows.append(
            {
                "id": f"mirage-{index:05d}",
                "domain": domain,
                "prompt": proc.title,
                "steps": proc.texts,
                "source": f"synthetic-mirage-{domain}",
                "sequences": sequences,
            }
        )
    manifest = out_dir / "mirage.jsonl"
    write_rows(manifest, rows)
    return manifest
