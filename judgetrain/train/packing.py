"""Padding-free packing of image–text records: several prompt–completion
records share one row of at most ``max_length`` tokens, with no padding
between them and no attention across them.

TRL packs text only (``SFTTrainer`` refuses ``packing`` for image data); this
module does it for judgetrain's records, on the same code path as TRL's own
vision collator:

- :func:`pack_bins` places records (lengths with images expanded) into rows
  by best-fit decreasing, so the number of rows, and of optimizer steps per
  epoch, is known before training starts;
- :func:`packed_rows` is the training set seen by the Trainer: item ``i``
  names the records of row ``i``;
- :class:`PackingCollator` runs TRL's ``DataCollatorForVisionLanguageModeling``
  (:func:`judgetrain.compat.trl.vision_collator`) on the records of a micro-batch (so text, images, labels and completion
  masks are exactly TRL's) and lays each row's records end to end. Positions
  restart at every record: plain ``0..L-1`` for 1-D RoPE, and for multimodal
  RoPE (Qwen-VL) the model's own ``get_rope_index`` per record with a text row
  in front, the ``(4, rows, length)`` form the Qwen-VL text models accept.
  No attention mask is passed: transformers then derives the block-diagonal
  causal mask from the restarts (``masking_utils.find_packed_sequence_indices``),
  for ``sdpa``/``eager``/``flex_attention``, and ``flash_attention_2`` reads
  ``cu_seqlens`` from the same positions.

The first token of every record has label -100: it is never predicted from the
record before it. Images keep their order, so each row's image tokens meet
their own features.

TRL's ``padding_free: true`` (which ``SFTTrainer`` refuses for image data too) is the
same layout without the bins: :func:`prepare_padding_free` hands the Trainer one item per
record (``packed_rows`` of ``[[0], [1], …]``), so its sampler, micro-batches, steps and
gradient accumulation are those of the unpacked run, and a :class:`PackingCollator` with
``one_row`` lays each micro-batch's records end to end in a single row, with no padding.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import bisect
import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BATCH_TOLERANCE",
    "PACKABLE_FAMILIES",
    "REAL_TOKENS_KEY",
    "PackedData",
    "PaddingFreeData",
    "packed_rows",
    "PackingCollator",
    "family_packing_problem",
    "lays_out_padding_free",
    "packed_batch",
    "pack_bins",
    "packing_problems",
    "padding_free_problems",
    "prepare_packing",
    "prepare_padding_free",
]

# Families whose packed rows are checked equal, in loss, gradients and logits, to their records
# run alone (tests/train/test_packing.py); a family joins only with that test.
PACKABLE_FAMILIES = ("qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "gemma-4")
PACKABLE_ATTENTION = (None, "sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")
IGNORE_INDEX = -100
# the batch key holding a packed batch's real (non-padding) token count, for the logged num_tokens
# (judgetrain.train.trainer takes it out before the forward)
REAL_TOKENS_KEY = "num_real_tokens"


def pack_bins(lengths: Sequence[int], max_length: int) -> list[list[int]]:
    """Best-fit decreasing: record indices grouped into rows of at most ``max_length``
    tokens. Longest records are placed first, each into the open row it fills most
    tightly (ties: the row opened first), else a new row. Deterministic; each row's
    indices ascend. Raises ValueError for a record longer than ``max_length``."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (room left, row number), kept sorted
    for i in order:
        n = int(lengths[i])
        if n > max_length:
            raise ValueError(f"record {i} has {n} tokens, more than max_length={max_length}")
        at = bisect.bisect_left(free, (n, -1))
        if at == len(free):
            rows.append([i])
            bisect.insort(free, (max_length - n, len(rows) - 1))
            continue
        room, row = free.pop(at)
        rows[row].append(i)
        bisect.insort(free, (room - n, row))
    return [sorted(r) for r in rows]


def packing_problems(model_args, data_args, training_args) -> list[str]:
    """Why a recipe with ``packing: true`` cannot pack, one message per problem naming
    the field and the fix; [] when it can (the family is checked once loaded)."""
    if not getattr(training_args, "packing", False):
        return []
    problems = []
    if training_args.packing_strategy != "bfd":
        problems.append(
            f"packing_strategy: {training_args.packing_strategy!r} splits records across rows, which would cut image "
            "tokens from their images; image records pack whole with `packing_strategy: bfd`"
        )
    if model_args.attn_implementation not in PACKABLE_ATTENTION:
        problems.append(
            f"packing: attn_implementation={model_args.attn_implementation!r} cannot keep packed records apart; use "
            "sdpa, eager, flex_attention or flash_attention_2, or set `packing: false`"
        )
    if training_args.max_length is None:
        problems.append("packing: needs max_length, the length of a packed row in tokens; set `max_length:`")
    if not data_args.check_lengths:
        problems.append("packing: needs every record's length in tokens; set `check_lengths: true`")
    return problems


