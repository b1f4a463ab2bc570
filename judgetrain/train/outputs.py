"""What a training run leaves behind and how it reports: checkpoints marked
complete once fully written (so ``resume_from_checkpoint: auto`` skips one cut
short by a kill), wandb / TensorBoard set-up (one wandb run across resumes, in the
project ``judgetrain sweep`` reports to), the resolved recipe, and the model card
(``huggingface_hub.ModelCard``) written next to the adapter and pushed by the
Trainer's own ``push_to_hub``.

Used by ``judgetrain.train``. Docs: "reference/recipes.md".
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shlex
import sys
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, cast

from judgetrain.grpo.args import REWARD_NAMES
from judgetrain.io import write_text
from judgetrain.wandb_mode import offline_without_a_key

__all__ = [
    "COMPLETE_MARKER",
    "DEFAULT_WANDB_PROJECT",
    "PIPELINE_TAG",
    "RECIPE_FILE",
    "base_license",
    "global_batch",
    "checkpoint_complete_callback",
    "configure_reporting",
    "find_resume_checkpoint",
    "model_card",
    "recorded_wandb_run",
    "replay_history",
    "resolved_recipe",
    "start_wandb_run",
    "wandb_run_config",
    "write_model_card",
]

logger = logging.getLogger("judgetrain.train")
COMPLETE_MARKER = "judgetrain_checkpoint_complete.json"
RECIPE_FILE = "judgetrain_recipe.yaml"
# where training runs log and `judgetrain sweep` writes its summary run, unless WANDB_PROJECT says otherwise
DEFAULT_WANDB_PROJECT = "judgetrain"
PIPELINE_TAG = "image-text-to-text"
# a reward model scores a sequence: the hub's tag for a sequence-classification head (as TRL's reward models carry)
REWARD_PIPELINE_TAG = "text-classification"


# --------------------------------------------------------------------------- checkpoints


def checkpoint_complete_callback(recipe: dict | None = None, records_per_row: float | None = None):
    """A ``TrainerCallback`` that writes into each checkpoint, once it is saved, the
    resolved ``recipe`` it was trained with (``RECIPE_FILE``; what a resume is checked
    against, ``judgetrain.train.resume``) and then ``COMPLETE_MARKER`` with the step,
    world size, global batch, packed the records a row holds on average (``records_per_row``,
    what a resume derives its accumulation over) and the wandb run id (when logging to wandb)."""
    import yaml
    from transformers import TrainerCallback

    class CheckpointComplete(TrainerCallback):
        """Marks a checkpoint complete once the Trainer has written all of it
        (model, optimizer, scheduler, RNG state, trainer state): a run killed
        mid-save leaves a folder without the marker, which resume skips."""

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    if recipe is not None:
                        write_text(folder / RECIPE_FILE, yaml.safe_dump(recipe, sort_keys=True))
                    marker = {"global_step": state.global_step, "world_size": args.world_size, "global_batch": global_batch(args)}
                    if records_per_row is not None:
                        marker["records_per_row"] = records_per_row
                    wandb = sys.modules.get("wandb")  # imported only when the run reports to it
                    if wandb is not None and wandb.run is not None:
                        marker["wandb_run_id"] = wandb.run.id  # a resume from here continues this run
                    write_text(folder / COMPLETE_MARKER, json.dumps(marker))
            return control

    return CheckpointComplete()


def find_resume_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest complete ``checkpoint-N`` in ``output_dir`` (None if none);
    incomplete ones (killed mid-save) are skipped with a warning."""
    out = Path(output_dir)
    if not out.is_dir():
        return None
    found = sorted((int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for _step, path in reversed(found):
        if (path / COMPLETE_MARKER).is_file() and (path / "trainer_state.json").is_file():
            return str(path)
        logger.warning("%s is incomplete (the run stopped while saving it); resuming from an earlier checkpoint", path)
    return None


# --------------------------------------------------------------------------- logging


def configure_reporting(training_args) -> None:
    """wandb without a configured key logs offline into the output folder
    (sync later with `wandb sync`); the key itself is never printed or saved. Runs go to
    the project ``WANDB_PROJECT``, by default ``DEFAULT_WANDB_PROJECT`` (where the sweep's
    summary run goes too, rather than the Trainer's default ``huggingface``)."""
    report_to = training_args.report_to or []
    if "wandb" in report_to:
        os.environ.setdefault("WANDB_DIR", str(Path(training_args.output_dir).resolve()))
        os.environ.setdefault("WANDB_PROJECT", DEFAULT_WANDB_PROJECT)
        Path(os.environ["WANDB_DIR"]).mkdir(parents=True, exist_ok=True)
        if offline_without_a_key():
            os.environ["WANDB_MODE"] = "offline"
            logger.warning(
                "wandb: no API key configured; logging offline to %s (upload later with `wandb sync`)", os.environ["WANDB_DIR"]
            )


def global_batch(args) -> int:
    """What one optimizer step takes: processes × per-device batch × accumulation (records, or
    packed rows with ``packing``)."""
    return args.world_size * args.per_device_train_batch_size * args.gradient_accumulation_steps


def recorded_wandb_run(checkpoint: str | os.PathLike | None) -> str | None:
    """The wandb run id a checkpoint was logged under (its ``COMPLETE_MARKER``), or None."""
    marker = Path(checkpoint) / COMPLETE_MARKER if checkpoint else None
    if marker is None or not marker.is_file():
        return None
    return json.loads(marker.read_text()).get("wandb_run_id")


def wandb_run_config(model_args, data_args, family, data_info: dict, training_args) -> dict:
    """What the Trainer's wandb callback leaves out of the run config: the recipe's data
    fields (datasets with their content hashes, family, the effective batch) and the rest
    of judgetrain's own fields under ``judgetrain``."""
    from judgetrain.models.adapters import stored_base

    args = training_args
    return {
        "datasets": [d["path"] for d in data_info["datasets"]],
        "dataset_content_hashes": {d["path"]: d["splits"] for d in data_info["datasets"]},
        "family": family.name,
        "base_model": stored_base(model_args.model_name_or_path),
        # the recipe's (records, also when packing makes the batches rows), else what each step took
        "effective_batch_size": data_args.effective_batch_size or global_batch(args),
        "world_size": args.world_size,
        "judgetrain": {**asdict(model_args), **asdict(data_args)},
    }


def start_wandb_run(trainer, config: dict, checkpoint: str | None) -> str | None:
    """On the main process of a run reporting to wandb, open its wandb run before the
    Trainer's ``WandbCallback`` would (it then logs into this one): when resuming from
    ``checkpoint``, the run that checkpoint recorded, with wandb's ``id=…, resume="allow"``
    (so ``--resume_from_checkpoint`` continues one run instead of opening a second);
    otherwise a new one. ``WANDB_RUN_ID`` / ``WANDB_RESUME`` in the environment win.
    ``config`` joins the run config; an offline run continued from ``checkpoint`` first gets the
    checkpoint's history (:func:`replay_history`). Returns the id of the run it opened (for
    ``wandb.finish``), None when it opened none."""
    args = trainer.args
    if "wandb" not in (args.report_to or []) or not trainer.is_world_process_zero():
        return None
    import wandb

    if wandb.run is not None:  # opened by the caller: log into it, as the Trainer would
        wandb.run.config.update(config, allow_val_change=True)
        return None
    kwargs: dict[str, Any] = {}
    given = os.environ.get("WANDB_RUN_ID")
    run_id = given or recorded_wandb_run(checkpoint)
    if run_id:
        kwargs.update(id=run_id, resume=os.environ.get("WANDB_RESUME", "allow"))
        logger.info("wandb: run %s (%s)", run_id, "WANDB_RUN_ID" if given else f"continued from {checkpoint}")
    if args.run_name:
        kwargs["name"] = args.run_name
    # the mode said outright: wandb reads the environment once per process, so a WANDB_MODE set after an
    # earlier run in this process (configure_reporting's offline) would otherwise not apply
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", DEFAULT_WANDB_PROJECT), mode=cast(Any, os.environ.get("WANDB_MODE")), **kwargs
    )
    run.config.update(config, allow_val_change=True)  # a resumed run keeps its config; the recipe may have grown
    if checkpoint is not None and run.offline:
        replay_history(run, checkpoint)
    return run.id


# what WandbCallback puts in the run summary instead of the history
_SUMMARY_ONLY = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "total_flos")


