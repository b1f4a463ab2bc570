"""A PEFT adapter checked against the model it goes onto, before anything is scored.

An adapter names the base it was trained on (``adapter_config.json``:
``base_model_name_or_path``) and its tensors carry that base's widths. Put onto another
model, PEFT either stops deep inside torch ("size mismatch") or, when the widths happen
to agree, loads silently, and scoring then fails with a shape error inside transformers
(the adapter folder's processor belongs to the other model). :func:`check_adapter`
compares the recorded base, its architecture, the processor saved with the adapter and
every LoRA tensor's shape with the model and says which base to pass;
:func:`load_adapter` checks, then loads.

Where the base is recorded, :func:`stored_base` decides how: a relative folder as given
(so the adapter loads from the working directory training ran in, wherever that tree is
copied), a hub id as is, any other local path absolute. :func:`adapter_base` reads it
back, refusing with the fix (``--base``) a recorded folder that does not exist from here.
Docs: "reference/api/registry.md".
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError

__all__ = [
    "AdapterMismatchError",
    "BaseModelNotFoundError",
    "adapter_base",
    "check_adapter",
    "load_adapter",
    "missing_base_hint",
    "same_base",
    "stored_base",
]

_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_LORA = (".lora_A.weight", ".lora_B.weight")
_SHOWN = 3  # shape problems listed; the rest are counted


class AdapterMismatchError(UserError, ValueError):
    """An adapter that was trained on another base model than the one it is loaded onto."""


class BaseModelNotFoundError(UserError, FileNotFoundError):
    """The base model an adapter records is not reachable from here (a relative folder read
    from another working directory, or a folder of another machine)."""


def stored_base(name_or_path: str | os.PathLike[str]) -> str:
    """How a base model is written into ``adapter_config.json`` and the model card: a
    relative path to an existing folder as given (it loads from the same working directory,
    e.g. ``quickstart/models/qwen3-vl``), any other local path absolute (``~`` expanded), and
    anything else (a hub id) unchanged."""
    given = os.fspath(name_or_path)
    path = Path(given).expanduser()
    if not path.is_absolute() and given == os.fspath(path) and path.is_dir():
        return given
    if path.is_absolute() or path.exists():
        return str(path.absolute())
    return given


def _could_be_hub_id(name: str) -> bool:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def missing_base_hint(adapter: str | os.PathLike[str], recorded: str) -> str:
    """What to do when ``recorded`` (an adapter's base) cannot be loaded from here."""
    fix = (
        f"pass the base model's folder or hub id: `judgetrain merge {adapter} --out DIR --base BASE`, "
        f"`judgetrain eval … --model BASE --adapter {adapter}`, or in Python "
        f"PeftModel.from_pretrained(<the base loaded from BASE>, {os.fspath(adapter)!r})"
    )
    if Path(recorded).expanduser().is_absolute():
        return f"the adapter records its base as the folder {recorded!r}, which does not exist on this machine; {fix}."
    return (
        f"the adapter records its base as {recorded!r}, a path relative to the folder training ran in; from the "
        f"working directory {os.getcwd()} it names no folder. Run from the folder training ran in, or {fix}."
    )


def adapter_base(adapter: str | os.PathLike[str], base: str | os.PathLike[str] | None = None) -> str:
    """The base model to load ``adapter`` onto: ``base`` when given (an override), else the
    recorded ``base_model_name_or_path``. A recorded local path that names no folder from the
    working directory is refused (:class:`BaseModelNotFoundError`) with the fix; a recorded
    name that may be a hub id is returned for ``from_pretrained`` to resolve."""
    if base is not None:
        return os.path.expanduser(os.fspath(base))
    adapter_dir = Path(os.fspath(adapter)).expanduser()
    recorded = _peft_config(adapter_dir).base_model_name_or_path
    if not recorded:
        raise BaseModelNotFoundError(
            f"{adapter_dir / 'adapter_config.json'} records no base_model_name_or_path: pass the "
            "base model it was trained on (--base BASE for `judgetrain merge`, --model BASE "
            "for `judgetrain eval`)"
        )
    if Path(recorded).expanduser().is_dir() or _could_be_hub_id(recorded):
        return recorded
    raise BaseModelNotFoundError(f"adapter {adapter_dir}: {missing_base_hint(adapter_dir, recorded)}")


def same_base(recorded: str | None, given: str | os.PathLike[str] | None) -> bool:
    """Whether two spellings name one base: equal strings, paths of one existing folder
    (a relative path is read from the working directory, as PEFT wrote it), or a recorded
    relative path that no folder here matches but that ends the existing folder given
    (``quickstart/models/qwen3-vl`` and ``/elsewhere/quickstart/models/qwen3-vl``: the
    tree training ran in, used from another working directory)."""
    if not recorded or given is None:
        return False
    given = os.fspath(given)
    if recorded == given:
        return True
    a, b = Path(recorded).expanduser(), Path(given).expanduser()
    if a.exists():
        return b.exists() and a.resolve() == b.resolve()
    parts = Path(os.path.normpath(recorded)).parts
    return not a.is_absolute() and ".." not in parts and b.is_dir() and b.resolve().parts[-len(parts) :] == parts


def _peft_config(adapter: Path) -> Any:
    from peft import PeftConfig

    if not (adapter / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"{adapter} holds no adapter_config.json, so it is not a PEFT adapter folder. Pass the "
            "folder the trainer saved the adapter to."
        )
    return PeftConfig.from_pretrained(str(adapter))


def _adapter_shapes(adapter: Path) -> dict[str, tuple[int, ...]]:
    """Every saved tensor's shape, keys as PEFT saves them (``base_model.model.`` + parameter)."""
    if (adapter / _WEIGHTS[0]).is_file():
        from safetensors import safe_open

        with safe_open(str(adapter / _WEIGHTS[0]), "pt") as f:  # the header only: no tensor is read
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (safetensors' safe_open is not a mapping: no `in`)
    if (adapter / _WEIGHTS[1]).is_file():
        import torch

        state = torch.load(adapter / _WEIGHTS[1], map_location="cpu", weights_only=True)
        return {k: tuple(v.shape) for k, v in state.items()}
    return {}


def _suffixes(name: str) -> Iterator[str]:
    parts = name.split(".")
    for i in range(len(parts)):
        yield ".".join(parts[i:])


def _module_index(model: Any) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Modules by name and, for names that moved (transformers renames checkpoint prefixes,
    e.g. ``model.layers`` → ``model.language_model.layers``), names by every dotted suffix."""
    modules = dict(model.named_modules())
    by_suffix: dict[str, list[str]] = {}
    for name in modules:
        for suffix in _suffixes(name):
            by_suffix.setdefault(suffix, []).append(name)
    return modules, by_suffix


def _find(name: str, modules: dict[str, Any], by_suffix: dict[str, list[str]]) -> Any:
    if name in modules:
        return modules[name]
    for suffix in _suffixes(name):  # the longest suffix naming exactly one module
        hits = by_suffix.get(suffix, [])
        if len(hits) == 1 and "." in suffix:
            return modules[hits[0]]
        if len(hits) > 1:
            return None
    return None


def _shape_problems(shapes: dict[str, tuple[int, ...]], model: Any) -> tuple[list[str], int]:
    """(problems, LoRA tensors matched to a linear layer of ``model``)."""
    import torch

    modules, by_suffix = _module_index(model)
    problems: list[str] = []
    matched = 0
    for key, shape in sorted(shapes.items()):
        end = next((e for e in _LORA if key.endswith(e)), None)
        if end is None:
            continue
        name = key.removeprefix("base_model.model.")[: -len(end)]
        module = _find(name, modules, by_suffix)
        if not isinstance(module, torch.nn.Linear):
            continue
        matched += 1
        if end == _LORA[0] and shape[1] != module.in_features:
            problems.append(
                f"{name}: the adapter's lora_A is {list(shape)} (in_features {shape[1]}), this model's "
                f"layer takes {module.in_features}"
            )
        elif end == _LORA[1] and shape[0] != module.out_features:
            problems.append(
                f"{name}: the adapter's lora_B is {list(shape)} (out_features {shape[0]}), this model's "
                f"layer gives {module.out_features}"
            )
    return problems, matched


def _model_type(name_or_path: str | None) -> str | None:
    """The ``model_type`` of a base readable here (a local folder, or a hub id in the local cache)."""
    if not name_or_path:
        return None
    config = Path(name_or_path).expanduser() / "config.json"
    try:
        if config.is_file():
            return json.loads(config.read_text()).get("model_type")
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(name_or_path, local_files_only=True).model_type
    except (OSError, ValueError):  # not readable offline: nothing to compare
        return None


def _processor_class(config: Any) -> str | None:
    """The processor class ``AutoProcessor`` loads for a model of ``config``'s class, by name."""
    from transformers import PROCESSOR_MAPPING

    found: Any = PROCESSOR_MAPPING.get(type(config), None)
    return found.__name__ if found is not None else None


def _architecture_problems(adapter: Path | None, peft_config: Any, recorded: str | None, model: Any) -> list[str]:
    """The recorded base's model type, the base class PEFT recorded, and the processor saved
    in the adapter folder (the scorer uses it; ``adapter`` ``None``: not known), each against ``model``."""
    config = model.config
    problems = []
    base_type = _model_type(recorded)
    if base_type and base_type != config.model_type:
        problems.append(f"model_type: the base is {base_type!r}, this model is {config.model_type!r}")
    recorded_class = (getattr(peft_config, "auto_mapping", None) or {}).get("base_model_class")
    if recorded_class and recorded_class != type(model).__name__:
        problems.append(f"architecture: the base is {recorded_class}, this model is {type(model).__name__}")
    saved = adapter / "processor_config.json" if adapter is not None else None
    expected = _processor_class(config)
    if saved is not None and saved.is_file() and expected:
        got = json.loads(saved.read_text()).get("processor_class")
        if got and got != expected:
            problems.append(f"processor: the adapter folder holds a {got} (used for scoring), this model needs a {expected}")
    return problems


def _message(adapter: Path | None, recorded: str | None, given: str | None, problems: list[str]) -> str:
    shown = problems[:_SHOWN] + ([f"… and {len(problems) - _SHOWN} more"] if len(problems) > _SHOWN else [])
    lines = "\n".join(f"  - {p}" for p in shown)
    onto = f"{given!r}" if given else "this model"
    what = f"adapter {adapter}" if adapter is not None else "the loaded adapter"
    python = f"adapter={str(adapter)!r}" if adapter is not None else "adapter=..."
    if recorded:
        return (
            f"{what} was trained on base model {recorded!r} (its adapter_config.json's "
            f"base_model_name_or_path) and does not fit {onto}:\n{lines}\nPass that base as --model {recorded} "
            f"(in Python: Scorer.from_pretrained({recorded!r}, {python})), or use an adapter "
            f"trained on {onto}."
        )
    return (
        f"{what} records no base model (adapter_config.json has no base_model_name_or_path) and "
        f"does not fit {onto}:\n{lines}\nPass the base model it was trained on as --model."
    )


def _warn_other_name(adapter: Path, recorded: str, given: str | None) -> None:
    # One call site, so Python's warning registry shows it once per message.
    warnings.warn(
        f"adapter {adapter} was trained on base model {recorded!r}; it is loaded onto {given!r}, another "
        "name whose architecture and layer shapes match. If that is not the same model, pass "
        f"--model {recorded}.",
        UserWarning,
        stacklevel=3,
    )


def check_adapter(
    model: Any,
    adapter: str | os.PathLike[str],
    model_name_or_path: str | os.PathLike[str] | None = None,
) -> None:
    """Refuse (:class:`AdapterMismatchError`) an adapter folder that cannot belong to
    ``model`` (a transformers model, before PEFT wraps it), naming the base it was trained
    on and how to pass it; warn when the base's name differs from ``model_name_or_path``
    (default: the path the model was loaded from) but everything checkable agrees.

    Checked: every ``lora_A`` / ``lora_B`` shape against the linear layer it goes onto; at
    least one LoRA tensor finds its layer; and, when the names differ, the recorded base's
    ``model_type`` (when readable offline), PEFT's recorded base class, and the processor
    class saved in the adapter folder.
    """
    adapter = Path(os.fspath(adapter)).expanduser()
    peft_config = _peft_config(adapter)
    recorded = peft_config.base_model_name_or_path
    given = (
        os.fspath(model_name_or_path) if model_name_or_path is not None else getattr(model.config, "name_or_path", None) or None
    )
    same = same_base(recorded, given)
    problems = [] if same else _architecture_problems(adapter, peft_config, recorded, model)
    shapes = _adapter_shapes(adapter)
    shape_problems, matched = _shape_problems(shapes, model)
    problems += shape_problems
    lora = [k for k in shapes if k.endswith(_LORA)]
    if lora and not matched:
        problems.append(
            f"layers: none of the adapter's {len(lora)} LoRA tensors (e.g. {lora[0]}) has its linear layer in this model"
        )
    if problems:
        raise AdapterMismatchError(_message(adapter, recorded, given, problems))
    if recorded and not same:
        _warn_other_name(adapter, recorded, given)


def load_adapter(
    model: Any,
    adapter: str | os.PathLike[str],
    model_name_or_path: str | os.PathLike[str] | None = None,
    *,
    is_trainable: bool = False,
) -> Any:
    """``PeftModel.from_pretrained(model, adapter)`` once :func:`check_adapter` has passed."""
    from peft import PeftModel

    check_adapter(model, adapter, model_name_or_path)
    return PeftModel.from_pretrained(model, str(Path(os.fspath(adapter)).expanduser()), is_trainable=is_trainable)
