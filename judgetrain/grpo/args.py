"""The GRPO fields of a training recipe (``method: grpo``), the numbers TRL's ``GRPOConfig``
takes, and the checks that span them: a leaf without torch or TRL, read by the parser and
the training checks before anything loads.

- ``rewards``: the rewards a completion earns, by name (:data:`REWARD_NAMES`, defined in
  :mod:`judgetrain.grpo.rewards`), weighted by TRL's own ``reward_weights`` (one per reward,
  in the same order; TRL's default: 1 each), or by a number per reward (``consistency_weight``,
  …), which a sweep can search (it searches scalars), turned into ``reward_weights`` once
  (:mod:`judgetrain.train.settings`).
- The numbers of ``GRPOConfig`` (:data:`GRPO_RANGES`): at least 2 generations a prompt (GRPO's
  advantages compare a prompt's completions), a positive temperature, β ≥ 0, …
- The consistency reward compares the completions of a question's presentations, so its
  records (twins, views) must meet in one generation batch that is one optimizer step:
  ``steps_per_generation`` equal to the accumulation (judgetrain's default), no
  ``mixture_weights`` (sampling by weight splits twins), and vLLM asked for only where it is
  installed.

Docs: "how-to/grpo.md".
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from judgetrain.config import Range, arg, one_of

__all__ = ["GRPO_RANGES", "GROUPED_REWARDS", "REWARD_NAMES", "GRPOArguments", "grpo_problems", "weights_given"]

# the rewards a recipe may name (judgetrain.grpo.rewards.REWARDS; a test keeps the two equal)
REWARD_NAMES = ("correct", "format", "consistency")
# rewards that compare a record's completions with those of its twins / views (grouped data order)
GROUPED_REWARDS = frozenset({"consistency"})

GRPO_RANGES = {
    "num_generations": Range(minimum=2, fix="at least 2 completions a prompt (GRPO compares a prompt's completions)"),
    "max_completion_length": Range(minimum=1, fix="a positive number of tokens a completion may take"),
    "temperature": Range(above=0, fix="a positive sampling temperature (TRL's default 1.0)"),
    "top_p": Range(above=0, maximum=1, fix="a probability in (0, 1] (1: no nucleus cut)"),
    "top_k": Range(minimum=0, fix="0 (no top-k cut) or a positive number of tokens"),
    "beta": Range(minimum=0, fix="0 (no KL penalty, TRL's default) or a positive KL coefficient such as 0.04"),
    "epsilon": Range(above=0, fix="a positive clipping range (TRL's default 0.2)"),
    "num_iterations": Range(minimum=1, fix="at least 1 optimisation pass over each generation batch"),
    "steps_per_generation": Range(minimum=1, fix="at least 1 step a generation batch, or leave it out"),
    "generation_batch_size": Range(minimum=1, fix="a positive number of completions, or leave it out"),
    "repetition_penalty": Range(above=0, fix="a positive penalty (1.0: none)"),
}


@dataclass
class GRPOArguments:
    """judgetrain's fields of a GRPO recipe, beside TRL's ``GRPOConfig`` (:mod:`judgetrain.grpo.config`)."""

    method: str = arg(
        "grpo",
        "sft, grpo or reward: grpo here (this recipe's training arguments are TRL's GRPOConfig with judgetrain's rewards).",
        identity=True,
    )
    rewards: list[str] = arg(
        ["correct"],
        f"The rewards a completion earns ({one_of(REWARD_NAMES)}), weighted by reward_weights in this order: correct, "
        "the parsed answer against the label (partial credit for 1–5 by distance, Kendall τ for an ordering); format, a "
        "rationale then the answer line (rationale records); consistency, agreeing with the same question presented "
        "otherwise (pairwise twins, video-MCQ views).",
        identity=True,
    )
    correct_weight: float | None = arg(
        None,
        "The correct reward's weight, a number a sweep can search (instead of reward_weights; default 1).",
        identity=True,
        minimum=0,
    )
    format_weight: float | None = arg(
        None,
        "The format reward's weight, a number a sweep can search (instead of reward_weights; default 1).",
        identity=True,
        minimum=0,
    )
    consistency_weight: float | None = arg(
        None,
        "The consistency reward's weight, a number a sweep can search (instead of reward_weights; default 1).",
        identity=True,
        minimum=0,
    )


def weights_given(training_args) -> dict[str, float]:
    """``{reward: weight}`` of the ``<reward>_weight`` fields the recipe sets."""
    return {
        name: getattr(training_args, f"{name}_weight")
        for name in REWARD_NAMES
        if getattr(training_args, f"{name}_weight", None) is not None
    }


def _vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def grpo_problems(data_args, training_args, accumulation: int, world_size: int = 1) -> list[str]:
    """Problems with a GRPO recipe's rewards, generation batches and vLLM, each naming the field and the fix;
    ``accumulation``: the micro-batches an optimizer step takes (derived from ``effective_batch_size`` when given),
    ``world_size``: the processes of the launch."""
    rewards = list(training_args.rewards or [])
    problems = [f"rewards: {name!r} is not a reward; use {one_of(REWARD_NAMES)}" for name in rewards if name not in REWARD_NAMES]
    if not rewards:
        problems.append(f"rewards: give at least one of {one_of(REWARD_NAMES)}")
    problems += [f"rewards: {name!r} is named twice; name each reward once" for name in set(rewards) if rewards.count(name) > 1]
    weights, named = training_args.reward_weights, weights_given(training_args)
    if weights is not None and named:
        problems.append(
            f"reward_weights and {', '.join(f'{n}_weight' for n in named)}: give the weights one way, the list "
            "reward_weights (in the order of rewards) or a <reward>_weight per reward (what a sweep searches)"
        )
    problems += [
        f"{name}_weight: set, but rewards {rewards} do not include {name}; add it to rewards or drop the weight"
        for name in named
        if name not in rewards
    ]
    if weights is not None and len(weights) != len(rewards):
        problems.append(
            f"reward_weights: {len(weights)} weight(s) for {len(rewards)} reward(s) {rewards}; give one weight per "
            "reward, in the same order"
        )
    if training_args.use_vllm and not _vllm_installed():
        problems.append(
            "use_vllm: true, but vLLM is not installed here; install it where the GPUs are (`pip install vllm`, the "
            "version TRL supports) or set `use_vllm: false` to generate through transformers"
        )
    if GROUPED_REWARDS & set(rewards):
        problems += _grouped_problems(data_args, training_args, accumulation, world_size)
    return problems


def _grouped_problems(data_args, training_args, accumulation: int, world_size: int) -> list[str]:
    """What would split a question's presentations across generation batches or optimizer steps."""
    problems = []
    if data_args.mixture_weights:
        problems.append(
            "mixture_weights: sampling records by weight splits a question's twins; drop it (concatenate the "
            "datasets) when rewards include consistency"
        )
    if training_args.eval_strategy != "no":
        problems.append(
            "eval_strategy: GRPO's evaluation samples prompts in its own order, which splits a question's twins; set "
            "`eval_strategy: no` with the consistency reward and evaluate the adapter with `judgetrain eval judge` and "
            "`eval bias` (a sweep's judge objective is computed at the end of training)"
        )
    per_device, world = training_args.per_device_train_batch_size, max(world_size, 1)
    given_steps, given_batch = training_args.generation_as_given
    steps = given_steps if given_batch is None else given_batch / max(per_device * world, 1)
    if steps is not None and steps != accumulation:
        problems.append(
            f"steps_per_generation: {steps:g} steps a generation batch, but an optimizer step accumulates {accumulation}; "
            "the consistency reward needs a question's presentations in one optimizer step: leave steps_per_generation "
            "and generation_batch_size out (one generation batch a step)"
        )
    return problems
