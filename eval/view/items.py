"""A run folder's items as the run browser shows them: one entry per item, whatever the evaluation.

:func:`load_run` reads ``run.json`` and ``predictions.jsonl`` (:func:`judgetrain.eval.core.runs.read_run`)
and turns each item into a plain dict: ``id``, ``task``, ``source``, ``gold``, ``pred``,
``correct``, ``top`` (the predicted choice's probability), ``margin`` (top minus the runner-up),
``flipped`` (PhaseFusion: whether the answer changes across its passes, every phase and
ordering; None elsewhere), ``choices`` and ``probs`` (the posterior: as ``predictions.jsonl``
holds it, or PhaseFusion's main arm, ``main`` saying which arm, ordering and origin),
``prompt`` (the text scored) with ``prompt_kind`` (``"rendered"``, or ``"messages"`` for a run
that stored none), ``frames`` (groups ``{"label", "note", "refs", "captions"}`` in the order the
model saw them: a pairwise judge record's Sequence A and B, a pointwise record's one Sequence,
PhaseFusion's grids with each frame's time, said how in ``frames_note``; each ref
``("sha256", hex)`` of an image's bytes or ``("video", path, index)``) and, for PhaseFusion,
``passes`` (one row per scored pass: origin, grid, phase, ordering, posterior, answer).
A reward-model run (``eval judge --mode reward``) shows one item per
gold-vs-negative pair: both sequences' frames, both rewards and which won.

TimeCatch and judge rows store ``prompt_text`` and ``frames`` since ``eval view`` exists; an older
run's items get their frames and prompt messages from the dataset ``run.json`` names (its
``data`` and ``split``), read by id, and show what there is when that is gone.
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.reward_pairs import REWARD_MODE
from ..core.runs import REPORT, read_run

__all__ = ["dataset_images", "load_run", "messages_text", "posterior_summary", "sequence_groups"]


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


def _pairwise_letters(layout: str, n: int, gold: Any, n_frames: Any) -> list[str] | None:
    """The sequence letter of each of a pairwise record's ``n`` images, in prompt order, as
    :func:`judgetrain.data_builders.prism.layouts.pairwise_parts` lays them out: P0–P3 all of
    Sequence A then all of B, P4 B then A, P5 step by step (A's k-th image, then B's), P6 one
    grid image per sequence (A, B). The gold sequence holds ``n_frames`` images (the record's
    gold letter ``gold``), the other the rest (MIRAGE's sequences may differ in length); None
    when the counts do not fit the layout."""
    if layout == "P6":
        return ["A", "B"] if n == 2 else None
    if gold in ("A", "B") and isinstance(n_frames, int) and 0 < n_frames < n:
        n_a = n_frames if gold == "A" else n - n_frames
    elif n % 2 == 0 and n > 0:
        n_a = n // 2
    else:
        return None
    n_b = n - n_a
    if layout == "P4":
        return ["B"] * n_b + ["A"] * n_a
    if layout == "P5":
        return [x for k in range(max(n_a, n_b)) for x, m in (("A", n_a), ("B", n_b)) if k < m]
    return ["A"] * n_a + ["B"] * n_b


def sequence_groups(row: Mapping[str, Any], refs: list[Any]) -> list[dict[str, Any]]:
    """A judge record's frames (``refs``, in prompt order) grouped as the model saw them: a
    pairwise record's ``Sequence A`` and ``Sequence B`` (in the order the layout presents
    them, see :func:`_pairwise_letters`), a pointwise record's one ``Sequence``; each group
    ``{"label", "note", "refs", "captions"}``, a caption per image (its place in its sequence and
    in the prompt). Any other record (TimeCatch, ordering) is one group of frames."""
    task, layout, n = row.get("task"), row.get("layout"), len(refs)
    captions = [f"image {k + 1}" for k in range(n)]
    if task == "pointwise":  # a PRISM / MIRAGE record of one sequence
        note = "pointwise: the one sequence the model rated" + (" (one grid image, P6)" if layout == "P6" else f" ({layout})")
        return [{"label": "Sequence", "note": note, "refs": refs, "captions": captions}]
    letters = _pairwise_letters(str(layout), n, row.get("label"), row.get("n_frames")) if task == "pairwise" else None
    if letters is None:
        return [{"label": "frames", "note": None, "refs": refs, "captions": captions}]
    groups: dict[str, dict[str, Any]] = {}
    for place, (letter, ref) in enumerate(zip(letters, refs, strict=True), start=1):
        g = groups.setdefault(letter, {"label": f"Sequence {letter}", "refs": [], "captions": []})
        g["refs"].append(ref)
        what = "grid image" if layout == "P6" else f"image {len(g['refs'])}"
        g["captions"].append(f"{what} · #{place} in the prompt")
    order = {
        "P4": "P4 shows Sequence B first",
        "P5": "P5 interleaves the sequences step by step (A's image k, then B's)",
        "P6": "P6 shows each sequence as one grid image, cells numbered left to right, top to bottom",
    }.get(str(layout), f"{layout} shows Sequence A, then Sequence B")
    for k, (letter, g) in enumerate(groups.items()):
        gold = row.get("label")
        role = "the gold sequence" if letter == gold else "the negative (not gold)" if gold in ("A", "B") else None
        shown = f"shown {('first', 'second')[k]}" if layout != "P5" else None  # P5: neither is shown first
        g["note"] = "; ".join(x for x in (shown, role, order) if x)
    return list(groups.values())


def _record_item(row: Mapping[str, Any]) -> dict[str, Any]:
    choices, probs = list(row.get("choices") or []), row.get("probs")
    pred = row.get("prediction")
    top, margin = posterior_summary(probs, choices.index(pred) if pred in choices else None)
    frames = sequence_groups(row, [("sha256", h) for h in row["frames"]]) if row.get("frames") is not None else None
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
        "main": None,
        "frames_note": None,
        "extra": extra,
        # what groups the frames into sequences (:func:`sequence_groups`), also for frames read from the dataset later
        "sequence": {k: row.get(k) for k in ("task", "layout", "label", "n_frames")},
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
                "main": None,
                "frames_note": None,
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
            it["frames"] = sequence_groups(it.get("sequence") or {}, [("image", im) for im in row["images"]])
        if it["prompt"] is None:
            it["prompt"], it["prompt_kind"] = messages_text(row["prompt"]), "messages"
    if len(found) < len(missing):
        warn.append(f"{len(missing) - len(found)} item(s) are not in {data} [{split}] any more: they show without frames")


POOLING = {
    "single": "the posterior of its one grid",
    "arithmetic": "the mean of its {views} phase grids' posteriors",
    "geometric": "the normalised geometric mean of its {views} phase grids' posteriors",
}


def _main_arm(info: Mapping[str, Any], col: Mapping[str, Any]) -> tuple[dict[str, Any], str] | None:
    """The arm whose posterior an item shows first, and the origin it is read at: ``fusion`` where
    the run scored it, else the run's first arm with a posterior (``run.json``'s order), at the
    first origin, as the report's Table A reads every arm (:mod:`judgetrain.eval.phasefusion.metrics`)."""
    from judgetrain.video import parse_fraction

    from ..phasefusion.answers import arm_specs

    if not col["grids"]:
        return None
    origins = list(info.get("origins") or sorted({o for o, _ in col["posteriors"]}, key=lambda o: parse_fraction(o)))
    first = origins[0] if origins else "0"
    arms = [a for a in arm_specs(info, col["grids"]) if a["pool"] in POOLING and (first, a["grid"]) in col["posteriors"]]
    if not arms:
        return None
    return next((a for a in arms if a["name"] == "fusion"), arms[0]), first


