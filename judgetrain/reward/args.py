"""The fields of a reward-model recipe (``method: reward``) beside TRL's ``RewardConfig``, their
numbers, and the checks that span them: a leaf without torch or TRL, read by the parser and the
training checks before anything loads.

- ``margin_per_score_point``: TRL's margin (the Bradley–Terry loss becomes
  ``-log σ(r_chosen − r_rejected − margin)``, as Llama 2's reward models take one per rating gap)
  from the two sequences' PRISM pointwise scores: ``margin = this × (gold score − negative score)``
  (a shuffle, score 1, gets a wider margin than a swap, score 3). ``None``: no margin.
- TRL's own ``center_rewards_coefficient`` (rewards pulled toward a mean of zero) is TRL's field.
- A reward model trains on pairs of PRISM pointwise records (:func:`judgetrain.pairs.sequence_pairs`):
  ``tasks`` must keep only ``pointwise``; ``packing`` has no meaning for pairs.

Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

from dataclasses import dataclass

from judgetrain.config import Range, arg

__all__ = ["REWARD_RANGES", "RewardArguments", "reward_problems"]

REWARD_RANGES = {
    "center_rewards_coefficient": Range(minimum=0, fix="0 or a small positive coefficient such as 0.01, or leave it out"),
    "margin_per_score_point": Range(minimum=0, fix="0 or a positive margin per point of PRISM's 1–5 score, or leave it out"),
}


@dataclass
class RewardArguments:
    """judgetrain's fields of a reward-model recipe, beside TRL's ``RewardConfig`` (:mod:`judgetrain.reward.config`)."""

    method: str = arg(
        "reward",
        "sft, grpo or reward: reward here (a scalar head trained Bradley–Terry by TRL's RewardTrainer on gold-versus-"
        "perturbed pairs of sequences).",
        identity=True,
    )
    margin_per_score_point: float | None = arg(
        None,
        "TRL's margin for each pair: this × (the gold's PRISM score − the negative's), e.g. 0.25 (a shuffle's margin "
        "1.0, a swap's 0.5); null: no margin.",
        identity=True,
        minimum=0,
    )


def reward_problems(model_args, data_args, training_args) -> list[str]:
    """Problems with a reward-model recipe, each naming the field and the fix."""
    problems = []
    if getattr(model_args, "init_adapter", None):
        problems.append(
            "init_adapter: a reward model starts from its base checkpoint (its head is new); to start from a judge "
            "trained by SFT, merge that adapter first (`judgetrain merge RUN --out MERGED`) and set "
            "`model_name_or_path: MERGED`"
        )
    if list(data_args.tasks or []) != ["pointwise"]:
        problems.append(
            f"tasks: {data_args.tasks}; a reward model trains on PRISM pointwise records (a gold sequence against each of "
            "its perturbations, each scored alone): set `tasks: [pointwise]` and build PRISM with `--modes "
            "pairwise,pointwise` (or `pointwise`)"
        )
    if data_args.mixture_weights:
        problems.append("mixture_weights: a reward model's pairs are made within one dataset's records; drop it")
    if getattr(training_args, "packing", False):
        problems.append("packing: a reward model's batch is pairs of whole sequences; drop packing")
    return problems
