"""The training data: the built judgetrain datasets a recipe names, filtered by
task, layout and frame count and mixed by weight, and the checks that refuse
records which would break training silently (no image, or longer than
``max_length`` once images are expanded into tokens).

Records go to TRL's ``SFTTrainer`` as they are (conversational prompt–completion), except
for a reasoning checkpoint, whose chat template opens a thinking block in the generation
prompt: :func:`prefill_records` renders its records as text, the closed empty block (the
prefill every evaluation scores after) on the prompt side and the answer after it, so the
loss covers only the answer and training sees the text evaluation scores.
Used by ``judgetrain.train``. Docs: "reference/recipes.md".
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any

from .args import ConfigError, DataArguments

__all__ = [
    "check_records",
    "image_expansion",
    "load_training_data",
    "prefill_records",
    "record_length",
    "training_prefill",
    "with_length_column",
]

logger = logging.getLogger("judgetrain.train")
# id(processor) -> {image sizes: tokens added}; an entry goes when its processor does (weakref.finalize)
_EXPANSIONS: dict[int, dict[tuple, int]] = {}


def load_training_data(data_args: DataArguments, seed: int):
    """Train and eval splits from the built datasets, filtered as asked, with
    each dataset's content hashes for the model card."""
    from judgetrain import records

    trains: list[Any] = []
    evals: list[Any] = []
    provenance: list[dict] = []
    dropped: dict = {}
    for path in data_args.datasets:
        info = records.read_build_info(path)
        dd = records.load(path)
        if data_args.train_split not in dd:
            raise ConfigError([f"train_split: {path} has no split {data_args.train_split!r} (it has {sorted(dd)})"])
        provenance.append(
            {
                "path": str(path),
                "builder": info.get("builder"),
                "version": info.get("version"),
                "splits": {s: v["content_hash"] for s, v in info.get("splits", {}).items()},
            }
        )
        for split, bucket in ((data_args.train_split, trains), (data_args.eval_split, evals)):
            if split is None or split not in dd:
                continue
            ds = dd[split]
            keep = _keep_mask(ds, data_args)
            n_out = len(ds) - sum(keep)
            if n_out:
                dropped[f"{path}:{split}"] = n_out
                ds = ds.select([i for i, k in enumerate(keep) if k])
            bucket.append(ds)
    for where, n in dropped.items():
        logger.warning("%s: left out %d record(s) by tasks/layouts/max_frames", where, n)

    train, evaluation = _combine(trains, data_args, seed), _combine(evals, data_args, seed)
    if train is None or len(train) == 0:
        raise ConfigError(
            [
                f"datasets: no training records left in split {data_args.train_split!r} after filtering "
                f"(tasks={data_args.tasks}, layouts={data_args.layouts}, max_frames={data_args.max_frames})"
            ]
        )
    if data_args.max_train_samples:
        train = train.select(range(min(data_args.max_train_samples, len(train))))
    if evaluation is not None and data_args.max_eval_samples:
        evaluation = evaluation.select(range(min(data_args.max_eval_samples, len(evaluation))))
    return train, evaluation, {"datasets": provenance, "left_out": dropped}


def _combine(parts, data_args: DataArguments, seed: int):
    """One dataset from one split of each dataset: sampled by ``mixture_weights`` when given, else concatenated."""
    import datasets

    if not parts:
        return None
    if data_args.mixture_weights and len(parts) == len(data_args.mixture_weights):
        total = sum(data_args.mixture_weights)
        return datasets.interleave_datasets(
            parts, probabilities=[w / total for w in data_args.mixture_weights], seed=seed, stopping_strategy="all_exhausted"
        )
    return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]


def _keep_mask(ds, data_args: DataArguments) -> list[bool]:
    cols = ds.select_columns(["task", "layout", "n_frames"])
    tasks, layouts, n = cols["task"], cols["layout"], cols["n_frames"]
    return [
        (data_args.tasks is None or t in data_args.tasks)
        and (data_args.layouts is None or lay in data_args.layouts)
        and (data_args.max_frames is None or k <= data_args.max_frames)
        for t, lay, k in zip(tasks, layouts, n, strict=True)
    ]


