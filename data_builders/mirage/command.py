"""``judgetrain build mirage``: MIRAGE (paper 002 §5E, C.2), human-validated generated image
sequences against rejected ones of the same prompt, as pairwise judge records in the PRISM
layouts. This module holds the config, the build in named steps and the summary; the
manifest and its synthetic stand-in are :mod:`.sources`, the pairs, plans and records
:mod:`.records`. Docs: "reference/commands/build-mirage.md", "concepts/prism-mirage.md"."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from judgetrain.config import arg, comma_list

from ..core.args import WorkBuildArgs
from ..core.common import BuildError, Fractions, Skip, balance_table, builder_parser, finish_summary, save_build, split_table
from ..core.manifests import nothing_left, report_skips
from ..core.outfolder import already_built
from ..core.steps import (
    DEFAULT_SPLITS,
    assign_splits,
    build_info,
    check_common,
    config_json,
    generate_splits,
    manifest_source,
    print_headline,
    settle_source,
    work_dirs,
)
from ..prism.layouts import LAYOUTS, check_layouts
from .records import BUILDER, Pairing, generate_records, pair_prompts, plan_splits, record_counts
from .sources import DEFAULT_SYNTHETIC, read_mirage, write_synthetic_mirage

VERSION = "1.0.0"
# --------------------------------------------------------------------------- the config


@dataclass(kw_only=True)
class MirageConfig(WorkBuildArgs):
    """``judgetrain build mirage``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(
        None, f"generate N synthetic prompts (the source when no manifest is given: {DEFAULT_SYNTHETIC})", metavar="N"
    )
    manifest: Path | None = arg(
        None,
        'MIRAGE manifest, JSON Lines: {"id", "domain", "prompt"?, "steps"?, '
        '"sequences": [{"generator", "images", "votes", ...}]}',
        metavar="MANIFEST",
    )
    layouts: list[str] = arg(
        list(LAYOUTS), "prompt layouts from " + ",".join(LAYOUTS) + " (space- or comma-separated; default: all)"
    )
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by prompt")
    synthetic_size: int = arg(128, "side of the synthetic images in pixels", metavar="PX")
    twins: bool = arg(
        False,
        "also show every pair the other way round (the twin: gold letter and presentation swapped, right after it, "
        "meta.twin naming the pair): what GRPO's consistency reward and eval bias's presentation-flip rate compare",
    )

    def __post_init__(self) -> None:
        settle_source(self, "manifest", DEFAULT_SYNTHETIC)
        self.layouts = comma_list(self.layouts)
        self.splits = Fractions(self.splits)

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = check_common(self.manifest, self.synthetic, self.splits, self.synthetic_size, manifest_flag="--manifest")
        problems += check_layouts(self.layouts)
        if problems:
            raise BuildError("invalid MIRAGE build options:\n" + "\n".join(f"  - {p}" for p in problems))


# --------------------------------------------------------------------------- the build


def source_manifest(cfg: MirageConfig, work: Path) -> Path:
    """The manifest to read: ``--manifest``, or a synthetic one written into ``work``."""
    if cfg.manifest is not None:
        return Path(cfg.manifest)
    return write_synthetic_mirage(
        work / "synthetic", cfg.synthetic or DEFAULT_SYNTHETIC, cfg.seed, size=cfg.synthetic_size, progress=cfg.progress
    )


def warn_unequal(unequal: list[dict]) -> None:
    """Name every pair left out for unequal length on stderr, with its manifest line and the fix."""
    for u in unequal:
        print(
            f"warning: {u['path']}:{u['line']}: sequences {u['positive']!r} and {u['negative']!r} show {u['images'][0]} and "
            f"{u['images'][1]} images; pair left out (the image count would give the answer away): give sequences of "
            "equal length, one image per step",
            file=sys.stderr,
        )


