"""Rewards and best-of-N rankings in Python: :class:`RewardModelScorer` holds a loaded reward
model and is a plain callable from sequences to floats (what a generator's RL loop calls, a GRPO
reward included); :func:`rank_sequences` ranks candidates within their groups.

A sequence is shown to the reward model as its training sequences were (:mod:`.render`: a PRISM
pointwise prompt under the layout the run trained on), scored alone, so its reward depends on
neither the batch nor the other candidates.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError

from .manifest import Candidate
from .render import candidate_record, candidate_records, choose_layout

__all__ = ["NotARewardModelError", "RankedCandidate", "RewardModelScorer", "check_reward_model", "rank_rewards", "rank_sequences"]


# sequences rendered (images decoded) and scored at a time
CHUNK = 64


class NotARewardModelError(UserError, ValueError):
    """The folder given as the reward model holds no trained reward model; the message says how to make one."""


class RewardModelScorer:
    """A trained reward model, loaded once: ``scorer(sequences) -> list[float]``, one reward per
    sequence in order (higher: more temporally coherent).

    Args:
        reward_model: a ``judgetrain train`` reward run folder (``method: reward``), or a checkpoint-N in it.
        base: the base model, where the one its adapter records has moved.
        layout: the PRISM pointwise layout sequences are shown in; ``"auto"``: the run's own
            (:func:`judgetrain.rank.render.choose_layout`).
        dtype, min_pixels, max_pixels, device_map: as :func:`judgetrain.models.load_reward_model` takes them.
        batch_size: sequences per forward pass, or ``"auto"``.
        progress: a progress bar per call.
    """

    def __init__(
        self,
        reward_model: str | os.PathLike[str],
        *,
        base: str | None = None,
        layout: str = "auto",
        dtype: str = "auto",
        batch_size: int | str = "auto",
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        device_map: str | dict[str, Any] | None = None,
        progress: bool = False,
    ) -> None:
        from judgetrain.models.reward import load_reward_model

        check_reward_model(reward_model)
        self.path = Path(reward_model)
        self.layout, self.layout_source = choose_layout(layout, reward_model)
        self.model, self.processor = load_reward_model(
            reward_model, base=base, dtype=dtype, min_pixels=min_pixels, max_pixels=max_pixels, device_map=device_map
        )
        self.batch_size, self.progress = batch_size, progress

    def records(self, sequences: Iterable[Any]) -> list[dict[str, Any]]:
        """The task records the reward model scores for ``sequences`` (see :meth:`__call__`)."""
        return candidate_records(sequences, self.layout)

    def __call__(self, sequences: Iterable[Any]) -> list[float]:
        """One reward per sequence, in order. A sequence is a :class:`~judgetrain.rank.Candidate`, a
        mapping with ``frames`` (image paths or PIL images) and optional ``title`` and ``steps``
        (the text shown with it), or a plain list of frames. Sequences are rendered and scored
        :data:`CHUNK` at a time, so the decoded images of a large manifest are never all in memory."""
        from tqdm.auto import tqdm

        from judgetrain.scoring.reward import reward_scores

        items = list(sequences)
        rewards: list[float] = []
        with tqdm(total=len(items), desc="rewards", unit="sequence", disable=not self.progress) as bar:
            for start in range(0, len(items), CHUNK):
                records = [candidate_record(c, self.layout, index=start + i) for i, c in enumerate(items[start : start + CHUNK])]
                rewards += reward_scores(self.model, self.processor, records, batch_size=self.batch_size, progress=False)  # type: ignore[arg-type]
                bar.update(len(records))
        return rewards


def check_reward_model(path: str | os.PathLike[str]) -> None:
    """:class:`NotARewardModelError` unless ``path`` is a trained reward model."""
    from judgetrain.models.reward import is_reward_adapter

    folder = Path(path)
    if is_reward_adapter(folder):
        return
    if (folder / "adapter_config.json").is_file():
        why = "its adapter_config.json is a generative judge's (task_type is not SEQ_CLS); score it with `judgetrain eval judge`"
    elif _merged_reward_model(folder):
        why = (
            "it is a merged reward model (`judgetrain merge`): pass the run folder it was merged from, or load it in "
            "Python with judgetrain.models.load_reward_model"
        )
    elif folder.is_dir():
        why = "it holds no adapter_config.json"
    else:
        why = "no such folder"
    raise NotARewardModelError(
        f"--reward-model {path}: not a trained reward model ({why}). Train one with a `method: reward` recipe, "
        "e.g. `judgetrain train recipes/tiny/qwen3vl-prism-reward.yaml`, and pass its output folder"
    )


def _merged_reward_model(folder: Path) -> bool:
    import json

    config = folder / "config.json"
    if not config.is_file():
        return False
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (ValueError, AttributeError):
        return False
    return any(str(a).endswith("RewardModel") for a in architectures)


@dataclass(frozen=True)
class RankedCandidate:
    """A candidate's reward and its rank among its group's candidates (1 = best; equal rewards share
    the better rank); ``best`` marks the group's one chosen candidate (the first of the best in input order)."""

    id: str
    group: str
    reward: float
    rank: int
    best: bool
    group_size: int


def rank_rewards(ids: Sequence[str], groups: Sequence[str], rewards: Sequence[float]) -> list[RankedCandidate]:
    """Ranks within each group of the given rewards (higher reward, better rank), in input order."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    ranks, best = [0] * len(ids), [False] * len(ids)
    for members in by_group.values():
        for i in members:
            ranks[i] = 1 + sum(rewards[j] > rewards[i] for j in members)
        best[min(i for i in members if ranks[i] == 1)] = True
    return [
        RankedCandidate(str(ids[i]), str(groups[i]), float(rewards[i]), ranks[i], best[i], len(by_group[groups[i]]))
        for i in range(len(ids))
    ]


def rank_sequences(
    reward_model: RewardModelScorer | str | os.PathLike[str], candidates: Iterable[Candidate | Mapping[str, Any]]
) -> list[RankedCandidate]:
    """Best-of-N: every candidate's reward and rank within its group, in input order. ``reward_model``
    is a :class:`RewardModelScorer` or the folder to load one from; a candidate is a
    :class:`~judgetrain.rank.Candidate` or a mapping with ``frames`` and ``group`` (and ``id``,
    else its index)."""
    scorer = reward_model if isinstance(reward_model, RewardModelScorer) else RewardModelScorer(reward_model)
    items = list(candidates)
    ids = [c.id if isinstance(c, Candidate) else str(c.get("id", i)) for i, c in enumerate(items)]
    groups = [c.group if isinstance(c, Candidate) else str(c["group"]) for c in items]
    return rank_rewards(ids, groups, scorer(items))
