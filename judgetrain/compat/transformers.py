"""What judgetrain relies on in transformers beyond its documented API, each reliance with a
contract test in ``tests/compat/test_transformers.py`` that fails naming it when a release
changes it. Where a release no longer offers it, these raise
:class:`~judgetrain.compat.versions.UpstreamChanged` instead of doing something else.
Docs: "get-started/install.md".
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .versions import UpstreamChanged

__all__ = [
    "InternalSaves",
    "argument_group",
    "attention_implementation",
    "cache_rows",
    "count_items_in_batch",
    "current_accumulation",
    "hub_key_layout",
    "parser_actions",
    "init_zeros",
    "register_reward_key_mapping",
    "restated_accelerator_config",
    "sequence_classifier",
    "wandb_names",
    "zero3_lifted",
]

LIBRARY = "transformers"


class InternalSaves:
    """A ``Trainer`` mixin (put it before the Trainer class): :meth:`after_internal_save` runs
    after every save the Trainer makes itself, which it marks ``save_model(...,
    _internal_call=True)``: each checkpoint folder (before ``hub_strategy: checkpoint`` uploads
    it) and the output folder ``push_to_hub`` uploads. A save the caller asks for
    (``trainer.save_model(out)``) is not one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from transformers import Trainer

        if "_internal_call" not in inspect.signature(Trainer.save_model).parameters:
            raise UpstreamChanged(
                LIBRARY,
                "Trainer.save_model(_internal_call=...)",
                "write judgetrain's model card into the folders the Trainer saves itself (checkpoints)",
            )
        super().__init__(*args, **kwargs)

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call=_internal_call)  # type: ignore[misc]
        if _internal_call:
            self.after_internal_save(Path(output_dir or self.args.output_dir))  # type: ignore[attr-defined]

    def after_internal_save(self, folder: Path) -> None:
        """What to add to ``folder`` once the Trainer has saved into it (nothing here)."""


def restated_accelerator_config(training_args: Any, configured_state: bool) -> dict[str, Any]:
    """The accelerator config for training arguments built anew from ``training_args``
    (``dataclasses.replace``): theirs, saying again whether to reuse the process group set up
    before them (``use_configured_state``). ``TrainingArguments.__post_init__`` sets up the
    devices, which pops that key off its ``AcceleratorConfig``; a copy would say no, and the new
    arguments would reset the launch's accelerate state."""
    import dataclasses

    config = training_args.accelerator_config
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise UpstreamChanged(
            LIBRARY,
            "TrainingArguments.accelerator_config as an AcceleratorConfig dataclass",
            "build training arguments anew that reuse the launch's process group",
        )
    return {**dataclasses.asdict(config), "use_configured_state": configured_state}


def count_items_in_batch(trainer: Any) -> None:
    """Have ``trainer`` count ``num_items_in_batch`` (the loss tokens of the whole global batch)
    and pass it to ``compute_loss``, leaving the accumulation scaling to the loss, whatever the
    model class says of its own ``forward`` (``Trainer.model_accepts_loss_kwargs``, which
    ``Trainer.__init__`` reads from the model's ``accepts_loss_kwargs``). Call after ``__init__``."""
    if not hasattr(trainer, "model_accepts_loss_kwargs"):
        raise UpstreamChanged(
            LIBRARY,
            "Trainer.model_accepts_loss_kwargs",
            "have the Trainer count a global batch's loss tokens (num_items_in_batch) for every model family",
        )
    trainer.model_accepts_loss_kwargs = True


def current_accumulation(trainer: Any) -> int:
    """The micro-batches of the optimizer step in progress
    (``Trainer.current_gradient_accumulation_steps``, which the training loop sets each step:
    ``gradient_accumulation_steps``, fewer on an epoch's short last step); 1 outside the loop."""
    steps = getattr(trainer, "current_gradient_accumulation_steps", None)
    if steps is None:
        if trainer.is_in_train:
            raise UpstreamChanged(
                LIBRARY,
                "Trainer.current_gradient_accumulation_steps",
                "scale the consistency term as the Trainer scales the loss over an accumulated step",
            )
        return 1
    return int(steps)


