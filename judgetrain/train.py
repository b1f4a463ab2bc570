"""Fine-tune a VLM judge on judgetrain records: TRL's SFTTrainer with PEFT LoRA.

    accelerate launch --config_file deepspeed_configs/zero3.yaml \\
        -m judgetrain.train --config recipes/qwen3vl-2b/timecatch-lora.yaml [--learning_rate 5e-5 …]

parse → model → data → trainer → train (with resume) → save. A recipe YAML
sets the fields of :class:`ModelArguments`, :class:`DataArguments`,
:class:`LoraArguments` and TRL's ``SFTConfig``; command-line flags override
it; unknown keys fail. Records go to ``SFTTrainer`` as they are (conversational
prompt–completion), so the loss covers only the completion.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from judgetrain import config

__all__ = ["ModelArguments", "DataArguments", "LoraArguments", "ConfigError", "make_parser", "main", "script", "find_resume_checkpoint"]

logger = logging.getLogger("judgetrain.train")
COMPLETE_MARKER = "judgetrain_checkpoint_complete.json"
RECIPE_FILE = "judgetrain_recipe.yaml"
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
# (evaluation records or None, processor, training arguments) -> a TrainerCallback or None; see setup()
CallbackFactory = Callable[[Any, Any, Any], Any]


class ConfigError(config.ConfigError):
    """Every problem with a training configuration at once, each naming the field and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems, "training configuration")


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default=None, metadata={"help": "Base model: a local folder or a hub id."})
    family: str | None = field(default=None, metadata={"help": "Model family (qwen3-vl, qwen2.5-vl, llava-onevision); default: from the config."})
    dtype: str = field(default="auto", metadata={"help": "Weights dtype: auto, float32, bfloat16, float16."})
    attn_implementation: str | None = field(default=None, metadata={"help": "eager, sdpa, flash_attention_2, …"})
    min_pixels: int | None = field(default=None, metadata={"help": "Qwen: smallest per-image pixel budget."})
    max_pixels: int | None = field(default=None, metadata={"help": "Qwen: largest per-image pixel budget (bounds image tokens per frame)."})
    freeze_vision_tower: bool = field(default=True, metadata={"help": "Keep the vision encoder frozen (default)."})
    freeze_projector: bool = field(default=True, metadata={"help": "Keep the vision-to-language projector frozen (default)."})


@dataclass
class DataArguments:
    datasets: list[str] = field(default=None, metadata={"help": "Built judgetrain datasets (folders with build.json)."})
    train_split: str = field(default="train")
    eval_split: str | None = field(default="validation", metadata={"help": "Split for evaluation loss; null for none."})
    tasks: list[str] | None = field(default=None, metadata={"help": "Keep only these tasks (default: all)."})
    layouts: list[str] | None = field(default=None, metadata={"help": "Keep only these prompt layouts (default: all)."})
    mixture_weights: list[float] | None = field(default=None, metadata={"help": "Sampling probability per dataset (default: concatenate)."})
    max_frames: int | None = field(default=None, metadata={"help": "Leave out records showing more images than this (counted and logged)."})
    max_train_samples: int | None = field(default=None)
    max_eval_samples: int | None = field(default=None)
    effective_batch_size: int | None = field(
        default=None,
        metadata={"help": "Global batch held fixed across GPU counts: gradient_accumulation_steps = this / (per-device batch × world size)."},
    )
    check_lengths: bool = field(default=True, metadata={"help": "Refuse records longer than max_length (image tokens would be cut)."})


@dataclass
class LoraArguments:
    use_lora: bool = field(default=True, metadata={"help": "LoRA through PEFT; false trains the language model fully."})
    lora_r: int = field(default=16)
    lora_alpha: int = field(default=32)
    lora_dropout: float = field(default=0.05)
    lora_target_modules: str | None = field(default=None, metadata={"help": "Regex of module names; default: the family's language-model projections."})
    lora_modules_to_save: list[str] | None = field(default=None, metadata={"help": "Extra modules trained fully and saved with the adapter."})


def make_parser():
    from trl import SFTConfig, TrlParser

    return TrlParser((ModelArguments, DataArguments, LoraArguments, SFTConfig))


