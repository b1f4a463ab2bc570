"""A candidate image sequence as the reward model read its training sequences: a PRISM pointwise
prompt (``pointwise_parts`` under a layout, the pointwise instruction, rendered by
``layout_record``), so a candidate's reward is the score of the same prompt the model was trained on.

The layout is the one the reward run trained on where its folder says so (:func:`trained_layouts`:
the recipe's ``layouts``, else the layouts its datasets' ``build.json`` were built with), P0 when
that is one of them or nothing is recorded; ``--layout`` chooses another.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.data_builders.core.images import image_bytes
from judgetrain.data_builders.prism.layouts import POINTWISE_LAYOUTS, instruction_for, pointwise_parts
from judgetrain.data_builders.prism.render import layout_record

from .manifest import Candidate

__all__ = ["DEFAULT_LAYOUT", "candidate_record", "candidate_records", "choose_layout", "frame_bytes", "trained_layouts"]

DEFAULT_LAYOUT = "P0"


def _recipe(reward_model: Path) -> dict[str, Any]:
    """The resolved recipe a ``judgetrain train`` run folder (or a checkpoint-N in it) holds, or {}."""
    from judgetrain.train.outputs import RECIPE_FILE
    from judgetrain.yamlfile import YamlError, read_yaml

    for folder in (reward_model, reward_model.parent):
        if (folder / RECIPE_FILE).is_file():
            try:
                recipe = read_yaml(folder / RECIPE_FILE)
            except (YamlError, OSError):
                return {}
            return recipe if isinstance(recipe, dict) else {}
    return {}


def trained_layouts(reward_model: str | os.PathLike) -> list[str]:
    """The pointwise layouts a reward run trained on, as its folder records them: the recipe's
    ``layouts`` when it chose some, else those its datasets (read from the working directory, as
    training read them) were built with; [] when neither can be read."""
    recipe = _recipe(Path(reward_model))
    chosen = recipe.get("layouts")
    if isinstance(chosen, list) and chosen:
        return [str(x) for x in chosen if str(x) in POINTWISE_LAYOUTS]
    found: list[str] = []
    for data in recipe.get("datasets") or []:
        build = Path(str(data)) / "build.json"
        try:
            layouts = json.loads(build.read_text()).get("args", {}).get("layouts") or []
        except (OSError, ValueError, AttributeError):
            continue
        found += [x for x in layouts if x in POINTWISE_LAYOUTS and x not in found]
    return found


def choose_layout(layout: str, reward_model: str | os.PathLike) -> tuple[str, str]:
    """``(layout, why)``: ``layout`` itself unless it is ``"auto"``, which takes the reward run's own
    (:func:`trained_layouts`; of several, P0 if among them, else the first)."""
    if layout != "auto":
        return layout, "--layout"
    trained = trained_layouts(reward_model)
    if not trained:
        return DEFAULT_LAYOUT, "the default: the reward model's folder records no training layout"
    pick = DEFAULT_LAYOUT if DEFAULT_LAYOUT in trained else trained[0]
    return pick, f"the reward model trained on {', '.join(trained)}"


def frame_bytes(frame: Any) -> bytes:
    """The bytes a record stores for a frame: an image file's (as the PRISM builder stores it:
    upright RGB), or a PIL image's as PNG."""
    if isinstance(frame, (str, os.PathLike)):
        return image_bytes(frame)
    buf = io.BytesIO()
    frame.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def candidate_record(
    candidate: Candidate | Mapping[str, Any] | Sequence[Any], layout: str = DEFAULT_LAYOUT, *, index: int = 0
) -> dict[str, Any]:
    """The pointwise task record of one candidate under ``layout`` (images decoded, RGB), the
    prompt a PRISM build makes for a sequence of those frames, title and steps. A candidate is a
    :class:`Candidate`, a mapping with ``frames`` (and optional ``id``, ``group``, ``title``,
    ``steps``), or a plain list of frames (image paths or PIL images)."""
    from PIL import Image

    if layout not in POINTWISE_LAYOUTS:
        raise ValueError(f"layout {layout!r}: choose one of {', '.join(POINTWISE_LAYOUTS)}")
    if isinstance(candidate, Candidate):
        cid, frames, title, steps = candidate.id, list(candidate.frames), candidate.title, list(candidate.steps)
    elif isinstance(candidate, Mapping):
        cid, frames = str(candidate.get("id", index)), list(candidate["frames"])
        title, steps = str(candidate.get("title") or ""), list(candidate.get("steps") or [])
    else:
        cid, frames, title, steps = str(index), list(candidate), "", []
    if not frames:
        raise ValueError(f"candidate {cid!r}: no frames; a candidate is a sequence of at least one image")
    parts = pointwise_parts(layout, title, steps, list(range(len(frames))), instruction_for("pointwise", layout))
    record = layout_record(
        parts,
        lambda k: frame_bytes(frames[k]),
        id=cid,
        task="pointwise",
        answer="",
        choices=[],
        label="",
        source="candidates",
        perturbation="none",
        position=-1,
        n_frames=len(frames),
        layout=layout,
        meta={},
    )
    record["images"] = [Image.open(io.BytesIO(im["bytes"])).convert("RGB") for im in record["images"]]
    return record


def candidate_records(candidates: Iterable[Any], layout: str = DEFAULT_LAYOUT) -> list[dict[str, Any]]:
    """:func:`candidate_record` of each candidate, in order."""
    return [candidate_record(c, layout, index=i) for i, c in enumerate(candidates)]