@contextlib.contextmanager
def zero3_lifted() -> Iterator[None]:
    """Inside, transformers builds a model whole, not partitioned by ZeRO-3 (which a meta-device
    model cannot take: "Cannot copy out of meta tensor"); afterwards the DeepSpeed config that
    was active is active again, whoever set it (``TrainingArguments(deepspeed=…)`` or
    accelerate's DeepSpeed plugin). Relies on the process-wide weak reference
    ``transformers.integrations.deepspeed`` keeps and its ``set_``/``unset_hf_deepspeed_config``."""
    try:
        from transformers.integrations import deepspeed
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY, "transformers.integrations.deepspeed", "build a model on the meta device under ZeRO-3", str(e)
        ) from None
    names = ("_hf_deepspeed_config_weak_ref", "set_hf_deepspeed_config", "unset_hf_deepspeed_config")
    missing = [n for n in names if not hasattr(deepspeed, n)]
    if missing:
        raise UpstreamChanged(
            LIBRARY,
            f"transformers.integrations.deepspeed.{missing[0]}",
            "build a model on the meta device under ZeRO-3 and restore the DeepSpeed config after",
        )
    ref = deepspeed._hf_deepspeed_config_weak_ref
    active = ref() if ref is not None else None
    deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        if active is not None:
            deepspeed.set_hf_deepspeed_config(active)


def wandb_names(logs: dict[str, Any]) -> dict[str, Any]:
    """``logs`` (a Trainer log entry) under the names transformers' ``WandbCallback`` logs them
    (``train/loss``, ``eval/loss``, …: ``integration_utils.rewrite_logs``)."""
    try:
        from transformers.integrations.integration_utils import rewrite_logs
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY,
            "transformers.integrations.integration_utils.rewrite_logs",
            "replay a checkpoint's history into wandb under WandbCallback's names",
            str(e),
        ) from None
    return rewrite_logs(logs)


