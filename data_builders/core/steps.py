"""The steps the procedure-based builds (PRISM, MIRAGE, the ordering probe) share: the
option checks of their sources and splits, the ``OUT.work/`` folder, the JSON form of a
config, one pass over a split's plans (progress bar, images read once per plan), the
arrow splits, and the head of ``build.json``.
Docs: "concepts/prism-mirage.md", "concepts/ordering-probe.md"."""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path

from judgetrain import records
from judgetrain.seeding import derive_seed

from .images import image_bytes

SPLIT_NAMES = ("train", "validation", "test")
DEFAULT_SPLITS = {"train": 0.7, "validation": 0.2, "test": 0.1}
PROCEDURES_HELP = 'procedure manifest, JSON Lines: {"id", "category", "title"?, "source"?, "steps": [{"text", "image"}, ...]}'


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


def settle_source(cfg, manifest_field: str, default_synthetic: int) -> None:
    """The source part of a config's ``__post_init__``: ``out`` and the manifest field as
    paths, and ``synthetic`` defaulting to ``default_synthetic`` when no manifest is given."""
    cfg.out = Path(cfg.out) if cfg.out is not None else None
    if getattr(cfg, manifest_field) is not None:
        setattr(cfg, manifest_field, Path(getattr(cfg, manifest_field)))
    elif cfg.synthetic is None:
        cfg.synthetic = default_synthetic


def work_dirs(cfg) -> tuple[Path, Path]:
    """``(OUT, OUT.work)``, both absolute; the work folder is created."""
    out = Path(cfg.out).resolve()
    work = out.with_name(out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)
    return out, work


def config_json(cfg, *path_fields: str) -> str:
    """``cfg`` as JSON (build.json's ``args``, and what the record generators read): ``out`` and
    the ``path_fields`` as strings (an unset path as null), every other field as ``asdict`` gives it."""
    paths = {name: str(getattr(cfg, name)) if getattr(cfg, name) else None for name in path_fields}
    return json.dumps({**asdict(cfg), "out": str(cfg.out), **paths})


def cached_loader() -> Callable[[str], bytes]:
    """``load(path)``: an image file's bytes, each file read once per loader."""
    cache: dict[str, bytes] = {}

    def load(path: str) -> bytes:
        if path not in cache:
            cache[path] = image_bytes(path)
        return cache[path]

    return load


def each_plan(plans_json: str, cfg_json: str, builder: str, unit: str) -> Iterator[tuple[dict, dict, Callable[[str], bytes]]]:
    """``(cfg, plan, load)`` for every plan of one split (``plans_json``, each with its
    ``split``), under a progress bar unless ``cfg["progress"]`` is false; ``load`` is a
    fresh :func:`cached_loader` per plan."""
    from tqdm.auto import tqdm

    cfg = json.loads(cfg_json)
    plans = json.loads(plans_json)
    for plan in tqdm(plans, desc=f"{builder} {plans[0]['split'] if plans else ''}", unit=unit, disable=not cfg["progress"]):
        yield cfg, plan, cached_loader()


def fresh_arrow_cache(work: Path) -> Path:
    """``work/arrow``, emptied: the cache ``Dataset.from_generator`` writes into."""
    arrow_cache = work / "arrow"
    shutil.rmtree(arrow_cache, ignore_errors=True)
    return arrow_cache


def arrow_split(generate: Callable, arrow_cache: Path, fingerprint: str, **gen_kwargs):
    """One split: the records ``generate(**gen_kwargs)`` yields, as a ``datasets.Dataset``."""
    import datasets

    return datasets.Dataset.from_generator(
        generate, features=records.FEATURES, cache_dir=str(arrow_cache), gen_kwargs=gen_kwargs, fingerprint=fingerprint
    )


def generate_splits(
    generate: Callable, plans_by_split: dict[str, list[dict]], cfg_json: str, work: Path, split_order: Iterable[str], builder: str
):
    """A ``DatasetDict`` of the splits in ``split_order`` that have plans, each made by
    ``generate(plans_json=…, cfg_json=…)``."""
    import datasets

    arrow_cache = fresh_arrow_cache(work)
    splits = {}
    for name in split_order:
        plans = plans_by_split.get(name)
        if not plans:
            continue
        plans_json = json.dumps(plans, sort_keys=True)
        splits[name] = arrow_split(
            generate, arrow_cache, records.make_id(builder, name, cfg_json, plans_json), plans_json=plans_json, cfg_json=cfg_json
        )
    return datasets.DatasetDict(splits)


def build_info(builder: str, version: str, cfg, cfg_json: str, **sections) -> dict:
    """``build.json``'s head (builder, version, seed, args), then ``sections`` in the order given."""
    return {"builder": builder, "version": version, "seed": cfg.seed, "args": json.loads(cfg_json), **sections}


def manifest_source(manifest: Path) -> dict:
    """The ``sources`` entry of the manifest a build read."""
    return {"path": str(manifest), "bytes": manifest.stat().st_size}


def procedure_sources(manifest: Path, procedures: Sequence) -> list[dict]:
    """``build.json``'s ``sources``: the manifest, then every procedure (by id) with its steps and image bytes."""
    return [manifest_source(manifest)] + [
        {"id": p.id, "category": p.category, "steps": p.n, "bytes": p.image_bytes_total}
        for p in sorted(procedures, key=lambda p: p.id)
    ]


def too_short(short: Sequence, min_steps: int) -> list[dict]:
    """``build.json``'s ``filtered`` entries of the procedures with fewer than ``min_steps`` steps."""
    return [{"id": p.id, "reason": f"{p.n} step(s) (< {min_steps})"} for p in short]


def print_headline(console, text: str, per_split: dict) -> None:
    """The first line of a build summary: ``text``, then ``"; "`` and the count of each split."""
    console.print(f"{text}; " + ", ".join(f"{s} {n}" for s, n in per_split.items()))


def assign_splits(
    items: Sequence[tuple[str, str]], fractions: dict[str, float], seed: int, salt: str = "split"
) -> dict[str, str]:
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
