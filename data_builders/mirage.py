"""MIRAGE: human-validated vs. model-generated image sequences, pairwise (paper 002 §5E, C.2).

Protocol, as built here:

1. **Manifest** (JSON Lines, one *prompt* per line, paths relative to the
   manifest's folder and never outside it)::

       {"id": "recipes-0007", "domain": "recipes",
        "prompt": "Make a margherita pizza",
        "steps": ["Roll out the dough.", "Spread the sauce.", "Add mozzarella.", "Bake."],
        "source": "mirage-recipes",
        "sequences": [
          {"id": "gill", "generator": "GILL", "backbone": "SD 2.1",
           "images": ["recipes-0007/gill/0.png", "…", "…", "…"], "votes": [1, 0, 0]},
          {"id": "storydiffusion", "generator": "StoryDiffusion", "backbone": "FLUX.1",
           "images": ["…"], "votes": [true, true, false]}]}

   ``id`` (unique), ``domain`` (``recipes``: procedural, or ``vist``:
   narrative) and ``sequences`` are required, and at least one of ``prompt``
   (the text the sequences were generated from: a recipe title, a story
   title) and ``steps`` (one text per image, in order: recipe steps, story
   sentences). ``source`` defaults to ``mirage-<domain>``. Per sequence:
   ``generator`` (the pipeline's name) and ``images`` (in order; exactly one per
   step when ``steps`` is given) are required; ``id`` defaults to
   ``seq-<index>`` and must be unique within the prompt; ``backbone``
   (e.g. ``FLUX.1``) is optional; ``votes`` (required) holds one vote per human
   annotator, ``1``/``true`` = "this sequence coherently illustrates the
   prompt", ``0``/``false`` = "it does not" (an empty list: not annotated).
   Other keys are ignored; a null optional field is its default, an integer
   ``id`` is taken as its string. The file is read with
   :func:`judgetrain.jsonl.read_jsonl` (split on ``\\n`` only, each line
   decoded on its own). A bad line (not UTF-8, not JSON, not an object, a
   missing or mistyped field, a duplicate prompt id) skips the line; a bad
   sequence (missing or unreadable image, a path outside the folder, wrong
   image count, bad votes, a duplicate sequence id) skips that sequence only;
   both are reported as ``path:line: field: problem; fix`` in ``build.json``
   (``--strict`` fails instead).
2. **Labels by majority vote** over annotators: more ``1`` than ``0`` votes →
   *positive* (human-validated); more ``0`` than ``1`` → *negative*; a tie
   (including no votes) → excluded from both, counted under ``tie`` /
   ``unannotated``. A human-validated generator output is a positive like any
   other; negatives are the rejected generator outputs of the same prompt.
3. **Pairs**: every positive against every negative *of the same prompt*,
   once per layout (P0–P6, the PRISM layouts of :mod:`.prism`, ``--layouts``;
   the text block is headed ``"Task: <prompt>"`` for recipes and
   ``"Story: <prompt>"`` for vist, the instruction is :data:`MIRAGE_INSTRUCTION`).
   Prompts without a positive or without a negative give no pair (counted).
   A record is task ``pairwise``, choices ``["A", "B"]``, label the letter of
   the positive; ``perturbation`` is ``none`` and ``position`` -1 (a generator's
   failure has no controlled kind or position); ``meta`` holds the domain, the
   prompt, both sequences' generator / backbone / votes, ``gold_letter`` and
   ``presentation`` (``gold_first`` / ``gold_second`` by display order).
4. **Splits** 70/20/10 by prompt (every record of a prompt in one split), exact
   counts, domains spread evenly (as PRISM's split by gold sequence).
5. **A/B order** as PRISM: at random, with ⌈N/2⌉ gold-A and ⌊N/2⌋ gold-B records
   per split and each layout within one (a seeded shuffle of a balanced list per layout).

:func:`write_synthetic_mirage` writes a small synthetic manifest (tests,
quickstart): each synthetic procedure (:mod:`.procedures`) is a prompt,
alternately ``recipes`` and ``vist``, "generated" by four pipelines — a
faithful one (the gold images) and three faulty ones (a consecutive swap, one
out-of-context frame, a shuffle) — each judged by three simulated annotators
who call a faithful sequence valid with probability 0.9 and a faulty one with
probability 0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from judgetrain import records
from judgetrain.config import WorkBuildArgs, arg, comma_list
from judgetrain.jsonl import json_kind, optional_text, read_jsonl, text
from judgetrain.seeding import rng_for

from .prism import (
    DEFAULT_SPLITS,
    LAYOUTS,
    PAIRWISE_CHOICES,
    assign_splits,
    balance_letters,
    check_common,
    consecutive_swaps,
    instruction_for,
    layout_record,
    pairwise_parts,
    presentation,
    shuffle_variant,
)
from .common import (BuildError, Fractions, Skip, balance_table, builder_parser, finish_summary, inside, save_build,
                     split_table)
from .procedures import check_image, image_bytes, read_procedures, write_procedures

BUILDER = "mirage"
VERSION = "1.0.0"
DOMAINS = ("recipes", "vist")
TITLE_LABELS = {"recipes": "Task", "vist": "Story"}
DEFAULT_SYNTHETIC = 48
SYNTHETIC_GENERATORS = ("synth-faithful", "synth-swap", "synth-outlier", "synth-shuffle")
SYNTHETIC_ANNOTATORS = 3
# P(an annotator calls the sequence valid): faithful output / faulty output
SYNTHETIC_P_VALID, SYNTHETIC_P_VALID_FAULTY = 0.9, 0.1
MIRAGE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given a text (the steps "
    "of a procedure or the sentences of a story) and two image sequences, Sequence A and Sequence B, each meant to "
    "illustrate it in order. Decide which sequence better adheres to the text: every image should show the content "
    "of its step, and the images should follow the text's chronological order. Commit to your choice before any "
    "explanation: begin your answer with the letter of the better sequence, A or B."
)


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
    """One prompt (a recipe or a story) with the sequences generated for it."""

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
        raise ValueError(f"{where}.votes: {raw!r} is not a list of votes; give one vote per annotator, "
                         "1/true (valid) or 0/false (not valid)")
    return [int(v) for v in raw]


def read_mirage(path: str | os.PathLike) -> tuple[list[MiragePrompt], list[Skip]]:
    """Parse a MIRAGE manifest (module docstring) with :func:`judgetrain.jsonl.read_jsonl`.
    Bad lines and bad sequences become :class:`Skip` entries naming ``path:line`` and
    ``field: problem; fix``; nothing raises except a missing manifest."""
    path = Path(path)
    if not path.is_file():
        raise BuildError(f"{path}: MIRAGE manifest not found")
    prompts: list[MiragePrompt] = []
    skips: list[Skip] = []
    seen: dict[str, int] = {}
    for item in read_jsonl(path):
        pid = None
        try:
            if item.problem:
                raise ValueError(item.problem)
            pid = text(item.row, "id", "a non-empty string naming the prompt", ids=True)
            if pid in seen:
                raise ValueError(f"id: {pid!r} is also on line {seen[pid]}; give every prompt its own id")
            prompt, bad = _mirage_prompt(item.row, pid, path, item.line)
        except ValueError as e:
            skips.append(Skip(str(path), item.line, str(e), pid))
            continue
        seen[pid] = item.line
        skips += [Skip(str(path), item.line, reason, pid) for reason in bad]
        prompts.append(prompt)
    return prompts, skips


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
        raise ValueError("prompt: missing and no steps; give 'prompt' (the generation prompt) or 'steps' "
                         "(one text per image), or both")
    source = text(row, "source", "a non-empty string, or leave it out", default=f"mirage-{domain}")
    raw = row.get("sequences")
    if not isinstance(raw, list) or not raw:
        what = "missing" if raw is None else "empty" if raw == [] else f"{json_kind(raw)}, not an array"
        raise ValueError(f'sequences: {what}; give a non-empty list of {{"generator", "images", "votes"}} objects')
    steps = [s.strip() for s in steps]
    sequences, bad, total = [], [], 0
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
    """Write ``n`` synthetic prompts (module docstring) as ``out_dir/mirage.jsonl``
    over the procedure images in ``out_dir/procedures/``; deterministic in
    ``seed``, resumable like :func:`.procedures.write_procedures`. Sequences
    carry an extra ``defect`` key (what the faulty generator did), which the
    reader ignores. Returns the manifest path."""
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
                images, defect = [rel[g] for g in v.order], {"perturbation": "swap", "positions": list(v.positions)}
            elif gen == "synth-outlier" and others:
                p = int(rng.integers(proc.n))
                q, k = others[int(rng.integers(len(others)))]
                images[p] = str(q.images[k].relative_to(out_dir.resolve()))
                defect = {"perturbation": "semantic-1", "positions": [p], "outlier": f"{q.id}/{k}"}
            elif gen == "synth-shuffle":
                v = shuffle_variant(proc.n, rng)
                images, defect = [rel[g] for g in v.order], {"perturbation": "shuffle", "positions": list(v.positions)}
            p_valid = SYNTHETIC_P_VALID if defect is None else SYNTHETIC_P_VALID_FAULTY
            votes = [int(x) for x in (rng.random(SYNTHETIC_ANNOTATORS) < p_valid)]
            sequences.append({"id": gen, "generator": gen, "backbone": "synthetic", "images": images, "votes": votes, "defect": defect})
        rows.append({"id": f"mirage-{index:05d}", "domain": domain, "prompt": proc.title, "steps": proc.texts,
                     "source": f"synthetic-mirage-{domain}", "sequences": sequences})
    manifest = out_dir / "mirage.jsonl"
    tmp = manifest.with_name(manifest.name + ".part")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, manifest)
    return manifest


# --------------------------------------------------------------------------- the build


@dataclass(kw_only=True)
class MirageConfig(WorkBuildArgs):
    """``judgetrain build mirage``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(None, f"generate N synthetic prompts (the source when no manifest is given: {DEFAULT_SYNTHETIC})",
                                metavar="N")
    manifest: Path | None = arg(None, 'MIRAGE manifest, JSON Lines: {"id", "domain", "prompt"?, "steps"?, '
                                      '"sequences": [{"generator", "images", "votes", ...}]}', metavar="MANIFEST")
    layouts: list[str] = arg(list(LAYOUTS), "prompt layouts from " + ",".join(LAYOUTS) + " (space- or comma-separated; default: all)")
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by prompt")
    synthetic_size: int = arg(128, "side of the synthetic images in pixels", metavar="PX")

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        if self.manifest is not None:
            self.manifest = Path(self.manifest)
        elif self.synthetic is None:
            self.synthetic = DEFAULT_SYNTHETIC
        self.layouts = comma_list(self.layouts)
        self.splits = Fractions(self.splits)

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = check_common(self.manifest, self.synthetic, self.splits, self.synthetic_size, manifest_flag="--manifest")
        bad = [x for x in self.layouts if x not in LAYOUTS]
        if bad or not self.layouts:
            problems.append(f"--layouts: unknown {bad}; choose one or more of {list(LAYOUTS)}" if bad else "--layouts: give at least one layout")
        if problems:
            raise BuildError("invalid MIRAGE build options:\n" + "\n".join(f"  - {p}" for p in problems))


