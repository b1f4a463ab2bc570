"""TimeCatch: temporal (swap) and frame-level (noise) anomaly sets (paper 000 §3), built.

:func:`build` runs the protocol end to end: read the sources (a video or frame-folder
manifest, or synthetic physics clips), decode, subsample and LPIPS-filter each sequence
(cached in ``OUT.work/``, so a killed build resumes), split by sequence, make the four
tasks' records, and write the dataset atomically with ``build.json``. The parts live beside it:
``config`` (constants, prompts, options), ``sequences`` (manifests, per-sequence work) and
``records`` (splits, anomalies, records). Docs: "reference/commands/build-timecatch.md", "concepts/timecatch.md".
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

from judgetrain import records
from judgetrain.perceptual import LpipsDistance

from ..core.common import builder_parser, finish_summary, save_build, split_table
from ..core.manifests import nothing_left, report_skips
from ..core.outfolder import already_built
from .config import (
    BUILDER,
    MAIN_MAX_FRAMES,
    MAX_FRAMES,
    MIN_FRAMES,
    NOISE_MEAN,
    NOISE_STD,
    SPLIT_NAMES,
    VERSION,
    TimeCatchConfig,
    subset_of,
)
from .records import assign_splits, sequence_records, shared_media
from .sequences import (
    MEASURE_ERRORS,
    SequenceSkip,
    SourceSequence,
    check_sources,
    process_sequence,
    read_manifest,
    sequence_skip,
)

__all__ = ["build", "main", "make_parser", "print_summary"]

Sequences = list[tuple[SourceSequence, dict]]


# --------------------------------------------------------------------------- the build


def _generate(items: list[tuple[SourceSequence, dict, str]], cfg_json: str):
    """The records of one split for ``datasets.Dataset.from_generator`` (arguments as plain data)."""
    cfg = TimeCatchConfig(**json.loads(cfg_json))
    for seq, done, folder in items:
        yield from sequence_records(seq, done, Path(folder), cfg)


def _synthetic_manifest(cfg: TimeCatchConfig, work: Path) -> tuple[str, Path]:
    from ..synthetic import write_frame_folders, write_physics_videos

    assert cfg.synthetic is not None  # __post_init__ makes 64 clips the source when no manifest is given
    if cfg.synthetic_kind == "frames":
        return "frames", write_frame_folders(work / "synthetic-frames", cfg.synthetic, seed=cfg.seed, progress=cfg.progress)
    return "videos", write_physics_videos(
        work / "synthetic", cfg.synthetic, seed=cfg.seed, long_fraction=cfg.synthetic_long_fraction, progress=cfg.progress
    )


def _read_sources(cfg: TimeCatchConfig, work: Path) -> tuple[Path, list[SourceSequence], list[SequenceSkip]]:
    """The manifest (``--videos``, ``--frames``, or synthetic clips written under ``work``), its sequences and skips."""
    if cfg.videos is not None:
        kind, manifest = "videos", Path(cfg.videos)
    elif cfg.frames is not None:
        kind, manifest = "frames", Path(cfg.frames)
    else:
        kind, manifest = _synthetic_manifest(cfg, work)
    sequences, skips = read_manifest(manifest, kind)
    named = {s.source for s in sequences if s.video} | {s.source for s in skips if s.source}
    for source, seconds in cfg.intervals.items():  # a value that samples nothing is said, not dropped silently
        if source not in named:
            print(
                f"warning: --interval {source}={seconds:g}: no video of {manifest} names source {source!r} "
                f"(its sources: {sorted(named)}); it samples nothing",
                file=sys.stderr,
            )
    return manifest, sequences, skips


def _process_sequences(
    sequences: list[SourceSequence], cfg: TimeCatchConfig, distance, work: Path
) -> tuple[Sequences, Sequences, list[SequenceSkip]]:
    """:func:`process_sequence` for each: (kept, too short, unreadable as skips naming the manifest line)."""
    from tqdm.auto import tqdm

    kept: Sequences = []
    short: Sequences = []
    failed: list[SequenceSkip] = []
    for seq in tqdm(sequences, desc="sequences", unit="seq", disable=not cfg.progress):
        try:
            done = process_sequence(seq, cfg, distance, work)
        except MEASURE_ERRORS as e:  # one sequence's failure is its skip (manifest:line, the file, what went wrong)
            failed.append(sequence_skip(seq, e))
            continue
        (kept if done["status"] == "ok" else short).append((seq, done))
    return kept, short, failed


def _make_dataset(kept: Sequences, split_of: dict[str, str], cfg: TimeCatchConfig, cfg_json: str, work: Path):
    """One ``datasets.Dataset`` per split (the configured ones first), its records in (source, id) order."""
    import datasets

    arrow_cache = work / "arrow"
    shutil.rmtree(arrow_cache, ignore_errors=True)
    splits = {}
    for name in [*cfg.splits, *sorted(set(split_of.values()) - set(cfg.splits))]:
        items = sorted(
            [(s, d, str(work / "sequences" / records.make_id(s.source, s.id))) for s, d in kept if split_of[s.id] == name],
            key=lambda x: (x[0].source, x[0].id),
        )
        if items:
            splits[name] = datasets.Dataset.from_generator(
                _generate,
                features=records.FEATURES,
                cache_dir=str(arrow_cache),
                gen_kwargs={"items": items, "cfg_json": cfg_json},
                fingerprint=records.make_id(name, cfg_json, [(s.id, d["key"]) for s, d, _ in items]),
            )
    return datasets.DatasetDict(splits)


def _record_counts(dataset) -> dict[str, dict]:
    """build.json's ``counts.records``: per split, the total and the counts per task, perturbation and both."""
    counts = {}
    for name, ds in dataset.items():
        cols = ds.select_columns(["task", "perturbation", "source"])
        counts[name] = {
            "total": len(ds),
            "task": dict(sorted(Counter(cols["task"]).items())),
            "perturbation": dict(sorted(Counter(cols["perturbation"]).items())),
            "task_perturbation": dict(
                sorted(Counter(f"{t}/{p}" for t, p in zip(cols["task"], cols["perturbation"], strict=True)).items())
            ),
        }
    return counts