def replay_history(run, checkpoint: str | os.PathLike) -> int:
    """Log ``checkpoint``'s history (its ``trainer_state.json`` ``log_history``, each entry as
    transformers' ``WandbCallback`` logs it: its names, :func:`judgetrain.compat.transformers.wandb_names`,
    and ``train/global_step``)
    into ``run``, an offline wandb run that continues from it. A process killed with SIGKILL
    flushes nothing of its offline run (its ``.wandb`` file can be a 7-byte header), so the
    continued run's folder holds the whole history on its own; an online run needs none (the
    server kept what was streamed). Returns the entries logged."""
    from judgetrain.compat.transformers import wandb_names

    path = Path(checkpoint) / "trainer_state.json"
    history = json.loads(path.read_text()).get("log_history", []) if path.is_file() else []
    for entry in history:
        logs = {k: v for k, v in entry.items() if k != "step" and k not in _SUMMARY_ONLY}
        run.log({**wandb_names(logs), "train/global_step": entry["step"]})
    if history:
        logger.info("wandb: %d logged step(s) of %s replayed into offline run %s", len(history), checkpoint, run.id)
    return len(history)


def resolved_recipe(model_args, data_args, training_args, argv: list[str]) -> dict:
    """Every model and data field (TRL's ``ModelConfig`` with judgetrain's model fields, and
    judgetrain's data fields) plus the training arguments' fields (SFTConfig's and the
    consistency fields of ``judgetrain.consistency.ConsistencyConfig``) that differ from their
    defaults: with the run's final arguments, what it derived (the gradient accumulation used)."""
    recipe: dict[str, Any] = {}
    for obj in (model_args, data_args):
        recipe.update(asdict(obj))
    recipe.pop("overwrite", None)  # an action on the output folder, not a setting: a rerun of the saved recipe must not wipe it
    recipe.pop("wait", None)  # how this launch met another writer, not a setting
    # the training arguments' own class: SFTConfig with the consistency fields (judgetrain.consistency)
    defaults = {f.name: f.default for f in fields(type(training_args))}
    for f in fields(type(training_args)):
        value = getattr(training_args, f.name)
        if f.name.endswith("_token") or f.name in ("hub_token", "push_to_hub_token"):
            continue  # secrets never go into saved configs
        if f.name in defaults and value != defaults[f.name] and _yamlable(value):
            recipe[f.name] = value.value if hasattr(value, "value") else value
    if hasattr(training_args, "method"):  # always said: it decides how the rest is read (a GRPO recipe's default)
        recipe["method"] = training_args.method
    recipe.pop("generation_batch_size", None)  # GRPO: steps_per_generation says it, and TRL takes one of the two
    if any(recipe.get(f"{name}_weight") is not None for name in REWARD_NAMES):
        recipe.pop("reward_weights", None)  # derived from the <reward>_weight fields, which say it
    return recipe