def _seq_json(s: MirageSequence) -> dict:
    return {"id": s.id, "generator": s.generator, "backbone": s.backbone, "votes": s.votes, "images": [str(p) for p in s.images]}


def _seq_meta(s: dict) -> dict:
    return {k: s[k] for k in ("id", "generator", "backbone", "votes")}


def _generate(plans_json: str, cfg_json: str):
    from tqdm.auto import tqdm

    cfg = json.loads(cfg_json)
    plans = json.loads(plans_json)
    for plan in tqdm(plans, desc=f"{BUILDER} {plans[0]['split'] if plans else ''}", unit="prompt", disable=not cfg["progress"]):
        pr = plan["prompt"]
        cache: dict[str, bytes] = {}

        def load(path: str) -> bytes:
            if path not in cache:
                cache[path] = image_bytes(path)
            return cache[path]

        seqs = {s["id"]: s for s in pr["sequences"]}
        for pos_id, neg_id, layout, letter in plan["records"]:
            pos, neg = seqs[pos_id], seqs[neg_id]
            seq_a, seq_b = (pos["images"], neg["images"]) if letter == "A" else (neg["images"], pos["images"])
            parts = pairwise_parts(layout, pr["prompt"], pr["steps"], seq_a, seq_b, instruction_for("pairwise", layout, MIRAGE_INSTRUCTION),
                                   TITLE_LABELS[pr["domain"]])
            meta = {"prompt_id": pr["id"], "domain": pr["domain"], "prompt": pr["prompt"], "positive": _seq_meta(pos), "negative": _seq_meta(neg),
                    "generator": neg["generator"], "backbone": neg["backbone"], "gold_letter": letter,
                    "presentation": presentation(letter, layout)}
            yield layout_record(
                parts, load, id=records.make_id(BUILDER, cfg["seed"], pr["source"], pr["id"], pos_id, neg_id, layout, prefix="mirage-"),
                task="pairwise", answer=letter, choices=PAIRWISE_CHOICES, label=letter, source=pr["source"], perturbation="none",
                position=-1, n_frames=len(pos["images"]), layout=layout, meta=meta,
            )