# --------------------------------------------------------------------------- parsing and checks


def _bf16_capable() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def _explicit(name: str, argv: list[str], recipe: dict) -> Any:
    """The value the user gave for ``name`` (command line over recipe), or None."""
    flag = f"--{name}"
    for i, a in enumerate(argv):
        if a == flag:
            return argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return recipe.get(name)


def _truthy(v: Any) -> bool:
    return v is True or str(v).lower() in {"1", "true", "yes", "on"}


def parse(argv: list[str] | None = None, *, configured_state: bool = False):
    """Parse recipe + overrides into the four dataclasses, as TRL's
    ``TrlParser.parse_args_and_config`` does (recipe values become defaults,
    flags win, an ``env:`` mapping sets environment variables), with an
    error naming every unknown key. bf16 left at TRL's default is switched off
    where no GPU supports it; bf16 asked for there fails. ``configured_state``
    makes the Trainer reuse the process group set up by
    :func:`setup_cpu_distributed` (it must be known when SFTConfig is built,
    which is when the DeepSpeed batch sizes are computed from the world size)."""
    import difflib

    import yaml

    argv = list(sys.argv[1:] if argv is None else argv)
    recipe: dict = {}
    recipe_path = None
    if "--config" in argv:
        i = argv.index("--config")
        recipe_path = Path(argv[i + 1])
        del argv[i : i + 2]
        if not recipe_path.is_file():
            raise ConfigError([f"--config {recipe_path}: no such recipe file"])
        recipe = yaml.safe_load(recipe_path.read_text()) or {}
        if not isinstance(recipe, dict):
            raise ConfigError([f"{recipe_path}: a recipe is a YAML mapping of field: value"])
    for key, value in (recipe.pop("env", None) or {}).items():
        os.environ[str(key)] = str(value)
    if configured_state:
        recipe["accelerator_config"] = {**(recipe.get("accelerator_config") or {}), "use_configured_state": True}
    if not _bf16_capable():
        bf16 = _explicit("bf16", argv, recipe)
        if bf16 is None and not _truthy(_explicit("fp16", argv, recipe)):
            # TRL turns bf16 on by default; without a bf16 GPU that fails (or emulates it 20x slower on CPU)
            recipe["bf16"] = False
        elif bf16 is not None and _truthy(bf16):
            raise ConfigError(["bf16: true, but this machine has no GPU that supports bfloat16: set `bf16: false` "
                               "(or pass --bf16 false) to train in float32 here, or run on a bf16-capable GPU (A100, H100, …)"])
    parser = make_parser()
    unknown = [k for k in recipe if k not in {a.dest for a in parser._actions}]
    if unknown:
        known = [a.dest for a in parser._actions]
        raise ConfigError([
            f"{recipe_path}: unknown key {k!r}" + (f"; did you mean {close[0]!r}?" if (close := difflib.get_close_matches(k, known, n=1)) else "")
            + " (fields: judgetrain's ModelArguments/DataArguments/LoraArguments and TRL's SFTConfig; `judgetrain train --help`)"
            for k in unknown
        ])
    parser.set_defaults_with_config(**recipe)
    *cfgs, rest = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True)
    if rest:
        flags = [o for a in parser._actions for o in a.option_strings]
        problems = [f"command line: unknown argument {w!r}"
                    + (f"; did you mean {close[0]!r}?" if (close := difflib.get_close_matches(w.split("=", 1)[0], flags, n=1)) else "")
                    + " (`judgetrain train --help` lists every field)"
                    for w in rest if w.startswith("-")]
        stray = [w for i, w in enumerate(rest) if not w.startswith("-") and (i == 0 or not rest[i - 1].startswith("-"))]
        if stray:
            problems.append(f"command line: {' '.join(stray)!r} not used. Flags take `--field value`; a list field given on the "
                            "command line takes space-separated values only where the field is a list (`--datasets a b`); "
                            "`report_to` takes one value there, so put several in the recipe (`report_to: [wandb, tensorboard]`)")
        raise ConfigError(problems)
    return tuple(cfgs)


