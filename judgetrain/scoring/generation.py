"""Greedy free-text generation, :func:`generate`, batched with left padding; each
text is read by an answer parser (:mod:`judgetrain.scoring.parsers`), and an answer
a parser cannot read is recorded as invalid and counted, never mapped to a guess.
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..models.registry import ModelFamily
from .batching import Batcher, BatchSize, run_batched
from .lengths import item_order
from .model import ScoringModel, eval_mode
from .parsers import parser_for_record
from .prompts import (
    FAMILY_PREFILL,
    FamilyPrefill,
    Item,
    NormalizedItem,
    as_sequence,
    describe_item,
    render_prompt,
    resolve_prefill,
    to_item,
)
from .results import Generation, GenerationOutput

if TYPE_CHECKING:
    from transformers import GenerationMixin, PreTrainedModel, ProcessorMixin

__all__ = ["generate"]

logger = logging.getLogger(__name__)


def generate(
    model: PreTrainedModel,
    processor: ProcessorMixin,
    items: Sequence[Item] | Iterable[Item],
    max_new_tokens: int = 64,
    parser: Callable[[str], str | None] | None = None,
    *,
    family: ModelFamily | str | None = None,
    prefill: str | None | FamilyPrefill = FAMILY_PREFILL,
    batch_size: BatchSize = "auto",
    progress: bool = True,
    sort_by_length: bool = True,
) -> GenerationOutput:
    """Greedy generation (``do_sample=False``, one beam), batched with left padding, then parsing.

    Args:
        items: task records, or ``(prompt messages, images[, choices])`` tuples.
        max_new_tokens: generation budget per item.
        parser: maps the generated text to a canonical answer or ``None``
            (:func:`yes_no`, :func:`frame_pair`, ...). ``None``: each record's own
            parser, :func:`parser_for_record` (tuples then need an explicit parser).
        prefill, family, batch_size, progress, sort_by_length: as in :func:`score`. The prefill is
            part of the prompt; the returned text is what comes after it.

    Returns:
        A :class:`GenerationOutput`: per item, in input order, the text, the parsed
        answer and whether it was valid; ``n_invalid`` counts the unparseable ones.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    m = ScoringModel(model, processor, family)
    seq = as_sequence(items)
    n = len(seq)
    pre = resolve_prefill(prefill, m.family, m.processor)
    config = _greedy_config(model, m, max_new_tokens)
    eos = config.eos_token_id
    eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}

    def run(idx: list[int], batcher: Batcher) -> list[Generation]:
        raw = [seq[i] for i in idx]
        batch = [to_item(x, i) for x, i in zip(raw, idx, strict=True)]
        parsers = _parsers(raw, batch, idx, parser)
        texts = [render_prompt(m.processor, it.prompt, pre) for it in batch]
        inputs = m.encode(texts, [it.images for it in batch])
        if not m.keeps_token_types():
            inputs.pop("mm_token_type_ids", None)
        # PreTrainedModel has no generate() in transformers 5 (each generating class mixes in
        # GenerationMixin, and a PeftModel forwards it): a model given here generates
        out = cast("GenerationMixin", model).generate(**inputs, generation_config=config)
        new = out[:, inputs["input_ids"].shape[1] :].tolist()
        return [_generation(tokens, eos_ids, m.tokenizer, parse) for tokens, parse in zip(new, parsers, strict=True)]

    order = item_order(m.processor, seq, pre) if sort_by_length else None
    with eval_mode(model):
        gens = run_batched(n, run, Batcher(batch_size, m.device, max(n, 1)), progress, "generating", order)
    output = GenerationOutput(gens)
    if output.n_invalid:
        logger.warning("%d of %d generations had no parseable answer; they are recorded as invalid.", output.n_invalid, n)
    return output


def _parsers(
    raw: Sequence[Any], batch: Sequence[NormalizedItem], idx: Sequence[int], parser: Callable[[str], str | None] | None
) -> list[Callable[[str], str | None]]:
    """One answer parser per item of a batch: ``parser`` when given, else the item's record's own
    (:func:`parser_for_record`). ``raw``: the items as given, ``batch``: the same normalized,
    ``idx``: their positions in the input (for the message). ``ValueError`` for a tuple item
    without ``parser``: it has no task to choose a parser from."""
    parsers = []
    for x, it, i in zip(raw, batch, idx, strict=True):
        if parser is not None:
            parsers.append(parser)
        elif it.record is not None:
            parsers.append(parser_for_record(it.record))
        else:
            raise ValueError(f"{describe_item(x, i)} is a tuple, so no parser can be chosen from its task; pass parser=.")
    return parsers


def _generation(tokens: list[int], eos_ids: set[int], tokenizer: Any, parse: Callable[[str], str | None]) -> Generation:
    """One item's :class:`Generation` from its generated ``tokens`` (the prompt cut off): the text
    up to the first of ``eos_ids`` (excluded), decoded without special tokens and stripped, its
    parsed answer; ``num_tokens`` counts the stop token, ``truncated`` when none came."""
    stop = next((k for k, t in enumerate(tokens) if t in eos_ids), None)
    kept = tokens if stop is None else tokens[:stop]
    text = tokenizer.decode(kept, skip_special_tokens=True).strip()
    answer = parse(text)
    return Generation(
        text=text,
        answer=answer,
        valid=answer is not None,
        num_tokens=len(tokens) if stop is None else stop + 1,
        truncated=stop is None,
    )


def _greedy_config(model: Any, m: ScoringModel, max_new_tokens: int) -> Any:
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
    neutral = {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 50,
        "typical_p": 1.0,
        "min_p": None,
        "repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0,
    }
    for name, value in neutral.items():
        if hasattr(config, name):
            setattr(config, name, value)
    if config.pad_token_id is None:
        config.pad_token_id = m.pad_id
    if config.eos_token_id is None:
        config.eos_token_id = m.tokenizer.eos_token_id
    return config
