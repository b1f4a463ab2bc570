"""Consistency tuning (paper 001, App. C; Table S3 rows 11–12): ``SFTTrainer`` with a loss that
asks a judge to agree with itself across the views of a question (phase grids, option orders).

A training example is one question with V views (``judgetrain build consistency-views``;
:mod:`judgetrain.consistency_collator` keeps a question's views in one micro-batch). For view
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

:class:`ConsistencyConfig` is TRL's ``SFTConfig`` with :class:`ConsistencyArguments`' fields.
README: "Consistency tuning (paper 001, App. C)".
"""

from __future__ import annotations

import math
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from trl import SFTConfig

from judgetrain.consistency_collator import BATCH_KEYS, ViewDataError, ViewGroupCollator, ViewGroups
from judgetrain.judge_trainer import JudgeSFTTrainer

__all__ = ["OBJECTIVES", "ConsistencyArguments", "ConsistencyConfig", "ConsistencyTrainer", "consistency_problems",
           "content_log_posteriors", "js_to_mixture", "log_mixture", "objective_problems", "pseudo_label", "trainer_class"]

OBJECTIVES = ("none", "js", "pseudo_label")


@dataclass
class ConsistencyArguments:
    """The consistency objective of a recipe (paper 001 App. C): names that no ``SFTConfig`` field uses."""

    consistency_objective: str = field(default="none", metadata={
        "help": "none (plain SFT), js (λ · mean over views of KL(view ‖ mixture)) or pseudo_label (λ · cross-entropy of "
                "every view to the mixture's argmax on questions whose mixture top probability is ≥ τ)."})
    consistency_lambda: float | None = field(default=None, metadata={
        "help": "λ, the weight of the consistency term (paper: js 0, 1, 3, 10; pseudo_label 1, 2)."})
    consistency_tau: float | None = field(default=None, metadata={
        "help": "τ, the confidence gate of pseudo_label (paper: 0.7, 0.9); pseudo_label only."})


@dataclass
class ConsistencyConfig(SFTConfig, ConsistencyArguments):
    """TRL's ``SFTConfig`` plus :class:`ConsistencyArguments` (the recipe's training arguments)."""


def objective_problems(training_args) -> list[str]:
    """Problems with ``consistency_objective``, ``consistency_lambda`` and ``consistency_tau``, each naming the field and the fix."""
    objective = getattr(training_args, "consistency_objective", "none")
    lam, tau = getattr(training_args, "consistency_lambda", None), getattr(training_args, "consistency_tau", None)
    if objective not in OBJECTIVES:
        return [f"consistency_objective: {objective!r} is not an objective; use one of {', '.join(OBJECTIVES)}"]
    if objective == "none":
        return [f"{name}: set, but consistency_objective is none; set `consistency_objective: js` or `pseudo_label`, or drop it"
                for name, value in (("consistency_lambda", lam), ("consistency_tau", tau)) if value is not None]
    problems = []
    if lam is None:
        problems.append(f"consistency_lambda: missing for consistency_objective {objective}; give λ ≥ 0 (paper 001: js 0, 1, 3, 10; "
                        "pseudo_label 1, 2)")
    elif not (math.isfinite(lam) and lam >= 0):
        problems.append(f"consistency_lambda: {lam} must be a finite number ≥ 0")
    if objective == "pseudo_label" and tau is None:
        problems.append("consistency_tau: missing for pseudo_label; give the confidence gate τ in (0, 1] (paper 001: 0.7, 0.9)")
    elif objective == "pseudo_label" and not 0 < tau <= 1:
        problems.append(f"consistency_tau: {tau} must be in (0, 1]: the gate compares it with a probability")
    elif objective == "js" and tau is not None:
        problems.append("consistency_tau: applies to pseudo_label only; drop it or set `consistency_objective: pseudo_label`")
    return problems