def check_config(model_args: ModelArguments, data_args: DataArguments, lora_args: LoraArguments, training_args, world_size: int) -> list[str]:
    """Cross-field rules; every problem names the field and the fix."""
    problems = []
    if not model_args.model_name_or_path:
        problems.append("model_name_or_path: missing; give a local model folder or a hub id")
    if not data_args.datasets:
        problems.append("datasets: missing; give one or more folders built with `judgetrain build …`")
    if data_args.mixture_weights is not None:
        if len(data_args.mixture_weights) != len(data_args.datasets or []):
            problems.append(f"mixture_weights: {len(data_args.mixture_weights)} weight(s) for {len(data_args.datasets or [])} dataset(s); give one per dataset")
        elif any(w < 0 for w in data_args.mixture_weights) or sum(data_args.mixture_weights) <= 0:
            problems.append("mixture_weights: must be non-negative with a positive sum")
    if getattr(training_args, "packing", False):
        problems.append("packing: packing is not supported for vision-language models; set `packing: false`")
    if training_args.bf16 and training_args.fp16:
        problems.append("bf16 and fp16 are both on; choose one")
    if data_args.effective_batch_size is not None:
        per_step = training_args.per_device_train_batch_size * world_size
        if data_args.effective_batch_size % per_step:
            problems.append(f"effective_batch_size: {data_args.effective_batch_size} is not a multiple of per_device_train_batch_size "
                            f"({training_args.per_device_train_batch_size}) × world size ({world_size}) = {per_step}; change one of them")
    if training_args.eval_strategy != "no" and not data_args.eval_split:
        strategy = getattr(training_args.eval_strategy, "value", training_args.eval_strategy)
        problems.append(f"eval_strategy: {strategy} needs eval_split; set `eval_split: validation` or `eval_strategy: no`")
    if lora_args.use_lora and (lora_args.lora_r <= 0 or lora_args.lora_alpha <= 0):
        problems.append("lora_r / lora_alpha: must be positive")
    if not 0 <= lora_args.lora_dropout < 1:
        problems.append(f"lora_dropout: {lora_args.lora_dropout} must be in [0, 1)")
    if training_args.resume_from_checkpoint not in (None, "auto") and not Path(training_args.resume_from_checkpoint).is_dir():
        problems.append(f"resume_from_checkpoint: {training_args.resume_from_checkpoint} is not a folder; give a checkpoint folder or `auto`")
    return problems


# --------------------------------------------------------------------------- distributed set-up on CPU


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def setup_cpu_distributed() -> bool:
    """On a machine without CUDA, launched with several processes: initialise
    torch.distributed with gloo before anything else touches it (DeepSpeed
    would otherwise pick a backend CPUs lack, and each rank would think it is
    rank 0 of 1). A GPU launch is left entirely to accelerate. Returns True
    when it initialised the group."""
    import torch

    if torch.cuda.is_available() or _world_size() <= 1:
        return False
    from accelerate import PartialState

    PartialState(backend="gloo")
    return True


# --------------------------------------------------------------------------- data


def load_training_data(data_args: DataArguments, seed: int):
    """Train and eval splits from the built datasets, filtered as asked, with
    each dataset's content hashes for the model card."""
    import datasets

    from judgetrain import records

    trains, evals, provenance, dropped = [], [], [], {}
    for path in data_args.datasets:
        info = records.read_build_info(path)
        dd = records.load(path)
        if data_args.train_split not in dd:
            raise ConfigError([f"train_split: {path} has no split {data_args.train_split!r} (it has {sorted(dd)})"])
        provenance.append({"path": str(path), "builder": info.get("builder"), "version": info.get("version"),
                           "splits": {s: v["content_hash"] for s, v in info.get("splits", {}).items()}})
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

    def combine(parts):
        if not parts:
            return None
        if data_args.mixture_weights and len(parts) == len(data_args.mixture_weights):
            total = sum(data_args.mixture_weights)
            return datasets.interleave_datasets(parts, probabilities=[w / total for w in data_args.mixture_weights], seed=seed,
                                                stopping_strategy="all_exhausted")
        return datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]

    train, evaluation = combine(trains), combine(evals)
    if train is None or len(train) == 0:
        raise ConfigError([f"datasets: no training records left in split {data_args.train_split!r} after filtering "
                           f"(tasks={data_args.tasks}, layouts={data_args.layouts}, max_frames={data_args.max_frames})"])
    if data_args.max_train_samples:
        train = train.select(range(min(data_args.max_train_samples, len(train))))
    if evaluation is not None and data_args.max_eval_samples:
        evaluation = evaluation.select(range(min(data_args.max_eval_samples, len(evaluation))))
    return train, evaluation, {"datasets": provenance, "left_out": dropped}


