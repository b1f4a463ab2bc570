"""What trains: the PEFT LoRA configuration on a family's language-model
projections, which vision modules join it, and which parameters train in a full
fine-tune; whether DDP must expect parameters without a gradient; and the check
that a recipe's ``lora_target_modules`` reaches layers LoRA can wrap, made on
the model built from its config on the meta device (no weights loaded); and the
warning that vLLM cannot serve an adapter that reaches the vision side.

Used by ``judgetrain.train``. README: "`judgetrain train`".
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from .args import LoraArguments, ModelArguments

__all__ = ["lora_config", "lora_target_problems", "prepare_trainable", "set_full_finetune_trainable", "vision_is_trainable",
           "vllm_serving_problem"]

logger = logging.getLogger("judgetrain.train")


def prepare_trainable(model, family, model_args: ModelArguments, lora_args: LoraArguments, training_args):
    """Decide what trains: return the LoRA config (``None`` without LoRA, after
    setting ``requires_grad`` for a full fine-tune), and set
    ``training_args.ddp_find_unused_parameters`` when the recipe leaves it unset."""
    peft_config = lora_config(lora_args, model_args, family, model) if lora_args.use_lora else None
    if peft_config is None:
        set_full_finetune_trainable(model, model_args, family)
    problem = vllm_serving_problem(model, family, peft_config, model_args)
    if problem:
        logger.warning(problem)
    if training_args.ddp_find_unused_parameters is None:
        # DDP must be told when some trainable parameters may get no gradient
        # in a step, which happens once training reaches the vision side
        # (LoRA on vision modules, an unfrozen tower or projector). Saying so
        # when it is not needed costs a graph walk per step and breaks
        # reentrant activation checkpointing, so it is on only then.
        training_args.ddp_find_unused_parameters = vision_is_trainable(model, family, peft_config, model_args)
    return peft_config


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


def vllm_serving_problem(model, family, peft_config, model_args: ModelArguments) -> str | None:
    """Why ``vllm serve --enable-lora`` cannot serve the adapter this LoRA config trains,
    with the fix, or None. vLLM applies LoRA to a multimodal model's language model only
    (LoRA on the vision tower or projector is dropped) and refuses an adapter with
    ``modules_to_save`` (an unfrozen tower or projector, ``lora_modules_to_save``)."""
    if peft_config is None:
        return None
    to_save = list(peft_config.modules_to_save or [])
    if not to_save and not vision_is_trainable(model, family, peft_config, model_args):
        return None
    what = (f"saves whole modules with the adapter (modules_to_save: {', '.join(to_save[:4])}"
            f"{', …' if len(to_save) > 4 else ''}), which vLLM refuses" if to_save
            else "puts LoRA on the vision tower or projector (lora_target_modules), which vLLM drops")
    return (f"vLLM serves LoRA on the language model only: this adapter {what}, so `vllm serve --enable-lora "
            "--lora-modules` will not serve it as trained. To serve it with vLLM, merge it first (`judgetrain merge "
            "OUTPUT_DIR --out MERGED`, then `vllm serve MERGED`), or train an adapter vLLM loads as is: keep "
            "freeze_vision_tower and freeze_projector true, lora_modules_to_save unset and lora_target_modules on the "
            "language model.")


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


# --------------------------------------------------------------------------- checking lora_target_modules before any weight loads


def lora_target_problems(model_args: ModelArguments, lora_args: LoraArguments, trust_remote_code: bool = False,
                         zero3_config: Any = None) -> list[str]:
    """Problems with the recipe's ``lora_target_modules`` (a regex PEFT full-matches
    against module names): not a regex, matching no module, or matching modules LoRA
    cannot wrap. Judged with PEFT's own matcher on the model built from its config on
    the meta device, so nothing is loaded; [] when there is no pattern to check or the
    config cannot be read (the model loader then says why). ``zero3_config``: the training
    arguments' ``hf_deepspeed_config`` (None without DeepSpeed), set aside while the meta
    model is built (:func:`_meta_model`)."""
    import re

    pattern = lora_args.lora_target_modules
    if not lora_args.use_lora or not pattern:
        return []
    try:
        re.compile(pattern)
    except re.error as e:
        return [f"lora_target_modules: {pattern!r} is not a regular expression ({e}); PEFT full-matches it against module names"]
    model = _meta_model(model_args.model_name_or_path, trust_remote_code, zero3_config)
    if model is None:
        return []
    from peft.tuners.tuners_utils import check_target_module_exists

    from judgetrain.models import detect_family, get_family

    family = get_family(model_args.family) if model_args.family else detect_family(model.config)
    config = lora_config(lora_args, model_args, family, model)
    modules = dict(model.named_modules())
    # a match object or True; an excluded module (modules_to_save) is falsy
    matched = [name for name in modules if name and bool(check_target_module_exists(config, name))]
    examples = ", ".join(_example_layer_names(modules))
    if not matched:
        return [f"lora_target_modules: {pattern!r} matches no module of {model_args.model_name_or_path} (PEFT full-matches the "
                f"whole dotted name); its layers LoRA can wrap look like: {examples}. Leave it unset for the family's "
                "language-model projections"]
    unwrappable = [name for name in matched if not isinstance(modules[name], _lora_layer_types())]
    if unwrappable:
        return [f"lora_target_modules: {pattern!r} matches {len(unwrappable)} module(s) LoRA cannot wrap (only Linear, Embedding, "
                f"Conv and MultiheadAttention layers), e.g. {', '.join(unwrappable[:3])}; match layers such as: {examples}"]
    return []


@functools.lru_cache(maxsize=4)  # a sweep checks its recipe once per probed value
def _meta_model(model_name_or_path: str | None, trust_remote_code: bool, zero3_config: Any = None):
    """The model class of ``model_name_or_path`` built from its config on the meta
    device (module tree only, no memory); None when its config cannot be read.
    transformers builds every model under ZeRO-3's partitioning once the training
    arguments name a ZeRO-3 config (a process-wide setting), which a meta tensor cannot
    take ("Cannot copy out of meta tensor"): the setting is lifted while the tree is
    built, and ``zero3_config`` (the arguments' ``hf_deepspeed_config``) put back."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText
    from transformers.integrations.deepspeed import set_hf_deepspeed_config, unset_hf_deepspeed_config

    if not model_name_or_path:
        return None
    try:
        config = AutoConfig.from_pretrained(model_name_or_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        return None
    unset_hf_deepspeed_config()
    try:
        with torch.device("meta"):
            return AutoModelForImageTextToText.from_config(config, trust_remote_code=trust_remote_code)
    finally:
        if zero3_config is not None:
            set_hf_deepspeed_config(zero3_config)


def _lora_layer_types() -> tuple[type, ...]:
    import torch
    from transformers.pytorch_utils import Conv1D

    nn = torch.nn
    return (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.MultiheadAttention, Conv1D)


def _example_layer_names(modules: dict, n: int = 8) -> list[str]:
    """Up to ``n`` wrappable layer names, layer numbers written as ``\\d+`` (one per pattern)."""
    import re

    seen: list[str] = []
    for name, module in modules.items():
        general = re.sub(r"\.\d+\.", r".\\d+.", name)
        if name and isinstance(module, _lora_layer_types()) and general not in seen:
            seen.append(general)
    language = [s for s in seen if "language_model" in s]
    return (language + [s for s in seen if s not in language])[:n]
