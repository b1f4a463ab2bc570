"""TimeCatch records scored through the shared visual prefix: the records of a source sequence
show few distinct frame orders (the frames in order, swapped, with the noise frame), each under
several questions, so the records of a chunk that show the same frames in the same order and
render identically up to the end of their last image become one
:class:`~judgetrain.scoring.PrefixGroup`, scored by :meth:`~judgetrain.scoring.Scorer.score_shared_prefix`:
their frames and shared text are encoded once, and each record's question is scored on a copy
of that cache. The same scores as :meth:`~judgetrain.scoring.Scorer.score` on each record up to
float rounding. A record that shares its frames with no other, or whose rendering differs from
theirs before the last image (another layout, frame labels, text before the images), or whose
group has no token boundary after the last image (:func:`~judgetrain.scoring.prefix.shared_split`),
is scored on its own, as before.
Docs: "concepts/timecatch.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["prefix_groups", "score_records"]


def prefix_groups(
    scorer: Any, items: Sequence[Any], frames: Sequence[Sequence[str]] | None = None
) -> tuple[list[list[int]], list[int]]:
    """``(groups, alone)``: positions in ``items`` that share their visual prefix, each group of two
    or more in input order, and the positions scored on their own, ascending.

    ``items``: records (or ``(prompt, images, choices)`` tuples) as :meth:`Scorer.score` takes
    them; ``frames``: per item, a digest of each image in prompt order (``records.frame_digests``;
    ``None``: computed from the decoded images). Items are grouped by their frames and by their
    rendering (``scorer.render``: chat template, prefill) up to the end of the last image; a group
    is kept only when :func:`~judgetrain.scoring.prefix.shared_split` finds the token boundary
    scoring its rest against the prefix needs, else its items are scored alone.
    """
    from judgetrain.scoring.model import ScoringModel
    from judgetrain.scoring.prefix import shared_split
    from judgetrain.scoring.prompts import to_item
    from judgetrain.scoring.vision import image_key

    normalized = [to_item(x, i) for i, x in enumerate(items)]
    keys = (
        [tuple(f) for f in frames] if frames is not None else [tuple(image_key(im).hex() for im in n.images) for n in normalized]
    )
    texts = [scorer.render(n.prompt) for n in normalized]
    image_token = getattr(scorer.processor, "image_token", None)
    candidates: dict[tuple[tuple[str, ...], str], list[int]] = {}
    alone: list[int] = []
    for i, (key, text) in enumerate(zip(keys, texts, strict=True)):
        if not key or not image_token or text.count(image_token) != len(key):
            alone.append(i)  # no image, or placeholders that do not match the images: nothing to share
            continue
        head = text[: text.rindex(image_token) + len(image_token)]
        candidates.setdefault((key, head), []).append(i)
    m = ScoringModel(scorer.model, scorer.processor, scorer.family)
    groups: list[list[int]] = []
    for (key, _), members in candidates.items():
        if len(members) < 2:
            alone.extend(members)
            continue
        try:
            shared_split(m, [texts[i] for i in members], len(key), f"records {members}")
        except ValueError:  # no shared token boundary after the last image: each on its own
            alone.extend(members)
            continue
        groups.append(members)
    return groups, sorted(alone)


def score_records(
    scorer: Any, items: Sequence[Any], frames: Sequence[Sequence[str]] | None = None, *, shared_prefix: bool = True
) -> list[Any]:
    """One :class:`~judgetrain.scoring.ChoiceScores` per item, in input order: the groups of
    :func:`prefix_groups` through :meth:`Scorer.score_shared_prefix`, the rest (every item when
    ``shared_prefix`` is false) through :meth:`Scorer.score`."""
    from judgetrain.scoring import PrefixGroup
    from judgetrain.scoring.prompts import to_item

    if not shared_prefix:
        return list(scorer.score(items, progress=False))
    groups, alone = prefix_groups(scorer, items, frames)
    out: list[Any] = [None] * len(items)
    if groups:
        normalized = [to_item(x, i) for i, x in enumerate(items)]
        prefix = [
            PrefixGroup(list(normalized[g[0]].images), [normalized[i].prompt for i in g], [normalized[i].choices for i in g])
            for g in groups
        ]
        for g, scores in zip(groups, scorer.score_shared_prefix(prefix, progress=False), strict=True):
            for i, s in zip(g, scores, strict=True):
                out[i] = s
    if alone:
        for i, s in zip(alone, scorer.score([items[i] for i in alone], progress=False), strict=True):
            out[i] = s
    return out