def _keep_mask(ds, data_args: DataArguments) -> list[bool]:
    cols = ds.select_columns(["task", "layout", "n_frames"])
    tasks, layouts, n = cols["task"], cols["layout"], cols["n_frames"]
    return [
        (data_args.tasks is None or t in data_args.tasks)
        and (data_args.layouts is None or lay in data_args.layouts)
        and (data_args.max_frames is None or k <= data_args.max_frames)
        for t, lay, k in zip(tasks, layouts, n)
    ]


def check_records(ds, processor, max_length: int | None, name: str, check_lengths: bool) -> int:
    """Refuse records that would break training silently: no image (under
    ZeRO-3 a rank whose batch has no image skips the vision tower and the
    ranks hang), or longer than ``max_length`` tokens with images expanded
    (truncation would cut image tokens). Returns the longest record in tokens
    (0 when not measured)."""
    from tqdm.auto import tqdm

    measure = check_lengths and max_length is not None
    longest, too_long, no_images = 0, [], []
    rows = ds if measure else ds.select_columns(["id", "images"])
    for row in tqdm(rows, desc=f"checking {name} records", unit="rec", disable=os.environ.get("LOCAL_RANK", "0") != "0"):
        if not row["images"]:
            no_images.append(row["id"])
        elif measure:
            n = record_length(processor, row)
            longest = max(longest, n)
            if n > max_length:
                too_long.append((row["id"], n))
    if no_images:
        raise ConfigError([f"{name}: {len(no_images)} record(s) show no image (e.g. {no_images[:3]}); every training batch must carry "
                           "images (a rank without any hangs under DeepSpeed ZeRO-3). Filter them out with `tasks:`/`layouts:`"])
    if too_long:
        raise ConfigError([f"max_length: {len(too_long)} {name} record(s) are longer than max_length={max_length} tokens "
                           f"(longest {longest}, e.g. {too_long[:3]}); truncation would cut image tokens. Set `max_length: {longest}` "
                           "(or more), lower max_pixels, or cap frames with `max_frames:`"])
    return longest


def record_length(processor, row: dict) -> int:
    """Tokens of prompt + completion with every image placeholder expanded, as
    the processor would produce them: the text's own tokens plus the expansion
    of its images, which depends only on their sizes and is computed once per
    combination of sizes (no pixel is processed per record)."""
    text = processor.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
    return len(processor.tokenizer(text)["input_ids"]) + _image_expansion(processor, tuple(im.size for im in row["images"]))


def _image_expansion(processor, sizes: tuple[tuple[int, int], ...]) -> int:
    cache = processor.__dict__.setdefault("_judgetrain_expansion", {})
    if sizes not in cache:
        from PIL import Image

        messages = [{"role": "user", "content": [{"type": "image"}] * len(sizes)}]
        text = processor.apply_chat_template(messages, tokenize=False)
        images = [Image.new("RGB", size) for size in sizes]
        expanded = processor(text=[text], images=[images], return_tensors="pt")["input_ids"].shape[1]
        cache[sizes] = expanded - len(processor.tokenizer(text)["input_ids"])
    return cache[sizes]


# --------------------------------------------------------------------------- model


