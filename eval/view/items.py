"""A run folder's items as the run browser shows them: one entry per item, whatever the evaluation.

:func:`load_run` reads ``run.json`` and ``predictions.jsonl`` (:func:`judgetrain.eval.core.runs.read_run`)
and turns each item into a plain dict: ``id``, ``task``, ``source``, ``gold``, ``pred``,
``correct``, ``top`` (the predicted choice's probability), ``margin`` (top minus the runner-up),
``flipped`` (PhaseFusion: whether the answer changes across its phases and orderings; None
elsewhere), ``choices`` and ``probs`` (the posterior as ``predictions.jsonl`` holds it),
``prompt`` (the text scored) with ``prompt_kind`` (``"rendered"``, or ``"messages"`` for a run
that stored none), ``frames`` (groups ``{"label", "refs"}`` in the order the model saw them,
each ref ``("sha256", hex)`` of an image's bytes or ``("video", path, index)``) and, for
PhaseFusion, ``passes`` (one ``[label, posterior, pred]`` per scored pass). A reward-model run
(``eval judge --mode reward``) shows one item per gold-vs-negative pair: both sequences' frames,
both rewards and which won.

TimeCatch and judge rows store ``prompt_text`` and ``frames`` since ``eval view`` exists; an older
run's items get their frames and prompt messages from the dataset ``run.json`` names (its
``data`` and ``split``), read by id, and show what there is when that is gone.
README: "`judgetrain eval view`".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.reward_pairs import REWARD_MODE
from ..core.runs import REPORT, read_run

__all__ = ["dataset_images", "load_run", "messages_text", "posterior_summary"]


def posterior_summary(probs: Sequence[float] | None, pred_index: int | None) -> tuple[float | None, float | None]:
    """``(top, margin)`` of a posterior: the predicted choice's probability and its lead over the
    best other choice (``top`` alone when there is one choice); ``(None, None)`` without one."""
    if not probs or pred_index is None:
        return None, None
    top = float(probs[pred_index])
    others = [float(p) for i, p in enumerate(probs) if i != pred_index]
    return top, (top - max(others) if others else None)


def messages_text(prompt: Sequence[Mapping[str, Any]]) -> str:
    """Prompt messages as readable text, ``<image>`` where each image goes: what an older run
    without its rendered prompt shows (the chat template's own markup is not in it)."""
    out = []
    for message in prompt:
        parts = ["<image>" if c.get("type") == "image" else (c.get("text") or "") for c in message.get("content") or []]
        out.append(f"[{message.get('role')}]\n" + "".join(parts))
    return "\n\n".join(out)


def _record_item(row: Mapping[str, Any]) -> dict[str, Any]:
    choices, probs = list(row.get("choices") or []), row.get("probs")
    pred = row.get("prediction")
    top, margin = posterior_summary(probs, choices.index(pred) if pred in choices else None)
    frames = [{"label": "frames", "refs": [("sha256", h) for h in row["frames"]]}] if row.get("frames") is not None else None
    extra = {
        k: row[k]
        for k in ("layout", "perturbation", "position", "n_frames", "subset", "presentation", "text", "lpips_swapped")
        if row.get(k) is not None
    }
    return {
        "id": row["id"],
        "task": row.get("task"),
        "source": row.get("source") or row.get("subset"),
        "gold": row.get("label"),
        "pred": pred,
        "correct": row.get("correct"),
        "top": top,
        "margin": margin,
        "flipped": None,
        "choices": choices,
        "probs": probs,
        "prompt": row.get("prompt_text"),
        "prompt_kind": "rendered" if row.get("prompt_text") is not None else None,
        "frames": frames,
        "passes": None,
        "extra": extra,
    }


def _reward_items(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A reward-model run's items: one per (gold, negative) pair (:func:`judgetrain.eval.core.reward_pairs.reward_pairs`),
    its id the negative's record, both sequences' frames, both rewards and which won; the posterior
    shown is the Bradley–Terry P(gold ≻ negative) = σ(r_gold − r_negative) and its complement."""
    from ..core.reward_pairs import bt_probability, reward_pairs

    pairs, _ = reward_pairs(rows)
    by_id = {r["id"]: r for r in rows}
    items = []
    for p in pairs:
        gold, neg = by_id[p["gold"]], by_id[p["id"]]
        prob = bt_probability(p["reward_gold"], p["reward_negative"])
        won = p["winner"] if p["winner"] != "tie" else None
        top, margin = posterior_summary([prob, 1 - prob], ["gold", "negative"].index(won) if won else None)
        frames = None
        if gold.get("frames") is not None and neg.get("frames") is not None:
            frames = [
                {"label": f"gold sequence ({gold['id']})", "refs": [("sha256", h) for h in gold["frames"]]},
                {"label": f"perturbed: {neg.get('variant')} ({neg['id']})", "refs": [("sha256", h) for h in neg["frames"]]},
            ]
        items.append(
            {
                "id": p["id"],
                "task": "reward pair",
                "source": p["source"],
                "gold": "gold",
                "pred": p["winner"],
                "correct": p["winner"] == "gold",
                "top": top,
                "margin": margin,
                "flipped": None,
                "choices": ["gold", "negative"],
                "probs": [prob, 1 - prob],
                "prompt": neg.get("prompt_text"),
                "prompt_kind": "rendered" if neg.get("prompt_text") is not None else None,
                "frames": frames,
                "passes": None,
                "extra": {
                    "perturbation": p["perturbation"],
                    "layout": p["layout"],
                    "reward (gold)": f"{p['reward_gold']:.6f}",
                    "reward (negative)": f"{p['reward_negative']:.6f}",
                    "won": p["winner"],
                    "gold record": gold["id"],
                },
            }
        )
    return items


def _from_dataset(items: list[dict[str, Any]], info: Mapping[str, Any], warn: list[str]) -> None:
    """Fill the frames and prompt of items whose rows lack them from the dataset ``info`` names."""
    missing = [it for it in items if it["frames"] is None or it["prompt"] is None]
    if not missing:
        return
    data, split = info.get("data"), info.get("split")
    if not data or not split or not Path(data).is_dir():
        warn.append(
            f"{len(missing)} item(s) have no stored frames or prompt and their dataset ({data or 'not recorded'}"
            f", split {split}) is not there: they show without them"
        )
        return
    from judgetrain import records

    ds = records.load(data)[split]
    position = {rid: i for i, rid in enumerate(ds["id"])}
    found = [it for it in missing if it["id"] in position]
    stored = records.stored_rows(ds.select([position[it["id"]] for it in found]).select_columns(["images", "prompt"]))
    for it, row in zip(found, stored, strict=True):
        if it["frames"] is None:
            it["frames"] = [{"label": "frames", "refs": [("image", im) for im in row["images"]]}]
        if it["prompt"] is None:
            it["prompt"], it["prompt_kind"] = messages_text(row["prompt"]), "messages"
    if len(found) < len(missing):
        warn.append(f"{len(missing) - len(found)} item(s) are not in {data} [{split}] any more: they show without frames")


def _phasefusion_items(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One item per question: the posterior averaged over every pass, its passes, its frame grids."""
    by_id: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = by_id.setdefault(r["id"], {"question": None, "passes": [], "error": None})
        kind = r.get("kind")
        if kind == "question":
            entry["question"] = r
        elif kind == "pass":
            entry["passes"].append(r)
        elif kind == "error":
            entry["error"] = r
    return [_phasefusion_item(qid, e) for qid, e in by_id.items() if e["question"] is not None or e["error"] is not None]


def _phasefusion_item(qid: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    q, passes = entry["question"] or {}, entry["passes"]
    options = list(q.get("options") or [])
    letters = [chr(ord("A") + i) for i in range(len(options))]
    choices = [f"{letters[i]}. {o}" for i, o in enumerate(options)]
    probs = [sum(p["posterior"][j] for p in passes) / len(passes) for j in range(len(options))] if passes else None
    pred_index = max(range(len(probs)), key=probs.__getitem__) if probs else None
    top, margin = posterior_summary(probs, pred_index)
    several = len({p["origin"] for p in passes}) > 1
    groups: dict[tuple[str, str, int], list[int]] = {}
    for p in passes:
        groups.setdefault((p["origin"], p["grid"], p["phase"]), p["frames"])
    video = q.get("video")
    frames = (
        [
            {
                "label": f"{grid} phase {phase}" + (f" (origin {origin})" if several else ""),
                "refs": [("video", video, int(i)) for i in idx],
            }
            for (origin, grid, phase), idx in groups.items()
        ]
        if video
        else None
    )
    prompts = q.get("prompts") or {}
    prompt = (
        "\n\n".join(f"--- {grid}, ordering {k}:\n{text}" for grid, texts in prompts.items() for k, text in enumerate(texts))
        or None
    )
    answer = q.get("answer")
    return {
        "id": qid,
        "task": "video_mcq",
        "source": q.get("benchmark") or (entry["error"] or {}).get("benchmark"),
        "gold": choices[answer] if answer is not None and answer < len(choices) else None,
        "pred": choices[pred_index] if pred_index is not None else None,
        "correct": (pred_index == answer) if pred_index is not None else None,
        "top": top,
        "margin": margin,
        "flipped": len({p["pred"] for p in passes}) > 1 if passes else None,
        "choices": choices,
        "probs": probs,
        "prompt": prompt
        if prompt
        else (q.get("question") and messages_text([{"role": "user", "content": [{"type": "text", "text": q["question"]}]}])),
        "prompt_kind": "rendered" if prompt else ("messages" if q.get("question") else None),
        "frames": frames,
        "passes": [
            [
                f"{p['grid']} phase {p['phase']} ordering {p['ordering']}" + (f" origin {p['origin']}" if several else ""),
                p["posterior"],
                p["pred"],
            ]
            for p in passes
        ],
        "extra": {"error": entry["error"]["error"]} if entry["error"] else {"question": q.get("question")},
    }


def load_run(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """A run folder as the browser shows it: ``{"dir", "info", "evaluation", "items", "warnings", "report"}``
    (items in file order, see the module docstring). The items' frame refs of an older run
    point at its dataset's images (``("image", {"bytes", "path"})``)."""
    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, "pass the --out folder of a `judgetrain eval …` run")
    evaluation = info.get("evaluation") or ("phasefusion" if any(r.get("kind") == "pass" for r in rows) else "timecatch")
    warnings: list[str] = []
    if evaluation == "phasefusion":
        items = _phasefusion_items(rows)
    elif info.get("mode") == REWARD_MODE:
        items = _reward_items(rows)
        _from_dataset(items, info, warnings)
    else:
        items = [_record_item(r) for r in rows]
        _from_dataset(items, info, warnings)
    return {
        "dir": run_dir,
        "info": info,
        "evaluation": evaluation,
        "items": items,
        "warnings": warnings,
        "report": (run_dir / REPORT).read_text() if (run_dir / REPORT).is_file() else None,
    }


def dataset_images(info: Mapping[str, Any], ids: Sequence[str]) -> dict[str, bytes]:
    """The encoded images of items ``ids`` of the dataset ``run.json`` names, by sha256 of their
    bytes (``{}`` when that dataset is not there): what thumbnails not made yet are made from."""
    data, split = info.get("data"), info.get("split")
    if not ids or not data or not split or not Path(data).is_dir():
        return {}
    import hashlib

    from judgetrain import records

    ds = records.load(data)[split]
    position = {rid: i for i, rid in enumerate(ds["id"])}
    found = [position[i] for i in ids if i in position]
    out: dict[str, bytes] = {}
    for row in records.stored_rows(ds.select(found).select_columns(["images"])):
        for im in row["images"]:
            raw = im["bytes"] if im.get("bytes") is not None else Path(im["path"]).read_bytes()
            out[hashlib.sha256(raw).hexdigest()] = raw
    return out