def _yamlable(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, dict)) or hasattr(v, "value")


@functools.lru_cache(maxsize=8)  # the card is rewritten at every checkpoint; the base's card is read once
def base_license(base: str) -> dict[str, Any]:
    """``license`` (and ``license_name`` / ``license_link``) from the base model's card: its
    folder's ``README.md``, or a hub id's card (from the cache, else the hub unless offline);
    {} when it has none or it cannot be read."""
    from huggingface_hub import ModelCard, constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    local = Path(base).expanduser()
    try:
        if local.exists():
            card = ModelCard.load(local / "README.md") if (local / "README.md").is_file() else None
        else:
            cached = try_to_load_from_cache(base, "README.md")
            card = ModelCard.load(cached) if isinstance(cached, str) else None
            if card is None and not constants.HF_HUB_OFFLINE:
                card = ModelCard.load(base)
    except (OSError, ValueError, HFValidationError) as e:  # the license is a courtesy: no card, no license
        logger.info("no license read from %s's model card: %s", base, e)
        return {}
    data = card.data if card is not None else None
    return {
        k: getattr(data, k) for k in ("license", "license_name", "license_link") if data is not None and getattr(data, k, None)
    }


def model_card(
    out: Path,
    model_args,
    family,
    data_info: dict,
    argv: list[str],
    trainer,
    longest: int,
    extra_tags: list[str] | tuple[str, ...] = (),
    run_info: dict | None = None,
):
    """The run's ``huggingface_hub.ModelCard``. Metadata: ``base_model`` (as the adapter
    records it, ``adapters.stored_base``), ``library_name`` (peft for an adapter),
    ``pipeline_tag``, tags with ``base_model:adapter:BASE``, ``datasets``, the base's
    license, and under ``judgetrain`` every dataset with its content hashes, the batch, the
    steps and, from ``run_info`` (``run.json``'s content), a hub base's resolved commit
    (``base_model_sha``) and the settings the run derived (``settings``). For the hub
    (``push_to_hub`` / ``hub_model_id`` set), local paths stay out of ``base_model``,
    ``datasets`` and the tags, which the hub accepts only as ids; the text still names them."""
    from huggingface_hub import ModelCard, ModelCardData

    from judgetrain.models.adapters import stored_base

    args, state = trainer.args, trainer.state
    base = stored_base(model_args.model_name_or_path)
    lora = getattr(trainer.model, "peft_config", None) is not None
    for_hub = bool(args.push_to_hub or args.hub_model_id)
    base_is_local = Path(base).expanduser().exists()
    effective = global_batch(args)
    sha = ((run_info or {}).get("identity") or {}).get("base_model", {}).get("sha")
    derived = (run_info or {}).get("settings") or {}
    tags = ["judgetrain", "vlm-judge", family.name, *(["lora"] if lora else []), *extra_tags]
    if not (for_hub and base_is_local):
        tags.append(f"base_model:{'adapter' if lora else 'finetune'}:{base}")
    wandb = sys.modules.get("wandb")
    data = ModelCardData(
        base_model=None if for_hub and base_is_local else base,
        library_name="peft" if lora else "transformers",
        pipeline_tag=REWARD_PIPELINE_TAG if getattr(args, "method", "sft") == "reward" else PIPELINE_TAG,
        tags=list(dict.fromkeys(tags)),
        datasets=None if for_hub else [d["path"] for d in data_info["datasets"]],
        model_name=(args.hub_model_id or "").split("/")[-1] or Path(out).name,
        **base_license(base),
        judgetrain={
            "base_model": base,
            "base_model_sha": sha,
            "family": family.name,
            "datasets": [
                {"path": d["path"], "builder": d["builder"], "version": d["version"], "content_hashes": d["splits"]}
                for d in data_info["datasets"]
            ],
            "left_out": data_info.get("left_out") or {},
            "global_step": state.global_step,
            "world_size": args.world_size,
            "per_device_train_batch_size": args.per_device_train_batch_size,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
            # records a step (with packing: rows a step × records a row, on average)
            "effective_batch_size": (data_info.get("packing") or {}).get("records_per_step", effective),
            "packed_rows_per_step": (data_info.get("packing") or {}).get("rows_per_step"),
            "longest_record_tokens": longest or None,
            "settings": {name: entry["value"] for name, entry in derived.items()},
            "wandb_run_id": wandb.run.id if wandb is not None and wandb.run is not None else None,
        },
    )
    text = _card_text(out, base, family, data_info, argv, trainer, longest, effective, sha) + _settings_text(derived)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + text)


