"""``judgetrain build prism``: PRISM (paper 002 §5E, A.1–A.4, B.2), gold procedure sequences
against perturbed copies, as pairwise (gold vs. negative, answer A/B) and pointwise (one
sequence, answer 1–5) judge records in the prompt layouts P0–P6. This module holds the
command: its config, the build in named steps, the summary. The parts live beside it:
negatives in :mod:`.negatives`, layouts and instructions in :mod:`.layouts`, rendering in
:mod:`.render`, letters and records in :mod:`.records`; splits are every builder's
(:func:`judgetrain.data_builders.core.steps.assign_splits`). Docs: "reference/commands/build-prism.md", "concepts/prism-mirage.md"."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from judgetrain.config import arg, comma_list, one_of

from ..core.args import WorkBuildArgs
from ..core.common import BuildError, Fractions, balance_table, builder_parser, finish_summary, save_build, split_table
from ..core.outfolder import already_built
from ..core.steps import (
    DEFAULT_SPLITS,
    PROCEDURES_HELP,
    assign_splits,
    build_info,
    check_common,
    config_json,
    generate_splits,
    print_headline,
    procedure_sources,
    settle_source,
    too_short,
    work_dirs,
)
from ..procedures import Procedure, load_procedures
from .layouts import LAYOUTS, POINTWISE_LAYOUTS, check_layouts
from .negatives import (
    DEFAULT_NONCONSECUTIVE,
    PERTURBATIONS,
    SEMANTIC,
    SHUFFLE_MIN_MOVED,
    OutlierImage,
    make_negatives,
    outlier_pool,
)
from .records import (
    BUILDER,
    POINTWISE_SCORES,
    POSITIONAL_SUBSET_MAX_FRAMES,
    deal_letters,
    generate_records,
    gold_plan,
    record_counts,
)

__all__ = [
    "DEFAULT_SYNTHETIC",
    "MIN_STEPS",
    "MODES",
    "PrismConfig",
    "SplitPlans",
    "VERSION",
    "build",
    "check_categories",
    "main",
    "make_parser",
    "plan_splits",
    "print_summary",
    "protocol",
    "sequence_counts",
    "split_outlier_pool",
]

VERSION = "1.0.0"
MODES = ("pairwise", "pointwise")
MIN_STEPS = 4  # semantic Type 3 replaces three frames and a shuffle moves three
DEFAULT_SYNTHETIC = 100  # the paper's base set size


# --------------------------------------------------------------------------- the config


@dataclass(kw_only=True)
class PrismConfig(WorkBuildArgs):
    """``judgetrain build prism``: every field is a flag (``--field-name``) and a ``--config`` key."""

    synthetic: int | None = arg(
        None, f"generate N synthetic procedures (the source when no manifest is given: {DEFAULT_SYNTHETIC})", metavar="N"
    )
    procedures: Path | None = arg(None, PROCEDURES_HELP, metavar="MANIFEST")
    layouts: list[str] = arg(
        list(LAYOUTS), "prompt layouts from " + ",".join(LAYOUTS) + " (space- or comma-separated; default: all)"
    )
    modes: list[str] = arg(list(MODES), f"{one_of([*MODES, 'both'])} (space- or comma-separated)")
    perturbations: list[str] = arg(
        list(PERTURBATIONS), "negative kinds from " + ",".join(PERTURBATIONS) + " (space- or comma-separated)"
    )
    nonconsecutive_swaps: int = arg(
        DEFAULT_NONCONSECUTIVE, "non-consecutive swaps per gold sequence (distinct pairs i, j with j-i >= 2)", metavar="K"
    )
    splits: Fractions = arg(Fractions(DEFAULT_SPLITS), "fractions per split by gold sequence")
    synthetic_size: int = arg(128, "side of the synthetic step images in pixels", metavar="PX")
    twins: bool = arg(
        False,
        "also show every pairwise item the other way round (the twin: gold letter and presentation swapped, right after "
        "it, meta.twin naming the pair): what GRPO's consistency reward and eval bias's presentation-flip rate compare",
    )

    def __post_init__(self) -> None:
        settle_source(self, "procedures", DEFAULT_SYNTHETIC)
        self.layouts, self.modes = comma_list(self.layouts), comma_list(self.modes)
        if self.modes == ["both"]:  # as --help offers it: every mode
            self.modes = list(MODES)
        self.perturbations = comma_list(self.perturbations)
        self.splits = Fractions(self.splits)

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = check_common(self.procedures, self.synthetic, self.splits, self.synthetic_size, manifest_flag="--procedures")
        problems += check_layouts(self.layouts)
        bad = [x for x in self.modes if x not in MODES]
        if bad or not self.modes:
            problems.append(
                f"--modes: unknown {bad}; choose from {list(MODES)}"
                if bad
                else "--modes: give at least one of pairwise, pointwise"
            )
        if tuple(self.modes) == ("pointwise",) and set(self.layouts) == {"P4"}:
            problems.append("--layouts P4 with --modes pointwise: pointwise P4 is P0 and is not emitted; add another layout")
        bad = [x for x in self.perturbations if x not in PERTURBATIONS]
        if bad or not self.perturbations:
            problems.append(
                f"--perturbations: unknown {bad}; choose from {list(PERTURBATIONS)}"
                if bad
                else "--perturbations: give at least one"
            )
        if self.nonconsecutive_swaps < 0:
            problems.append(f"--nonconsecutive-swaps {self.nonconsecutive_swaps}: must be 0 or more")
        if problems:
            raise BuildError("invalid PRISM build options:\n" + "\n".join(f"  - {p}" for p in problems))


# --------------------------------------------------------------------------- the build


@dataclass
class SplitPlans:
    """The plans of every split (one per gold sequence, :func:`.records.gold_plan`), the
    gold sequences per outlier-pool kind (``split`` / ``all``), and per step count the
    sequences that got fewer non-consecutive swaps than asked, and how many they got."""

    by_split: dict[str, list[dict]] = field(default_factory=dict)
    outlier_pool: Counter = field(default_factory=Counter)
    capped: dict[str, dict[str, int]] = field(default_factory=dict)


def check_categories(kept: Sequence[Procedure], perturbations: Sequence[str]) -> list[str]:
    """The categories of the usable procedures; BuildError when semantic outliers are asked for
    and there is only one (an outlier is an image of another category)."""
    categories = sorted({p.category for p in kept})
    if any(p in SEMANTIC for p in perturbations) and len(categories) < 2:
        raise BuildError(
            f"semantic outliers are images from another category, but every usable procedure is in {categories}; "
            f"add procedures of other categories or leave semantic-1/2/3 out of --perturbations"
        )
    return categories


def split_outlier_pool(
    gold: Procedure, split_golds: Sequence[Procedure], kept: Sequence[Procedure]
) -> tuple[list[OutlierImage], str]:
    """The out-of-context images for ``gold`` and where they come from: the other categories'
    procedures of its split, or of every split when that gives fewer than three."""
    pool = outlier_pool(gold, split_golds)
    if len(pool) < 3:  # Type 3 needs three distinct images; fall back to every other-category image
        return outlier_pool(gold, kept), "all"
    return pool, "split"


def plan_splits(by_split: dict[str, list[Procedure]], kept: Sequence[Procedure], cfg: PrismConfig) -> SplitPlans:
    """Every gold sequence's negatives and records, split by split, gold letters dealt."""
    out = SplitPlans()
    for name, golds in by_split.items():
        plans = []
        for gold in sorted(golds, key=lambda p: p.id):
            pool, pool_kind = split_outlier_pool(gold, golds, kept)
            negatives = make_negatives(
                gold, pool, seed=cfg.seed, perturbations=cfg.perturbations, nonconsecutive=cfg.nonconsecutive_swaps
            )
            if "swap-nonconsecutive" in cfg.perturbations:
                got = sum(v.perturbation == "swap-nonconsecutive" for v in negatives)
                if got < cfg.nonconsecutive_swaps:  # fewer pairs (i, j), j - i >= 2, than asked: say so, never silently
                    out.capped[str(gold.n)] = {"sequences": out.capped.get(str(gold.n), {}).get("sequences", 0) + 1, "swaps": got}
            if any(v.outliers for v in negatives):
                out.outlier_pool[pool_kind] += 1
            plans.append(gold_plan(name, gold, negatives, pool_kind, cfg.modes, cfg.layouts))
        deal_letters(plans, cfg.seed, f"prism-presentation-{name}")
        out.by_split[name] = plans
    return out