def lora_config(lora_args: LoraArguments, model_args: ModelArguments, family, model=None):
    """PEFT LoRA on the language model's projections; the vision tower and
    projector join as fully trained ``modules_to_save`` only when unfrozen."""
    from peft import LoraConfig

    to_save = list(lora_args.lora_modules_to_save or [])
    if not model_args.freeze_vision_tower:
        to_save += list(family.vision_modules)
    if not model_args.freeze_projector:
        to_save += [m for m in family.projector_modules if not any(m.startswith(v) for v in to_save)]
    if model is not None:
        to_save = _expand_module_lists(model, to_save)
    return LoraConfig(
        r=lora_args.lora_r,
        lora_alpha=lora_args.lora_alpha,
        lora_dropout=lora_args.lora_dropout,
        target_modules=lora_args.lora_target_modules or family.lora_target_regex,
        modules_to_save=to_save or None,
        task_type="CAUSAL_LM",
    )


def _expand_module_lists(model, names: list[str]) -> list[str]:
    """PEFT cannot copy a ModuleList as a module to save (Qwen3-VL's
    ``deepstack_merger_list``): name its members instead."""
    import torch

    modules = dict(model.named_modules())
    out = []
    for name in names:
        found = [m for full, m in modules.items() if full == name or full.endswith("." + name)]
        if found and isinstance(found[0], (torch.nn.ModuleList, torch.nn.ModuleDict)):
            out += [f"{name}.{child}" for child, _ in found[0].named_children()]
        else:
            out.append(name)
    return out


def vision_is_trainable(model, family, peft_config, model_args: ModelArguments) -> bool:
    """Whether training will touch the vision tower or projector: unfrozen by
    the recipe, or reached by the LoRA target pattern."""
    import re

    if not model_args.freeze_vision_tower or not model_args.freeze_projector:
        return True
    if peft_config is None:
        return False
    targets = peft_config.target_modules
    for name, _ in model.named_modules():
        if not (family.is_vision_tower(name) or family.is_projector(name)):
            continue
        if isinstance(targets, str):
            hit = re.fullmatch(targets, name) is not None
        else:
            hit = any(name == t or name.endswith("." + t) for t in targets or ())
        if hit:
            return True
    return False


def set_full_finetune_trainable(model, model_args: ModelArguments, family) -> None:
    """Without LoRA: the language model and head train, the vision tower and
    projector follow their freeze flags."""
    for name, p in model.named_parameters():
        if family.is_projector(name):
            p.requires_grad_(not model_args.freeze_projector)
        elif family.is_vision_tower(name):
            p.requires_grad_(not model_args.freeze_vision_tower)
        else:
            p.requires_grad_(True)


# --------------------------------------------------------------------------- checkpoints