def equal_length_pairs(p: MiragePrompt, pos: list[MirageSequence], neg: list[MirageSequence]) -> tuple[list, list[dict]]:
    """(positive, negative) pairs of ``p`` that show as many images each, and the others,
    located: a pair of unequal length would let the image count give the answer away."""
    equal, unequal = [], []
    for a in pos:
        for b in neg:
            if len(a.images) == len(b.images):
                equal.append((a, b))
            else:
                unequal.append({"path": p.manifest, "line": p.line, "id": p.id, "positive": a.id, "negative": b.id,
                                "images": [len(a.images), len(b.images)]})
    return equal, unequal


def build(cfg: MirageConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    import datasets

    cfg.check()
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    manifest = Path(cfg.manifest) if cfg.manifest is not None else write_synthetic_mirage(
        work / "synthetic", cfg.synthetic or DEFAULT_SYNTHETIC, cfg.seed, size=cfg.synthetic_size, progress=cfg.progress)
    prompts, skips = read_mirage(manifest)
    if skips:
        for s in skips:
            print(f"warning: skipped {s}", file=sys.stderr)
        if cfg.strict:
            raise BuildError(f"{len(skips)} bad input(s) (listed above; the first: {skips[0]}); fix them or rerun "
                             "without --strict to skip them")

    verdicts: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    kept, filtered, pairs_of, unequal = [], [], {}, []
    for p in prompts:
        for s in p.sequences:
            verdicts[p.domain][s.generator][s.verdict] += 1
        pos = [s for s in p.sequences if s.verdict == "positive"]
        neg = [s for s in p.sequences if s.verdict == "negative"]
        equal, odd = equal_length_pairs(p, pos, neg)
        unequal += odd
        if equal:
            kept.append((p, pos, neg))
            pairs_of[p.id] = equal
        else:
            reason = ("no human-validated positive" if not pos else "no negative" if not neg
                      else "no positive and negative of equal length (the image count would give the answer away)")
            filtered.append({"id": p.id, "domain": p.domain, "reason": reason})
    for u in unequal:
        print(f"warning: {u['path']}:{u['line']}: sequences {u['positive']!r} and {u['negative']!r} show {u['images'][0]} and "
              f"{u['images'][1]} images; pair left out (the image count would give the answer away): give sequences of "
              "equal length, one image per step", file=sys.stderr)
    if not kept:
        raise BuildError(f"no prompt in {manifest} has both a positive and a negative sequence by majority vote "
                         f"({len(filtered)} without, {len(skips)} skipped); see build.json or the warnings above")

    split_of = assign_splits([(p.id, p.domain) for p, _, _ in kept], cfg.splits, cfg.seed, "mirage-split")
    plans_by_split: dict[str, list[dict]] = defaultdict(list)
    items_by_split: dict[str, list] = defaultdict(list)
    for p, pos, neg in sorted(kept, key=lambda x: x[0].id):
        name = split_of[p.id]
        recs = [[a.id, b.id, layout, None] for a, b in pairs_of[p.id] for layout in cfg.layouts]
        generator_of = {b.id: b.generator for b in neg}
        items_by_split[name] += [((p.id, a, b, layout), (layout, p.domain, generator_of[b])) for a, b, layout, _ in recs]
        plans_by_split[name].append({"split": name, "records": recs, "prompt": {
            "id": p.id, "domain": p.domain, "prompt": p.prompt, "steps": p.steps, "source": p.source,
            "sequences": [_seq_json(s) for s in pos + neg]}})
    for name, plans in plans_by_split.items():
        letters = balance_letters(items_by_split[name], cfg.seed, f"mirage-presentation-{name}")
        for plan in plans:
            for rec in plan["records"]:
                rec[3] = letters[(plan["prompt"]["id"], rec[0], rec[1], rec[2])]

    cfg_json = json.dumps({**asdict(cfg), "out": str(cfg.out), "manifest": str(cfg.manifest) if cfg.manifest else None})
    arrow_cache = work / "arrow"
    shutil.rmtree(arrow_cache, ignore_errors=True)
    splits = {}
    for name in cfg.splits:
        if plans_by_split.get(name):
            plans_json = json.dumps(plans_by_split[name], sort_keys=True)
            splits[name] = datasets.Dataset.from_generator(
                _generate, features=records.FEATURES, cache_dir=str(arrow_cache), gen_kwargs={"plans_json": plans_json, "cfg_json": cfg_json},
                fingerprint=records.make_id(BUILDER, name, cfg_json, plans_json))
    dataset = datasets.DatasetDict(splits)

    counts: dict = {"records": {}}
    for name, ds in dataset.items():
        cols = ds.select_columns(["layout", "label", "meta"]).to_dict()
        metas = [json.loads(m) for m in cols["meta"]]
        counts["records"][name] = {
            "total": len(ds),
            "layout": dict(sorted(Counter(cols["layout"]).items())),
            "domain": dict(sorted(Counter(m["domain"] for m in metas).items())),
            "generator": dict(sorted(Counter(m["generator"] for m in metas).items())),
            "domain_generator": dict(sorted(Counter(f"{m['domain']}/{m['generator']}" for m in metas).items())),
            "pairwise_label": dict(sorted(Counter(cols["label"]).items())),
            "pairwise_presentation": dict(sorted(Counter(m["presentation"] for m in metas).items())),
        }
    pairs: Counter = Counter()
    for p, _, _ in kept:
        for _, b in pairs_of[p.id]:
            pairs[f"{p.domain}/{b.generator}"] += 1
    counts["pairs"] = dict(sorted(pairs.items()))  # comparisons per domain/generator, before layouts
    counts["sequences"] = {d: {g: dict(sorted(c.items())) for g, c in sorted(gens.items())} for d, gens in sorted(verdicts.items())}
    counts["prompts"] = {"kept": len(kept), "without_pair": len(filtered), "skipped_inputs": len(skips),
                         "per_split": {name: sum(1 for p, _, _ in kept if split_of[p.id] == name) for name in cfg.splits},
                         "per_domain": dict(sorted(Counter(p.domain for p, _, _ in kept).items()))}
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "seed": cfg.seed,
        "args": json.loads(cfg_json),
        "protocol": {
            "labels": "majority vote over annotators; ties and unannotated sequences excluded",
            "pairs": "every positive x every negative of the same prompt and length, once per layout",
            "balance": "per split and layout: gold letters drawn at random from a seeded shuffle of as many A as B",
            "splits": cfg.splits,
        },
        "sources": [{"path": str(manifest), "bytes": manifest.stat().st_size}]
        + [{"id": p.id, "domain": p.domain, "sequences": len(p.sequences), "bytes": p.image_bytes_total} for p in sorted(prompts, key=lambda p: p.id)],
        "counts": counts,
        "filtered": filtered,
        "unequal_pairs": unequal,
        "skipped": [asdict(s) for s in skips],
    }
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(MirageConfig, "mirage",
                          "Build MIRAGE (paper 002 §5E): human-validated vs. generated image sequences as pairwise judge records.",
                          ["--out data/mirage --synthetic 48",
                           "--out data/mirage --manifest mirage/mirage.jsonl --layouts P0,P6"])


def print_summary(info: dict, out: Path) -> None:
    """Prompts kept, sequences by verdict, records per domain/generator and split, A/B balance."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    pr = info["counts"]["prompts"]
    console.print(f"MIRAGE: {pr['kept']} prompt(s) with a pair, {pr['without_pair']} without, {len(info['skipped'])} input(s) skipped; "
                  + ", ".join(f"{s} {n}" for s, n in pr["per_split"].items()))
    t = Table(title="Sequences by majority vote")
    verdicts = ("positive", "negative", "tie", "unannotated")
    t.add_column("domain / generator")
    for v in verdicts:
        t.add_column(v, justify="right")
    for d, gens in info["counts"]["sequences"].items():
        for g, c in gens.items():
            t.add_row(f"{d}/{g}", *[str(c.get(v, 0)) for v in verdicts])
    console.print(t)
    counts = info["counts"]["records"]
    console.print(split_table("Pairwise records per domain / negative generator and split", "domain / generator", counts,
                              "domain_generator", total=True))
    console.print(balance_table(counts))
    finish_summary(console, info, out)


def main(cfg: MirageConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