def check_records(ds, processor, max_length: int | None, name: str, check_lengths: bool) -> list[int]:
    """Refuse records that would break training silently: no image (under
    ZeRO-3 a rank whose batch has no image skips the vision tower and the
    ranks hang), or longer than ``max_length`` tokens with images expanded
    (truncation would cut image tokens). Returns every record's length in
    tokens, in order ([] when not measured)."""
    from tqdm.auto import tqdm

    measure = check_lengths and max_length is not None
    lengths: list[int] = []
    too_long: list[tuple[str, int]] = []
    no_images: list[str] = []
    rows = ds if measure else ds.select_columns(["id", "images"])
    for row in tqdm(rows, desc=f"checking {name} records", unit="rec", disable=os.environ.get("LOCAL_RANK", "0") != "0"):
        if not row["images"]:
            no_images.append(row["id"])
        elif measure:
            n = record_length(processor, row)
            lengths.append(n)
            if max_length is not None and n > max_length:
                too_long.append((row["id"], n))
    if no_images:
        raise ConfigError(
            [
                f"{name}: {len(no_images)} record(s) show no image (e.g. {no_images[:3]}); every training batch must carry "
                "images (a rank without any hangs under DeepSpeed ZeRO-3). Filter them out with `tasks:`/`layouts:`"
            ]
        )
    if too_long:
        raise ConfigError(
            [
                f"max_length: {len(too_long)} {name} record(s) are longer than max_length={max_length} tokens "
                f"(longest {max(lengths)}, e.g. {too_long[:3]}); truncation would cut image tokens. Set `max_length: {max(lengths)}` "
                "(or more), lower max_pixels, or cap frames with `max_frames:`"
            ]
        )
    return lengths


def training_prefill(processor, family=None) -> str | None:
    """The prefill a model is trained and evaluated after: what closes the thinking block its
    chat template opens (a reasoning checkpoint), else ``None``; as every evaluation decides it
    (:func:`judgetrain.scoring.prompts.resolve_prefill` with ``FAMILY_PREFILL``)."""
    from judgetrain.scoring.prompts import FAMILY_PREFILL, resolve_prefill

    return resolve_prefill(FAMILY_PREFILL, family, processor)


def prefill_records(ds, processor, prefill: str | None):
    """``ds`` (conversational prompt–completion records) with ``prompt`` and ``completion``
    as the text TRL trains on when ``prefill`` is set: ``prompt`` the chat template's
    rendering with the generation prompt, then ``prefill``; ``completion`` what the template
    writes after that (the answer and the end of the turn). TRL's prompt–completion
    handling trains on the completion only, so the prefill is context, never a target.
    ``prefill`` ``None`` or empty (or ``ds`` None): ``ds`` unchanged. ``ConfigError`` naming the record when the
    template does not write the answer after the prefill (another template's thinking block)."""
    if not prefill or ds is None:
        return ds

    def render(row: dict) -> dict:
        head = processor.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True) + prefill
        full = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        if not full.startswith(head):
            raise ConfigError(
                [
                    f"record {row['id']}: the chat template does not write the answer after the prefill "
                    f"{prefill!r} (it writes {full[len(head) - len(prefill) :][:80]!r}); pass the "
                    "template's own closing text, or train the instruct checkpoint"
                ]
            )
        return {"prompt": head, "completion": full[len(head) :]}

    # in memory: the rendered text is cheap to redo and never lands in the datasets cache
    return ds.map(render, keep_in_memory=True, load_from_cache_file=False, desc="prefilling records")


def record_length(processor, row: dict) -> int:
    """Tokens of prompt + completion with every image placeholder expanded, as
    the processor would produce them: the text's own tokens plus the expansion
    of its images, which depends only on their sizes and is computed once per
    combination of sizes (no pixel is processed per record). A record rendered
    as text (:func:`prefill_records`) is counted as it stands."""
    if isinstance(row["prompt"], str):
        text = row["prompt"] + row["completion"]
    else:
        text = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    return len(processor.tokenizer(text)["input_ids"]) + image_expansion(processor, tuple(im.size for im in row["images"]))


def image_expansion(processor, sizes: tuple[tuple[int, int], ...]) -> int:
    """Tokens the processor adds to a prompt when it expands one image placeholder per
    ``(width, height)`` in ``sizes`` into the images' feature tokens; cached per processor for as
    long as it lives."""
    cache = _EXPANSIONS.get(id(processor))
    if cache is None:
        cache = _EXPANSIONS[id(processor)] = {}
        weakref.finalize(processor, _EXPANSIONS.pop, id(processor), None)
    if sizes not in cache:
        from PIL import Image

        messages = [{"role": "user", "content": [{"type": "image"}] * len(sizes)}]
        text = processor.apply_chat_template(messages, tokenize=False)
        images = [Image.new("RGB", size) for size in sizes]
        expanded = processor(text=[text], images=[images], return_tensors="pt")["input_ids"].shape[1]
        cache[sizes] = expanded - len(processor.tokenizer(text)["input_ids"])
    return cache[sizes]


def with_length_column(ds, lengths: list[int], training_args):
    """For ``train_sampling_strategy: group_by_length`` on unpacked records: the records
    with their lengths (images expanded) in ``length_column_name``, which the Trainer's
    ``LengthGroupedSampler`` reads instead of ``input_ids`` (image records have none).
    The column must reach the sampler, so :mod:`judgetrain.train.settings` turns
    ``remove_unused_columns`` off; TRL's vision collator reads only the record's own fields."""
    if not lengths:
        raise ConfigError(
            ["train_sampling_strategy: group_by_length needs every record's length; set `check_lengths: true` and `max_length:`"]
        )
    name = training_args.length_column_name
    return (ds.remove_columns(name) if name in ds.column_names else ds).add_column(name, lengths)
