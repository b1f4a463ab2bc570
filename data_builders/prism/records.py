"""PRISM's records: which split each gold sequence goes to, the gold letter of each pairwise
record (exact A/B balance), the plan of one gold sequence (its negatives and the records
they give), and the pairwise / pointwise records made from a plan.
Docs: "concepts/prism-mirage.md" (splits, pairwise, A/B order, pointwise, positional subset)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import asdict
from typing import Any

from judgetrain import records
from judgetrain.seeding import derive_seed, rng_for

from ..core.steps import each_plan
from ..procedures import Procedure
from .layouts import POINTWISE_LAYOUTS, instruction_for, pairwise_parts, pointwise_parts
from .negatives import OutlierImage, Variant, gold_variant
from .render import layout_record

BUILDER = "prism"  # part of every record id
# Figure S4 / S2: coherent 5, an order violation 3, any out-of-context image 1 (the minimum)
POINTWISE_SCORES = {
    "none": 5,
    "swap": 3,
    "swap-nonconsecutive": 3,
    "shuffle": 3,
    "semantic-1": 1,
    "semantic-2": 1,
    "semantic-3": 1,
}
PAIRWISE_CHOICES = ["A", "B"]
POINTWISE_CHOICES = ["1", "2", "3", "4", "5"]
POSITIONAL_SUBSET_MAX_FRAMES = records.POSITIONAL_SUBSET_MAX_FRAMES


# --------------------------------------------------------------------------- presentation order


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
        out.update({key: letters[i] for key, i in zip(keys, order, strict=True)})
    return out


def presentation(gold_letter: str, layout: str) -> str:
    """``gold_first`` when the gold sequence's images are shown first (P4 shows B first)."""
    return "gold_first" if (gold_letter == "A") != (layout == "P4") else "gold_second"


# --------------------------------------------------------------------------- plans


def _procedure_json(p: Procedure) -> dict:
    return {
        "id": p.id,
        "category": p.category,
        "title": p.title,
        "source": p.source,
        "n": p.n,
        "texts": p.texts,
        "images": [str(x) for x in p.images],
    }


def _variant_json(v: Variant, pool_kind: str | None) -> dict:
    return {
        "perturbation": v.perturbation,
        "key": v.key,
        "order": list(v.order),
        "position": v.position,
        "positions": list(v.positions),
        "outliers": [[p, asdict(o)] for p, o in v.outliers],
        "outlier_pool": pool_kind,
    }


def _variant_from_json(d: dict) -> Variant:
    return Variant(
        d["perturbation"],
        d["key"],
        tuple(d["order"]),
        d["position"],
        tuple(d["positions"]),
        tuple((p, OutlierImage(**o)) for p, o in d["outliers"]),
    )


def gold_plan(
    split: str, gold: Procedure, negatives: Sequence[Variant], pool_kind: str, modes: Sequence[str], layouts: Sequence[str]
) -> dict:
    """The plan of one gold sequence: the gold, its negatives and its records
    ``[task, variant key, layout, gold letter]`` (pairwise: every negative under every
    layout; pointwise: the gold and every negative under every pointwise layout); the
    letters are None until :func:`deal_letters`."""
    recs: list[list] = []
    if "pairwise" in modes:
        recs += [["pairwise", v.key, layout, None] for v in negatives for layout in layouts]
    if "pointwise" in modes:
        recs += [
            ["pointwise", v.key, layout, None]
            for v in [gold_variant(gold.n), *negatives]
            for layout in layouts
            if layout in POINTWISE_LAYOUTS
        ]
    return {
        "split": split,
        "gold": _procedure_json(gold),
        "records": recs,
        "variants": [_variant_json(v, pool_kind if v.outliers else None) for v in negatives],
    }


def deal_letters(plans: Sequence[dict], seed: int, salt: str) -> None:
    """Fill in the gold letter of every pairwise record of one split's ``plans``
    (:func:`balance_letters`, stratified by layout, perturbation and position)."""
    items = []
    for plan in plans:
        variants = {d["key"]: d for d in plan["variants"]}
        items += [
            ((plan["gold"]["id"], key, layout), (layout, variants[key]["perturbation"], variants[key]["position"]))
            for task, key, layout, _ in plan["records"]
            if task == "pairwise"
        ]
    letters = balance_letters(items, seed, salt)
    for plan in plans:
        for rec in plan["records"]:
            if rec[0] == "pairwise":
                rec[3] = letters[(plan["gold"]["id"], rec[1], rec[2])]


# --------------------------------------------------------------------------- records