def lays_out_padding_free(training_args) -> bool:
    """Whether the run lays each micro-batch's records out in one row itself: ``padding_free:
    true`` on an SFT recipe that does not pack (packed rows are padding-free already)."""
    return (
        bool(getattr(training_args, "padding_free", False))
        and not getattr(training_args, "packing", False)
        and getattr(training_args, "method", "sft") == "sft"
    )


def padding_free_problems(model_args, training_args) -> list[str]:
    """Why a recipe with ``padding_free: true`` (and no packing, whose own checks then apply)
    cannot lay its micro-batches out in one row, naming the field and the fix; [] when it can
    (the family is checked once loaded)."""
    if not lays_out_padding_free(training_args) or model_args.attn_implementation in PACKABLE_ATTENTION:
        return []
    return [
        f"padding_free: attn_implementation={model_args.attn_implementation!r} cannot keep the records of a padding-free "
        "row apart; use sdpa, eager, flex_attention or flash_attention_2, or set `padding_free: false`"
    ]


def family_packing_problem(family_name: str, field: str = "packing") -> str | None:
    """The message for a family whose packing (or, ``field="padding_free"``, padding-free
    micro-batches: the same layout) is not verified, or None."""
    if family_name in PACKABLE_FAMILIES:
        return None
    what = "pack image records" if field == "packing" else "lay image records out padding-free"
    return f"{field}: the {family_name} family cannot {what} yet (verified: {', '.join(PACKABLE_FAMILIES)}); set `{field}: false`"


def packed_rows(split: str, rows: list[list[int]], lengths: dict[str, list[int]] | None = None):
    """The set the Trainer iterates: a ``datasets.Dataset`` with one item per packed row,
    ``{"split": split, "members": [record indices]}``; the collator fetches the records.
    (TRL takes only ``datasets`` sets; rows of indices copy no image.) ``lengths``,
    ``{column: record lengths}``, adds that column holding each row's tokens."""
    import datasets

    columns: dict[str, list] = {"split": [split] * len(rows), "members": rows}
    for name, per_record in (lengths or {}).items():
        columns[name] = [sum(per_record[j] for j in row) for row in rows]
    return datasets.Dataset.from_dict(columns)


