"""The prefill an evaluation scores after, decided by the model: ``--prefill`` when given, else
what the checkpoint's chat template calls for (a reasoning checkpoint whose generation prompt
opens a thinking block gets what closes it; :func:`judgetrain.scoring.prompts.template_prefill`).

Every evaluation (``eval timecatch``, ``eval judge``, ``eval phasefusion``) resolves it once,
before its run folder is checked: the text goes into ``run.json`` (``prefill``, and
``prefill_from`` saying how it was decided) and into the run's identity, so a run scored with
another prefill is never resumed into this one, and the scorer is built with exactly that text.
Docs: "concepts/reasoning-prefill.md".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FROM_FLAG", "FROM_TEMPLATE", "NO_THINKING", "UNREAD", "RunPrefill", "run_prefill", "scorer_loader"]

# run.json's `prefill_from`: how the prefill was decided
FROM_FLAG = "--prefill"
FROM_TEMPLATE = "the model's chat template (its generation prompt opens a thinking block)"
NO_THINKING = "the model's chat template (it opens no thinking block: no prefill)"
UNREAD = "none: the model's files could not be read"
_PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


@dataclass(frozen=True)
class RunPrefill:
    """The prefill of one run: ``text`` (``""``: none) and ``source``, how it was decided."""

    text: str
    source: str


def _checkpoint(model: str | os.PathLike[str], adapter: str | os.PathLike[str] | None) -> tuple[str, str | None]:
    """``(base model, adapter or None)`` as ``Scorer.from_pretrained`` reads them: an adapter
    folder given as the model stands for its recorded base plus itself."""
    path = Path(os.fspath(model)).expanduser()
    if adapter is None and (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        from judgetrain.models.adapters import adapter_base

        return str(adapter_base(path)), str(path)
    return os.fspath(model), os.fspath(adapter) if adapter else None


def _processor(base: str, adapter: str | None) -> Any:
    """The processor the scorer will render prompts with: the adapter folder's when it holds
    one (as ``Scorer.from_pretrained`` loads it), else the base model's."""
    from judgetrain.models.registry import load_processor

    if adapter is not None and any((Path(adapter) / f).is_file() for f in _PROCESSOR_FILES):
        return load_processor(adapter)
    return load_processor(base)


def run_prefill(
    model: str | os.PathLike[str], adapter: str | os.PathLike[str] | None = None, setting: str | None = None
) -> RunPrefill:
    """The prefill a run of ``model`` (+ ``adapter``) scores after. ``setting`` is
    ``EvalArgs.prefill`` as normalised: a string (``""`` for none) wins as given; ``None``
    reads the checkpoint's processor (not its weights) and takes what its chat template
    calls for (:func:`judgetrain.scoring.prompts.resolve_prefill` with ``FAMILY_PREFILL``).
    A model whose files cannot be read gets no prefill (``source`` :data:`UNREAD`): its
    identity refuses another run's folder, and loading it fails naming what is missing."""
    if setting is not None:
        return RunPrefill(setting, FROM_FLAG)
    from judgetrain.errors import UserError
    from judgetrain.models.registry import detect_family
    from judgetrain.scoring.prompts import FAMILY_PREFILL, resolve_prefill

    try:
        base, adapter = _checkpoint(model, adapter)
        text = resolve_prefill(FAMILY_PREFILL, detect_family(base), _processor(base, adapter)) or ""
    except (UserError, OSError, ValueError):
        # no readable model: a folder of another run is refused on the model's identity, and
        # otherwise the scorer's load fails naming what is missing, before run.json is written
        return RunPrefill("", UNREAD)
    return RunPrefill(text, FROM_TEMPLATE if text else NO_THINKING)


def scorer_loader(cfg: Any, prefill: RunPrefill) -> Callable[[str | None], Any]:
    """``run_sharded``'s ``load(device)`` for an :class:`~judgetrain.eval.core.args.EvalArgs`
    config: ``Scorer.from_pretrained`` of its model, adapter, dtype and batch size, scoring
    after ``prefill.text``."""
    from .args import parse_batch_size

    def load(device: str | None) -> Any:
        from judgetrain.scoring import Scorer

        return Scorer.from_pretrained(
            cfg.model,
            cfg.adapter,
            dtype=cfg.dtype,
            device=device,
            batch_size=parse_batch_size(str(cfg.batch_size)),
            prefill=prefill.text or None,
            progress=False,
        )

    return load