def consistency_problems(data_args, training_args) -> list[str]:
    """:func:`objective_problems` and, under a consistency objective, what would split a question's
    views (packing, ``mixture_weights``, a record-level sampler); for ``check_config``."""
    problems = objective_problems(training_args)
    if getattr(training_args, "consistency_objective", "none") in ("none", None) or problems:
        return problems
    if getattr(training_args, "packing", False):
        problems.append("packing: a question's views must be rows of their own for consistency tuning; set `packing: false`")
    if data_args.mixture_weights:
        problems.append("mixture_weights: sampling records by weight splits and repeats a question's views; drop it "
                        "(concatenate the datasets) for consistency tuning")
    if training_args.train_sampling_strategy not in ("random", "sequential"):
        problems.append(f"train_sampling_strategy: {training_args.train_sampling_strategy} samples records, but consistency "
                        "tuning samples whole questions; use random or sequential")
    return problems


def trainer_class(training_args) -> type:
    """:class:`ConsistencyTrainer` when the recipe sets a consistency objective, else
    :class:`~judgetrain.judge_trainer.JudgeSFTTrainer` (TRL's ``SFTTrainer``, judgetrain's card)."""
    return JudgeSFTTrainer if getattr(training_args, "consistency_objective", "none") == "none" else ConsistencyTrainer


# --------------------------------------------------------------------------- the objectives (pure tensors)


def content_log_posteriors(letter_logits: torch.Tensor, slot_of_content: torch.Tensor) -> torch.Tensor:
    """(R, N) letter logits at the answer position, slot ``j`` = letter ``j`` (columns beyond a
    row's live letters are ignored), and (R, N) the slot showing option ``c`` (−1: no option
    ``c``) → (R, N) ``log p(c)``: the letters renormalised, in option order; −inf where no option."""
    live = slot_of_content >= 0
    n_live = live.sum(-1, keepdim=True)
    slot_live = torch.arange(letter_logits.shape[-1], device=letter_logits.device) < n_live
    logits = letter_logits.to(torch.promote_types(letter_logits.dtype, torch.float32))  # bf16 logits in float32, float64 kept
    logp_slot = torch.log_softmax(logits.masked_fill(~slot_live, float("-inf")), dim=-1)
    return logp_slot.gather(-1, slot_of_content.clamp(min=0)).masked_fill(~live, float("-inf"))


