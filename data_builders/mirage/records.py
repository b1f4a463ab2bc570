"""MIRAGE's pairs and records: every human-validated (positive) sequence of a prompt against
every rejected (negative) one of equal length, the plans of each split with the gold letters
dealt as PRISM deals them, and the pairwise records made from a plan.
Docs: "concepts/prism-mirage.md"."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judgetrain import records

from ..core.steps import each_plan
from ..prism.layouts import instruction_for, pairwise_parts
from ..prism.records import PAIRWISE_CHOICES, balance_letters, presentation, twin_letters
from ..prism.render import layout_record

if TYPE_CHECKING:
    from .sources import MiragePrompt, MirageSequence

BUILDER = "mirage"
# part of every record id
TITLE_LABELS = {"recipes": "Task", "vist": "Story"}

MIRAGE_INSTRUCTION = (
    "You are an expert judge of temporal and logical coherence in image sequences. You are given a text (the steps "
    "of a procedure or the sentences of a story) and two image sequences, Sequence A and Sequence B, each meant to "
    "illustrate it in order. Decide which sequence better adheres to the text: every image should show the content "
    "of its step, and the images should follow the text's chronological order. Commit to your choice before any "
    "explanation: begin your answer with the letter of the better sequence, A or B."
)


# --------------------------------------------------------------------------- pairs and plans


def equal_length_pairs(p: MiragePrompt, pos: list[MirageSequence], neg: list[MirageSequence]) -> tuple[list, list[dict]]:
    """(positive, negative) pairs of ``p`` that show as many images each, and the others,
    located: a pair of unequal length would let the image count give the answer away."""
    equal, unequal = [], []
    for a in pos:
        for b in neg:
            if len(a.images) == len(b.images):
                equal.append((a, b))
            else:
                unequal.append(
                    {
                        "path": p.manifest,
                        "line": p.line,
                        "id": p.id,
                        "positive": a.id,
                        "negative": b.id,
                        "images": [len(a.images), len(b.images)],
                    }
                )
    return equal, unequal


@dataclass
class Pairing:
    """The prompts that give a pair (with their positives and negatives), the pairs of each
    (:func:`equal_length_pairs`), the prompts without one and why, the pairs left out for
    unequal length, and the sequences per domain, generator and verdict."""

    kept: list[tuple[MiragePrompt, list[MirageSequence], list[MirageSequence]]] = field(default_factory=list)
    pairs_of: dict[str, list[tuple[MirageSequence, MirageSequence]]] = field(default_factory=dict)
    filtered: list[dict] = field(default_factory=list)
    unequal: list[dict] = field(default_factory=list)
    verdicts: dict[str, dict[str, Counter]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(Counter)))


def pair_prompts(prompts: list[MiragePrompt]) -> Pairing:
    """Label every sequence by majority vote and pair each prompt's positives with its negatives."""
    out = Pairing()
    for p in prompts:
        for s in p.sequences:
            out.verdicts[p.domain][s.generator][s.verdict] += 1
        pos = [s for s in p.sequences if s.verdict == "positive"]
        neg = [s for s in p.sequences if s.verdict == "negative"]
        equal, odd = equal_length_pairs(p, pos, neg)
        out.unequal += odd
        if equal:
            out.kept.append((p, pos, neg))
            out.pairs_of[p.id] = equal
        else:
            reason = (
                "no human-validated positive"
                if not pos
                else "no negative"
                if not neg
                else "no positive and negative of equal length (the image count would give the answer away)"
            )
            out.filtered.append({"id": p.id, "domain": p.domain, "reason": reason})
    return out


def _seq_json(s: MirageSequence) -> dict:
    return {"id": s.id, "generator": s.generator, "backbone": s.backbone, "votes": s.votes, "images": [str(p) for p in s.images]}


def stratified_letters(items: Sequence[tuple[Hashable, tuple[str, str, str]]], seed: int, salt: str) -> dict[Hashable, str]:
    """Gold letters of one split's records ``(key, (layout, domain, negative generator))``,
    balanced within one in every stratum, in every layout and layout/domain, and in the split.

    :func:`balance_letters` deals a seeded shuffle of as many A as B per ``stratum[0]``, and
    gives odd strata their extra letter A, B, A, … in ``str`` order of ``stratum[0]``: handing
    it the whole stratum as ``stratum[0]`` balances each stratum, and as the strata of one
    layout (and of one layout and domain) are neighbours in that order, the extras alternate
    within them too, so every coarser group is also within one and the split has ⌈N/2⌉ A."""
    return balance_letters([(key, (tuple(stratum),)) for key, stratum in items], seed, salt)


