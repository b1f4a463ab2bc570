"""Model families (Qwen3-VL, Qwen2.5-VL, LLaVA-OneVision / LLaVA-Critic, InternVL, Gemma-4) and their loader.

``judgetrain.models.tiny`` builds tiny offline checkpoints of each family. README: "Models".
"""

from .registry import DTYPES, FAMILIES, ModelFamily, ModelNotFoundError, detect_family, get_family, load_model_and_processor

__all__ = ["DTYPES", "FAMILIES", "ModelFamily", "ModelNotFoundError", "detect_family", "get_family", "load_model_and_processor"]
