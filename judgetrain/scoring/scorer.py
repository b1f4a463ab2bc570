"""The :class:`Scorer`: a loaded model behind the engine's narrow model API (the shape
of lm-eval's ``lm_eval/api/model.py``), three methods over items only:
:meth:`Scorer.score` (:func:`~judgetrain.scoring.score`),
:meth:`Scorer.score_shared_prefix` (:func:`~judgetrain.scoring.score_shared_prefix`)
and :meth:`Scorer.generate` (:func:`~judgetrain.scoring.generate`). The functions take
an already loaded ``(model, processor)``; :meth:`Scorer.from_pretrained` also loads
checkpoints (base, base + PEFT adapter, or merged).
Docs: "reference/api/scoring.md".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..models.registry import ModelFamily
from .batching import Batcher, BatchSize
from .constrained import score
from .generation import generate
from .model import ScoringModel
from .prefix import PrefixGroup, score_shared_prefix
from .prompts import FAMILY_PREFILL, FamilyPrefill, Item, render_prompt, resolve_prefill
from .results import ChoiceScores, GenerationOutput

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, ProcessorMixin

__all__ = ["Scorer"]


_PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def _base_of_adapter_folder(
    model_name_or_path: str | os.PathLike[str],
) -> tuple[str | os.PathLike[str], str | os.PathLike[str] | None]:
    """(the model to load, the adapter to put on it) for a ``model_name_or_path`` given without
    ``adapter=``: an adapter folder (``adapter_config.json`` and no ``config.json``) gives its
    recorded base and itself; anything else is the model, with no adapter."""
    path = Path(os.fspath(model_name_or_path)).expanduser()
    if not (path / "adapter_config.json").is_file() or (path / "config.json").is_file():
        return model_name_or_path, None
    from ..models.adapters import adapter_base

    # a recorded relative base folder missing from here: BaseModelNotFoundError with the fix
    return adapter_base(path), path


def _with_adapter(
    model: Any, processor: Any, adapter: str | os.PathLike[str], base: str | os.PathLike[str], merge: bool
) -> tuple[Any, Any]:
    """(model, processor) with the PEFT ``adapter`` folder loaded onto ``model`` (the checkpoint
    ``base``), folded into its weights when ``merge``; the processor is the adapter folder's when it
    holds one (:data:`_PROCESSOR_FILES`), else ``processor``. ``FileNotFoundError`` when the folder
    has no ``adapter_config.json``; an adapter of another base is refused, naming that base."""
    from ..models.adapters import load_adapter

    adapter_dir = Path(os.fspath(adapter)).expanduser()
    if not (adapter_dir / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"{adapter_dir} holds no adapter_config.json, so it is not a PEFT adapter "
            "folder. Pass the folder the trainer saved the adapter to (or a merged model "
            "folder as model_name_or_path, without adapter=)."
        )
    # refuses an adapter of another base (its shapes, architecture, processor), naming that base
    model = load_adapter(model, adapter_dir, base)
    if merge:
        model = model.merge_and_unload()
    if any((adapter_dir / f).is_file() for f in _PROCESSOR_FILES):
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(str(adapter_dir))
    return model, processor


class Scorer:
    """A loaded model ready to score and generate: holds (model, processor, family,
    batch size, device, dtype, prefill) so callers pass only items.

    ``sort_by_length``: batches of items of similar length, longest first
    (:mod:`~judgetrain.scoring.lengths`); results are in input order either way.
    ``share_images``: each distinct image of a call through the vision tower once
    (:mod:`~judgetrain.scoring.vision`).

    ``batch_size="auto"``: on CUDA the first batch holds one item, its peak memory
    sets the batch size from ``torch.cuda.mem_get_info`` (80% of free memory, at
    most ``MAX_AUTO_BATCH_SIZE``), and an out-of-memory error halves it and retries
    the batch; on CPU it is ``CPU_BATCH_SIZE``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        processor: ProcessorMixin,
        family: ModelFamily | str | None = None,
        *,
        batch_size: BatchSize = "auto",
        prefill: str | None | FamilyPrefill = FAMILY_PREFILL,
        progress: bool = True,
        sort_by_length: bool = True,
        share_images: bool = True,
    ):
        self.model = model
        self.processor = processor
        self._m = ScoringModel(model, processor, family)
        self.family = self._m.family
        self.device = self._m.device
        self.dtype = self._m.dtype
        self.batch_size = batch_size
        Batcher(batch_size, self.device, 1)  # validate now, not on the first call
        self.prefill = resolve_prefill(prefill, self.family, processor)
        self.progress = progress
        self.sort_by_length = sort_by_length
        self.share_images = share_images
        model.eval()

    @classmethod
    def from_pretrained(
        cls,
        model_name_or_path: str | os.PathLike[str],
        adapter: str | os.PathLike[str] | None = None,
        *,
        dtype: str | torch.dtype | None = None,
        device: str | torch.device | None = None,
        batch_size: BatchSize = "auto",
        family: ModelFamily | str | None = None,
        merge_adapter: bool = False,
        prefill: str | None | FamilyPrefill = FAMILY_PREFILL,
        progress: bool = True,
        sort_by_length: bool = True,
        share_images: bool = True,
        **load_kwargs: Any,
    ) -> Scorer:
        """Load a base checkpoint, a base + PEFT adapter, or a merged folder.

        Args:
            model_name_or_path: a model folder or hub id (base or merged). An adapter
                folder (``adapter_config.json`` and no ``config.json``) is accepted
                too: its base comes from ``base_model_name_or_path``.
            adapter: a PEFT adapter folder, loaded with ``PeftModel.from_pretrained``
                onto the base. The processor comes from the adapter folder when it
                holds one (``processor_config.json`` / ``preprocessor_config.json``),
                else from the base.
            dtype: ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"auto"`` (the
                checkpoint's) or a torch dtype; ``None``: float32 on CPU, the
                checkpoint's dtype on an accelerator.
            device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None``: CUDA when available.
            merge_adapter: fold the adapter into the base weights after loading
                (faster inference, same scores up to float rounding).
            **load_kwargs: forwarded to ``load_model_and_processor`` (e.g.
                ``attn_implementation``, ``min_pixels``, ``local_files_only``).
        """
        import torch

        from ..models.registry import load_model_and_processor

        if adapter is None:
            model_name_or_path, adapter = _base_of_adapter_folder(model_name_or_path)
        dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = "float32" if dev.type == "cpu" else "auto"
        if dev.type != "cpu":
            load_kwargs.setdefault("device_map", str(dev))
        model, processor = load_model_and_processor(model_name_or_path, family=family, dtype=dtype, **load_kwargs)
        if adapter is not None:
            model, processor = _with_adapter(model, processor, adapter, model_name_or_path, merge_adapter)
        # transformers wraps PreTrainedModel.to in functools.wraps(nn.Module.to), whose stub types the
        # bound call as the unbound one (the model expected where the device goes)
        model.to(dev)  # type: ignore[arg-type]
        return cls(
            model,
            processor,
            family,
            batch_size=batch_size,
            prefill=prefill,
            progress=progress,
            sort_by_length=sort_by_length,
            share_images=share_images,
        )

    def render(self, prompt: Sequence[Mapping[str, Any]]) -> str:
        """The exact text scored or generated from: chat template, generation prompt, prefill."""
        return render_prompt(self.processor, prompt, self.prefill)

    def score(
        self, items: Sequence[Item] | Iterable[Item], *, reduction: Literal["sum", "mean"] = "sum", progress: bool | None = None
    ) -> list[ChoiceScores]:
        """:func:`score` with this scorer's model, family, prefill and batch size."""
        return score(
            self.model,
            self.processor,
            items,
            family=self.family,
            prefill=self.prefill,
            batch_size=self.batch_size,
            reduction=reduction,
            progress=self.progress if progress is None else progress,
            sort_by_length=self.sort_by_length,
            share_images=self.share_images,
        )

    def score_shared_prefix(
        self,
        groups: Sequence[PrefixGroup] | Iterable[PrefixGroup],
        *,
        reduction: Literal["sum", "mean"] = "sum",
        progress: bool | None = None,
    ) -> list[list[ChoiceScores]]:
        """:func:`score_shared_prefix` with this scorer's model, family, prefill and batch size."""
        return score_shared_prefix(
            self.model,
            self.processor,
            groups,
            family=self.family,
            prefill=self.prefill,
            batch_size=self.batch_size,
            reduction=reduction,
            progress=self.progress if progress is None else progress,
            sort_by_length=self.sort_by_length,
            share_images=self.share_images,
        )

    def generate(
        self,
        items: Sequence[Item] | Iterable[Item],
        max_new_tokens: int = 64,
        parser: Callable[[str], str | None] | None = None,
        *,
        progress: bool | None = None,
    ) -> GenerationOutput:
        """:func:`generate` with this scorer's model, family, prefill and batch size."""
        return generate(
            self.model,
            self.processor,
            items,
            max_new_tokens,
            parser,
            family=self.family,
            prefill=self.prefill,
            batch_size=self.batch_size,
            progress=self.progress if progress is None else progress,
            sort_by_length=self.sort_by_length,
        )