def _sequence_counts(kept: Sequences, short: Sequences, skips: list[SequenceSkip], split_of: dict[str, str]) -> dict[str, dict]:
    """build.json's ``counts.sequences`` (per source: kept, per split, per subset, too short,
    skipped) and ``counts.length_histogram`` (kept sequences per number of kept frames)."""
    per_source: dict[str, Counter] = defaultdict(Counter)
    lengths: Counter = Counter()
    for s, d in kept:
        per_source[s.source]["kept"] += 1
        per_source[s.source][split_of[s.id]] += 1
        per_source[s.source][subset_of(d["n_kept"])] += 1
        lengths[d["n_kept"]] += 1
    for s, _ in short:
        per_source[s.source]["too_short"] += 1
    for skip in skips:  # under the source its line names; a line that names none readable is "unknown"
        per_source[skip.source or "unknown (malformed line)"]["skipped"] += 1
    return {
        "sequences": {src: dict(sorted(c.items())) for src, c in sorted(per_source.items())},
        "length_histogram": {str(k): v for k, v in sorted(lengths.items())},
    }


def _shared_report(shared: list[dict], kept: Sequences, split_of: dict[str, str]) -> tuple[list[dict], list[dict]]:
    """build.json's ``shared_media`` (each group of sequences that share media, with the split all its
    copies went to) and ``manifest_splits_overridden`` (a copy whose manifest ``split`` named another
    split than its group's), each override warned about."""
    named = {s.id: (s.split, s.manifest, s.line) for s, _ in kept}
    overridden = []
    for group in shared:
        group["split"] = split_of[group["ids"][0]]
        for sid in group["ids"]:
            split, manifest, line = named[sid]
            if split and split != group["split"]:
                overridden.append({"id": sid, "manifest_split": split, "split": group["split"]})
                print(
                    f"warning: {manifest}:{line}: {sid!r} shares its media with {group['ids'][0]!r}, so it goes to "
                    f"{group['split']!r} with it, not to its {split!r}; give copies one split, or drop a copy",
                    file=sys.stderr,
                )
    return shared, overridden


