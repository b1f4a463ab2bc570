"""Consistency tuning (paper 001, App. C; Table S3 rows 11–12): ``SFTTrainer`` with a loss that
asks a judge to agree with itself across the views of a question (phase grids, option orders).

A training example is one question with V views (``judgetrain build consistency-views``;
:mod:`judgetrain.consistency.collator` keeps a question's views in one micro-batch). For view
``v`` the **option posterior** is the scoring engine's: the letter logits at the answer
position (the logits that predict the completion's first token, the gold letter),
renormalised over the question's live letters and mapped to option content through the
view's permutation, ``p_v(c) = softmax(z_v)[slot_v(c)]`` (``judgetrain.scoring``;
``eval phasefusion``'s ``to_content``). ``m = (1/V) Σ_v p_v`` is the views' mixture.

The loss of a micro-batch is TRL's SFT loss of every view (the completion tokens'
cross-entropy, exactly ``SFTTrainer.compute_loss``) plus λ times the mean over its
questions of one consistency term:

- ``js`` (JS-to-mixture): ``J = (1/V) Σ_v KL(p_v ‖ m) = H(m) − (1/V) Σ_v H(p_v)``, the
  generalised Jensen–Shannon divergence of the V views with equal weights. This direction
  (each view to the mixture, not the mixture to each view) is bounded by log V, zero exactly
  when every view gives the same posterior, symmetric in the views, and finite when a view
  puts (numerically) zero mass on an option others choose, which ``KL(m ‖ p_v)`` is not. Its
  optimum is agreement, whatever the posterior agreed on, flat included: the paper's
  "degenerate flattening optimum". ``m`` is detached. That changes nothing in the gradient,
  which is why we may: ``∂J/∂p_v(c) = (log p_v(c) − log m(c))/V`` with or without the path
  through ``m``, which only adds ``−(1/V)·Σ_w p_w(c)/(V m(c)) = −1/V``, the same for every
  option, and so vanishes through the softmax (a test checks both give equal gradients). The
  detached target makes the computation graph one softmax per view instead of a mixture of V.
- ``pseudo_label`` (confident pseudo-labelling): ``y = argmax_c m(c)`` (ties to the lowest
  option, as the scoring engine) and ``P = [max_c m(c) ≥ τ] · (1/V) Σ_v −log p_v(y)``: each
  view is pulled to the mixture's answer, on confident questions only. ``y`` need not be the
  gold option (consistency ≠ correctness). Gated-off questions count 0 in the mean over
  questions, so λ is the weight of one confident question whatever the hit rate.

λ = 0 is plain SFT on the same records and batches, exactly (same loss, same gradients).
With gradient accumulation the term is scaled as the Trainer scales the cross-entropy, so a
step's term is the mean over its questions (all micro-batches full). Evaluation returns the
cross-entropy alone, so ``eval_loss`` compares across λ and τ (what ``judgetrain sweep
--objective eval_loss`` minimises). Logged every logging step (``consistency/…``; ``eval_``
in front during evaluation): the term, the agreement rate (questions whose views all choose
one option), the gate's hit rate (``pseudo_label``), and per-view posteriors (mean top
probability overall and per view index, gold probability, accuracy).

The package: the recipe fields and their checks (``args``), ``SFTConfig`` with them
(``config``), the terms as tensor functions (``objectives``), whole questions per micro-batch
(``collator``) and the trainer (``trainer``).
Docs: "how-to/consistency-tuning.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["OBJECTIVES", "ConsistencyArguments", "objective_problems"],
        "config": ["ConsistencyConfig"],
        "objectives": ["content_log_posteriors", "js_to_mixture", "log_mixture", "pseudo_label"],
        "collator": ["BATCH_KEYS", "ViewDataError", "ViewGroup", "ViewGroupCollator", "ViewGroups"],
        "trainer": ["ConsistencyTrainer", "trainer_class"],
    },
)
