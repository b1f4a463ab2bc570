"""Model families (Qwen3-VL, Qwen2.5-VL, LLaVA-OneVision / LLaVA-Critic, InternVL, Gemma-4) and their loader.

``judgetrain.models.tiny`` builds tiny offline checkpoints of each family. Docs: "reference/api/registry.md".
"""

from .heads import REWARD_HEAD, reward_model_class
from .registry import DTYPES, FAMILIES, ModelFamily, ModelNotFoundError, detect_family, get_family, load_model_and_processor
from .reward import REWARD_TASK, is_reward_adapter, load_reward_model

__all__ = [
    "DTYPES",
    "FAMILIES",
    "REWARD_HEAD",
    "REWARD_TASK",
    "ModelFamily",
    "ModelNotFoundError",
    "detect_family",
    "get_family",
    "is_reward_adapter",
    "load_model_and_processor",
    "load_reward_model",
    "reward_model_class",
]
