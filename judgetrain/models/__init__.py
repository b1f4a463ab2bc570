"""Model families (Qwen3-VL, Qwen2.5-VL, LLaVA-OneVision / LLaVA-Critic) and their loader.

``judgetrain.models.tiny`` builds tiny offline checkpoints of each family. README: "Models".
"""

from .registry import FAMILIES, ModelFamily, ModelNotFoundError, detect_family, get_family, load_model_and_processor

__all__ = ["FAMILIES", "ModelFamily", "ModelNotFoundError", "detect_family", "get_family", "load_model_and_processor"]