def log_mixture(logp: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """(G, N) ``log m``, ``m`` the mean posterior of each group's rows (logsumexp, so no option underflows to −inf)."""
    return torch.stack([torch.logsumexp(logp[group == g], dim=0) - math.log(int((group == g).sum())) for g in range(n_groups)])


def js_to_mixture(logp: torch.Tensor, group: torch.Tensor, n_groups: int, *, detach_mixture: bool = True) -> torch.Tensor:
    """(G,) ``(1/V) Σ_v KL(p_v ‖ m)`` per group from (R, N) content log posteriors (module docstring)."""
    log_m = log_mixture(logp.detach() if detach_mixture else logp, group, n_groups)
    live = torch.isfinite(logp)
    safe = logp.masked_fill(~live, 0.0)
    kl = (safe.exp() * (safe - log_m[group].masked_fill(~live, 0.0))).masked_fill(~live, 0.0).sum(-1)
    return _group_mean(kl, group, n_groups)


def pseudo_label(logp: torch.Tensor, group: torch.Tensor, n_groups: int, tau: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-group term (G,), gate (G,) bool, target (G,)): ``[max m ≥ τ] · (1/V) Σ_v −log p_v(argmax m)``."""
    log_m = log_mixture(logp.detach(), group, n_groups)
    top, target = log_m.max(-1)  # the first maximum: ties to the lowest option
    gate = top.exp() >= tau
    nll = -logp.gather(-1, target[group].unsqueeze(-1)).squeeze(-1)
    return _group_mean(nll, group, n_groups) * gate, gate, target


def _group_mean(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    sums = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(0, group, values)
    return sums / torch.bincount(group, minlength=n_groups).to(values.dtype)


# --------------------------------------------------------------------------- the trainer


@contextmanager
def _first_output(module):
    """The output of ``module``'s first forward inside the block (``captured["output"]``)."""
    captured: dict = {}

    def hook(_module, _args, output):
        captured.setdefault("output", output)

    handle = module.register_forward_hook(hook)
    try:
        yield captured
    finally:
        handle.remove()


class ConsistencyTrainer(JudgeSFTTrainer):
    """``SFTTrainer`` whose loss adds the consistency term of ``args.consistency_objective``
    (module docstring). Takes ``SFTTrainer``'s arguments unchanged, with view records
    (``judgetrain build consistency-views``) as ``train_dataset``/``eval_dataset`` and a
    :class:`ConsistencyConfig` as ``args``; it then samples whole questions
    (``per_device_train_batch_size`` counts questions, each V rows)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        problems = objective_problems(self.args)
        if self.args.consistency_objective == "none" or problems:
            raise ValueError("ConsistencyTrainer needs a consistency objective: " + ("; ".join(problems) or
                             "consistency_objective is none (use SFTTrainer, or set js / pseudo_label)"))
        if isinstance(self.eval_dataset, dict):
            raise ViewDataError("eval_dataset: give one dataset of view records, not a mapping of several")
        self.train_dataset = ViewGroups(self.train_dataset, "train")
        if self.eval_dataset is not None:
            self.eval_dataset = ViewGroups(self.eval_dataset, "eval")
        self.data_collator = ViewGroupCollator(self.data_collator, self.processing_class)
        sets = [self.train_dataset] + ([self.eval_dataset] if self.eval_dataset is not None else [])
        self.max_views = max(len(rows) for s in sets for rows in s.rows)
        self.consistency_sums: dict[str, dict[str, float]] = {"train": defaultdict(float), "eval": defaultdict(float)}

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """TRL's SFT loss plus λ · the consistency term (training); the SFT loss alone in evaluation."""
        pairing = {k: inputs.pop(k) for k in BATCH_KEYS}
        backbone, head, text_config = self._language_parts(model)
        with _first_output(backbone) as captured:
            result = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
        loss = result[0] if return_outputs else result
        training = self.model.training
        lam = float(self.args.consistency_lambda)
        with torch.set_grad_enabled(torch.is_grad_enabled() and training and lam > 0):
            term, stats = self._consistency(captured["output"], head, text_config, inputs["labels"], pairing)
        if training and lam > 0:
            # scaled as the Trainer scales the cross-entropy: normalised over the accumulation when it passes num_items_in_batch
            # (the Trainer sets current_gradient_accumulation_steps each step; 1 for a call outside its loop)
            steps = getattr(self, "current_gradient_accumulation_steps", 1) if num_items_in_batch is not None else 1
            loss = loss + lam * term / steps
        self._record(stats, "train" if training else "eval")
        return (loss, result[1]) if return_outputs else loss

    def _language_parts(self, model):
        """The module whose output TRL's fused LM head projects, the LM head, the text config."""
        inner = self.accelerator.unwrap_model(model)
        inner = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
        return inner.base_model, inner.get_output_embeddings(), inner.config.get_text_config()

    def _consistency(self, backbone_output, head, text_config, labels, pairing) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(mean over the micro-batch's questions of the term, the sums to log)."""
        hidden = backbone_output.last_hidden_state if hasattr(backbone_output, "last_hidden_state") else backbone_output[0]
        group = pairing["consistency_group"]
        rows = torch.arange(labels.shape[0], device=labels.device)
        has_label = labels != -100
        if not bool(has_label.any(-1).all()):
            raise ViewDataError("a view has no completion token left (max_length cut it); raise max_length")
        first = has_label.int().argmax(-1)  # the completion's first token: the letter
        letter_ids = pairing["consistency_letter_ids"]
        gold_slot = pairing["consistency_slot_of_content"].gather(-1, pairing["consistency_answer"].unsqueeze(-1)).squeeze(-1)
        wrong = labels[rows, first] != letter_ids[rows, gold_slot]
        if bool(wrong.any()):
            raise ViewDataError(f"{int(wrong.sum())} view(s) whose completion does not start with the gold letter's token; "
                                "consistency tuning reads the option posterior at the answer position, so each completion "
                                "must be the letter alone (rebuild with `judgetrain build consistency-views`)")
        logits = head(hidden[rows, first - 1].to(head.weight.dtype)).float()
        cap = getattr(text_config, "final_logit_softcapping", None)
        if cap:  # as the model's own forward, which the scoring engine reads
            logits = torch.tanh(logits / cap) * cap
        letter_logits = logits.gather(-1, letter_ids.clamp(min=0)).masked_fill(letter_ids < 0, float("-inf"))
        logp = content_log_posteriors(letter_logits, pairing["consistency_slot_of_content"])
        n_groups = int(group.max()) + 1
        gate = None
        if self.args.consistency_objective == "js":
            per_group = js_to_mixture(logp, group, n_groups)
        else:
            per_group, gate, _target = pseudo_label(logp, group, n_groups, float(self.args.consistency_tau))
        return per_group.mean(), self._stats(logp.detach(), group, n_groups, per_group.detach(), gate, pairing)

    def _stats(self, logp, group, n_groups, per_group, gate, pairing) -> dict[str, torch.Tensor]:
        p = logp.exp()
        top, choice = p.max(-1)
        answer = pairing["consistency_answer"]
        agree = torch.stack([(choice[group == g] == choice[group == g][0]).all() for g in range(n_groups)])
        per_view = torch.zeros(self.max_views, dtype=p.dtype, device=p.device).index_add(0, pairing["consistency_view"], top)
        per_view_n = torch.bincount(pairing["consistency_view"], minlength=self.max_views).to(p.dtype)
        sums = {"questions": float(n_groups), "views": float(len(group)), "term": per_group.sum(), "agreement": agree.sum(),
                "max_prob": top.sum(), "gold_prob": p.gather(-1, answer.unsqueeze(-1)).sum(), "accuracy": (choice == answer).sum()}
        if gate is not None:
            sums["gate_hit_rate"] = gate.sum()
        out = {k: torch.as_tensor(v, dtype=p.dtype, device=p.device) for k, v in sums.items()}
        out.update({f"view{v}_max_prob": per_view[v] for v in range(self.max_views)})
        out.update({f"view{v}_n": per_view_n[v] for v in range(self.max_views)})
        return out

    def _record(self, stats: dict[str, torch.Tensor], mode: str) -> None:
        """Add this micro-batch's sums, summed over the processes, to the logging window."""
        names = sorted(stats)
        total = self.accelerator.reduce(torch.stack([stats[k] for k in names]), reduction="sum")
        for k, v in zip(names, total.tolist(), strict=True):
            self.consistency_sums[mode][k] += v

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """The logging window's consistency metrics join ``logs`` (wandb, TensorBoard, …), then TRL's own."""
        mode = "train" if self.model.training else "eval"
        sums, prefix = self.consistency_sums[mode], "eval_" if mode == "eval" else ""
        if sums.get("questions"):
            per_question = ["term", "agreement"] + (["gate_hit_rate"] if "gate_hit_rate" in sums else [])
            metrics = {k: sums[k] / sums["questions"] for k in per_question}
            metrics.update({f"view_{k}": sums[k] / sums["views"] for k in ("max_prob", "gold_prob", "accuracy")})
            metrics.update({f"view{v}_max_prob": sums[f"view{v}_max_prob"] / sums[f"view{v}_n"]
                            for v in range(self.max_views) if sums.get(f"view{v}_n")})
            logs.update({f"{prefix}consistency/{k}": v for k, v in metrics.items()})
        sums.clear()
        super().log(logs, start_time)

