"""From a PhaseFusion run's prediction rows to each question's answers under each arm.

:func:`collect_rows` groups ``predictions.jsonl`` rows into posterior blocks per
(origin, grid, question); :func:`arm_specs` names the arms a run holds (from
``run.json``, else from its grids); :func:`arm_answers` and
:func:`per_question_answers` read an arm's answers, consensus, flip and margin off
those blocks. The measures built on them are in :mod:`judgetrain.eval.phasefusion.metrics`.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core import stats
from .views import parse_arms
from .views import pool as pool_posteriors

__all__ = ["arm_answers", "arm_specs", "collect_rows", "per_question_answers"]


def collect_rows(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Questions, errors, per-(origin, grid, id) posterior blocks [phase][ordering][option] and cost rows."""
    questions: dict[str, Mapping[str, Any]] = {}
    errors: list[Mapping[str, Any]] = []
    blocks: dict[tuple[str, str], dict[str, dict[tuple[int, int], list[float]]]] = {}
    costs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    grid_shape: dict[str, tuple[int, int]] = {}
    for r in rows:
        kind = r.get("kind")
        if kind == "question":
            questions[r["id"]] = r
        elif kind == "error":
            errors.append(r)
        elif kind == "pass":
            blocks.setdefault((r["origin"], r["grid"]), {}).setdefault(r["id"], {})[(r["phase"], r["ordering"])] = r["posterior"]
        elif kind == "cost":
            costs.setdefault((r["origin"], r["grid"]), []).append(r)
            grid_shape[r["grid"]] = (int(r["views"]), int(r["budget"]))
    posteriors: dict[tuple[str, str], dict[str, list[list[list[float]]]]] = {}
    for key, by_id in blocks.items():
        for qid, cells in by_id.items():
            if qid not in questions:
                continue  # rows of an unfinished question (never in a repaired file)
            views = 1 + max(s for s, _ in cells)
            k = 1 + max(o for _, o in cells)
            posteriors.setdefault(key, {})[qid] = [[cells[(s, o)] for o in range(k)] for s in range(views)]
    return {"questions": questions, "errors": errors, "posteriors": posteriors, "costs": costs, "grids": grid_shape}


def arm_answers(block: Sequence[Sequence[Sequence[float]]], pool: str) -> tuple[list[int], list[list[float]] | None]:
    """One question's answers per ordering under an arm, and its posterior per ordering.

    ``block[s][k]`` is the content-space posterior of view ``s`` under ordering ``k``.
    ``pool``: ``"single"`` (view 0), ``"arithmetic"`` / ``"geometric"`` (pooled posterior,
    Eq. 2) or ``"vote"`` (plurality of the views' argmax answers, ties to the lowest
    content index; no posterior). Argmax ties go to the lowest content index.
    """
    n_orderings = len(block[0])
    if pool == "vote":
        answers = [stats.consensus_answer([int(np.argmax(view[k])) for view in block]) for k in range(n_orderings)]
        return answers, None
    if pool == "single":
        post = [list(map(float, block[0][k])) for k in range(n_orderings)]
    elif pool in ("arithmetic", "geometric"):
        post = [pool_posteriors([view[k] for view in block], pool) for k in range(n_orderings)]
    else:
        raise ValueError(f"unknown pooling {pool!r}")
    return [int(np.argmax(p)) for p in post], post


def arm_specs(info: Mapping[str, Any], grids: Mapping[str, tuple[int, int]]) -> list[dict[str, Any]]:
    """The run's arms in the order ``run.json`` asked for them (without one: every arm its grids
    support), each with its grid, pooling, frames label, views, budget and attention units."""
    names = info.get("arms")
    if not names:  # no run.json: every arm the grids support
        names = [n for g in grids for n in (("fusion", "fusion-geo", "vote") if g == "phase" else (g,))]
    budget = info.get("budget") or (grids["single"][1] if "single" in grids else next(iter(grids.values()))[1])
    phases = info.get("phases") or (grids["phase"][0] if "phase" in grids else 1)
    arms, parsed = parse_arms(names, int(budget), int(phases))
    out = []
    for a in arms:
        g = parsed[a.grid]
        frames = f"{g.views}×{g.budget}f" if g.views > 1 else f"{g.budget}f"
        out.append(
            {
                "name": a.name,
                "grid": a.grid,
                "pool": a.pool,
                "frames": frames,
                "views": g.views,
                "budget": g.budget,
                "attention_units": g.attention_units,
                "origin_free": g.origin_free,
            }
        )
    return out


def per_question_answers(col: Mapping[str, Any], arm: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """Per question id: answers per ordering, identity posterior (``None`` for a vote), correctness,
    consensus, flip, margin and top-1 probability."""
    out = {}
    for qid, block in col["posteriors"].get((origin, arm["grid"]), {}).items():
        gold = int(col["questions"][qid]["answer"])
        answers, post = arm_answers(block, arm["pool"])
        consensus = stats.consensus_answer(answers)
        out[qid] = {
            "answers": answers,
            "identity": answers[0],
            "correct": answers[0] == gold,
            "order_avg": float(np.mean([a == gold for a in answers])),
            "consensus": consensus,
            "consensus_correct": consensus == gold,
            "flip": stats.flipped(answers),
            "margin": stats.answer_margin(post[0]) if post is not None else None,
            "top1": float(max(post[0])) if post is not None else None,
            "posterior": post[0] if post is not None else None,
        }
    return out