def _checkpoint_complete_callback():
    from transformers import TrainerCallback

    class CheckpointComplete(TrainerCallback):
        """Marks a checkpoint complete once the Trainer has written all of it
        (model, optimizer, scheduler, RNG state, trainer state): a run killed
        mid-save leaves a folder without the marker, which resume skips."""

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if folder.is_dir():
                    _atomic_write(folder / COMPLETE_MARKER, json.dumps({"global_step": state.global_step}))
            return control

    return CheckpointComplete()


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def find_resume_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The newest complete ``checkpoint-N`` in ``output_dir`` (None if none);
    incomplete ones (killed mid-save) are skipped with a warning."""
    out = Path(output_dir)
    if not out.is_dir():
        return None
    found = sorted((int(p.name.split("-")[1]), p) for p in out.glob("checkpoint-*") if p.name.split("-")[1].isdigit())
    for step, path in reversed(found):
        if (path / COMPLETE_MARKER).is_file() and (path / "trainer_state.json").is_file():
            return str(path)
        logger.warning("%s is incomplete (the run stopped while saving it); resuming from an earlier checkpoint", path)
    return None


# --------------------------------------------------------------------------- logging


def configure_reporting(training_args) -> None:
    """wandb without a configured key logs offline into the output folder
    (sync later with `wandb sync`); the key itself is never printed or saved."""
    report_to = training_args.report_to or []
    if "wandb" in report_to:
        os.environ.setdefault("WANDB_DIR", str(Path(training_args.output_dir).resolve()))
        Path(os.environ["WANDB_DIR"]).mkdir(parents=True, exist_ok=True)
        if not os.environ.get("WANDB_API_KEY") and not wandb_netrc_configured() and os.environ.get("WANDB_MODE") is None:
            os.environ["WANDB_MODE"] = "offline"
            logger.warning("wandb: no API key configured; logging offline to %s (upload later with `wandb sync`)", os.environ["WANDB_DIR"])


def wandb_netrc_configured() -> bool:
    """True when ~/.netrc holds a wandb API key (then runs log online, as `wandb login` left them)."""
    import netrc

    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def _redacted_env(env: dict) -> dict:
    return {k: ("<redacted>" if any(w in k.upper() for w in _SECRET_WORDS) else v) for k, v in (env or {}).items()}


def resolved_recipe(model_args, data_args, lora_args, training_args, argv: list[str]) -> dict:
    """Every judgetrain field plus the SFTConfig fields that differ from their defaults."""
    from trl import SFTConfig

    recipe: dict[str, Any] = {}
    for obj in (model_args, data_args, lora_args):
        recipe.update(asdict(obj))
    defaults = {f.name: f.default for f in fields(SFTConfig)}
    for f in fields(SFTConfig):
        value = getattr(training_args, f.name)
        if f.name.endswith("_token") or f.name in ("hub_token", "push_to_hub_token"):
            continue  # secrets never go into saved configs
        if f.name in defaults and value != defaults[f.name] and _yamlable(value):
            recipe[f.name] = value.value if hasattr(value, "value") else value
    return recipe


def _yamlable(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, dict)) or hasattr(v, "value")


def write_model_card(out: Path, model_args, family, data_info: dict, argv: list[str], trainer, longest: int) -> None:
    lines = [
        "---",
        f"base_model: {model_args.model_name_or_path}",
        "library_name: peft" if (out / "adapter_config.json").exists() else "library_name: transformers",
        "tags: [judgetrain, lora, vlm-judge]",
        "---",
        "",
        f"# judgetrain judge: {family.name} fine-tuned on {len(data_info['datasets'])} dataset(s)",
        "",
        f"- base model: `{model_args.model_name_or_path}` ({family.name})",
        f"- steps: {trainer.state.global_step}, epochs: {trainer.state.epoch:.2f}",
        f"- world size: {trainer.args.world_size}, per-device batch: {trainer.args.per_device_train_batch_size}, "
        f"gradient accumulation: {trainer.args.gradient_accumulation_steps} "
        f"(effective batch {trainer.args.world_size * trainer.args.per_device_train_batch_size * trainer.args.gradient_accumulation_steps})",
        f"- longest training record: {longest or 'not measured'} tokens",
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
    _atomic_write(out / "README.md", "\n".join(lines))


# --------------------------------------------------------------------------- main


@dataclass
class Run:
    """Everything :func:`setup` wired together, ready to train."""

    trainer: Any
    processor: Any
    family: Any
    model_args: ModelArguments
    data_args: DataArguments
    lora_args: LoraArguments
    training_args: Any
    data_info: dict
    longest: int
    argv: list[str]


def setup(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> Run:
    """parse → model → data → trainer; nothing trained yet. Each of ``callbacks`` is
    called with the evaluation records (or None), the processor and the training
    arguments once the trainer exists; what it returns (a ``TrainerCallback``, or
    None for none) joins the trainer. ``judgetrain sweep``'s trials add theirs so."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cpu_distributed = setup_cpu_distributed()
    model_args, data_args, lora_args, training_args = parse(argv, configured_state=cpu_distributed)
    problems = check_config(model_args, data_args, lora_args, training_args, _world_size())
    if problems:
        raise ConfigError(problems)
    if data_args.effective_batch_size:
        training_args.gradient_accumulation_steps = data_args.effective_batch_size // (training_args.per_device_train_batch_size * _world_size())
    configure_reporting(training_args)

    from transformers import set_seed
    from trl import SFTTrainer

    from judgetrain.models import get_family, load_model_and_processor

    set_seed(training_args.seed)
    # 1. model
    model, processor = load_model_and_processor(
        model_args.model_name_or_path, family=model_args.family, dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
        trust_remote_code=training_args.trust_remote_code,  # SFTConfig's field: off unless the recipe asks
        min_pixels=model_args.min_pixels, max_pixels=model_args.max_pixels,
    )
    model.train()
    family = get_family(model_args.family) if model_args.family else _family_of(model)
    # 2. data
    train, evaluation, data_info = load_training_data(data_args, training_args.seed)
    with training_args.main_process_first(desc="checking records"):
        longest = check_records(train, processor, training_args.max_length, "train", data_args.check_lengths)
        if evaluation is not None:
            longest = max(longest, check_records(evaluation, processor, training_args.max_length, "eval", data_args.check_lengths))
    # 3. trainer
    peft_config = lora_config(lora_args, model_args, family, model) if lora_args.use_lora else None
    if peft_config is None:
        set_full_finetune_trainable(model, model_args, family)
    if training_args.ddp_find_unused_parameters is None:
        # DDP must be told when some trainable parameters may get no gradient
        # in a step, which happens once training reaches the vision side
        # (LoRA on vision modules, an unfrozen tower or projector). Saying so
        # when it is not needed costs a graph walk per step and breaks
        # reentrant activation checkpointing, so it is on only then.
        training_args.ddp_find_unused_parameters = vision_is_trainable(model, family, peft_config, model_args)
    trainer = SFTTrainer(
        model=model, args=training_args, train_dataset=train,
        eval_dataset=evaluation if training_args.eval_strategy != "no" else None,
        processing_class=processor, peft_config=peft_config, callbacks=[_checkpoint_complete_callback()],
    )
    for factory in callbacks:
        callback = factory(evaluation, processor, training_args)
        if callback is not None:
            trainer.add_callback(callback)
    if trainer.accelerator.is_main_process:
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in trainer.model.parameters())
        logger.info("trainable parameters: %d of %d (%.2f%%)", trainable, total, 100 * trainable / max(total, 1))
    return Run(trainer, processor, family, model_args, data_args, lora_args, training_args, data_info, longest, argv)