class PackingCollator:
    """Collate packed rows (items of :func:`packed_rows`): TRL's vision collator over every
    record of the micro-batch, then each row's records end to end (module docstring).
    ``records`` maps a split name to its ``datasets.Dataset``; ``rope_index`` is the
    model's ``get_rope_index`` for multimodal-RoPE families, else None. ``one_row``: every
    record of the micro-batch goes into one row (``padding_free``), whatever items name them;
    ``max_length``: TRL's vision collator truncates records to it, as ``SFTTrainer``'s own does."""

    def __init__(
        self,
        processor,
        records: dict,
        *,
        completion_only_loss: bool = True,
        rope_index=None,
        one_row: bool = False,
        max_length: int | None = None,
    ):
        from judgetrain.compat.trl import vision_collator

        self.records = records
        self.inner = vision_collator(processor, completion_only_loss=completion_only_loss, max_length=max_length)
        self.pad_id = processor.tokenizer.pad_token_id
        self.rope_index = rope_index
        self.one_row = one_row

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        records = [self.records[item["split"]][j] for item in items for j in item["members"]]
        # TRL rewrites the messages of what it collates, in place
        batch = self.inner(
            [{**r, "prompt": copy.deepcopy(r["prompt"]), "completion": copy.deepcopy(r["completion"])} for r in records]
        )
        lengths = batch["attention_mask"].sum(-1).tolist()  # flushed left: record j's tokens are [:lengths[j]]
        per_token = [k for k, v in batch.items() if hasattr(v, "shape") and tuple(v.shape) == tuple(batch["input_ids"].shape)]
        positions = self._positions(batch, lengths)
        sizes = [len(records)] if self.one_row else [len(item["members"]) for item in items]
        out = {k: v for k, v in batch.items() if k not in per_token}
        out.update(self._lay_out(batch, per_token, positions, lengths, sizes))
        out[REAL_TOKENS_KEY] = torch.tensor(sum(lengths))
        return out

    def _positions(self, batch, lengths: list[int]) -> list[Any]:
        """Each record's position ids, ``(L,)`` or, with multimodal RoPE, ``(4, L)``: text then t/h/w."""
        import torch

        if self.rope_index is None:
            return [torch.arange(n) for n in lengths]
        kwargs = {k: batch[k] for k in ("image_grid_thw", "video_grid_thw", "mm_token_type_ids") if k in batch}
        rope, _ = self.rope_index(batch["input_ids"], attention_mask=batch["attention_mask"], **kwargs)
        return [torch.cat([torch.arange(n)[None], rope[:, j, :n].to(torch.long)]) for j, n in enumerate(lengths)]

    def _lay_out(self, batch, per_token: list[str], positions: list[Any], lengths: list[int], sizes: list[int]) -> dict[str, Any]:
        """Rows of records end to end, right-padded to the longest row; the padding is
        its own "record" (positions from 0, label -100), so it attends to nothing real."""
        import torch

        fill = {"input_ids": self.pad_id, "labels": IGNORE_INDEX}
        rows: dict[str, list] = {k: [] for k in per_token if k != "attention_mask"}
        rows["position_ids"] = []
        starts = [sum(sizes[:r]) for r in range(len(sizes))]
        width = max(sum(lengths[s : s + n]) for s, n in zip(starts, sizes, strict=True))
        for s, n in zip(starts, sizes, strict=True):
            members = range(s, s + n)
            used = sum(lengths[j] for j in members)
            for k in rows:
                if k == "position_ids":
                    parts = [positions[j] for j in members]
                    pad = torch.arange(width - used).expand(*parts[0].shape[:-1], -1)
                    rows[k].append(torch.cat(parts + [pad], dim=-1))
                    continue
                parts = [batch[k][j, : lengths[j]].clone() for j in members]
                if k == "labels":
                    for p in parts:
                        p[0] = IGNORE_INDEX  # never predicted from the record before it
                parts.append(torch.full((width - used,), fill.get(k, 0), dtype=batch[k].dtype))
                rows[k].append(torch.cat(parts))
        out = {k: torch.stack(v, dim=-2 if k == "position_ids" and v[0].dim() == 2 else 0) for k, v in rows.items()}
        return out


class PackedData:
    """What :func:`prepare_packing` hands the trainer: the packed train and eval sets, their
    collator, and the counts behind them: ``records`` training records in ``rows`` rows
    ``fill`` full on average (tokens over the rows' capacity)."""

    def __init__(self, train, evaluation, collator, *, records: int, rows: int, fill: float):
        self.train, self.evaluation, self.collator = train, evaluation, collator
        self.records, self.rows, self.fill = records, rows, fill

    @property
    def records_per_row(self) -> float:
        """Training records a packed row holds on average (what the gradient accumulation is derived over)."""
        return self.records / max(self.rows, 1)

    def describe(self, training_args, world_size: int, effective_batch_size: int | None) -> dict[str, Any]:
        """:func:`packed_batch` under the run's final arguments (their gradient accumulation),
        logged in one line (and its ``warning``, when there is one)."""
        rows_per_step = training_args.per_device_train_batch_size * world_size * training_args.gradient_accumulation_steps
        batch = packed_batch(self.records, self.rows, rows_per_step, effective_batch_size)
        log = logging.getLogger("judgetrain.train")
        log.info(
            "packing: %d training records into %d rows of at most %d tokens (%.2f records a row, %.0f%% full); gradient "
            "accumulation %d, %d row(s) ≈ %s records a step",
            self.records,
            self.rows,
            training_args.max_length,
            self.records_per_row,
            100 * self.fill,
            training_args.gradient_accumulation_steps,
            rows_per_step,
            batch["records_per_step"],
        )
        if "warning" in batch:
            log.warning(batch["warning"])
        return batch


# a packed step's records may miss effective_batch_size by this fraction before the run says so
BATCH_TOLERANCE = 0.25


