"""The model fields of a training recipe: TRL's ``ModelConfig`` as TRL's own scripts parse it
(the base model and its ``model_revision``, ``dtype``, ``attn_implementation``, and the PEFT
LoRA fields ``use_peft``, ``lora_r``, ``lora_alpha``, ``lora_dropout``,
``lora_target_modules``, ``lora_target_parameters``, ``lora_modules_to_save``,
``lora_task_type``, ``use_rslora``, ``use_dora``), with judgetrain's own model fields beside
them (the family, the per-image pixel budget, the frozen vision tower and projector), and
their own checks.

``trl.get_peft_config(model_args)`` reads it as it reads TRL's own (judgetrain's LoRA config
is built through it, :func:`judgetrain.train.model.lora_config`). Two defaults differ from
TRL's: LoRA is on (``use_peft: true``) and ``dtype`` is the checkpoint's (``auto``).
Importing TRL's dataclass loads TRL, which the launcher's options do not need, hence this
module beside :mod:`judgetrain.train.args`.
Docs: "reference/recipes.md".
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path

from trl import ModelConfig

from judgetrain.config import arg
from judgetrain.models.registry import DTYPES, FAMILIES

__all__ = ["IDENTITY_FIELDS", "QUANTIZATION_FIELDS", "STRING_LISTS", "ModelArguments", "model_problems"]

# TRL's fields that change the trained weights (judgetrain's own say so in their metadata). The
# revision enters a run's identity as the commit it resolves to (judgetrain.train.base_model).
IDENTITY_FIELDS = (
    "use_peft",
    "lora_r",
    "lora_alpha",
    "lora_dropout",
    "lora_target_modules",
    "lora_target_parameters",
    "lora_modules_to_save",
    "lora_task_type",
    "use_rslora",
    "use_dora",
)
# TRL's quantized loading (QLoRA through bitsandbytes), which judgetrain train does not do: refused by model_problems
QUANTIZATION_FIELDS = ("load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type", "use_bnb_nested_quant", "bnb_4bit_quant_storage")
# list fields whose one value TRL keeps as a string (ModelConfig.__post_init__): a regex PEFT full-matches
STRING_LISTS = ("lora_target_modules",)


@dataclass
class ModelArguments(ModelConfig):
    """TRL's ``ModelConfig`` (LoRA on, the checkpoint's dtype) plus judgetrain's model fields."""

    dtype: str = arg("auto", f"Weights dtype: {', '.join(DTYPES)}.", identity=True)
    use_peft: bool = arg(
        True, "LoRA through PEFT (judgetrain's default: on); false trains the language model fully.", identity=True
    )
    lora_target_modules: list[str] | None = arg(
        None,
        "Modules LoRA wraps, as PEFT matches them: one value is a regex full-matched against each module's dotted "
        "name, several are module names; default: the family's language-model projections.",
        identity=True,
    )
    family: str | None = arg(None, f"Model family ({', '.join(FAMILIES)}); default: from the config.", identity=True)
    min_pixels: int | None = arg(None, "Qwen: smallest per-image pixel budget.", identity=True, minimum=1)
    max_pixels: int | None = arg(
        None, "Qwen: largest per-image pixel budget (bounds image tokens per frame).", identity=True, minimum=1
    )
    freeze_vision_tower: bool = arg(True, "Keep the vision encoder frozen (default).", identity=True)
    freeze_projector: bool = arg(True, "Keep the vision-to-language projector frozen (default).", identity=True)
    init_adapter: str | None = arg(
        None,
        "A LoRA adapter folder (an SFT warm-up's output_dir) this run starts from and trains on, as LLaMA-Factory's "
        "adapter_name_or_path: SFT then GRPO. Its LoRA settings are the adapter's (lora_r and lora_alpha must agree); "
        "the run's identity holds its files' sha256.",
    )


def _trl_default(name: str):
    field = next(f for f in fields(ModelConfig) if f.name == name)
    return field.default_factory() if field.default is MISSING and field.default_factory is not MISSING else field.default


def model_problems(model_args: ModelArguments) -> list[str]:
    """Problems with the model fields alone, each naming the field and the fix: LoRA's shape,
    a LoRA task other than a causal LM, TRL's quantized loading (not done here), and a
    ``model_revision`` for a local folder (a revision names a hub commit)."""
    problems = []
    for name, fix in (("lora_r", "a positive rank (TRL's default 16)"), ("lora_alpha", "a positive scale (TRL's default 32)")):
        value = getattr(model_args, name)
        if model_args.use_peft and not (isinstance(value, (int, float)) and 0 < value < float("inf")):
            problems.append(f"{name}: {value!r} is not positive; give {fix}")
    if not 0 <= model_args.lora_dropout < 1:
        problems.append(f"lora_dropout: {model_args.lora_dropout} must be in [0, 1)")
    if model_args.use_peft and model_args.lora_task_type != "CAUSAL_LM":
        problems.append(
            f"lora_task_type: {model_args.lora_task_type!r}, but judgetrain train fine-tunes the language model's "
            "next-token loss; leave it CAUSAL_LM"
        )
    for name in QUANTIZATION_FIELDS:
        value = getattr(model_args, name)
        if value != _trl_default(name):
            problems.append(
                f"{name}: {value!r}, but judgetrain train loads the base model unquantized (no QLoRA); leave "
                f"{name} at {_trl_default(name)!r}, or lower memory with a smaller per-device batch, gradient "
                "checkpointing or DeepSpeed ZeRO-3"
            )
    problems += _init_adapter_problems(model_args)
    path = model_args.model_name_or_path
    if path and Path(path).expanduser().exists() and model_args.model_revision != _trl_default("model_revision"):
        problems.append(
            f"model_revision: {model_args.model_revision!r} names a hub commit, but {path} is a local folder (its "
            "files are what trains); drop model_revision, or give the hub id"
        )
    return problems


def _init_adapter_problems(model_args: ModelArguments) -> list[str]:
    """An ``init_adapter`` that is no adapter folder, on a full fine-tune, or with other LoRA shapes than the recipe's."""
    import json

    if not model_args.init_adapter:
        return []
    config_file = Path(model_args.init_adapter).expanduser() / "adapter_config.json"
    if not model_args.use_peft:
        return ["init_adapter: set with use_peft false; an adapter trains on as LoRA: set `use_peft: true`, or drop it"]
    if not config_file.is_file():
        return [
            f"init_adapter: {model_args.init_adapter} holds no adapter_config.json; give the output_dir of a LoRA run "
            "(`judgetrain train` writes the adapter there)"
        ]
    saved = json.loads(config_file.read_text())
    return [
        f"{field}: {getattr(model_args, field)!r}, but init_adapter {model_args.init_adapter} was trained with "
        f"{saved.get(key)!r}; set `{field}: {saved.get(key)}` (the adapter's shape trains on)"
        for field, key in (("lora_r", "r"), ("lora_alpha", "lora_alpha"))
        if saved.get(key) is not None and getattr(model_args, field) != saved.get(key)
    ]
