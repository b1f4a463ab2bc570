"""Model families judgetrain can fine-tune and evaluate, and one loader for all of them.

A family groups the checkpoints that share an architecture (``config.model_type``),
a processor and therefore a set of module names. The registry is a plain dict,
``FAMILIES``; ``get_family`` looks a name up with a "did you mean" error and
``detect_family`` reads it off a checkpoint's config. ``load_model_and_processor``
loads any checkpoint, a local folder or a hub id, through ``AutoConfig``,
``AutoModelForImageTextToText`` and ``AutoProcessor``, exactly as transformers
would, and turns "the files are not here" into an error that says how to get them.
Docs: "reference/api/registry.md".
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain.errors import UserError, did_you_mean

if TYPE_CHECKING:  # importing transformers costs seconds; only the loader needs it
    import torch
    from transformers import PretrainedConfig, PreTrainedModel, ProcessorMixin

__all__ = [
    "DTYPES",
    "DTYPE_ALIASES",
    "dtype_name",
    "FAMILIES",
    "ModelFamily",
    "ModelNotFoundError",
    "QWEN3_THINKING",
    "ThinkingBlock",
    "detect_family",
    "get_family",
    "load_model_and_processor",
    "load_processor",
]


# Language-model projections only. PEFT full-matches a string `target_modules`
# against every module name, so a bare list such as ["q_proj", "v_proj"] would
# also wrap SigLIP's q/k/v_proj (LLaVA-OneVision) and the gate/up/down_proj of
# Qwen2.5-VL's vision MLP. Anchoring on `language_model.layers.N.` keeps LoRA in
# the decoder; the optional `.model` covers the transformers 4.x layout
# (`language_model.model.layers`) so adapters trained there still match.
_LM_PROJECTIONS = (
    r"(?:.*\.)?language_model\.(?:model\.)?layers\.\d+\."
    r"(?:self_attn\.(?:q_proj|k_proj|v_proj|o_proj)|mlp\.(?:gate_proj|up_proj|down_proj))"
)


@dataclass(frozen=True)
class ThinkingBlock:
    """How a family's reasoning ("Thinking") checkpoints write their thinking block, as their
    chat template does it.

    Attributes:
        open: the tag that opens the block (``"<think>"``). A chat template whose generation
            prompt writes it and not ``close`` after it leaves the block open: the model's
            next tokens are reasoning, not the answer.
        close: the tag that closes it (``"</think>"``).
        prefill: what the template writes after an opened block before the answer, the
            block left empty; appended to such a generation prompt it makes the next token
            the answer (paper 001's prefill for reasoning models).
    """

    open: str
    close: str
    prefill: str


# Qwen3-VL-*-Thinking: the generation prompt ends "<|im_start|>assistant\n<think>\n", and an
# answer turn is rendered "<think>\n" + reasoning + "\n</think>\n\n" + answer.
QWEN3_THINKING = ThinkingBlock(open="<think>", close="</think>", prefill="\n</think>\n\n")


@dataclass(frozen=True)
class ModelFamily:
    """One architecture family: what the loader, the trainer and the scorer need to know about it.

    Attributes:
        name: registry key, e.g. ``"qwen3-vl"``.
        model_types: ``config.model_type`` values that belong to this family.
        description: one line for listings and error messages.
        example_checkpoints: hub ids of real checkpoints of this family.
        aliases: other names ``get_family`` accepts (LLaVA-Critic is a LLaVA-OneVision).
        lora_target_regex: regex for ``peft.LoraConfig(target_modules=...)``; PEFT
            full-matches it against module names and it selects only the language
            model's q/k/v/o and gate/up/down projections, never the vision tower.
        vision_tower_regex: ``re.search`` pattern matching the module and parameter
            names of the vision encoder (excluding the projector).
        projector_regex: ``re.search`` pattern matching the vision-to-language
            projector (Qwen's patch merger, LLaVA's multi-modal projector and
            image-newline vector).
        image_token: placeholder token the processor expands into one token per
            visual feature; counting it in ``input_ids`` gives the visual token count.
        min_pixels, max_pixels: recommended per-image pixel budget for multi-frame
            judge prompts (Qwen only; ``None`` where the processor tiles to a fixed
            grid instead, as LLaVA-OneVision does). Not applied implicitly, so a
            checkpoint's own ``preprocessor_config.json`` stays the default: pass
            ``min_pixels=family.min_pixels, max_pixels=family.max_pixels`` to
            ``load_model_and_processor`` to opt in.
        pixel_factor: side length in pixels of one visual token (patch size times
            spatial merge); Qwen processors round images to multiples of it.
        think_prefill: text appended after the generation prompt of every checkpoint of
            the family, whatever its chat template (``None`` for every family here; a
            custom entry may set one). Reasoning checkpoints are found by ``thinking``.
        thinking: the thinking block of the family's reasoning ("Thinking")
            checkpoints (:class:`ThinkingBlock`), or ``None`` when the family has none.
            Such checkpoints share ``model_type`` and architecture with the instruct
            ones; their chat template tells them apart: a generation prompt that leaves
            the block open gets ``thinking.prefill``
            (:func:`judgetrain.scoring.prompts.template_prefill`), so constrained scoring
            compares answers rather than ways to start reasoning.
    """

    name: str
    model_types: tuple[str, ...]
    description: str
    example_checkpoints: tuple[str, ...]
    vision_tower_regex: str
    projector_regex: str
    image_token: str
    # Module names (suffixes, as PEFT's ``modules_to_save`` matches them) that
    # are trained fully when a recipe unfreezes the vision tower / projector.
    vision_modules: tuple[str, ...] = ()
    projector_modules: tuple[str, ...] = ()
    lora_target_regex: str = _LM_PROJECTIONS
    aliases: tuple[str, ...] = ()
    min_pixels: int | None = None
    max_pixels: int | None = None
    pixel_factor: int | None = None
    think_prefill: str | None = None
    thinking: ThinkingBlock | None = None
    # Compiled patterns, built once; not part of equality or the repr.
    _vision_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _projector_re: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _lora_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_vision_re", re.compile(self.vision_tower_regex))
        object.__setattr__(self, "_projector_re", re.compile(self.projector_regex))
        object.__setattr__(self, "_lora_re", re.compile(self.lora_target_regex))

    def is_vision_tower(self, name: str) -> bool:
        """True when a module or parameter name belongs to the vision encoder (not the projector)."""
        return self._vision_re.search(name) is not None and not self.is_projector(name)

    def is_projector(self, name: str) -> bool:
        """True when a module or parameter name belongs to the vision-to-language projector."""
        return self._projector_re.search(name) is not None

    def is_lora_target(self, module_name: str) -> bool:
        """True when PEFT would put LoRA on this module given ``lora_target_regex`` (full match, as PEFT does)."""
        return self._lora_re.fullmatch(module_name) is not None

    def image_size_kwargs(self, min_pixels: int | None = None, max_pixels: int | None = None) -> dict[str, Any]:
        """Processor keyword arguments that set the per-image pixel budget, in this family's vocabulary.

        Returns ``{}`` when both are ``None``. Raises ``ValueError`` for a family
        whose processor has no pixel budget (LLaVA-OneVision tiles images to
        ``image_grid_pinpoints``) or when ``min_pixels > max_pixels``.
        """
        if min_pixels is None and max_pixels is None:
            return {}
        if self.pixel_factor is None:
            raise ValueError(
                f"Model family '{self.name}' has no min/max pixel budget: its image processor resizes every "
                "image to the vision tower's input size and tiles large ones to `image_grid_pinpoints`. "
                "Drop min_pixels/max_pixels, or resize the images before building the prompt."
            )
        if min_pixels is not None and max_pixels is not None and min_pixels > max_pixels:
            raise ValueError(f"min_pixels ({min_pixels}) must not exceed max_pixels ({max_pixels}).")
        kwargs: dict[str, Any] = {}
        if min_pixels is not None:
            kwargs["min_pixels"] = int(min_pixels)
        if max_pixels is not None:
            kwargs["max_pixels"] = int(max_pixels)
        return kwargs


FAMILIES: dict[str, ModelFamily] = {
    "qwen3-vl": ModelFamily(
        name="qwen3-vl",
        model_types=("qwen3_vl",),
        description="Qwen3-VL instruct (SigLIP-2-style ViT, patch 16, DeepStack mergers, interleaved M-RoPE)",
        example_checkpoints=("Qwen/Qwen3-VL-2B-Instruct", "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct"),
        # `visual.merger` and `visual.deepstack_merger_list` project into the
        # language model; everything else under `visual.` is the encoder.
        vision_tower_regex=r"(?:^|\.)visual\.",
        projector_regex=r"(?:^|\.)visual\.(?:merger|deepstack_merger_list)(?:\.|$)",
        vision_modules=("visual",),
        projector_modules=("visual.merger", "visual.deepstack_merger_list"),
        image_token="<|image_pad|>",
        # 32 px per token; 64..1280 tokens per frame keeps a 16-frame prompt
        # within ~20k visual tokens while small frames are not upscaled much.
        min_pixels=64 * 32 * 32,
        max_pixels=1280 * 32 * 32,
        pixel_factor=32,
        # Qwen3-VL-2B/4B/8B/32B-Thinking: same architecture, a template that opens <think>
        thinking=QWEN3_THINKING,
    ),
    "qwen2.5-vl": ModelFamily(
        name="qwen2.5-vl",
        model_types=("qwen2_5_vl",),
        description="Qwen2.5-VL instruct (window-attention ViT, patch 14, M-RoPE)",
        example_checkpoints=("Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"),
        vision_tower_regex=r"(?:^|\.)visual\.",
        projector_regex=r"(?:^|\.)visual\.merger(?:\.|$)",
        vision_modules=("visual",),
        projector_modules=("visual.merger",),
        image_token="<|image_pad|>",
        # The model card's recommended range: 256..1280 visual tokens of 28x28 px.
        min_pixels=256 * 28 * 28,
        max_pixels=1280 * 28 * 28,
        pixel_factor=28,
    ),
    "llava-onevision": ModelFamily(
        name="llava-onevision",
        model_types=("llava_onevision",),
        description="LLaVA-OneVision and LLaVA-Critic (SigLIP + Qwen2, anyres tiling)",
        example_checkpoints=(
            "llava-hf/llava-onevision-qwen2-0.5b-ov-hf",
            "llava-hf/llava-onevision-qwen2-7b-ov-hf",
        ),
        aliases=("llava-critic", "llava-ov"),
        vision_tower_regex=r"(?:^|\.)vision_tower\.",
        projector_regex=r"(?:^|\.)(?:multi_modal_projector(?:\.|$)|image_newline$)",
        vision_modules=("vision_tower",),
        projector_modules=("multi_modal_projector",),  # image_newline is a bare parameter: it stays frozen
        image_token="<image>",
    ),
    # Transformers-native checkpoints only (the `-hf` / `-HF` conversions, model_type
    # "internvl"); OpenGVLab's original repos need trust_remote_code and another layout.
    # InternVL3 has a Qwen2 decoder, InternVL3.5 a Qwen3 one: same module names, one family.
    "internvl": ModelFamily(
        name="internvl",
        model_types=("internvl",),
        description="InternVL3 / InternVL3.5, transformers-native -hf checkpoints (InternViT + MLP projector + Qwen2/Qwen3)",
        example_checkpoints=("OpenGVLab/InternVL3-8B-hf", "OpenGVLab/InternVL3_5-8B-HF", "OpenGVLab/InternVL3-1B-hf"),
        aliases=("internvl3", "internvl3.5", "internvl3-5"),
        # InternViT's attention has q/k/v_proj of its own (encoder.layer.N.attention.*).
        vision_tower_regex=r"(?:^|\.)vision_tower\.",
        projector_regex=r"(?:^|\.)multi_modal_projector(?:\.|$)",
        vision_modules=("vision_tower",),
        projector_modules=("multi_modal_projector",),
        image_token="<IMG_CONTEXT>",
    ),
    # Gemma 4 (E2B/E4B: per-layer embeddings, shared KV in the last layers, an audio tower).
    # The vision and audio encoders reuse q/k/v/o_proj and gate/up/down_proj (wrapped in
    # Gemma4ClippableLinear), so only the anchored regex keeps LoRA in the decoder; KV-sharing
    # layers have no k_proj/v_proj, which the regex simply does not find there.
    "gemma-4": ModelFamily(
        name="gemma-4",
        model_types=("gemma4",),
        description="Gemma 4 instruct (E2B/E4B: SigLIP-style ViT with pooling, PLE, sliding/full attention, audio tower)",
        example_checkpoints=("google/gemma-4-E4B-it", "google/gemma-4-E2B-it"),
        aliases=("gemma4",),
        vision_tower_regex=r"(?:^|\.)(?:vision_tower|audio_tower)\.",
        projector_regex=r"(?:^|\.)embed_(?:vision|audio)(?:\.|$)",
        vision_modules=("vision_tower",),
        projector_modules=("embed_vision",),
        image_token="<|image|>",
    ),
}

# Every accepted spelling -> registry key.
_NAMES: dict[str, str] = {alias: fam.name for fam in FAMILIES.values() for alias in (fam.name, *fam.aliases)}


def _normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def get_family(name: str) -> ModelFamily:
    """Return the registered family called ``name`` (or one of its aliases; case and ``_``/``-`` do not matter).

    Raises ``ValueError`` naming the closest registered names and listing all of them.
    """
    key = _normalise(name)
    if key in _NAMES:
        return FAMILIES[_NAMES[key]]
    # Also accept a config.model_type ("qwen2_5_vl") where a family name is expected.
    for fam in FAMILIES.values():
        if key in {_normalise(t) for t in fam.model_types}:
            return fam
    hint = did_you_mean(key, _NAMES, n=3, cutoff=0.4, sentence=True)
    raise ValueError(f"Unknown model family {name!r}.{hint} Available: {', '.join(sorted(FAMILIES))}.")


def _supported_types() -> str:
    return ", ".join(f"{t} ({fam.name})" for fam in FAMILIES.values() for t in fam.model_types)


def detect_family(config_or_path: PretrainedConfig | str | os.PathLike[str]) -> ModelFamily:
    """Return the family a checkpoint belongs to, read off ``config.model_type``.

    ``config_or_path`` is a loaded config or anything ``AutoConfig.from_pretrained``
    accepts (local folder or hub id). Raises ``ModelNotFoundError`` when the config
    cannot be found, and ``ValueError`` listing the supported model types when the
    architecture is not one judgetrain knows.
    """
    if isinstance(config_or_path, (str, os.PathLike)):
        config = _load_config(str(config_or_path), trust_remote_code=False, local_files_only=None)
        where = f" ({os.fspath(config_or_path)})"
    else:
        config = config_or_path
        where = ""
    model_type = getattr(config, "model_type", None)
    for fam in FAMILIES.values():
        if model_type in fam.model_types:
            return fam
    raise ValueError(
        f"Unsupported model type {model_type!r}{where}. judgetrain supports: {_supported_types()}. "
        "Pass one of those checkpoints, or add a family to judgetrain.models.registry.FAMILIES."
    )


class ModelNotFoundError(UserError, OSError):
    """A model's files are not where they were looked for (missing folder, incomplete folder, or a hub id offline).

    Subclasses ``OSError`` so callers that already catch what transformers raises keep working.
    """


_TINY_HINT = (
    "For tests and dry runs, build a tiny random model of every family offline with "
    "`python -m judgetrain.models.tiny --out DIR` and pass DIR/<family>."
)


def _looks_like_path(name_or_path: str) -> bool:
    # A hub id is "name" or "namespace/name"; anything else (absolute, ./, ~,
    # Windows drive, several slashes) can only be meant as a folder.
    p = name_or_path
    return os.path.isabs(p) or p.startswith((".", "~")) or p.count("/") > 1 or "\\" in p or os.path.exists(p)


def _offline() -> bool:
    from huggingface_hub import constants

    # constants.HF_HUB_OFFLINE is read once at import; the environment may have changed since.
    env = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.HF_HUB_OFFLINE) or env.strip().upper() in {"1", "ON", "YES", "TRUE"}


def _not_found(name_or_path: str, what: str, err: BaseException, local_files_only: bool | None) -> ModelNotFoundError:
    """Build the error for ``what`` (e.g. "config.json") missing for ``name_or_path``."""
    if _looks_like_path(name_or_path):
        folder = Path(name_or_path).expanduser()
        if not folder.exists():
            problem = f"Model folder '{folder}' does not exist."
        elif not folder.is_dir():
            problem = f"Model path '{folder}' is a file; pass the folder that holds config.json and the weights."
        else:
            present = ", ".join(sorted(p.name for p in folder.iterdir())[:12]) or "nothing"
            problem = f"Model folder '{folder}' has no {what} (it holds: {present})."
        example = FAMILIES["qwen3-vl"].example_checkpoints[0]
        how = (
            "To provide it: on a machine with network access run `hf download <hub-id> --local-dir DIR` "
            f"(e.g. `hf download {example} --local-dir DIR`), copy DIR here and pass it as the model path. " + _TINY_HINT
        )
    else:
        from huggingface_hub import constants

        if _offline():
            mode = "offline (HF_HUB_OFFLINE=1)"
        elif local_files_only:
            mode = "with local_files_only=True"
        else:  # transformers retries for a while first; offline mode fails at once
            mode = "because the Hub could not be reached (set HF_HUB_OFFLINE=1 to fail fast without retries)"
        problem = (
            f"Could not load {what} of '{name_or_path}' from the Hugging Face Hub {mode}, and it is not in the "
            f"local cache ({constants.HF_HUB_CACHE})."
        )
        if "/" in name_or_path:  # "runs/model" reads as a hub id too
            problem += f" No local folder '{Path(name_or_path).resolve()}' exists either."
        how = (
            f"To provide it: on a machine with network access run `hf download {name_or_path} --local-dir DIR`, "
            "copy DIR here and pass DIR instead of the hub id; or set HF_HOME to a Hugging Face cache that "
            f"already holds '{name_or_path}'. " + _TINY_HINT
        )
    lines = str(err).strip().splitlines()
    said = f" (transformers said: {lines[0][:300]})" if lines else ""
    return ModelNotFoundError(f"{problem} {how}{said}")


def _hub_errors() -> tuple[type[BaseException], ...]:
    # OSError covers what transformers re-raises; the hub's own errors are
    # listed too because some code paths let them through unwrapped.
    from huggingface_hub import errors

    names = ("HFValidationError", "LocalEntryNotFoundError", "RepositoryNotFoundError", "EntryNotFoundError")
    return (OSError, *(getattr(errors, n) for n in names if hasattr(errors, n)))


@contextlib.contextmanager
def _missing_files_explained(name_or_path: str, what: str, local_files_only: bool | None) -> Iterator[None]:
    """Turn "``what`` is not there" from transformers or the hub into a ``ModelNotFoundError`` saying how to get it."""
    try:
        yield
    except PermissionError:
        raise  # the files are there; the message from the OS is the useful one
    except _hub_errors() as err:
        raise _not_found(name_or_path, what, err, local_files_only) from err


def _hub_kwargs(trust_remote_code: bool, local_files_only: bool | None) -> dict[str, Any]:
    # local_files_only only when given: None leaves it to HF_HUB_OFFLINE.
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if local_files_only is not None:
        kwargs["local_files_only"] = local_files_only
    return kwargs


def _load_config(
    name_or_path: str, *, trust_remote_code: bool, local_files_only: bool | None, revision: str | None = None
) -> PretrainedConfig:
    from transformers import AutoConfig

    with _missing_files_explained(name_or_path, "config.json", local_files_only):
        return AutoConfig.from_pretrained(
            name_or_path, **_hub_kwargs(trust_remote_code, local_files_only), **({"revision": revision} if revision else {})
        )


# the weights dtypes a loader takes by name (`--dtype`); help texts list them from here
DTYPES = ("auto", "float32", "bfloat16", "float16")


# other spellings a loader takes for them
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}


def dtype_name(dtype: Any) -> str:
    """A dtype's name as :data:`DTYPES` spells it (``"bf16"``, ``torch.bfloat16`` → ``"bfloat16"``);
    ``ValueError`` naming the choices for any other."""
    raw = str(dtype).replace("torch.", "").lower()
    name = DTYPE_ALIASES.get(raw, raw)
    if name not in DTYPES:
        hint = did_you_mean(name, [*DTYPES, *DTYPE_ALIASES], n=2, sentence=True)
        raise ValueError(f"Unknown dtype {dtype!r}.{hint} Use one of: {', '.join(DTYPES)} (or a torch.dtype).")
    return name


def _resolve_dtype(dtype: str | torch.dtype) -> str | torch.dtype:
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    name = dtype_name(dtype)
    return name if name == "auto" else getattr(torch, name)


def load_model_and_processor(
    name_or_path: str | os.PathLike[str],
    family: str | ModelFamily | None = None,
    dtype: str | torch.dtype = "auto",
    attn_implementation: str | None = None,
    device_map: str | dict[str, Any] | None = None,
    trust_remote_code: bool = False,
    local_files_only: bool | None = None,
    min_pixels: int | None = None,
    max_pixels: int | None = None,
    revision: str | None = None,
    head: str = "generate",
    **processor_kwargs: Any,
) -> tuple[PreTrainedModel, ProcessorMixin]:
    """Load a checkpoint's model and processor the way transformers would.

    Args:
        name_or_path: a local folder (a real download or ``judgetrain.models.tiny`` output) or a hub id.
        family: registry name or ``ModelFamily``; ``None`` detects it from ``config.model_type``.
            When given, it must agree with the config.
        dtype: ``"auto"`` (the checkpoint's dtype), ``"float32"``, ``"bfloat16"``, ``"float16"``
            or a ``torch.dtype``. Use float32 on CPU.
        attn_implementation: passed to ``from_pretrained`` when set (``"sdpa"``, ``"eager"``,
            ``"flash_attention_2"``); ``None`` keeps transformers' choice.
        device_map: passed to ``from_pretrained`` when set (``"auto"``, ``"cuda:0"``, a dict).
        trust_remote_code: forwarded as given; never switched on implicitly.
        revision: a hub id's branch, tag or commit, for the config, processor and weights alike
            (``None``: the default branch); a local folder ignores it.
        local_files_only: forwarded when not ``None``; ``None`` leaves it to ``HF_HUB_OFFLINE``.
        min_pixels, max_pixels: per-image pixel budget for Qwen families (see
            ``ModelFamily.image_size_kwargs``), applied to the image processor only
            (videos keep their per-clip budget); ``None`` keeps the checkpoint's own.
        head: ``"generate"``: the checkpoint as it is (``AutoModelForImageTextToText``); ``"reward"``:
            its decoder with a scalar head instead of the language-model head
            (:func:`judgetrain.models.reward.reward_model_class`, ``num_labels`` 1), the head new
            unless the checkpoint has one (:func:`~judgetrain.models.reward.load_reward_model`
            loads a trained reward model).
        **processor_kwargs: forwarded to ``AutoProcessor.from_pretrained``.

    Returns:
        ``(model, processor)``, the model in eval mode; ``detect_family(model.config)``
        gives the family. The tokenizer pads as the checkpoint stores it (right for
        every family here), so batched scoring passes ``padding_side="left"``.

    Raises:
        ModelNotFoundError: the folder, a file in it, or the hub id (offline) is missing;
            the message says how to provide it.
        ValueError: unsupported architecture, family mismatch, or a bad dtype.
    """
    from transformers import AutoModelForImageTextToText

    path = os.fspath(name_or_path)
    torch_dtype = _resolve_dtype(dtype)
    config = _load_config(path, trust_remote_code=trust_remote_code, local_files_only=local_files_only, revision=revision)
    chosen = _check_family(path, config, family)
    hub_kwargs = {**_hub_kwargs(trust_remote_code, local_files_only), **({"revision": revision} if revision else {})}
    processor = _load_processor(path, chosen.image_size_kwargs(min_pixels, max_pixels), hub_kwargs, processor_kwargs)
    model_kwargs: dict[str, Any] = {"dtype": torch_dtype, **hub_kwargs}
    if attn_implementation is not None:
        model_kwargs["attn_implementation"] = attn_implementation
    if device_map is not None:
        model_kwargs["device_map"] = device_map
    model_class: Any = AutoModelForImageTextToText
    if head == "reward":
        from .heads import reward_model_class

        model_class = reward_model_class(config)
        config.num_labels = 1  # this load's own config: one scalar per sequence
    elif head != "generate":
        raise ValueError(f"head={head!r}: use 'generate' or 'reward'")
    with _missing_files_explained(path, "model weights (*.safetensors)", local_files_only):
        model = model_class.from_pretrained(path, config=config, **model_kwargs)
    model.eval()
    return model, processor


def _check_family(path: str, config: PretrainedConfig, family: str | ModelFamily | None) -> ModelFamily:
    """The family of ``config``; when the caller named one, it must be that one (``ValueError`` otherwise)."""
    detected = detect_family(config)
    if family is None:
        return detected
    chosen = family if isinstance(family, ModelFamily) else get_family(family)
    if config.model_type not in chosen.model_types:
        raise ValueError(
            f"'{path}' is a {config.model_type!r} checkpoint (family '{detected.name}'), but family "
            f"'{chosen.name}' expects model_type {' or '.join(chosen.model_types)}. Pass family='{detected.name}' "
            "or leave family=None to detect it."
        )
    return chosen


def load_processor(
    name_or_path: str | os.PathLike[str], trust_remote_code: bool = False, local_files_only: bool | None = None
) -> ProcessorMixin:
    """The processor of a checkpoint alone (no weights), as :func:`load_model_and_processor`
    loads it: what a caller needs to read the chat template before loading the model.
    Raises ``ModelNotFoundError`` saying how to get the files when they are missing."""
    return _load_processor(os.fspath(name_or_path), {}, _hub_kwargs(trust_remote_code, local_files_only), {})


def _load_processor(
    path: str, size_kwargs: dict[str, Any], hub_kwargs: dict[str, Any], processor_kwargs: dict[str, Any]
) -> ProcessorMixin:
    """``AutoProcessor`` for ``path``, its image processor given the per-image pixel budget ``size_kwargs`` if any."""
    from transformers import AutoImageProcessor, AutoProcessor

    what = "processor files (tokenizer.json, processor_config.json or preprocessor_config.json)"
    with _missing_files_explained(path, what, hub_kwargs.get("local_files_only")):
        if size_kwargs:
            # Through the image processor alone: AutoProcessor would hand min/max_pixels
            # to the video processor too, whose budget covers a whole clip, not one frame.
            image_processor = AutoImageProcessor.from_pretrained(path, **size_kwargs, **hub_kwargs)
            processor_kwargs = {"image_processor": image_processor, **processor_kwargs}
        return AutoProcessor.from_pretrained(path, **processor_kwargs, **hub_kwargs)
