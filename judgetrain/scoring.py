"""The scoring engine: the one way evaluation, training-time validation and sweeps get answers from a model.

Two entry points, as functions over an already loaded ``(model, processor)`` and
as methods of :class:`Scorer`, which also loads checkpoints (base, base + PEFT
adapter, or merged):

- :func:`score`: constrained scoring. For each item the log-probability of every
  member of ``choices`` given the prompt, renormalised over the choices. A choice's
  sequence log-probability is the SUM of its tokens' log-probabilities (or their
  mean with ``reduction="mean"``); the prompt is encoded once per item, and a
  choice of more than one token continues from a copy of the prompt's KV cache.
- :func:`score_shared_prefix`: the same scores for many prompts that show the same
  images and differ only after them (one video question under several option
  orderings): the images and the shared text are encoded once per
  :class:`PrefixGroup`, and every prompt's rest is scored against a copy of that cache.
- :func:`generate`: greedy free-text generation, parsed by an answer parser
  (:func:`yes_no`, :func:`choice_letter`, :func:`integer_in_range`,
  :func:`frame_pair`, :func:`likert_1_5`, :func:`ordering`, :func:`one_of`). An
  answer a parser cannot read is recorded as invalid and counted, never mapped to
  a guess.

An item is a task record (a dict with ``prompt``, ``images``, ``choices``; see
``judgetrain.records``) or a ``(prompt messages, images, choices)`` tuple. The
prompt is rendered with the processor's chat template and
``add_generation_prompt=True``, followed by the prefill text (by default the model
family's ``think_prefill``, e.g. an empty think block for reasoning checkpoints).
Results come back in input order.

How the multi-token path works (and why it matches a full forward pass): the
prompts of a batch are encoded once, left-padded, with ``use_cache=True`` and
explicit position ids. Each (item, choice) that needs more than one token then
gets its own row of a copy of the cache (``batch_select_indices`` on a shallow
copy, so the prompt cache itself is never modified), and all those rows are fed
their choice tokens in one forward pass, right-padded. Qwen-VL models use
M-RoPE, whose positions after an image are not the token index: the suffix
positions continue from the prompt's largest position id (all three M-RoPE
components equal for text), which is what the model computes itself for
prompt + choice in one pass.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .models.registry import ModelFamily, detect_family, get_family

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, ProcessorMixin

__all__ = [
    "CPU_BATCH_SIZE",
    "FAMILY_PREFILL",
    "MAX_AUTO_BATCH_SIZE",
    "ChoiceScores",
    "Generation",
    "GenerationOutput",
    "Parser",
    "PrefixGroup",
    "Scorer",
    "choice_letter",
    "frame_pair",
    "generate",
    "integer_in_range",
    "likert_1_5",
    "one_of",
    "ordering",
    "parser_for_record",
    "render_prompt",
    "score",
    "score_shared_prefix",
    "yes_no",
]

logger = logging.getLogger(__name__)

# "auto" batch size on CPU (no free-memory probe there: throughput flattens
# early on CPU and RAM is rarely the limit for the models scored here).
CPU_BATCH_SIZE = 8
# Upper bound for the "auto" batch size on an accelerator.
MAX_AUTO_BATCH_SIZE = 64
# Fraction of free accelerator memory the "auto" batch size plans to use.
_AUTO_MEMORY_FRACTION = 0.8


class _FamilyPrefill:
    """Sentinel: use the model family's ``think_prefill`` (``None`` means no prefill)."""

    _instance: _FamilyPrefill | None = None

    def __new__(cls) -> _FamilyPrefill:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FAMILY_PREFILL"


FAMILY_PREFILL = _FamilyPrefill()

Item = Mapping[str, Any] | tuple
BatchSize = int | Literal["auto"]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ChoiceScores:
    """Constrained-scoring result for one item.

    Attributes:
        logprobs: per choice, in ``choices`` order, the log-probability renormalised
            over the choices (``sum(exp(logprobs)) == 1``), from the summed (or, with
            ``reduction="mean"``, length-normalised) sequence log-probabilities.
        raw_logprobs: per choice, the un-renormalised sequence log-probability
            ``log p(choice | prompt)``: the SUM of its tokens' log-probabilities,
            whatever the reduction.
        prediction: the choice with the highest score (ties go to the lowest index).
        prediction_index: its 0-based index in ``choices``.
        choices: the choices, as given.
        num_tokens: per choice, how many tokens it was scored as.
    """

    logprobs: list[float]
    raw_logprobs: list[float]
    prediction: str
    prediction_index: int
    choices: list[str] = field(default_factory=list)
    num_tokens: list[int] = field(default_factory=list)

    @property
    def probs(self) -> list[float]:
        """The renormalised probabilities, ``exp(logprobs)``."""
        return [math.exp(x) for x in self.logprobs]


@dataclass(frozen=True)
class Generation:
    """One greedy generation and what the parser read from it.

    Attributes:
        text: the generated text (special tokens removed; the prefill is part of the
            prompt, not of ``text``), stripped of surrounding whitespace.
        answer: the parser's canonical answer, ``None`` when it could not read one.
        valid: ``answer is not None``.
        num_tokens: generated tokens, the end-of-turn token included when reached.
        truncated: generation stopped at ``max_new_tokens`` before an end-of-turn token.
    """

    text: str
    answer: str | None
    valid: bool
    num_tokens: int
    truncated: bool


@dataclass(frozen=True)
class GenerationOutput(Sequence[Generation]):
    """The generations of :func:`generate`, in input order, with validity counts.

    Behaves as a sequence of :class:`Generation`; ``n_invalid`` counts the
    answers no parser could read (recorded as invalid, never guessed).
    """

    generations: list[Generation]

    def __len__(self) -> int:
        return len(self.generations)

    def __getitem__(self, i):  # type: ignore[override]
        return self.generations[i]

    def __iter__(self) -> Iterator[Generation]:
        return iter(self.generations)

    @property
    def n_valid(self) -> int:
        return sum(g.valid for g in self.generations)

    @property
    def n_invalid(self) -> int:
        return len(self.generations) - self.n_valid

    @property
    def invalid_rate(self) -> float:
        return self.n_invalid / len(self.generations) if self.generations else 0.0

    @property
    def n_truncated(self) -> int:
        return sum(g.truncated for g in self.generations)

    def counts(self) -> dict[str, int | float]:
        """``{"n", "valid", "invalid", "invalid_rate", "truncated"}`` for metrics.json."""
        return {"n": len(self), "valid": self.n_valid, "invalid": self.n_invalid,
                "invalid_rate": self.invalid_rate, "truncated": self.n_truncated}


# --------------------------------------------------------------------------- items and prompts


@dataclass(frozen=True)
class _Item:
    prompt: list
    images: list
    choices: list[str]
    record: Mapping[str, Any] | None


