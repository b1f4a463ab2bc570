"""The scalar reward head a reward model puts on a judge's decoder (:mod:`judgetrain.models.reward`):
one model class per family, made the way transformers makes its ``…ForSequenceClassification``
classes and registered with ``AutoModelForSequenceClassification``, which
:func:`judgetrain.models.registry.load_model_and_processor` loads (``head="reward"``).
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

from typing import Any

__all__ = ["REWARD_HEAD", "reward_model_class"]

# the scalar head's module name (transformers' GenericForSequenceClassification); trained in full, saved with the LoRA
REWARD_HEAD = "score"

_CLASSES: dict[type, type] = {}


def reward_model_class(config: Any) -> type:
    """The ``AutoModelForSequenceClassification`` class for ``config``: transformers' own where it
    has one, else judgetrain's for the family (``<Family>RewardModel``), made and registered once."""
    from transformers import (
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
        MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING,
        MODEL_MAPPING,
        AutoModelForSequenceClassification,
        PreTrainedModel,
    )

    from judgetrain.compat.transformers import register_reward_key_mapping, sequence_classifier

    config_class: Any = type(config)
    if config_class in _CLASSES:
        return _CLASSES[config_class]
    if config_class in MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING:
        return MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING[config_class]  # type: ignore[return-value]
    base: Any = MODEL_MAPPING[config_class]  # e.g. Qwen3VLModel: the decoder and vision tower, no language-model head
    family_base = next(c for c in base.__mro__[1:] if issubclass(c, PreTrainedModel) and c is not PreTrainedModel)
    name = base.__name__.removesuffix("Model") + "RewardModel"
    cls = type(
        name,
        (sequence_classifier(), family_base),
        {
            "__module__": __name__,
            "__doc__": f"{base.__name__} with a scalar reward head (``score``) on the last non-pad token.",
            "config_class": config_class,
            # a generative checkpoint has a language-model head and no scalar one: both expected, neither reported
            "_keys_to_ignore_on_load_missing": [rf"^{REWARD_HEAD}\."],
            "_keys_to_ignore_on_load_unexpected": [r"lm_head\."],
            "forward": _forward,
            "_init_weights": _init_weights,
        },
    )
    globals()[name] = cls  # importable (and picklable) by its name
    AutoModelForSequenceClassification.register(config_class, cls, exist_ok=True)
    if config_class in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING:  # the generative class's key renames (Qwen2.5-VL's 4.x layout)
        generative: Any = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING[config_class]
        register_reward_key_mapping(name, generative.__name__)
    _CLASSES[config_class] = cls
    return cls


def _init_weights(self, module: Any) -> None:
    """A new head starts at zero, every sequence's reward 0 before training (the Bradley–Terry loss log 2), the
    same however the weights are sharded (a random head would be drawn otherwise under ZeRO-3's partitioned
    initialisation than on one process); everything else as the family initialises it."""
    from judgetrain.compat.transformers import init_zeros

    head: Any = getattr(self, REWARD_HEAD, None)
    if head is not None and module is head:
        init_zeros(head.weight)
        return
    super(type(self), self)._init_weights(module)


def _forward(self, *args, margin=None, **kwargs):
    """transformers' forward; ``margin`` (TRL's ``RewardTrainer`` hands the batch, margins included,
    to the model) is the loss's, not the model's."""
    return super(type(self), self).forward(*args, **kwargs)