def plan_splits(pairing: Pairing, split_of: dict[str, str], layouts: Sequence[str], seed: int) -> dict[str, list[dict]]:
    """The plans (one per prompt: its sequences and records ``[positive id, negative id, layout,
    gold letter]``) of every split, gold letters dealt per split (:func:`stratified_letters`:
    A and B within one in every (layout, domain, negative generator) stratum)."""
    plans_by_split: dict[str, list[dict]] = defaultdict(list)
    items_by_split: dict[str, list] = defaultdict(list)
    for p, pos, neg in sorted(pairing.kept, key=lambda x: x[0].id):
        name = split_of[p.id]
        pairs = [(a.id, b.id, layout) for a, b in pairing.pairs_of[p.id] for layout in layouts]
        recs = [[a, b, layout, None] for a, b, layout in pairs]  # the gold letter (None) is dealt below
        generator_of = {b.id: b.generator for b in neg}
        items_by_split[name] += [((p.id, a, b, layout), (layout, p.domain, generator_of[b])) for a, b, layout in pairs]
        plans_by_split[name].append(
            {
                "split": name,
                "records": recs,
                "prompt": {
                    "id": p.id,
                    "domain": p.domain,
                    "prompt": p.prompt,
                    "steps": p.steps,
                    "source": p.source,
                    "sequences": [_seq_json(s) for s in pos + neg],
                },
            }
        )
    for name, plans in plans_by_split.items():
        letters = stratified_letters(items_by_split[name], seed, f"mirage-presentation-{name}")
        for plan in plans:
            for rec in plan["records"]:
                rec[3] = letters[(plan["prompt"]["id"], rec[0], rec[1], rec[2])]
    return plans_by_split


# --------------------------------------------------------------------------- records


def _seq_meta(s: dict) -> dict:
    return {k: s[k] for k in ("id", "generator", "backbone", "votes")}


def prompt_records(plan: dict, load: Callable[[str], bytes], seed: int, twins: bool = False) -> Iterator[dict]:
    """The pairwise records of one prompt's plan, in its order; ``load(path)`` gives an image's bytes.
    ``twins``: each record is followed by its twin (the sequences swapped, ``meta.twin`` the first's id)."""
    pr = plan["prompt"]
    seqs = {s["id"]: s for s in pr["sequences"]}
    for pos_id, neg_id, layout, letter in plan["records"]:
        pos, neg = seqs[pos_id], seqs[neg_id]
        first = records.make_id(BUILDER, seed, pr["source"], pr["id"], pos_id, neg_id, layout, prefix="mirage-")
        for k, shown in enumerate(twin_letters(letter, twins)):
            seq_a, seq_b = (pos["images"], neg["images"]) if shown == "A" else (neg["images"], pos["images"])
            parts = pairwise_parts(
                layout,
                pr["prompt"],
                pr["steps"],
                seq_a,
                seq_b,
                instruction_for("pairwise", layout, MIRAGE_INSTRUCTION),
                TITLE_LABELS[pr["domain"]],
            )
            meta = {
                "prompt_id": pr["id"],
                "domain": pr["domain"],
                "prompt": pr["prompt"],
                "positive": _seq_meta(pos),
                "negative": _seq_meta(neg),
                "generator": neg["generator"],
                "backbone": neg["backbone"],
                "gold_letter": shown,
                "presentation": presentation(shown, layout),
                **({"twin": first} if twins else {}),
            }
            twin_id = records.make_id(BUILDER, seed, pr["source"], pr["id"], pos_id, neg_id, layout, "twin", prefix="mirage-")
            yield layout_record(
                parts,
                load,
                id=first if k == 0 else twin_id,
                task="pairwise",
                answer=shown,
                choices=PAIRWISE_CHOICES,
                label=shown,
                source=pr["source"],
                perturbation="none",
                position=-1,
                n_frames=len(pos["images"]),
                layout=layout,
                meta=meta,
            )


def generate_records(plans_json: str, cfg_json: str) -> Iterator[dict]:
    """Records of the plans (one per prompt) in plan order: the generator of one split's ``Dataset.from_generator``."""
    for cfg, plan, load in each_plan(plans_json, cfg_json, BUILDER, "prompt"):
        yield from prompt_records(plan, load, cfg["seed"], bool(cfg.get("twins")))


def record_counts(dataset) -> dict:
    """Records per split: total, layout, domain, negative generator, domain/generator, labels and presentation."""
    out = {}
    for name, ds in dataset.items():
        cols = ds.select_columns(["layout", "label", "meta"]).to_dict()
        metas = [json.loads(m) for m in cols["meta"]]
        out[name] = {
            "total": len(ds),
            "layout": dict(sorted(Counter(cols["layout"]).items())),
            "domain": dict(sorted(Counter(m["domain"] for m in metas).items())),
            "generator": dict(sorted(Counter(m["generator"] for m in metas).items())),
            "domain_generator": dict(sorted(Counter(f"{m['domain']}/{m['generator']}" for m in metas).items())),
            "pairwise_label": dict(sorted(Counter(cols["label"]).items())),
            "pairwise_presentation": dict(sorted(Counter(m["presentation"] for m in metas).items())),
        }
    return out