def protocol(cfg: PrismConfig) -> dict:
    """``build.json``'s ``protocol``: the rules this build followed."""
    return {
        "min_steps": MIN_STEPS,
        "pointwise_scores": POINTWISE_SCORES,
        "pointwise_layouts": [x for x in cfg.layouts if x in POINTWISE_LAYOUTS],
        "nonconsecutive_swaps": cfg.nonconsecutive_swaps,
        "shuffle_min_moved": SHUFFLE_MIN_MOVED,
        "positional_subset": f"semantic-1 and swap negatives of gold sequences of at most {POSITIONAL_SUBSET_MAX_FRAMES} frames",
        "balance": "per split and layout: gold letters drawn at random from a seeded shuffle of as many A as B",
        "splits": cfg.splits,
    }


def sequence_counts(kept, short, skips, by_split, split_of, plans: SplitPlans, cfg: PrismConfig) -> dict:
    """``build.json``'s ``counts.sequences``: gold sequences kept, left out, per split and category,
    per outlier pool, and the capped non-consecutive swaps (None when none was capped)."""
    categories = sorted({p.category for p in kept})
    return {
        "kept": len(kept),
        "too_short": len(short),
        "skipped": len(skips),
        "per_split": {name: len(by_split.get(name, [])) for name in cfg.splits},
        "per_category": {c: dict(sorted(Counter(split_of[p.id] for p in kept if p.category == c).items())) for c in categories},
        "outlier_pool": dict(sorted(plans.outlier_pool.items())),
        "nonconsecutive_capped": {"asked": cfg.nonconsecutive_swaps, "by_steps": dict(sorted(plans.capped.items()))}
        if plans.capped
        else None,
    }