def _build_info(
    cfg: TimeCatchConfig,
    cfg_json: str,
    manifest: Path,
    kept: Sequences,
    short: Sequences,
    skips: list[SequenceSkip],
    counts: dict,
    sequences: list[SourceSequence],
) -> dict:
    """build.json's content but the split hashes: arguments, protocol, sources with sizes, counts, filtered and skipped inputs."""
    sources = [{"path": str(manifest), "bytes": manifest.stat().st_size}]
    sources += [
        {"id": s.id, "source": s.source, **d["input"]} for s, d in sorted(kept + short, key=lambda x: (x[0].source, x[0].id))
    ]
    return {
        "builder": BUILDER,
        "version": VERSION,
        "seed": cfg.seed,
        "args": json.loads(cfg_json)
        | {"videos": str(cfg.videos) if cfg.videos else None, "frames": str(cfg.frames) if cfg.frames else None},
        "protocol": {
            "intervals_s": {src: cfg.interval_for(src) for src in sorted({s.source for s in sequences if s.video})},
            "lpips": {"net": cfg.lpips_net, "pretrained_backbone": cfg.lpips_pretrained, "threshold": cfg.lpips_threshold},
            "lengths": {
                "min": MIN_FRAMES,
                "main_max": MAIN_MAX_FRAMES,
                "max": MAX_FRAMES,
                "longer": "cut to the first 16 kept frames",
            },
            "noise": {"distribution": "normal", "mean": NOISE_MEAN, "std": NOISE_STD, "clip": [0, 255]},
        },
        "sources": sources,
        "counts": counts,
        "filtered": [{"id": s.id, "source": s.source, "reason": d["reason"]} for s, d in short],
        "skipped": [asdict(s) for s in skips],
    }


def build(cfg: TimeCatchConfig) -> dict:
    """Run the whole build; returns the ``build.json`` contents."""
    cfg.check()
    check_sources(cfg)  # a missing manifest is reported as such, not as a failed LPIPS download
    if (done := already_built(cfg, BUILDER, VERSION)) is not None:  # same build: nothing to do; another: refused
        return done
    # first, so that missing LPIPS weights fail the build before any other work
    distance = LpipsDistance(cfg.lpips_net, pretrained_backbone=cfg.lpips_pretrained, device=cfg.device, seed=cfg.seed)
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    manifest, sequences, skips = _read_sources(cfg, work)
    kept, short, failed = _process_sequences(sequences, cfg, distance, work)
    skips += failed
    kept = [(s, d) for s, d in kept if subset_of(d["n_kept"]) in cfg.subsets]
    report_skips(skips, cfg.strict, name_first=False)
    if not kept:
        raise nothing_left(
            manifest,
            "sequence",
            len(sequences),
            skips,
            f"no sequence of {MIN_FRAMES}+ frames survived ({len(short)} too short, {len(skips)} skipped)",
        )

    shared = shared_media(kept)  # copies of the same media (by content) go to one split: none is trained and validated on
    split_of = assign_splits([s for s, _ in kept], cfg.splits, cfg.seed, [g["ids"] for g in shared])
    cfg_json = json.dumps({**asdict(cfg), "out": str(cfg.out), "videos": None, "frames": None})
    dataset = _make_dataset(kept, split_of, cfg, cfg_json, work)
    counts = {"records": _record_counts(dataset), **_sequence_counts(kept, short, skips, split_of)}
    info = _build_info(cfg, cfg_json, manifest, kept, short, skips, counts, sequences)
    info["shared_media"], info["manifest_splits_overridden"] = _shared_report(shared, kept, split_of)
    return save_build(dataset, out, info, cfg, work)


# --------------------------------------------------------------------------- CLI


def make_parser():
    return builder_parser(
        TimeCatchConfig,
        "timecatch",
        "Build the TimeCatch swap / noise anomaly sets (paper 000 §3) as task records.",
        [
            "--out data/timecatch --synthetic 4 --lpips-random-backbone",
            "--out data/timecatch-frames --synthetic 4 --synthetic-kind frames --no-descriptions "
            "--lpips-random-backbone   # DriveLM-like frame folders",
            "--out data/timecatch-1s --synthetic 4 --interval 1.0 --tasks temporal_detect --lpips-random-backbone",
        ],
    )


def print_summary(info: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title="Sequences per source")
    order = ["kept", "main", "long", *SPLIT_NAMES, "too_short", "skipped"]
    present = {k for c in info["counts"]["sequences"].values() for k in c}
    keys = [k for k in order if k in present] + sorted(present - set(order))
    t.add_column("source")
    for k in keys:
        t.add_column(k.replace("_", " "), justify="right")
    for src, c in info["counts"]["sequences"].items():
        t.add_row(src, *[str(c.get(k, 0)) for k in keys])
    console.print(t)
    hist = info["counts"]["length_histogram"]
    width = max(hist.values(), default=1)
    console.print("Kept sequence lengths (frames: count)")
    for k, v in hist.items():
        console.print(f"  {int(k):>2}: {'█' * max(1, round(30 * v / width))} {v}")
    console.print(
        split_table(
            "Records per task and split", "task / perturbation", info["counts"]["records"], "task_perturbation", total=True
        )
    )
    finish_summary(console, info, out)


def main(cfg: TimeCatchConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0