def _batch_words(effective: int, packing: dict | None) -> str:
    """The global batch in words: records a step, and with packing the rows that hold them."""
    if not packing:
        return f"effective batch {effective}"
    return (
        f"effective batch {effective} packed rows ≈ {packing['records_per_step']} records a step, "
        f"{packing['records_per_row']} records a row"
    )


def _settings_text(derived: dict[str, dict[str, Any]]) -> str:
    """The settings the run derived from its recipe (judgetrain.train.settings), as a table; "" for none."""
    if not derived:
        return ""
    rows = [f"| `{name}` | `{entry['value']}` | `{entry['recipe']}` | {entry['why']} |" for name, entry in derived.items()]
    return "\n".join(
        [
            "",
            "## Settings derived from the recipe",
            "",
            "| setting | used | recipe | why |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
        ]
    )


def _method_lines(args) -> list[str]:
    """The card's line on how the judge was trained, for a GRPO run (``method: grpo``, :mod:`judgetrain.grpo`) or a
    reward model (``method: reward``, :mod:`judgetrain.reward`): what its score means."""
    method = getattr(args, "method", "sft")
    if method == "reward":
        margin = args.margin_per_score_point
        return [
            "- a reward model: one number per image sequence, a scalar head (`score`) on the last token of the "
            "sequence's prompt, higher for a more temporally coherent order; trained Bradley–Terry (TRL's "
            "RewardTrainer) on each gold sequence (chosen) against its swaps, shuffles and out-of-context images "
            "(rejected), each scored alone"
            + (f"; margin {margin:g} × the PRISM score gap" if margin is not None else "")
            + (
                f"; center_rewards_coefficient {args.center_rewards_coefficient:g}"
                if args.center_rewards_coefficient is not None
                else ""
            )
            + ". Rewards compare sequences of one text and layout; their scale has no meaning of its own"
        ]
    if method != "grpo":
        return []
    weights = args.reward_weights or [1.0] * len(args.rewards)
    rewards = ", ".join(f"{name} × {w:g}" for name, w in zip(args.rewards, weights, strict=True))
    return [
        f"- trained by GRPO (TRL's GRPOTrainer): rewards {rewards}; {args.num_generations} completions a prompt of at "
        f"most {args.max_completion_length} tokens, temperature {args.temperature:g}, β {args.beta:g}"
    ]