def build_counts(dataset, pairing: Pairing, split_of: dict[str, str], skips: list[Skip], splits) -> dict:
    """``build.json``'s ``counts``: records per split, comparisons per domain/generator (before
    layouts), sequences per domain, generator and verdict, and prompts kept, left out and per split."""
    kept = pairing.kept
    pairs: Counter = Counter()
    for p, _, _ in kept:
        for _, b in pairing.pairs_of[p.id]:
            pairs[f"{p.domain}/{b.generator}"] += 1
    return {
        "records": record_counts(dataset),
        "pairs": dict(sorted(pairs.items())),
        "sequences": {
            d: {g: dict(sorted(c.items())) for g, c in sorted(gens.items())} for d, gens in sorted(pairing.verdicts.items())
        },
        "prompts": {
            "kept": len(kept),
            "without_pair": len(pairing.filtered),
            "skipped_inputs": len(skips),
            "per_split": {name: sum(1 for p, _, _ in kept if split_of[p.id] == name) for name in splits},
            "per_domain": dict(sorted(Counter(p.domain for p, _, _ in kept).items())),
        },
    }


PROTOCOL = {
    "labels": "majority vote over annotators; ties and unannotated sequences excluded",
    "pairs": "every positive x every negative of the same prompt and length, once per layout",
    "balance": "per split and (layout, domain, negative generator) stratum: gold letters drawn at random from a seeded "
    "shuffle of as many A as B; every stratum, layout and split within one",
}


def build(cfg: MirageConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    cfg.check()
    if (done := already_built(cfg, BUILDER, VERSION)) is not None:  # same build: nothing to do; another: refused
        return done
    out, work = work_dirs(cfg)
    manifest = source_manifest(cfg, work)
    prompts, skips = read_mirage(manifest)
    report_skips(skips, cfg.strict)
    pairing = pair_prompts(prompts)
    warn_unequal(pairing.unequal)
    if not pairing.kept:
        raise nothing_left(
            manifest,
            "prompt",
            len(prompts),
            skips,
            f"no prompt in {manifest} has both a positive and a negative sequence by majority vote "
            f"({len(pairing.filtered)} without, {len(skips)} skipped)",
        )
    split_of = assign_splits([(p.id, p.domain) for p, _, _ in pairing.kept], cfg.splits, cfg.seed, "mirage-split")
    plans_by_split = plan_splits(pairing, split_of, cfg.layouts, cfg.seed)
    cfg_json = config_json(cfg, "manifest")
    dataset = generate_splits(generate_records, plans_by_split, cfg_json, work, cfg.splits, BUILDER)
    sources = [manifest_source(manifest)] + [
        {"id": p.id, "domain": p.domain, "sequences": len(p.sequences), "bytes": p.image_bytes_total}
        for p in sorted(prompts, key=lambda p: p.id)
    ]
    info = build_info(
        BUILDER,
        VERSION,
        cfg,
        cfg_json,
        protocol={**PROTOCOL, "splits": cfg.splits},
        sources=sources,
        counts=build_counts(dataset, pairing, split_of, skips, cfg.splits),
        filtered=pairing.filtered,
        unequal_pairs=pairing.unequal,
        skipped=[asdict(s) for s in skips],
    )
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(
        MirageConfig,
        "mirage",
        "Build MIRAGE (paper 002 §5E): human-validated vs. generated image sequences as pairwise judge records.",
        ["--out data/mirage --synthetic 12", "--out data/mirage-p0p6 --synthetic 12 --layouts P0,P6"],
    )


def print_summary(info: dict, out: Path) -> None:
    """Prompts kept, sequences by verdict, records per domain/generator and split, A/B balance."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    pr = info["counts"]["prompts"]
    print_headline(
        console,
        f"MIRAGE: {pr['kept']} prompt(s) with a pair, {pr['without_pair']} without, {len(info['skipped'])} input(s) skipped",
        pr["per_split"],
    )
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
    console.print(
        split_table(
            "Pairwise records per domain / negative generator and split",
            "domain / generator",
            counts,
            "domain_generator",
            total=True,
        )
    )
    console.print(balance_table(counts))
    finish_summary(console, info, out)


def main(cfg: MirageConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