def _meta(gold: dict, v: Variant, pool_kind: str | None) -> dict:
    meta = {
        "gold_id": gold["id"],
        "category": gold["category"],
        "title": gold["title"],
        "subset": v.subset,
        "variant": v.key,
        "positions": list(v.positions),
        "frame_order": list(v.order),
        "positional_subset": gold["n"] <= POSITIONAL_SUBSET_MAX_FRAMES and v.perturbation in ("semantic-1", "swap"),
    }
    if v.outliers:
        meta["outliers"] = [
            {"position": p, "procedure_id": o.procedure_id, "step": o.step, "category": o.category} for p, o in v.outliers
        ]
        meta["outlier_pool"] = pool_kind
    if v.perturbation in ("swap", "swap-nonconsecutive"):
        meta["swapped_frames"] = [p + 1 for p in v.positions]
    return meta


def twin_letters(letter: str, twins: bool) -> tuple[str, ...]:
    """The gold letters a pairwise item is shown with: the dealt one, then (``twins``) the other, the
    same two sequences the other way round (``judgetrain build prism --twins``, ``build mirage --twins``)."""
    return (letter, "B" if letter == "A" else "A") if twins else (letter,)


def plan_records(plan: dict, load: Callable[[str], bytes], seed: int, twins: bool = False) -> Iterator[dict]:
    """The records of one plan, in its order; ``load(path)`` gives an image's bytes. ``twins``: each
    pairwise record is followed by its twin (the sequences swapped, ``meta.twin`` the first's id)."""
    gold = plan["gold"]
    variants = {d["key"]: (_variant_from_json(d), d["outlier_pool"]) for d in plan["variants"]}
    gold_v = gold_variant(gold["n"])
    for task, key, layout, letter in plan["records"]:
        v, pool_kind = variants[key] if key != "gold" else (gold_v, None)
        meta = _meta(gold, v, pool_kind)
        shown = v.images(gold["images"])
        common = {
            "source": gold["source"],
            "perturbation": v.perturbation,
            "position": v.position,
            "n_frames": gold["n"],
            "layout": layout,
            "id": records.make_id(BUILDER, seed, gold["source"], gold["id"], task, key, layout, prefix="prism-"),
        }
        if task == "pairwise":
            first = common["id"]
            for k, shown_letter in enumerate(twin_letters(letter, twins)):
                gold_imgs = gold["images"]
                seq_a, seq_b = (gold_imgs, shown) if shown_letter == "A" else (shown, gold_imgs)
                parts = pairwise_parts(layout, gold["title"], gold["texts"], seq_a, seq_b, instruction_for("pairwise", layout))
                twin_meta = {**meta, "gold_letter": shown_letter, "presentation": presentation(shown_letter, layout)}
                if twins:
                    twin_meta["twin"] = first
                ids = (
                    {"id": first}
                    if k == 0
                    else {
                        "id": records.make_id(
                            BUILDER, seed, gold["source"], gold["id"], task, key, layout, "twin", prefix="prism-"
                        )
                    }
                )
                yield layout_record(
                    parts,
                    load,
                    task="pairwise",
                    answer=shown_letter,
                    choices=PAIRWISE_CHOICES,
                    label=shown_letter,
                    meta=twin_meta,
                    **{**common, **ids},
                )
        else:
            score = str(POINTWISE_SCORES[v.perturbation])
            parts = pointwise_parts(layout, gold["title"], gold["texts"], shown, instruction_for("pointwise", layout))
            meta["score"] = int(score)
            yield layout_record(
                parts, load, task="pointwise", answer=score, choices=POINTWISE_CHOICES, label=score, meta=meta, **common
            )


def generate_records(plans_json: str, cfg_json: str) -> Iterator[dict]:
    """Records of the plans (one per gold sequence) in plan order: the generator of one split's
    ``Dataset.from_generator``."""
    for cfg, plan, load in each_plan(plans_json, cfg_json, BUILDER, "gold"):
        yield from plan_records(plan, load, cfg["seed"], bool(cfg.get("twins")))


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
            "task_perturbation": dict(
                sorted(Counter(f"{t}/{p}" for t, p in zip(cols["task"], cols["perturbation"], strict=True)).items())
            ),
            "pairwise_label": dict(sorted(Counter(cols["label"][i] for i in pair).items())),
            "pairwise_presentation": dict(sorted(Counter(metas[i]["presentation"] for i in pair).items())),
            "pointwise_label": dict(sorted(Counter(cols["label"][i] for i in point).items())),
            "positional_subset": sum(bool(m.get("positional_subset")) for m in metas),
        }
    return out