def _describe(x: Any, i: int) -> str:
    rid = x.get("id") if isinstance(x, Mapping) else None
    return f"item {i}" + (f" (id {rid!r})" if rid else "")


def _to_item(x: Any, i: int) -> _Item:
    if isinstance(x, Mapping):
        missing = [k for k in ("prompt",) if k not in x]
        if missing:
            raise ValueError(f"{_describe(x, i)} has no {missing[0]!r}: an item is a task record "
                             "(keys 'prompt', 'images', 'choices') or a (prompt, images, choices) tuple.")
        return _Item(list(x["prompt"]), list(x.get("images") or []), list(x.get("choices") or []), x)
    if isinstance(x, tuple) and len(x) in (2, 3):
        prompt, images = x[0], x[1]
        choices = list(x[2]) if len(x) == 3 and x[2] is not None else []
        return _Item(list(prompt), list(images or []), choices, None)
    raise TypeError(f"item {i} is a {type(x).__name__}; expected a task record (dict) or a "
                    "(prompt messages, images, choices) tuple.")


def _as_sequence(items: Any) -> Any:
    """Index items lazily when we can (a ``datasets.Dataset`` decodes images per row)."""
    if isinstance(items, Mapping):
        raise TypeError("score()/generate() take a sequence of items; wrap a single record in a list.")
    if hasattr(items, "__len__") and hasattr(items, "__getitem__"):
        return items
    return list(items)


def _resolve_prefill(prefill: str | None | _FamilyPrefill, family: ModelFamily | None) -> str | None:
    if isinstance(prefill, _FamilyPrefill):
        return family.think_prefill if family is not None else None
    if prefill is not None and not isinstance(prefill, str):
        raise TypeError(f"prefill must be a string, None or FAMILY_PREFILL, not {type(prefill).__name__}")
    return prefill or None


def render_prompt(processor: Any, prompt: Sequence[Mapping[str, Any]], prefill: str | None = None) -> str:
    """The text the model is scored on or generates after: ``prompt`` through the
    processor's chat template with ``add_generation_prompt=True``, then ``prefill``
    verbatim (``None``: nothing). Images stay placeholders; the processor expands them."""
    text = processor.apply_chat_template(list(prompt), tokenize=False, add_generation_prompt=True)
    return text + prefill if prefill else text


# --------------------------------------------------------------------------- model plumbing