def hub_key_layout(model: Any) -> None:
    """Make ``model.save_pretrained`` write the key layout of the family's original hub
    checkpoints: every renaming of its conversion mapping
    (``conversion_mapping.get_model_conversion_mapping(model, add_legacy=False)``) reversed on
    save, not only those its loading applied (``model._weight_conversions``, which
    ``from_pretrained`` sets and ``save_pretrained`` reverses). ``model`` must come from
    ``from_pretrained``."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY,
            "transformers.conversion_mapping.get_model_conversion_mapping",
            "save a merged model in the hub's key layout (what vLLM loads)",
            str(e),
        ) from None
    if not hasattr(model, "_weight_conversions"):
        raise UpstreamChanged(
            LIBRARY,
            "PreTrainedModel._weight_conversions (set by from_pretrained, reversed by save_pretrained)",
            "save a merged model in the hub's key layout (what vLLM loads)",
        )
    model._weight_conversions = get_model_conversion_mapping(model, add_legacy=False)


def cache_rows(cache: Any, rows: Any) -> Any:
    """A new cache holding ``rows`` (a 1-D index tensor, repeats allowed) of a transformers
    ``Cache``, ``cache`` left untouched, so one prompt cache can serve any number of
    continuations. A shallow copy of the cache and of each of its layers (``Cache.layers``,
    the per-layer key/value holders transformers does not document), then the cache's own
    ``batch_select_indices``, whose advanced indexing gives the copy fresh key/value tensors
    (``copy.deepcopy`` would duplicate the whole batch first)."""
    import copy

    if not isinstance(getattr(cache, "layers", None), list) or not callable(getattr(cache, "batch_select_indices", None)):
        raise UpstreamChanged(
            LIBRARY,
            f"{type(cache).__name__}.layers (a list of per-layer caches) and Cache.batch_select_indices",
            "score every continuation of a shared prompt from one cache",
        )
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    new.batch_select_indices(rows)
    return new


def argument_group(dataclass_type: type, title: str) -> type:
    """``dataclass_type`` as a subclass whose fields ``HfArgumentParser`` (and so TRL's parser)
    lists under their own heading ``title`` in ``--help``: it adds the fields of a dataclass
    with an ``_argument_group_name`` to an argument group of that name. The subclass parses
    as ``dataclass_type`` does."""
    from transformers import HfArgumentParser

    if "_argument_group_name" not in inspect.getsource(HfArgumentParser):
        raise UpstreamChanged(
            LIBRARY,
            "HfArgumentParser's _argument_group_name (a dataclass's heading in --help)",
            "list the recipe fields in `judgetrain train --help` under the dataclass that declares them",
        )
    return type(dataclass_type.__name__, (dataclass_type,), {"_argument_group_name": title})


def parser_actions(parser: Any) -> list[Any]:
    """The ``argparse.Action`` of every flag of an ``HfArgumentParser`` (or TRL's parser, or a
    plain ``argparse.ArgumentParser``), in the order they were added: argparse keeps them in
    ``_actions`` and lists them nowhere public (``--help`` text aside)."""
    actions = getattr(parser, "_actions", None)
    if not isinstance(actions, list):
        raise UpstreamChanged(
            LIBRARY,
            "ArgumentParser._actions (the parser's flags, which HfArgumentParser inherits from argparse)",
            "check --config keys and flags against the fields a command takes",
        )
    return list(actions)


def attention_implementation(model: Any) -> Any:
    """The attention implementation ``model`` runs (``"sdpa"``, ``"eager"``, a name registered
    with ``AttentionInterface``), as ``model.set_attn_implementation`` takes it back: its
    config's ``_attn_implementation``, which transformers sets and reads but offers no public
    getter for."""
    config: Any = getattr(model, "config", None)
    if not hasattr(config, "_attn_implementation"):
        raise UpstreamChanged(
            LIBRARY,
            "PretrainedConfig._attn_implementation",
            "switch a model's attention implementation and back (benchmarks/bench_phasefusion.py)",
        )
    return config._attn_implementation


def sequence_classifier() -> type:
    """transformers' ``GenericForSequenceClassification`` (``transformers.modeling_layers``, not
    exported at the top level): the scalar head on the last non-pad token's hidden state that
    its ``…ForSequenceClassification`` classes are made of (``score``, a bias-free linear layer
    over ``config.get_text_config().hidden_size``), and that TRL's ``RewardTrainer`` trains."""
    import importlib

    try:
        head: Any = importlib.import_module("transformers.modeling_layers").GenericForSequenceClassification
    except (ImportError, AttributeError):
        head = None
    if head is None or not hasattr(head, "forward"):
        raise UpstreamChanged(
            LIBRARY,
            "transformers.modeling_layers.GenericForSequenceClassification",
            "put a scalar reward head on a vision-language decoder (judgetrain.models.reward)",
        )
    return head


def register_reward_key_mapping(class_name: str, like: str) -> None:
    """Load checkpoints into the model class ``class_name`` with the key renames transformers
    applies to the class ``like`` (Qwen2.5-VL's hub checkpoints store the transformers 4.x
    layout, ``model.layers…``, which its generative class renames on load): transformers'
    ``register_checkpoint_conversion_mapping``, looked up by class name. A no-op when ``like``
    has no renames or ``class_name`` has its own already."""
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping, register_checkpoint_conversion_mapping
    except ImportError:
        raise UpstreamChanged(
            LIBRARY,
            "transformers.conversion_mapping.register_checkpoint_conversion_mapping",
            "load a generative checkpoint into judgetrain's reward model class (judgetrain.models.reward)",
        ) from None
    mapping = get_checkpoint_conversion_mapping(like)
    if mapping is not None and get_checkpoint_conversion_mapping(class_name) is None:
        register_checkpoint_conversion_mapping(class_name, mapping)


def init_zeros(tensor: Any) -> Any:
    """``transformers.initialization.zeros_``: the initialisation a model's ``_init_weights`` uses, which
    leaves a weight loaded from the checkpoint as it is (plain ``torch.nn.init`` would overwrite it)."""
    import importlib

    try:
        initialization: Any = importlib.import_module("transformers.initialization")
    except ImportError:
        initialization = None
    if initialization is None or not hasattr(initialization, "zeros_"):
        raise UpstreamChanged(
            LIBRARY,
            "transformers.initialization.zeros_",
            "start a new reward head at zero (judgetrain.models.heads)",
        )
    return initialization.zeros_(tensor)
