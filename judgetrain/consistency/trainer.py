"""``ConsistencyTrainer``: TRL's ``SFTTrainer`` (as :class:`~judgetrain.train.trainer.JudgeSFTTrainer`)
whose loss adds a consistency term over the views of each question (paper 001 App. C;
the loss is defined in :mod:`judgetrain.consistency`), and the choice of trainer a recipe makes.
Docs: "how-to/consistency-tuning.md".
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch

from judgetrain.compat.transformers import current_accumulation
from judgetrain.train.trainer import JudgeSFTTrainer

from .args import objective_problems
from .collator import BATCH_KEYS, ViewDataError, ViewGroupCollator, ViewGroups
from .objectives import content_log_posteriors, js_to_mixture, pseudo_label

if TYPE_CHECKING:
    from .config import ConsistencyConfig

__all__ = ["ConsistencyTrainer", "trainer_class"]


def trainer_class(training_args) -> type:
    """:class:`ConsistencyTrainer` when the recipe sets a consistency objective, else
    :class:`~judgetrain.train.trainer.JudgeSFTTrainer` (TRL's ``SFTTrainer``, judgetrain's card)."""
    return JudgeSFTTrainer if getattr(training_args, "consistency_objective", "none") == "none" else ConsistencyTrainer


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

    args: ConsistencyConfig  # the Trainer's arguments, with the consistency fields

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        problems = objective_problems(self.args)
        if self.args.consistency_objective == "none" or problems:
            raise ValueError(
                "ConsistencyTrainer needs a consistency objective: "
                + ("; ".join(problems) or "consistency_objective is none (use SFTTrainer, or set js / pseudo_label)")
            )
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
            # (the step's micro-batches, set by the Trainer's loop; 1 for a call outside it)
            steps = current_accumulation(self) if num_items_in_batch is not None else 1
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
            raise ViewDataError(
                f"{int(wrong.sum())} view(s) whose completion does not start with the gold letter's token; "
                "consistency tuning reads the option posterior at the answer position, so each completion "
                "must be the letter alone (rebuild with `judgetrain build consistency-views`)"
            )
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
            tau = self.args.consistency_tau
            assert tau is not None, "objective_problems refused pseudo_label without τ when the trainer was made"
            per_group, gate, _target = pseudo_label(logp, group, n_groups, float(tau))
        return per_group.mean(), self._stats(logp.detach(), group, n_groups, per_group.detach(), gate, pairing)

    def _stats(self, logp, group, n_groups, per_group, gate, pairing) -> dict[str, torch.Tensor]:
        p = logp.exp()
        top, choice = p.max(-1)
        answer = pairing["consistency_answer"]
        agree = torch.stack([(choice[group == g] == choice[group == g][0]).all() for g in range(n_groups)])
        per_view = torch.zeros(self.max_views, dtype=p.dtype, device=p.device).index_add(0, pairing["consistency_view"], top)
        per_view_n = torch.bincount(pairing["consistency_view"], minlength=self.max_views).to(p.dtype)
        sums = {
            "questions": float(n_groups),
            "views": float(len(group)),
            "term": per_group.sum(),
            "agreement": agree.sum(),
            "max_prob": top.sum(),
            "gold_prob": p.gather(-1, answer.unsqueeze(-1)).sum(),
            "accuracy": (choice == answer).sum(),
        }
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
        mode = "train" if self.model is not None and self.model.training else "eval"
        sums, prefix = self.consistency_sums[mode], "eval_" if mode == "eval" else ""
        if sums.get("questions"):
            per_question = ["term", "agreement"] + (["gate_hit_rate"] if "gate_hit_rate" in sums else [])
            metrics = {k: sums[k] / sums["questions"] for k in per_question}
            metrics.update({f"view_{k}": sums[k] / sums["views"] for k in ("max_prob", "gold_prob", "accuracy")})
            metrics.update(
                {
                    f"view{v}_max_prob": sums[f"view{v}_max_prob"] / sums[f"view{v}_n"]
                    for v in range(self.max_views)
                    if sums.get(f"view{v}_n")
                }
            )
            logs.update({f"{prefix}consistency/{k}": v for k, v in metrics.items()})
        sums.clear()
        super().log(logs, start_time)
