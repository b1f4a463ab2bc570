"""The consistency fields of a training recipe (paper 001 App. C) and their own checks.

``consistency_objective``, ``consistency_lambda`` and ``consistency_tau`` are recipe keys
like ``learning_rate``: every recipe's parser knows them (``none`` is plain SFT). A leaf,
so that the training checks read these without importing torch or TRL.
Docs: "how-to/consistency-tuning.md".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from judgetrain.config import arg

__all__ = ["OBJECTIVES", "ConsistencyArguments", "objective_problems"]

OBJECTIVES = ("none", "js", "pseudo_label")


@dataclass
class ConsistencyArguments:
    """The consistency objective of a recipe (paper 001 App. C): names that no ``SFTConfig`` field uses."""

    consistency_objective: str = arg(
        "none",
        "none (plain SFT), js (λ · mean over views of KL(view ‖ mixture)) or pseudo_label (λ · cross-entropy of "
        "every view to the mixture's argmax on questions whose mixture top probability is ≥ τ).",
        identity=True,
    )
    consistency_lambda: float | None = arg(
        None, "λ, the weight of the consistency term (paper: js 0, 1, 3, 10; pseudo_label 1, 2).", identity=True
    )
    consistency_tau: float | None = arg(
        None, "τ, the confidence gate of pseudo_label (paper: 0.7, 0.9); pseudo_label only.", identity=True
    )


def objective_problems(training_args) -> list[str]:
    """Problems with ``consistency_objective``, ``consistency_lambda`` and ``consistency_tau``, each naming the field and the fix."""
    objective = getattr(training_args, "consistency_objective", "none")
    lam, tau = getattr(training_args, "consistency_lambda", None), getattr(training_args, "consistency_tau", None)
    if objective not in OBJECTIVES:
        return [f"consistency_objective: {objective!r} is not an objective; use one of {', '.join(OBJECTIVES)}"]
    if objective == "none":
        return [
            f"{name}: set, but consistency_objective is none; set `consistency_objective: js` or `pseudo_label`, or drop it"
            for name, value in (("consistency_lambda", lam), ("consistency_tau", tau))
            if value is not None
        ]
    problems = []
    if lam is None:
        problems.append(
            f"consistency_lambda: missing for consistency_objective {objective}; give λ ≥ 0 (paper 001: js 0, 1, 3, 10; "
            "pseudo_label 1, 2)"
        )
    elif not (math.isfinite(lam) and lam >= 0):
        problems.append(f"consistency_lambda: {lam} must be a finite number ≥ 0")
    if objective == "pseudo_label" and tau is None:
        problems.append("consistency_tau: missing for pseudo_label; give the confidence gate τ in (0, 1] (paper 001: 0.7, 0.9)")
    elif objective == "pseudo_label" and tau is not None and not 0 < tau <= 1:
        problems.append(f"consistency_tau: {tau} must be in (0, 1]: the gate compares it with a probability")
    elif objective == "js" and tau is not None:
        problems.append("consistency_tau: applies to pseudo_label only; drop it or set `consistency_objective: pseudo_label`")
    return problems