class _Model:
    """What scoring needs to know about a loaded model, worked out once."""

    def __init__(self, model: Any, processor: Any, family: ModelFamily | str | None):
        self.model = model
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self.config = base.config
        if family is None:
            self.family: ModelFamily | None = detect_family(self.config)
        else:
            self.family = family if isinstance(family, ModelFamily) else get_family(family)
        params = inspect.signature(base.forward).parameters
        # transformers 5 renamed past_key_values to `cache` (the old name is deprecated).
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.keep_arg = next((a for a in ("logits_to_keep", "num_logits_to_keep") if a in params), None)
        # M-RoPE models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) expose get_rope_index on their inner model.
        self.rope_index = None
        for module in base.modules():
            fn = getattr(module, "get_rope_index", None)
            if callable(fn):
                self.rope_index = fn
                self._rope_params = set(inspect.signature(fn).parameters)
                break
        self.device = _model_device(base)
        self.dtype = getattr(base, "dtype", None)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.tokenizer.eos_token_id

    # -- inputs
    def encode(self, texts: list[str], images: list[list]) -> dict[str, torch.Tensor]:
        """Tokenise a batch, left-padded, on the model's device (floats in the model's dtype)."""
        kwargs: dict[str, Any] = {"text": texts, "return_tensors": "pt", "padding": True, "padding_side": "left"}
        if any(images):
            kwargs["images"] = images
        batch = self.processor(**kwargs)
        out = {}
        for k, v in batch.items():
            if hasattr(v, "to"):
                v = v.to(self.device)
                if v.is_floating_point() and self.dtype is not None:
                    v = v.to(self.dtype)
            out[k] = v
        return out

    def positions(self, inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(prompt position ids, next position per row).

        1-D RoPE: position = number of real tokens before, so left padding changes
        nothing. M-RoPE: the model's own ``get_rope_index`` (3, batch, len), which
        skips padding via the attention mask; the next text token of row b sits at
        ``max(position ids of b) + 1`` in all three components.
        """
        import torch

        mask = inputs["attention_mask"]
        text_pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        if self.rope_index is None:
            return text_pos, mask.long().sum(-1)
        if "image_grid_thw" in inputs or "video_grid_thw" in inputs:
            kwargs = {k: inputs[k] for k in ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")
                      if k in inputs and k in self._rope_params}
            mm = inputs.get("mm_token_type_ids")
            if mm is None:  # older processors: rebuild it (text 0, image 1, video 2)
                ids = inputs["input_ids"]
                mm = torch.zeros_like(ids)
                mm[ids == getattr(self.config, "image_token_id", -1)] = 1
                mm[ids == getattr(self.config, "video_token_id", -1)] = 2
            pos, _ = self.rope_index(input_ids=inputs["input_ids"], mm_token_type_ids=mm, attention_mask=mask, **kwargs)
        else:
            pos = text_pos.unsqueeze(0).expand(3, -1, -1)
        return pos, pos.amax(dim=(0, 2)) + 1

    def forward(self, inputs: Mapping[str, Any], *, position_ids, cache=None, use_cache: bool, last_only: bool,
                keep: int | None = None):
        """Logits (of the last position with ``last_only``, of the last ``keep`` positions
        with ``keep``, else of all) and the cache."""
        if last_only:
            keep = 1
        kwargs = {k: v for k, v in inputs.items() if k != "mm_token_type_ids" or self.rope_index is not None}
        kwargs["position_ids"] = position_ids
        kwargs["use_cache"] = use_cache
        if cache is not None:
            kwargs[self.cache_arg] = cache
        if keep and self.keep_arg:
            kwargs[self.keep_arg] = keep
        out = self.model(**kwargs)
        logits = out.logits[:, -keep:] if keep else out.logits
        # Reading the old name on a transformers 5 output logs a deprecation warning.
        return logits, getattr(out, self.cache_arg, None)


def _model_device(model: Any) -> torch.device:
    import torch

    try:
        return model.get_input_embeddings().weight.device
    except (AttributeError, NotImplementedError):
        return next(iter(model.parameters()), torch.empty(0)).device


def _select_cache_rows(cache: Any, rows: torch.Tensor) -> Any:
    """A new cache holding ``rows`` of ``cache`` (repeats allowed) and leaving ``cache`` untouched.

    A shallow copy of the cache and of each layer, then ``batch_select_indices``:
    advanced indexing allocates fresh key/value tensors for the copy, so the
    prompt cache can serve any number of continuations. (``copy.deepcopy`` would
    duplicate the whole batch first.)
    """
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    new.batch_select_indices(rows)
    return new


@contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------- batching


class _Batcher:
    """Batch size: fixed, or "auto" (CPU: CPU_BATCH_SIZE; CUDA: probe the first
    item's peak memory, size batches to the free memory, halve on out-of-memory)."""

    def __init__(self, spec: BatchSize, device: torch.device, n: int):
        if spec != "auto" and (isinstance(spec, bool) or not isinstance(spec, int) or spec < 1):
            raise ValueError(f"batch_size must be a positive int or 'auto', got {spec!r}")
        self.device = device
        self.cuda = device.type == "cuda"
        self.probe = spec == "auto" and self.cuda
        self.size = 1 if self.probe else (CPU_BATCH_SIZE if spec == "auto" else int(spec))
        self.size = max(1, min(self.size, n))
        self.rows: int | None = None  # cap on continuation rows per pass (set on OOM at size 1)
        self.spec = spec

    @contextmanager
    def measure(self) -> Iterator[None]:
        import torch

        if not self.probe:
            yield
            return
        dev = self.device
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        yield
        peak = max(torch.cuda.max_memory_allocated(dev) - before, 1)
        free, _ = torch.cuda.mem_get_info(dev)
        self.size = max(1, min(MAX_AUTO_BATCH_SIZE, int(_AUTO_MEMORY_FRACTION * free / peak)))
        self.probe = False
        logger.info("auto batch size: %d (%.0f MiB peak for one item, %.0f MiB free)", self.size, peak / 2**20, free / 2**20)

    def shrink(self, rows_in_batch: int) -> bool:
        """Halve after an out-of-memory error; False when nothing is left to halve."""
        self.probe = False
        if self.size > 1:
            self.size //= 2
        elif rows_in_batch > 1 and (self.rows is None or self.rows > 1):
            self.rows = max(1, (self.rows or rows_in_batch) // 2)
        else:
            return False
        logger.warning("out of memory: retrying with batch size %d%s", self.size,
                       f", {self.rows} continuation rows per pass" if self.rows else "")
        return True


def _run_batched(n: int, fn: Callable[[list[int], _Batcher], list], batcher: _Batcher, progress: bool, desc: str) -> list:
    import torch
    from tqdm.auto import tqdm

    results: list = [None] * n
    i = 0
    with tqdm(total=n, desc=desc, unit="item", disable=not progress, leave=False) as bar:
        while i < n:
            idx = list(range(i, min(n, i + batcher.size)))
            oom: BaseException | None = None
            try:
                with batcher.measure():
                    out = fn(idx, batcher)
            except torch.OutOfMemoryError as err:
                oom = err
            if oom is not None:
                rows = getattr(oom, "_judgetrain_rows", 1)
                oom = None  # drop the traceback's references to the batch's tensors before freeing
                if batcher.cuda:
                    torch.cuda.empty_cache()
                if not batcher.shrink(rows):
                    raise torch.OutOfMemoryError(
                        f"{desc}: out of memory with one item per batch (items {i}..). Use a smaller dtype "
                        "(bfloat16), fewer or smaller images (min_pixels/max_pixels), or a larger device.")
                continue
            for j, r in zip(idx, out, strict=True):
                results[j] = r
            i += len(idx)
            bar.update(len(idx))
    return results


# --------------------------------------------------------------------------- constrained scoring


def _choice_token_ids(tokenizer: Any, text: str, choices: list[str], where: str) -> list[list[int]]:
    """Token ids of each choice as it continues ``text``: tokenise text + choice and
    drop the tokens of text alone (checked to be a prefix, so the split is the one
    the tokenizer itself makes)."""
    return _choice_token_ids_many(tokenizer, [text], [choices], [where])[0]


def _choice_token_ids_many(tokenizer: Any, texts: list[str], choices: list[list[str]], wheres: list[str],
                           bases: list[list[int]] | None = None) -> list[list[list[int]]]:
    """:func:`_choice_token_ids` for many texts in two tokenizer calls (``bases``: the
    texts' own token ids, when already known)."""
    if bases is None:
        bases = tokenizer(texts, add_special_tokens=False)["input_ids"]
    flat = [t + c for t, cs in zip(texts, choices, strict=True) for c in cs]
    fulls = iter(tokenizer(flat, add_special_tokens=False)["input_ids"] if flat else [])
    out = []
    for base, cs, where in zip(bases, choices, wheres, strict=True):
        per_text = []
        for c in cs:
            ids = next(fulls)
            if not c:
                raise ValueError(f"{where}: an empty choice cannot be scored.")
            if ids[: len(base)] != base or len(ids) == len(base):
                raise ValueError(
                    f"{where}: the choice {c!r} merges with the end of the prompt when tokenised, so its "
                    "log-probability is not defined by the prompt's tokens. End the prompt (or the prefill) "
                    "at a token boundary, e.g. with a newline or a space, or drop the leading space from the choice.")
            per_text.append(ids[len(base):])
        out.append(per_text)
    return out


def _finish(choices: list[str], raw: list[float], ntok: list[int], reduction: str) -> ChoiceScores:
    scores = raw if reduction == "sum" else [r / n for r, n in zip(raw, ntok, strict=True)]
    top = max(scores)
    lse = top + math.log(sum(math.exp(s - top) for s in scores))
    best = scores.index(top)  # first maximum: ties go to the lowest index
    return ChoiceScores(logprobs=[s - lse for s in scores], raw_logprobs=list(raw), prediction=choices[best],
                        prediction_index=best, choices=list(choices), num_tokens=list(ntok))


def _score_batch(m: _Model, items: list[_Item], prefill: str | None, reduction: str, labels: list[str],
                 batcher: _Batcher) -> list[ChoiceScores]:
    import torch

    texts = [render_prompt(m.processor, it.prompt, prefill) for it in items]
    choice_ids = [_choice_token_ids(m.tokenizer, t, it.choices, lab) for t, it, lab in zip(texts, items, labels, strict=True)]
    inputs = m.encode(texts, [it.images for it in items])
    pos, nxt = m.positions(inputs)
    multi = any(len(ids) > 1 for per_item in choice_ids for ids in per_item)

    # One pass over the prompts; the last position's logits give every choice's first token.
    logits, cache = m.forward(inputs, position_ids=pos, use_cache=multi, last_only=True)
    last = logits[:, -1].float()
    owner = torch.tensor([b for b, per_item in enumerate(choice_ids) for _ in per_item], device=last.device)
    token = torch.tensor([ids[0] for per_item in choice_ids for ids in per_item], device=last.device)
    # Gather, then one transfer: no host sync per choice, no (batch, vocab) log-softmax copy.
    flat = (last[owner, token] - torch.logsumexp(last, dim=-1)[owner]).tolist()
    raw, k = [], 0
    for per_item in choice_ids:
        raw.append(flat[k:k + len(per_item)])
        k += len(per_item)

    if multi:
        # Every (item, choice) with more tokens continues from its own copy of the item's cache.
        rows = [(b, c) for b, per_item in enumerate(choice_ids) for c, ids in enumerate(per_item) if len(ids) > 1]
        cap = batcher.rows or len(rows)
        mask = inputs["attention_mask"]
        for start in range(0, len(rows), cap):
            chunk = rows[start:start + cap]
            try:
                _score_continuations(m, chunk, choice_ids, cache, mask, nxt, raw)
            except torch.OutOfMemoryError as err:
                err._judgetrain_rows = len(chunk)  # type: ignore[attr-defined]
                raise
    return [_finish(it.choices, r, [len(x) for x in ids], reduction)
            for it, r, ids in zip(items, raw, choice_ids, strict=True)]


def _score_continuations(m: _Model, chunk: list[tuple[int, int]], choice_ids: list[list[list[int]]], cache: Any,
                         prompt_mask: torch.Tensor, nxt: torch.Tensor, raw: list[list[float]]) -> None:
    """Add tokens 2..k of each (item, choice) in ``chunk`` to ``raw``, in one forward pass."""
    import torch

    dev = prompt_mask.device
    seqs = [choice_ids[b][c] for b, c in chunk]
    width = max(len(s) for s in seqs) - 1  # the last token is only ever a target
    inp = torch.full((len(chunk), width), m.pad_id, dtype=torch.long, device=dev)
    valid = torch.zeros((len(chunk), width), dtype=prompt_mask.dtype, device=dev)
    for r, s in enumerate(seqs):  # right-padded: real tokens never attend to the pads after them
        inp[r, : len(s) - 1] = torch.tensor(s[:-1], device=dev)
        valid[r, : len(s) - 1] = 1
    owner = torch.tensor([b for b, _ in chunk], device=dev)
    rows_cache = _select_cache_rows(cache, owner)
    attn = torch.cat([prompt_mask[owner], valid], dim=1)
    pos = nxt[owner].unsqueeze(1) + torch.arange(width, device=dev)
    if m.rope_index is not None:  # M-RoPE: text positions are equal in all three components
        pos = pos.unsqueeze(0).expand(3, -1, -1)
    logits, _ = m.forward({"input_ids": inp, "attention_mask": attn}, position_ids=pos, cache=rows_cache,
                          use_cache=True, last_only=False)
    del rows_cache  # the copied keys/values are the big allocation here
    logits = logits.float()
    # Input position k predicts choice token k + 1; pad targets are 0 and masked out.
    targets = torch.zeros_like(inp)
    for r, s in enumerate(seqs):
        targets[r, : len(s) - 1] = torch.tensor(s[1:], device=dev)
    token_lp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    sums = (token_lp * valid.to(token_lp.dtype)).sum(-1).tolist()
    for (b, c), add in zip(chunk, sums, strict=True):
        raw[b][c] += add


def score(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    items: Sequence[Item] | Iterable[Item],
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | _FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    reduction: Literal["sum", "mean"] = "sum",
    progress: bool = True,
) -> list[ChoiceScores]:
    """Score every member of each item's ``choices`` given its prompt; one :class:`ChoiceScores` per item, in input order.

    A choice's sequence log-probability is the SUM of the log-probabilities of its
    tokens (as the tokenizer splits prompt + choice) given the rendered prompt and
    the choice's earlier tokens; ``logprobs`` are these renormalised over the
    choices (a log-softmax). With ``reduction="mean"`` the renormalisation uses the
    per-token mean instead (length normalisation); ``raw_logprobs`` stay sums.

    Cost: when every choice of every item in a batch is one token, one forward
    pass over the batch's prompts (last-position logits only). Otherwise the
    prompts are encoded once with a KV cache and one more pass scores all the
    multi-token continuations of the batch against copies of it.

    Args:
        model, processor: as ``judgetrain.models.load_model_and_processor`` returns
            them (a ``peft.PeftModel`` works too). Switched to eval mode for the call
            and restored after.
        items: task records, or ``(prompt messages, images, choices)`` tuples.
        family: registry family; ``None`` detects it from the model's config.
        prefill: text appended after the generation prompt; ``FAMILY_PREFILL`` uses
            the family's ``think_prefill``; ``None`` appends nothing.
        batch_size: items per forward pass, or ``"auto"`` (see :class:`Scorer`).
        reduction: ``"sum"`` (default) or ``"mean"``, see above.
        progress: show a tqdm bar over items.

    Raises:
        ValueError: an item without choices (use :func:`generate`), an empty choice,
            or a choice whose tokens merge with the end of the prompt.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    m = _Model(model, processor, family)
    seq = _as_sequence(items)
    n = len(seq)
    pre = _resolve_prefill(prefill, m.family)

    def run(idx: list[int], batcher: _Batcher) -> list[ChoiceScores]:
        raw = [seq[i] for i in idx]
        batch = [_to_item(x, i) for x, i in zip(raw, idx, strict=True)]
        labels = [_describe(x, i) for x, i in zip(raw, idx, strict=True)]
        for it, lab in zip(batch, labels, strict=True):
            if not it.choices:
                raise ValueError(f"{lab} has no choices; constrained scoring needs a closed answer set. "
                                 "Use generate() for free-form tasks.")
        return _score_batch(m, batch, pre, reduction, labels, batcher)

    with _eval_mode(model):
        return _run_batched(n, run, _Batcher(batch_size, m.device, max(n, 1)), progress, "scoring")


# --------------------------------------------------------------------------- shared-prefix scoring


@dataclass(frozen=True)
class PrefixGroup:
    """Prompts that show the same images and differ only in the text after the last image,
    each with its own closed answer set: one video question under several option orderings.

    Attributes:
        images: the images every prompt shows, in order.
        prompts: one chat (list of messages) per variant, each showing ``images`` at the
            same places; they may differ only after the last image.
        choices: per variant, the closed answer set; a single list of strings applies to
            every variant.
    """

    images: list
    prompts: list
    choices: list

    def variant_choices(self) -> list[list[str]]:
        """The answer set of every variant, in ``prompts`` order."""
        if self.choices and all(isinstance(c, str) for c in self.choices):
            return [list(self.choices) for _ in self.prompts]
        return [list(c) for c in self.choices]


def _shared_split(m: _Model, texts: list[str], n_images: int, where: str) -> tuple[str, list[list[int]]]:
    """The longest text every rendering shares, cut at a token boundary after the last
    image, and each rendering's remaining token ids.

    The cut is the last newline of the shared text (so a shared question goes into the
    prefix), else just after the last image placeholder (a special token, hence a
    token boundary); it is kept only when the tokenizer splits prefix + rest exactly
    as it splits the whole text, so scoring the rest against the prefix's cache is the
    same computation as scoring the whole prompt.
    """
    tok = m.tokenizer
    image_token = getattr(m.processor, "image_token", None)
    shared = os.path.commonprefix(texts)[: min(len(t) for t in texts) - 1]  # every variant keeps >= 1 token
    image_end = 0
    if n_images:
        if not image_token or shared.count(image_token) != n_images:
            raise ValueError(f"{where}: the prompts must show all {n_images} images identically before they first "
                             "differ; put the images first and the text that varies after them.")
        image_end = shared.rindex(image_token) + len(image_token)
    candidates = [shared.rfind("\n") + 1, image_end]
    fulls = tok(texts, add_special_tokens=False)["input_ids"]
    for cut in dict.fromkeys(c for c in candidates if c >= max(image_end, 1)):
        prefix = shared[:cut]
        head, *rests = tok([prefix] + [t[cut:] for t in texts], add_special_tokens=False)["input_ids"]
        if all(head + rest == full and rest for rest, full in zip(rests, fulls, strict=True)):
            return prefix, rests
    raise ValueError(f"{where}: no token boundary after the last image is shared by every prompt; the prompts must "
                     "render identically up to (at least) the end of the last image.")


def _score_prefix_batch(m: _Model, groups: list[PrefixGroup], labels: list[str], prefill: str | None,
                        reduction: str, batcher: _Batcher) -> list[list[ChoiceScores]]:
    import torch

    prefixes, rests, choices, choice_ids = [], [], [], []
    # Groups of one batch often carry the same prompts (PhaseFusion's S phase grids of one
    # question): their text is rendered, split and tokenised once.
    done: dict[str, tuple[str, list[list[int]], list[list[str]], list[list[list[int]]]]] = {}
    for g, lab in zip(groups, labels, strict=True):
        per_variant = g.variant_choices()
        key = json.dumps([g.prompts, per_variant, len(g.images)], default=str)
        if key not in done:
            texts = [render_prompt(m.processor, p, prefill) for p in g.prompts]
            if not texts or len(per_variant) != len(texts) or not all(per_variant):
                raise ValueError(f"{lab}: needs at least one prompt and a non-empty answer set for every prompt "
                                 f"(got {len(texts)} prompt(s), {len(per_variant)} answer set(s)).")
            prefix, rest = _shared_split(m, texts, len(g.images), lab)
            # The cut is a pre-tokenizer boundary of every prompt (checked above), so a choice
            # continues the prompt's rest exactly as it continues the whole prompt.
            ids = _choice_token_ids_many(m.tokenizer, [t[len(prefix):] for t in texts], per_variant,
                                         [f"{lab}, prompt {v}" for v in range(len(texts))], rest)
            done[key] = (prefix, rest, per_variant, ids)
        prefix, rest, per_variant, ids = done[key]
        prefixes.append(prefix)
        rests.append(rest)
        choices.append(per_variant)
        choice_ids.append(ids)
    inputs = m.encode(prefixes, [list(g.images) for g in groups])
    pos, nxt = m.positions(inputs)
    _, cache = m.forward(inputs, position_ids=pos, use_cache=True, last_only=True)

    # A row continues one group's cache with one variant's rest; a variant whose choices
    # are all one token is one row (its last position scores every choice), otherwise
    # each choice gets a row that also holds the choice's tokens but the last.
    rows: list[tuple[int, int, int | None, list[int], int]] = []
    for b, per_variant in enumerate(choice_ids):
        for v, ids in enumerate(per_variant):
            if all(len(c) == 1 for c in ids):
                rows.append((b, v, None, rests[b][v], 1))
            else:
                rows.extend((b, v, c, rests[b][v] + cid[:-1], len(cid)) for c, cid in enumerate(ids))
    raw = [[[0.0] * len(c) for c in per_variant] for per_variant in choices]
    cap = batcher.rows or len(rows)
    for start in range(0, len(rows), cap):
        chunk = rows[start:start + cap]
        try:
            _score_rest_rows(m, chunk, choice_ids, cache, inputs["attention_mask"], nxt, raw)
        except torch.OutOfMemoryError as err:
            err._judgetrain_rows = len(chunk)  # type: ignore[attr-defined]
            raise
    return [[_finish(c, r, [len(x) for x in ids], reduction) for c, r, ids in zip(cs, rs, idss, strict=True)]
            for cs, rs, idss in zip(choices, raw, choice_ids, strict=True)]


def _score_rest_rows(m: _Model, chunk: list[tuple[int, int, int | None, list[int], int]],
                     choice_ids: list[list[list[list[int]]]], cache: Any, prompt_mask: torch.Tensor,
                     nxt: torch.Tensor, raw: list[list[list[float]]]) -> None:
    """Score the rows of ``chunk`` against copies of their group's cache in one forward pass
    and add each choice's log-probability to ``raw[group][variant][choice]``."""
    import torch

    dev = prompt_mask.device
    width = max(len(r[3]) for r in chunk)
    keep = max(r[4] for r in chunk)
    inp = torch.full((len(chunk), width), m.pad_id, dtype=torch.long, device=dev)
    valid = torch.zeros((len(chunk), width), dtype=prompt_mask.dtype, device=dev)
    for r, (_, _, _, tokens, _) in enumerate(chunk):
        # Right-aligned (pads between the cached prefix and the rest, masked out), so the
        # positions to score are the last `keep` of every row and logits stay (rows, keep, vocab).
        inp[r, width - len(tokens):] = torch.tensor(tokens, device=dev)
        valid[r, width - len(tokens):] = 1
    owner = torch.tensor([r[0] for r in chunk], device=dev)
    rows_cache = _select_cache_rows(cache, owner)
    attn = torch.cat([prompt_mask[owner], valid], dim=1)
    pos = nxt[owner].unsqueeze(1) + (valid.long().cumsum(-1) - 1).clamp(min=0)
    if m.rope_index is not None:  # M-RoPE: text positions are equal in all three components
        pos = pos.unsqueeze(0).expand(3, -1, -1)
    logits, _ = m.forward({"input_ids": inp, "attention_mask": attn}, position_ids=pos, cache=rows_cache,
                          use_cache=True, last_only=False, keep=keep)
    del rows_cache  # the copied keys/values are the big allocation here
    logits = logits[:, -keep:].float()
    # (row, position, token) of every scored choice token; one gather, one transfer.
    at_row, at_pos, at_tok, slot = [], [], [], []
    for r, (b, v, c, _, n) in enumerate(chunk):
        targets = [(cid[0], k) for k, cid in enumerate(choice_ids[b][v])] if c is None else \
            [(t, c) for t in choice_ids[b][v][c]]
        for j, (t, k) in enumerate(targets):
            at_row.append(r)
            at_pos.append(keep - 1 if c is None else keep - n + j)
            at_tok.append(t)
            slot.append((b, v, k))
    rr, pp = torch.tensor(at_row, device=dev), torch.tensor(at_pos, device=dev)
    vals = (logits[rr, pp, torch.tensor(at_tok, device=dev)] - torch.logsumexp(logits, dim=-1)[rr, pp]).tolist()
    for (b, v, k), x in zip(slot, vals, strict=True):
        raw[b][v][k] += x


def score_shared_prefix(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    groups: Sequence[PrefixGroup] | Iterable[PrefixGroup],
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | _FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    reduction: Literal["sum", "mean"] = "sum",
    progress: bool = True,
) -> list[list[ChoiceScores]]:
    """Score many prompts that share their images: per :class:`PrefixGroup`, one
    :class:`ChoiceScores` per prompt, in input order (a list per group).

    The same numbers as :func:`score` on every prompt as its own item (up to float
    rounding), at a fraction of the cost: each group's images and the text every
    prompt shares (chat template, images, the shared question…) are encoded once, with
    a KV cache, and every prompt's remaining text (options, generation prompt, prefill)
    and its choices are scored against a copy of that cache, all rows of a batch in one
    more forward pass. Right-aligned rows with explicit positions (M-RoPE continues
    from the prefix's largest position) make that pass equal to the full prompt.

    Args:
        groups: :class:`PrefixGroup` s; prompts of one group must render identically up
            to the end of their last image.
        batch_size: groups per prefix pass (their prompts share the second pass), or
            ``"auto"`` (see :class:`Scorer`).
        family, prefill, reduction, progress: as in :func:`score`.

    Raises:
        ValueError: prompts that differ before their last image, an empty answer set, or a
            choice whose tokens merge with the end of its prompt.
    """
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    m = _Model(model, processor, family)
    seq = _as_sequence(groups)
    n = len(seq)
    pre = _resolve_prefill(prefill, m.family)

    def run(idx: list[int], batcher: _Batcher) -> list[list[ChoiceScores]]:
        batch = [seq[i] for i in idx]
        for g, i in zip(batch, idx, strict=True):
            if not isinstance(g, PrefixGroup):
                raise TypeError(f"group {i} is a {type(g).__name__}; score_shared_prefix takes PrefixGroup objects.")
        return _score_prefix_batch(m, batch, [f"group {i}" for i in idx], pre, reduction, batcher)

    with _eval_mode(model):
        return _run_batched(n, run, _Batcher(batch_size, m.device, max(n, 1)), progress, "scoring")


# --------------------------------------------------------------------------- generation


def generate(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    items: Sequence[Item] | Iterable[Item],
    max_new_tokens: int = 64,
    parser: Callable[[str], str | None] | None = None,
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | _FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    progress: bool = True,
) -> GenerationOutput:
    """Greedy generation (``do_sample=False``, one beam), batched with left padding, then parsing.

    Args:
        items: task records, or ``(prompt messages, images[, choices])`` tuples.
        max_new_tokens: generation budget per item.
        parser: maps the generated text to a canonical answer or ``None``
            (:func:`yes_no`, :func:`frame_pair`, ...). ``None``: each record's own
            parser, :func:`parser_for_record` (tuples then need an explicit parser).
        prefill, family, batch_size, progress: as in :func:`score`. The prefill is
            part of the prompt; the returned text is what comes after it.

    Returns:
        A :class:`GenerationOutput`: per item, in input order, the text, the parsed
        answer and whether it was valid; ``n_invalid`` counts the unparseable ones.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    m = _Model(model, processor, family)
    seq = _as_sequence(items)
    n = len(seq)
    pre = _resolve_prefill(prefill, m.family)
    config = _greedy_config(model, m, max_new_tokens)
    eos = config.eos_token_id
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    def run(idx: list[int], batcher: _Batcher) -> list[Generation]:
        raw = [seq[i] for i in idx]
        batch = [_to_item(x, i) for x, i in zip(raw, idx, strict=True)]
        parsers = []
        for x, it, i in zip(raw, batch, idx, strict=True):
            if parser is not None:
                parsers.append(parser)
            elif it.record is not None:
                parsers.append(parser_for_record(it.record))
            else:
                raise ValueError(f"{_describe(x, i)} is a tuple, so no parser can be chosen from its task; pass parser=.")
        texts = [render_prompt(m.processor, it.prompt, pre) for it in batch]
        inputs = m.encode(texts, [it.images for it in batch])
        if m.rope_index is None:
            inputs.pop("mm_token_type_ids", None)
        out = model.generate(**inputs, generation_config=config)
        new = out[:, inputs["input_ids"].shape[1]:].tolist()
        results = []
        for tokens, parse in zip(new, parsers, strict=True):
            stop = next((k for k, t in enumerate(tokens) if t in eos_ids), None)
            kept = tokens if stop is None else tokens[:stop]
            text = m.tokenizer.decode(kept, skip_special_tokens=True).strip()
            answer = parse(text)
            results.append(Generation(text=text, answer=answer, valid=answer is not None,
                                      num_tokens=len(tokens) if stop is None else stop + 1, truncated=stop is None))
        return results

    with _eval_mode(model):
        gens = _run_batched(n, run, _Batcher(batch_size, m.device, max(n, 1)), progress, "generating")
    output = GenerationOutput(gens)
    if output.n_invalid:
        logger.warning("%d of %d generations had no parseable answer; they are recorded as invalid.", output.n_invalid, n)
    return output


def _greedy_config(model: Any, m: _Model, max_new_tokens: int) -> Any:
    from transformers import GenerationConfig

    base = getattr(model, "generation_config", None) or GenerationConfig()
    config = copy.deepcopy(base)
    config.do_sample = False
    config.num_beams = 1
    config.max_new_tokens = max_new_tokens
    config.max_length = None
    # Plain greedy: the argmax continuation of the model's own distribution. A
    # checkpoint's sampling settings (Qwen ships temperature 0.7, top_p 0.8, top_k 20)
    # are set to their neutral values rather than None, because generate() refills
    # None from model.generation_config and then warns on every call; its
    # repetition penalty (1.05 for Qwen2.5-VL) would change greedy answers, so it goes too.
    neutral = {"temperature": 1.0, "top_p": 1.0, "top_k": 50, "typical_p": 1.0, "min_p": None,
               "repetition_penalty": 1.0, "no_repeat_ngram_size": 0}
    for name, value in neutral.items():
        if hasattr(config, name):
            setattr(config, name, value)
    if config.pad_token_id is None:
        config.pad_token_id = m.pad_id
    if config.eos_token_id is None:
        config.eos_token_id = m.tokenizer.eos_token_id
    return config


# --------------------------------------------------------------------------- answer parsers


@dataclass(frozen=True)
class Parser:
    """A named answer parser: ``parser(text)`` is the canonical answer string, or
    ``None`` when the text holds no well-formed answer (never a guess)."""

    name: str
    fn: Callable[[str], str | None] = field(repr=False, compare=False)

    def __call__(self, text: str) -> str | None:
        if not isinstance(text, str):
            return None
        return self.fn(text)


# "Answer: yes", "The answer is 3", "Final answer: 3 and 4", "Rating: 4": the text after the last cue is the answer.
_CUE = re.compile(r"(?i)\b(?:final\s+answer|answer|rating|score)\s*(?:is\b|:)\s*:?")
_WRAP = " \t\r\n*_`\"'“”‘’"
_SENTENCE = r"(?:[\n!?;:]|\.\s)"


def _answer_span(text: str) -> str:
    text = text.strip()
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text:
        return ""  # a reasoning block that never closed holds no answer
    cues = list(_CUE.finditer(text))
    if cues:
        text = text[cues[-1].end():]
    return text.strip()


def _clean(s: str) -> str:
    prev = None
    while prev != s:
        prev = s
        s = s.strip(_WRAP).rstrip(".!?")
    return s


def _parse_with(text: str, match: Callable[[str], str | None], sentence: str = _SENTENCE) -> str | None:
    """Try the whole answer span, then its first sentence; ``match`` full-matches a cleaned candidate."""
    span = _answer_span(text)
    for candidate in (span, re.split(sentence, span, maxsplit=1)[0]):
        cand = _clean(candidate)
        if cand:
            got = match(cand)
            if got is not None:
                return got
    return None


_YES_NO = re.compile(r"(?i)(yes|no)")


def yes_no() -> Parser:
    """``"yes"`` / ``"no"``: "Yes", "no.", "Yes, the frames ...", "Answer: no"; "maybe", "yes or no" -> None."""

    def match(c: str) -> str | None:
        m = _YES_NO.fullmatch(c)
        return m.group(1).lower() if m else None

    return Parser("yes_no", lambda t: _parse_with(t, match, r"(?:[\n!?;:,]|\.\s)"))


_LETTER = re.compile(r"(?i)(?:(?:option|sequence|choice|answer)\s*)?[(\[]?\s*([a-z])\s*[)\]]?")


def choice_letter(letters: str | Sequence[str] = "AB") -> Parser:
    """One of ``letters`` (upper case): "A", "B.", "(A)", "Sequence B", "Option A, because ...".
    A lower-case letter counts only on its own ("a")."""
    allowed = {str(x).upper() for x in letters}
    if not allowed or any(len(x) != 1 or not x.isalpha() for x in allowed):
        raise ValueError(f"choice_letter needs single letters, got {letters!r}")

    def match(c: str) -> str | None:
        m = _LETTER.fullmatch(c)
        if not m:
            return None
        letter = m.group(1)
        if letter.upper() not in allowed or (letter.islower() and c.strip("()[] ") != letter):
            return None
        return letter.upper()

    return Parser(f"choice_letter({''.join(sorted(allowed))})", lambda t: _parse_with(t, match, r"(?:[\n!?;:,]|\.\s)"))


_INTEGER = re.compile(r"(?i)(?:(?:frame|image|picture|number|no\.?)\s*#?\s*)?(\d{1,6})")


def integer_in_range(lo: int, hi: int) -> Parser:
    """An integer in ``lo..hi`` (inclusive) as its decimal string: "3", "Frame 3.", "03";
    out of range, "3 and 4", "3, 4" -> None."""
    if lo > hi:
        raise ValueError(f"integer_in_range: lo ({lo}) > hi ({hi})")

    def match(c: str) -> str | None:
        m = _INTEGER.fullmatch(c)
        if not m:
            return None
        v = int(m.group(1))
        return str(v) if lo <= v <= hi else None

    return Parser(f"integer_in_range({lo},{hi})", lambda t: _parse_with(t, match))


def likert_1_5() -> Parser:
    """A 1..5 rating: "4", "4.", "Rating: 4" -> "4"; "6", "four" -> None."""
    inner = integer_in_range(1, 5)
    return Parser("likert_1_5", inner.fn)


_PAIR = re.compile(
    r"(?i)(?:(?:frames?|images?|pictures?)\s*)?[(\[]?\s*(\d{1,6})\s*(?:,|and|&)\s*(?:(?:frame|image|picture)\s*)?(\d{1,6})\s*[)\]]?")


def frame_pair(lo: int = 1, hi: int = 10**6, *, ordered: bool = False) -> Parser:
    """Two distinct frame numbers in ``lo..hi`` as ``"i and j"``: "3 and 4", "3, 4",
    "frames 3 and 4", "(3, 4)". Unordered (default): "4 and 3" -> "3 and 4". Out of
    range or equal numbers -> None."""

    def match(c: str) -> str | None:
        m = _PAIR.fullmatch(c)
        if not m:
            return None
        a, b = int(m.group(1)), int(m.group(2))
        if a == b or not (lo <= a <= hi and lo <= b <= hi):
            return None
        if not ordered:
            a, b = min(a, b), max(a, b)
        return f"{a} and {b}"

    return Parser(f"frame_pair({lo},{hi}{',ordered' if ordered else ''})", lambda t: _parse_with(t, match))


_ORDER = re.compile(r"(?i)(?:(?:order|ordering|sequence)\s*:?\s*)?[(\[]?\s*(\d{1,6}(?:\s*(?:,|>|->|→|\s)\s*\d{1,6})*)\s*[)\]]?")


def ordering(n: int) -> Parser:
    """A permutation of 1..n as ``"3, 1, 2, 4"``: separators ",", whitespace, ">", "->";
    a repeated, missing or out-of-range number -> None."""
    if n < 1:
        raise ValueError(f"ordering needs n >= 1, got {n}")

    def match(c: str) -> str | None:
        m = _ORDER.fullmatch(c)
        if not m:
            return None
        values = [int(v) for v in re.findall(r"\d+", m.group(1))]
        if sorted(values) != list(range(1, n + 1)):
            return None
        return ", ".join(map(str, values))

    return Parser(f"ordering({n})", lambda t: _parse_with(t, match))


def one_of(choices: Sequence[str]) -> Parser:
    """Exactly one of ``choices`` (case-insensitive, surrounding punctuation ignored), returned as given."""
    table = {c.strip().lower(): c for c in choices}

    def match(c: str) -> str | None:
        return table.get(c.lower())

    return Parser(f"one_of({len(table)})", lambda t: _parse_with(t, match))


def parser_for_record(record: Mapping[str, Any]) -> Parser:
    """The parser for a task record's answer format, from its ``task``, ``choices`` and
    ``n_frames``. For closed tasks an answer outside ``choices`` is also invalid."""
    task = record.get("task")
    choices = list(record.get("choices") or [])
    n = int(record.get("n_frames") or 0)
    lowered = {c.lower() for c in choices}
    if task == "ordering":
        return ordering(n)
    if task in ("temporal_detect", "frame_detect") and lowered == {"yes", "no"}:
        inner = yes_no()
    elif task == "frame_localize" and n:
        inner = integer_in_range(1, n)
    elif task == "temporal_localize" and n:
        inner = frame_pair(1, n)
    elif task == "pairwise" and choices and all(len(c) == 1 and c.isalpha() for c in choices):
        inner = choice_letter(choices)
    elif task == "pointwise" and choices and all(c.isdigit() for c in choices):
        values = sorted(int(c) for c in choices)
        inner = likert_1_5() if values == [1, 2, 3, 4, 5] else integer_in_range(values[0], values[-1])
    elif choices:
        inner = one_of(choices)
    else:
        raise ValueError(f"no answer parser for task {task!r} without choices; pass parser= to generate().")
    if not choices:
        return inner
    allowed = set(choices)
    return Parser(inner.name, lambda t: (a if (a := inner(t)) in allowed else None))


# --------------------------------------------------------------------------- Scorer


_PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


class Scorer:
    """A loaded model ready to score and generate: holds (model, processor, family,
    batch size, device, dtype, prefill) so callers pass only items.

    ``batch_size="auto"``: on CUDA the first batch holds one item, its peak memory
    sets the batch size from ``torch.cuda.mem_get_info`` (80% of free memory, at
    most ``MAX_AUTO_BATCH_SIZE``), and an out-of-memory error halves it and retries
    the batch; on CPU it is ``CPU_BATCH_SIZE``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        processor: ProcessorMixin,
        family: ModelFamily | str | None = None,
        *,
        batch_size: BatchSize = "auto",
        prefill: str | None | _FamilyPrefill = FAMILY_PREFILL,
        progress: bool = True,
    ):
        self.model = model
        self.processor = processor
        self._m = _Model(model, processor, family)
        self.family = self._m.family
        self.device = self._m.device
        self.dtype = self._m.dtype
        self.batch_size = batch_size
        _Batcher(batch_size, self.device, 1)  # validate now, not on the first call
        self.prefill = _resolve_prefill(prefill, self.family)
        self.progress = progress
        model.eval()

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | os.PathLike[str],
        adapter: str | os.PathLike[str] | None = None,
        *,
        dtype: str | torch.dtype | None = None,
        device: str | torch.device | None = None,
        batch_size: BatchSize = "auto",
        family: ModelFamily | str | None = None,
        merge_adapter: bool = False,
        prefill: str | None | _FamilyPrefill = FAMILY_PREFILL,
        progress: bool = True,
        **load_kwargs: Any,
    ) -> Scorer:
        """Load a base checkpoint, a base + PEFT adapter, or a merged folder.

        Args:
            model_name_or_path: a model folder or hub id (base or merged). An adapter
                folder (``adapter_config.json`` and no ``config.json``) is accepted
                too: its base comes from ``base_model_name_or_path``.
            adapter: a PEFT adapter folder, loaded with ``PeftModel.from_pretrained``
                onto the base. The processor comes from the adapter folder when it
                holds one (``processor_config.json`` / ``preprocessor_config.json``),
                else from the base.
            dtype: ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"auto"`` (the
                checkpoint's) or a torch dtype; ``None``: float32 on CPU, the
                checkpoint's dtype on an accelerator.
            device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None``: CUDA when available.
            merge_adapter: fold the adapter into the base weights after loading
                (faster inference, same scores up to float rounding).
            **load_kwargs: forwarded to ``load_model_and_processor`` (e.g.
                ``attn_implementation``, ``min_pixels``, ``local_files_only``).
        """
        import torch

        from .models.registry import load_model_and_processor

        path = Path(os.fspath(model_name_or_path)).expanduser()
        if adapter is None and (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
            adapter = path
            base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
            if not base:
                raise ValueError(f"{path / 'adapter_config.json'} names no base_model_name_or_path; pass the base "
                                 "model as model_name_or_path and this folder as adapter=.")
            model_name_or_path = base
        dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = "float32" if dev.type == "cpu" else "auto"
        if dev.type != "cpu":
            load_kwargs.setdefault("device_map", str(dev))
        model, processor = load_model_and_processor(model_name_or_path, family=family, dtype=dtype, **load_kwargs)
        if adapter is not None:
            from peft import PeftModel

            adapter_dir = Path(os.fspath(adapter)).expanduser()
            if not (adapter_dir / "adapter_config.json").is_file():
                raise FileNotFoundError(f"{adapter_dir} holds no adapter_config.json, so it is not a PEFT adapter "
                                        "folder. Pass the folder the trainer saved the adapter to (or a merged model "
                                        "folder as model_name_or_path, without adapter=).")
            model = PeftModel.from_pretrained(model, str(adapter_dir), is_trainable=False)
            if merge_adapter:
                model = model.merge_and_unload()
            if any((adapter_dir / f).is_file() for f in _PROCESSOR_FILES):
                from transformers import AutoProcessor

                processor = AutoProcessor.from_pretrained(str(adapter_dir))
        model.to(dev)
        return cls(model, processor, family, batch_size=batch_size, prefill=prefill, progress=progress)

    def render(self, prompt: Sequence[Mapping[str, Any]]) -> str:
        """The exact text scored or generated from: chat template, generation prompt, prefill."""
        return render_prompt(self.processor, prompt, self.prefill)

    def score(self, items: Sequence[Item] | Iterable[Item], *, reduction: Literal["sum", "mean"] = "sum",
              progress: bool | None = None) -> list[ChoiceScores]:
        """:func:`score` with this scorer's model, family, prefill and batch size."""
        return score(self.model, self.processor, items, family=self.family, prefill=self.prefill,
                     batch_size=self.batch_size, reduction=reduction,
                     progress=self.progress if progress is None else progress)

    def score_shared_prefix(self, groups: Sequence[PrefixGroup] | Iterable[PrefixGroup], *,
                            reduction: Literal["sum", "mean"] = "sum", progress: bool | None = None) -> list[list[ChoiceScores]]:
        """:func:`score_shared_prefix` with this scorer's model, family, prefill and batch size."""
        return score_shared_prefix(self.model, self.processor, groups, family=self.family, prefill=self.prefill,
                                   batch_size=self.batch_size, reduction=reduction,
                                   progress=self.progress if progress is None else progress)

    def generate(self, items: Sequence[Item] | Iterable[Item], max_new_tokens: int = 64,
                 parser: Callable[[str], str | None] | None = None, *, progress: bool | None = None) -> GenerationOutput:
        """:func:`generate` with this scorer's model, family, prefill and batch size."""
        return generate(self.model, self.processor, items, max_new_tokens, parser, family=self.family,
                        prefill=self.prefill, batch_size=self.batch_size,
                        progress=self.progress if progress is None else progress)
