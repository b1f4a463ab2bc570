"""The two consistency terms as pure tensor functions (paper 001 App. C), over the option
posteriors of a micro-batch's views grouped by question; the definitions and why ``m`` may
be detached are in :mod:`judgetrain.consistency`.
Docs: "how-to/consistency-tuning.md".
"""

from __future__ import annotations

import math

import torch

__all__ = ["content_log_posteriors", "js_to_mixture", "log_mixture", "pseudo_label"]


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


def pseudo_label(
    logp: torch.Tensor, group: torch.Tensor, n_groups: int, tau: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-group term (G,), gate (G,) bool, target (G,)): ``[max m ≥ τ] · (1/V) Σ_v −log p_v(argmax m)``."""
    log_m = log_mixture(logp.detach(), group, n_groups)
    top, target = log_m.max(-1)  # the first maximum: ties to the lowest option
    gate = top.exp() >= tau
    nll = -logp.gather(-1, target[group].unsqueeze(-1)).squeeze(-1)
    return _group_mean(nll, group, n_groups) * gate, gate, target


def _group_mean(values: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    sums = torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(0, group, values)
    return sums / torch.bincount(group, minlength=n_groups).to(values.dtype)
