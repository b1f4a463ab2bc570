"""The records of a GRPO run, as TRL's ``GRPOTrainer`` takes them, and their order.

A record is a conversational prompt with its images (the task record unchanged); its gold
completion becomes the column ``reference`` (its text: does the record ask for a rationale?),
which the rewards read beside the record's own columns (``label``, ``task``, ``meta``, …).

**Questions in one generation batch.** The consistency reward compares the completions of
one question under its presentations: a pairwise item and its twin (``judgetrain build prism
--twins``, ``meta.twin``) or the views of a video-MCQ question (``judgetrain build
consistency-views``, ``meta.group`` of ``meta.views``). TRL's sampler (``RepeatSampler``) cuts
the dataset, in order when ``shuffle_dataset`` is off, into generation batches of
``generation_batch_size / num_generations`` prompts, each spread over every process and
generated and scored together; with one generation batch an optimizer step (judgetrain's
default) a batch is a step. :func:`question_order` therefore puts each question's records
next to one another, the questions in an order shuffled with the seed (``random.Random``,
the same on every process and thread count), and refuses a batch size that would cut a
question in two: the prompts of a generation batch must be a multiple of the question's
records. A record without its twin is refused, naming it (nothing is dropped silently).

Docs: "how-to/grpo.md".
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from judgetrain.pairs import question_group  # shared with the reward models (judgetrain.pairs)
from judgetrain.train.args import ConfigError

__all__ = ["completion_text", "grpo_records", "media_token_ids", "question_order"]

# added tokens that stand for images or video (Qwen-VL's <|image_pad|>, <|vision_start|>, …; LLaVA's <image>, <video>)
_MEDIA_TOKEN = re.compile(r"(?i)image|video|vision|img")


def media_token_ids(processor) -> list[int]:
    """The ids of the tokenizer's added tokens that stand for images or video: a completion that samples
    one breaks the model's next forward (Qwen-VL's M-RoPE counts image tokens the prompt's images do not
    fill), so GRPO's generation suppresses them (:mod:`judgetrain.train.settings`)."""
    tokenizer = getattr(processor, "tokenizer", processor)
    return sorted(i for token, i in tokenizer.get_added_vocab().items() if _MEDIA_TOKEN.search(token))


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or conversational messages whose content is a
    string or a list of ``{"type": "text", "text": …}`` parts (joined)."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion or []:
        content = message.get("content") if isinstance(message, Mapping) else message
        if isinstance(content, str):
            parts.append(content)
        else:
            parts += [p.get("text") or "" for p in content or [] if isinstance(p, Mapping) and p.get("type") == "text"]
    return "".join(parts)


def question_order(tasks: list[str], metas: list[str], ids: list[str], prompts_per_batch: int, seed: int) -> list[int]:
    """The record indices with each question's records consecutive (in dataset order) and the
    questions shuffled with ``seed``. ``ConfigError`` naming the records when one belongs to no
    question, a question is incomplete, questions differ in size, or ``prompts_per_batch`` is
    not a multiple of a question's records."""
    groups: dict[str, list[int]] = defaultdict(list)
    sizes: dict[str, int] = {}
    alone = []
    for i, (task, meta) in enumerate(zip(tasks, metas, strict=True)):
        found = question_group(task, meta)
        if found is None:
            alone.append(ids[i])
            continue
        groups[found[0]].append(i)
        sizes[found[0]] = found[1]
    problems = []
    if alone:
        problems.append(
            f"datasets: {len(alone)} record(s) present their question once (e.g. {alone[:3]}), but the consistency "
            "reward compares a question across presentations: build pairwise twins (`judgetrain build prism --twins`, "
            "`build mirage --twins`) or video-MCQ views (`build consistency-views`), keep those with `tasks:`, or "
            "drop consistency from rewards"
        )
    incomplete = [(key, len(idx), sizes[key]) for key, idx in groups.items() if len(idx) != sizes[key]]
    if incomplete:
        key, have, want = incomplete[0]
        problems.append(
            f"datasets: {len(incomplete)} question(s) have not all their presentations in the training split (e.g. "
            f"{key}: {have} of {want} records, {[ids[i] for i in groups[key]]}); rebuild the dataset, or filter whole questions"
        )
    size_set = sorted(set(sizes.values()))
    if len(size_set) > 1:
        problems.append(f"datasets: questions of {size_set} records mixed; train on one kind of question at a time")
    elif size_set and prompts_per_batch % size_set[0]:
        problems.append(
            f"generation_batch_size: {prompts_per_batch} prompts a generation batch (generation_batch_size / "
            f"num_generations) would cut a question's {size_set[0]} presentations apart; make it a multiple of "
            f"{size_set[0]} (per_device_train_batch_size × processes × steps_per_generation / num_generations)"
        )
    if problems:
        raise ConfigError(problems)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    return [i for key in keys for i in groups[key]]


def grpo_records(ds, *, grouped: bool, prompts_per_batch: int, seed: int):
    """``ds`` (task records) as ``GRPOTrainer`` takes them: ``completion`` out, ``reference`` in; under a grouped reward, in :func:`question_order`. ``None`` stays ``None``."""
    if ds is None:
        return None
    ds = ds.map(
        lambda row: {"reference": completion_text(row["completion"])},
        remove_columns=["completion"],
        desc="GRPO records",
    )
    if grouped:
        cols = ds.select_columns(["task", "meta", "id"])
        ds = ds.select(question_order(cols["task"], cols["meta"], cols["id"], prompts_per_batch, seed))
    return ds
