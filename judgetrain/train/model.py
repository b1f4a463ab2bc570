"""What trains: the PEFT LoRA configuration (``trl.get_peft_config`` of the recipe's model
fields) on a family's language-model projections, which vision modules join it, and which
parameters train in a full fine-tune; whether training reaches the vision side (which
:mod:`judgetrain.train.settings` tells DDP); the check that a recipe's
``lora_target_modules`` reaches layers LoRA can wrap, made on the model built from its
config on the meta device (no weights loaded); and the warning that vLLM cannot serve an
adapter that reaches the vision side.

Used by ``judgetrain.train``. Docs: "reference/recipes.md".
"""

from __future__ import annotations

import functools
import logging

from judgetrain.compat.peft import targets_module
from judgetrain.compat.transformers import zero3_lifted

from .model_args import ModelArguments

__all__ = [
    "lora_config",
    "lora_target_problems",
    "prepare_trainable",
    "set_full_finetune_trainable",
    "vision_is_trainable",
    "vllm_serving_problem",
]

logger = logging.getLogger("judgetrain.train")


def prepare_trainable(model, family, model_args: ModelArguments, task_type: str | None = None):
    """Decide what trains: return the LoRA config (``None`` without LoRA, after setting
    ``requires_grad`` for a full fine-tune; ``task_type``: PEFT's, where the method decides it);
    warn when vLLM could not serve the adapter."""
    peft_config = lora_config(model_args, family, model, task_type) if model_args.use_peft else None
    if peft_config is None:
        set_full_finetune_trainable(model, model_args, family)
    problem = vllm_serving_problem(model, family, peft_config, model_args)
    if problem:
        logger.warning(problem)
    return peft_config


def lora_config(model_args: ModelArguments, family, model=None, task_type: str | None = None):
    """``trl.get_peft_config(model_args)`` (every LoRA field of TRL's ``ModelConfig``: rank,
    alpha, dropout, ``use_rslora``, ``use_dora``, ``lora_target_parameters``, the task) with
    two of judgetrain's: the targets default to the family's language-model projections, and
    the vision tower and projector join as fully trained ``modules_to_save`` when unfrozen."""
    from dataclasses import replace

    from trl import get_peft_config

    to_save = list(model_args.lora_modules_to_save or [])
    if not model_args.freeze_vision_tower:
        to_save += list(family.vision_modules)
    if not model_args.freeze_projector:
        to_save += [m for m in family.projector_modules if not any(m.startswith(v) for v in to_save)]
    if model is not None:
        to_save = _expand_module_lists(model, to_save)
    return get_peft_config(
        replace(
            model_args,
            use_peft=True,
            lora_modules_to_save=to_save or None,
            lora_target_modules=model_args.lora_target_modules or family.lora_target_regex,
            lora_task_type=task_type or model_args.lora_task_type,
        )
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
    what = (
        f"saves whole modules with the adapter (modules_to_save: {', '.join(to_save[:4])}"
        f"{', …' if len(to_save) > 4 else ''}), which vLLM refuses"
        if to_save
        else "puts LoRA on the vision tower or projector (lora_target_modules), which vLLM drops"
    )
    return (
        f"vLLM serves LoRA on the language model only: this adapter {what}, so `vllm serve --enable-lora "
        "--lora-modules` will not serve it as trained. To serve it with vLLM, merge it first (`judgetrain merge "
        "OUTPUT_DIR --out MERGED`, then `vllm serve MERGED`), or train an adapter vLLM loads as is: keep "
        "freeze_vision_tower and freeze_projector true, lora_modules_to_save unset and lora_target_modules on the "
        "language model."
    )


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


def lora_target_problems(model_args: ModelArguments, trust_remote_code: bool = False) -> list[str]:
    """Problems with the recipe's ``lora_target_modules`` (one value: a regex PEFT full-matches
    against module names; several: module names): not a regex, matching no module, or
    matching modules LoRA cannot wrap. Judged with PEFT's own matcher on the model built from
    its config on the meta device, so nothing is loaded; [] when there is nothing to check or
    the config cannot be read (the model loader then says why)."""
    import re

    pattern = model_args.lora_target_modules
    if not model_args.use_peft or not pattern:
        return []
    if isinstance(pattern, str):
        try:
            re.compile(pattern)
        except re.error as e:
            return [
                f"lora_target_modules: {pattern!r} is not a regular expression ({e}); PEFT full-matches it against module names"
            ]
    model = _meta_model(model_args.model_name_or_path, model_args.model_revision, trust_remote_code)
    if model is None:
        return []
    from judgetrain.models import detect_family, get_family

    family = get_family(model_args.family) if model_args.family else detect_family(model.config)
    config = lora_config(model_args, family, model)
    modules = dict(model.named_modules())
    matched = [name for name in modules if name and targets_module(config, name)]  # a module to save is not matched
    examples = ", ".join(_example_layer_names(modules))
    if not matched:
        return [
            f"lora_target_modules: {pattern!r} matches no module of {model_args.model_name_or_path} (PEFT full-matches the "
            f"whole dotted name); its layers LoRA can wrap look like: {examples}. Leave it unset for the family's "
            "language-model projections"
        ]
    unwrappable = [name for name in matched if not isinstance(modules[name], _lora_layer_types())]
    if unwrappable:
        return [
            f"lora_target_modules: {pattern!r} matches {len(unwrappable)} module(s) LoRA cannot wrap (only Linear, Embedding, "
            f"Conv and MultiheadAttention layers), e.g. {', '.join(unwrappable[:3])}; match layers such as: {examples}"
        ]
    return []


@functools.lru_cache(maxsize=4)  # a sweep checks its recipe once per probed value
def _meta_model(model_name_or_path: str | None, revision: str | None, trust_remote_code: bool):
    """The model class of ``model_name_or_path`` (at hub ``revision``) built from its config
    on the meta device (module tree only, no memory); None when its config cannot be read.
    transformers builds every model under ZeRO-3's partitioning once a ZeRO-3 config is
    active (a process-wide setting), which a meta tensor cannot take: it is lifted while the
    tree is built (:func:`judgetrain.compat.transformers.zero3_lifted`)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    if not model_name_or_path:
        return None
    try:
        config = AutoConfig.from_pretrained(model_name_or_path, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):
        return None
    with zero3_lifted(), torch.device("meta"):
        return AutoModelForImageTextToText.from_config(config, trust_remote_code=trust_remote_code)


def _lora_layer_types() -> tuple[type, ...]:
    import torch
    from transformers import Conv1D

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