def packed_batch(n_records: int, n_rows: int, rows_per_step: int, effective_batch_size: int | None) -> dict[str, Any]:
    """What a packed optimizer step takes: ``rows_per_step`` rows (processes × per-device rows ×
    accumulation) of ``records_per_row`` records on average, so ``records_per_step`` records;
    and, when that misses ``effective_batch_size`` (which counts records) by more than
    :data:`BATCH_TOLERANCE`, ``warning``: why, and what to change. Accumulation cannot go below
    one, so rows that hold many records overshoot a small effective batch."""
    per_row = n_records / max(n_rows, 1)
    batch: dict[str, Any] = {
        "rows": n_rows,
        "records": n_records,
        "records_per_row": round(per_row, 3),
        "rows_per_step": rows_per_step,
        "records_per_step": round(per_row * rows_per_step, 2),
    }
    if effective_batch_size and abs(per_row * rows_per_step - effective_batch_size) > BATCH_TOLERANCE * effective_batch_size:
        batch["warning"] = (
            f"packing: effective_batch_size {effective_batch_size} counts records, but a step takes {rows_per_step} row(s) of "
            f"{per_row:.1f} records on average, {per_row * rows_per_step:.1f} records a step (gradient accumulation cannot go "
            "below 1). To train with the batch the recipe names, lower max_length (fewer records a row) or "
            "per_device_train_batch_size, or raise effective_batch_size; the model card records the records a step"
        )
    return batch


def prepare_packing(
    train, evaluation, lengths: tuple[list[int], list[int] | None], processor, model, family_name: str, training_args
) -> PackedData:
    """Pack the train records into rows of ``max_length`` tokens (evaluation too, or one
    record per row with ``eval_packing: false``) and build the collator. What packing
    implies for the training arguments (the gradient accumulation over the records a row
    holds, TRL's settings for a custom collator) :mod:`judgetrain.train.settings` derives.
    Raises ConfigError for a family whose packing is not verified."""
    from .args import ConfigError

    problem = family_packing_problem(family_name)
    if problem:
        raise ConfigError([problem])
    train_lengths, eval_lengths = lengths
    rows = pack_bins(train_lengths, training_args.max_length)
    packed_eval = None
    if evaluation is not None:
        assert eval_lengths is not None, "the evaluation records are measured with the training ones"
        eval_rows = (
            pack_bins(eval_lengths, training_args.max_length)
            if training_args.eval_packing is not False
            else [[i] for i in range(len(evaluation))]
        )
        packed_eval = packed_rows("eval", eval_rows)
    fill = sum(train_lengths) / (len(rows) * training_args.max_length)
    from judgetrain.scoring.model import rope_index_of

    completion_only = training_args.completion_only_loss is not False  # records are prompt–completion, as TRL decides
    collator = PackingCollator(
        processor, {"train": train, "eval": evaluation}, completion_only_loss=completion_only, rope_index=rope_index_of(model)
    )
    # group_by_length: the Trainer's LengthGroupedSampler reads each row's tokens, so the rows of a
    # micro-batch, padded to the longest, are of like length
    grouped = (
        {training_args.length_column_name: train_lengths} if training_args.train_sampling_strategy == "group_by_length" else None
    )
    return PackedData(packed_rows("train", rows, grouped), packed_eval, collator, records=len(train), rows=len(rows), fill=fill)


@dataclass(frozen=True)
class PaddingFreeData:
    """What :func:`prepare_padding_free` hands the trainer: one item per training (and evaluation)
    record, and the collator that lays each micro-batch's records out in one row."""

    train: Any
    evaluation: Any
    collator: PackingCollator


def prepare_padding_free(train, evaluation, processor, model, training_args) -> PaddingFreeData:
    """``padding_free: true`` for image records (module docstring): the Trainer iterates one item
    per record, in the order its sampler gives the unpacked records (the same length, so the same
    permutation; with ``group_by_length``, the records' length column), and each micro-batch,
    training or evaluation, becomes one row of its records end to end. The micro-batches, steps and
    gradient accumulation are the unpacked run's; :mod:`judgetrain.train.settings` derives what TRL
    is told. The family is checked by the caller (:func:`family_packing_problem`)."""
    from judgetrain.scoring.model import rope_index_of

    column = training_args.length_column_name
    # the column the Trainer's length-grouped samplers read, where the records carry it (group_by_length adds it)
    grouped = {column: train[column]} if column in train.column_names else None
    items = packed_rows("train", [[i] for i in range(len(train))], grouped)
    eval_items = None if evaluation is None else packed_rows("eval", [[i] for i in range(len(evaluation))])
    collator = PackingCollator(
        processor,
        {"train": train, "eval": evaluation},
        completion_only_loss=training_args.completion_only_loss is not False,
        rope_index=rope_index_of(model),
        one_row=True,
        max_length=training_args.max_length,
    )
    per_device = training_args.per_device_train_batch_size
    logging.getLogger("judgetrain.train").info(
        "padding_free: the %d records of each micro-batch (per_device_train_batch_size) laid end to end in one row, no "
        "padding; evaluation batches too%s",
        per_device,
        " (one record a micro-batch: nothing to save)" if per_device == 1 else "",
    )
    return PaddingFreeData(items, eval_items, collator)