def _card_text(
    out: Path, base: str, family, data_info: dict, argv: list[str], trainer, longest: int, effective: int, sha: str | None = None
) -> str:
    args, state = trainer.args, trainer.state
    relative = not Path(base).is_absolute() and Path(base).expanduser().exists()
    where = " (relative to the folder training ran in: load from there, or pass the base with --base)" if relative else ""
    reward = getattr(args, "method", "sft") == "reward"
    lines = [
        f"# judgetrain {'reward model' if reward else 'judge'}: {family.name} fine-tuned on {len(data_info['datasets'])} "
        "dataset(s)",
        "",
        f"- base model: `{base}` ({family.name}){where}" + (f", commit `{sha}`" if sha else ""),
        f"- steps: {state.global_step}, epochs: {state.epoch or 0:.2f}",
        f"- world size: {args.world_size}, per-device batch: {args.per_device_train_batch_size}, "
        f"gradient accumulation: {args.gradient_accumulation_steps} ({_batch_words(effective, data_info.get('packing'))})",
        f"- longest training record: {f'{longest} tokens' if longest else 'not measured'}",
        *_method_lines(args),
        *(
            [
                f"- reasoning checkpoint: each answer is trained after the prefill {data_info['prefill']!r}, which every "
                "evaluation scores after"
            ]
            if data_info.get("prefill")
            else []
        ),
        "",
        "## Data (content hashes from each build.json)",
        "",
        "| dataset | builder | split | content hash |",
        "| --- | --- | --- | --- |",
    ]
    for d in data_info["datasets"]:
        for split, h in d["splits"].items():
            lines.append(f"| `{d['path']}` | {d['builder']} {d['version']} | {split} | `{h}` |")
    if data_info.get("left_out"):
        lines += ["", f"Records left out by filters: {data_info['left_out']}"]
    lines += ["", "## Use", "", *(_reward_use(out) if reward else _judge_use(base, out))]
    lines += [
        "",
        "## Reproduce",
        "",
        "```bash",
        f"accelerate launch -m judgetrain.train --config {out / RECIPE_FILE}",
        "```",
        "",
        f"Original command: `python -m judgetrain.train {' '.join(shlex.quote(a) for a in argv)}`",
        "",
    ]
    return "\n".join(lines)


def _judge_use(base: str, out: Path) -> list[str]:
    return [
        "```bash",
        f"judgetrain eval timecatch --model {base} --adapter {out} --data DATA --out RESULTS   # or eval judge, phasefusion",
        f"judgetrain merge {out} --out MERGED   # one folder, e.g. for vLLM",
        "```",
    ]


def _reward_use(out: Path) -> list[str]:
    return [
        "```python",
        "from judgetrain.models.reward import load_reward_model",
        "from judgetrain.scoring import reward_scores",
        "",
        f'model, processor = load_reward_model("{out}")   # the base it records, the LoRA and the head',
        "rewards = reward_scores(model, processor, records)   # one number per record (a sequence and its text)",
        "```",
    ]


def write_model_card(
    out: Path,
    model_args,
    family,
    data_info: dict,
    argv: list[str],
    trainer,
    longest: int,
    extra_tags: list[str] | tuple[str, ...] = (),
    folder: Path | None = None,
    run_info: dict | None = None,
) -> None:
    """``README.md`` in ``folder`` (default: the run folder ``out``, which names the card):
    :func:`model_card`, written atomically."""
    card = model_card(Path(out), model_args, family, data_info, argv, trainer, longest, extra_tags, run_info)
    write_text(Path(folder or out) / "README.md", str(card))