def train_and_save(run: Run) -> Path:
    """train (resuming when asked) → save adapter, processor, recipe, state, model card."""
    import yaml

    trainer, training_args = run.trainer, run.training_args
    resume = training_args.resume_from_checkpoint
    if resume == "auto":
        resume = find_resume_checkpoint(training_args.output_dir)
        logger.info("resume_from_checkpoint auto: %s", resume or "no complete checkpoint, starting fresh")
    trainer.train(resume_from_checkpoint=resume)
    out = Path(training_args.output_dir)
    trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        run.processor.save_pretrained(str(out))
        trainer.save_state()
        recipe = resolved_recipe(run.model_args, run.data_args, run.lora_args, training_args, run.argv)
        header = f"# accelerate launch -m judgetrain.train --config {out / RECIPE_FILE}\n"
        _atomic_write(out / RECIPE_FILE, header + yaml.safe_dump(recipe, sort_keys=True))
        write_model_card(out, run.model_args, run.family, run.data_info, run.argv, trainer, run.longest)
        print(f"Training finished at step {trainer.state.global_step}; adapter, processor, recipe and model card in {out}", flush=True)
    return out


def main(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    run = setup(argv, callbacks=callbacks)
    train_and_save(run)
    # Every rank waits until the main one has written its files, then the
    # group is torn down together: a rank that tears down (or exits) while
    # another still holds the gloo group makes the latter abort with SIGABRT.
    run.trainer.accelerator.wait_for_everyone()
    run.trainer.end()  # finish trackers and destroy the process group
    return 0


def _family_of(model):
    from judgetrain.models import detect_family

    return detect_family(model.config)


def script(argv: list[str] | None = None, *, callbacks: Sequence[CallbackFactory] = ()) -> int:
    """``python -m judgetrain.train`` (what ``accelerate launch`` runs in every process):
    :func:`main`, with a user error (configuration, dataset, model) printed as its
    message, which says what to change, and exit code 2 instead of a traceback."""
    from judgetrain.models import ModelNotFoundError
    from judgetrain.records import IncompleteDatasetError, RecordValidationError

    try:
        return main(argv, callbacks=callbacks)
    except (config.ConfigError, IncompleteDatasetError, RecordValidationError, ModelNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(script())