def _phasefusion_items(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One item per question: the main arm's posterior (:func:`_main_arm`, identity ordering), every
    pass as a row, the frame grids with each frame's time in the video."""
    from ..phasefusion.answers import collect_rows, per_question_answers

    col = collect_rows(rows)
    main = _main_arm(info, col)
    answers = per_question_answers(col, main[0], main[1]) if main else {}
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
    return [
        _phasefusion_item(qid, e, main, answers.get(qid))
        for qid, e in by_id.items()
        if e["question"] is not None or e["error"] is not None
    ]


def _main_text(main: tuple[dict[str, Any], str] | None, n_passes: int, several: bool) -> str:
    if main is None:
        return f"the mean over all {n_passes} passes (the run holds no arm with a posterior)"
    arm, origin = main
    how = POOLING[arm["pool"]].format(views=arm["views"])
    return (
        f"arm {arm['name']} ({how}; {arm['frames']}) at ordering 0, the identity ordering (the options in the "
        f"question's order)" + (f", origin {origin}" if several else "") + ": the answer the report's Table A counts"
    )


def _frame_groups(
    q: Mapping[str, Any], passes: Sequence[Mapping[str, Any]], several: bool
) -> tuple[list[dict] | None, str | None]:
    """One group per (origin, grid, phase) with each frame's time, and how the times are known."""
    video, fps = q.get("video"), q.get("fps")
    if not video:
        return None, None
    views = {p["grid"]: 1 + max(x["phase"] for x in passes if x["grid"] == p["grid"]) for p in passes}
    groups: dict[tuple[str, str, int], list[int]] = {}
    for p in passes:
        groups.setdefault((p["origin"], p["grid"], p["phase"]), [int(i) for i in p["frames"]])
    out = []
    for (origin, grid, phase), idx in groups.items():
        label = f"{grid} grid" + (f" · phase {phase}" if views[grid] > 1 else "")
        out.append(
            {
                "label": label + (f" · origin {origin}" if several else ""),
                "note": f"{len(idx)} frames, {_seconds(idx[0], fps)} to {_seconds(idx[-1], fps)}" if fps else None,
                "refs": [("video", video, i) for i in idx],
                "captions": [f"frame {i} · {_seconds(i, fps)}" if fps else f"frame {i}" for i in idx],
            }
        )
    note = (
        f"Each frame's time is its index ÷ the video's {float(fps):g} fps (from the video's probe), since the run "
        "records frame indices, not timestamps"
        + (f"; the video lasts {float(q['duration']):.2f} s" if q.get("duration") else "")
        + "."
        if fps
        else "The run records no frame rate for this video: frames show by index."
    )
    return out, note


def _seconds(index: int, fps: float | None) -> str:
    return f"{index / float(fps):.2f} s" if fps else "–"


def _pass_rows(
    passes: Sequence[Mapping[str, Any]], q: Mapping[str, Any], main: tuple[dict[str, Any], str] | None
) -> list[dict[str, Any]]:
    """Every pass as a table row: origin, grid, phase, ordering (and the option order it showed),
    frame times, answer and posterior; ``main``: whether the main posterior reads this pass."""
    fps, letters = q.get("fps"), [chr(ord("A") + i) for i in range(len(q.get("options") or []))]
    arm, origin = main if main else ({}, None)
    out = []
    for p in passes:
        in_main = p["origin"] == origin and p["grid"] == arm.get("grid") and p["ordering"] == 0
        out.append(
            {
                "origin": p["origin"],
                "grid": p["grid"],
                "phase": p["phase"],
                "ordering": p["ordering"],
                "shown": " ".join(letters[c] if c < len(letters) else str(c) for c in p.get("perm") or []),
                "times": f"{_seconds(p['frames'][0], fps)}–{_seconds(p['frames'][-1], fps)}" if p["frames"] else "–",
                "posterior": p["posterior"],
                "pred": p["pred"],
                "main": in_main and (arm.get("pool") != "single" or p["phase"] == 0),
            }
        )
    return out


def _phasefusion_item(
    qid: str, entry: Mapping[str, Any], main: tuple[dict[str, Any], str] | None, answer: Mapping[str, Any] | None
) -> dict[str, Any]:
    q, passes = entry["question"] or {}, entry["passes"]
    options = list(q.get("options") or [])
    choices = [f"{chr(ord('A') + i)}. {o}" for i, o in enumerate(options)]
    if answer is not None and answer["posterior"] is not None:
        probs: list[float] | None = [float(x) for x in answer["posterior"]]
    else:  # an errored question, or a run without an arm with a posterior
        main = None
        probs = [sum(p["posterior"][j] for p in passes) / len(passes) for j in range(len(options))] if passes else None
    pred_index = max(range(len(probs)), key=probs.__getitem__) if probs else None
    top, margin = posterior_summary(probs, pred_index)
    several = len({p["origin"] for p in passes}) > 1
    frames, frames_note = _frame_groups(q, passes, several)
    prompts = q.get("prompts") or {}
    prompt = (
        "\n\n".join(f"--- {grid} grid, ordering {k}:\n{text}" for grid, texts in prompts.items() for k, text in enumerate(texts))
        or None
    )
    gold = q.get("answer")
    return {
        "id": qid,
        "task": "video_mcq",
        "source": q.get("benchmark") or (entry["error"] or {}).get("benchmark"),
        "gold": choices[gold] if gold is not None and gold < len(choices) else None,
        "pred": choices[pred_index] if pred_index is not None else None,
        "correct": (pred_index == gold) if pred_index is not None else None,
        "top": top,
        "margin": margin,
        "flipped": len({p["pred"] for p in passes}) > 1 if passes else None,
        "choices": choices,
        "probs": probs,
        "main": _main_text(main, len(passes), several) if probs else None,
        "prompt": prompt
        if prompt
        else (q.get("question") and messages_text([{"role": "user", "content": [{"type": "text", "text": q["question"]}]}])),
        "prompt_kind": "rendered" if prompt else ("messages" if q.get("question") else None),
        "frames": frames,
        "frames_note": frames_note,
        "passes": _pass_rows(passes, q, main),
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
        items = _phasefusion_items(rows, info)
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