def build(cfg: PrismConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    cfg.check()
    if (done := already_built(cfg, BUILDER, VERSION)) is not None:  # same build: nothing to do; another: refused
        return done
    out, work = work_dirs(cfg)
    manifest, kept, short, skips = load_procedures(
        cfg.procedures,
        cfg.synthetic or DEFAULT_SYNTHETIC,
        work,
        seed=cfg.seed,
        size=cfg.synthetic_size,
        progress=cfg.progress,
        strict=cfg.strict,
        min_steps=MIN_STEPS,
    )
    check_categories(kept, cfg.perturbations)
    split_of = assign_splits([(p.id, p.category) for p in kept], cfg.splits, cfg.seed, "prism-split")
    by_split: dict[str, list[Procedure]] = defaultdict(list)
    for p in kept:
        by_split[split_of[p.id]].append(p)
    plans = plan_splits(by_split, kept, cfg)
    cfg_json = config_json(cfg, "procedures")
    dataset = generate_splits(generate_records, plans.by_split, cfg_json, work, [*cfg.splits], BUILDER)
    counts = {
        "records": record_counts(dataset),
        "sequences": sequence_counts(kept, short, skips, by_split, split_of, plans, cfg),
        "length_histogram": {str(k): v for k, v in sorted(Counter(p.n for p in kept).items())},
    }
    info = build_info(
        BUILDER,
        VERSION,
        cfg,
        cfg_json,
        protocol=protocol(cfg),
        sources=procedure_sources(manifest, kept + short),
        counts=counts,
        filtered=too_short(short, MIN_STEPS),
        skipped=[asdict(s) for s in skips],
    )
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(
        PrismConfig,
        "prism",
        "Build PRISM (paper 002 §5E): perturbed procedure sequences as pairwise and pointwise judge records.",
        ["--out data/prism --synthetic 12", "--out data/prism-pairwise --synthetic 12 --layouts P0,P6 --modes pairwise"],
    )


def print_summary(info: dict, out: Path, *, title: str = "PRISM") -> None:
    """Records per split by task / perturbation and by layout, pairwise A/B balance."""
    from rich.console import Console

    console = Console()
    counts = info["counts"]["records"]
    seq = info["counts"]["sequences"]
    print_headline(
        console,
        f"{title}: {seq['kept']} gold sequence(s) kept, {seq.get('too_short', 0)} too short, {seq['skipped']} skipped",
        seq["per_split"],
    )
    capped = seq.get("nonconsecutive_capped")
    for steps, c in (capped or {}).get("by_steps", {}).items():
        console.print(
            f"[yellow]--nonconsecutive-swaps {capped['asked']}: {c['sequences']} sequence(s) of {steps} steps have only "
            f"{c['swaps']} pair(s) i, j with j - i >= 2, so they got {c['swaps']} (build.json: "
            "counts.sequences.nonconsecutive_capped)[/yellow]"
        )
    console.print(split_table("Records per task / perturbation and split", "task / perturbation", counts, "task_perturbation"))
    console.print(split_table("Records per layout and split", "layout", counts, "layout", total=True))
    console.print(balance_table(counts))
    finish_summary(console, info, out)


def main(cfg: PrismConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
