"""Merge a trained LoRA adapter into its base model and save the result.

`judgetrain merge ADAPTER --out DIR` loads the base model named in the
adapter's config (or `--base`), applies the adapter with PEFT, folds it in
with `merge_and_unload()` and saves model (safetensors) and processor, so the
folder loads like any checkpoint (`judgetrain.models.load_model_and_processor`).
A base recorded as a relative folder (`quickstart/models/qwen3-vl`) is read from
the working directory; from anywhere else `--base` names it.
README: "`judgetrain merge`".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import ConfigError, arg
from judgetrain.models.registry import DTYPES


@dataclass
class MergeConfig:
    """``judgetrain merge``'s options."""

    adapter: Path = arg(help="folder with adapter_config.json (a training output or checkpoint); "
                             "the first word: `judgetrain merge ADAPTER`", positional=True)
    out: Path = arg(help="folder for the merged model")
    base: str | None = arg(None, "base model folder or hub id (None: the one recorded in the adapter config, a relative "
                                 "folder read from the working directory)")
    dtype: str = arg("auto", f"dtype to load the base in ({', '.join(DTYPES)})")


def merge_adapter(adapter: str | Path, out: str | Path, *, base: str | None = None, dtype: str = "auto") -> Path:
    """Write base + adapter, merged, to ``out``; returns ``out``. ``base`` overrides the
    base recorded in the adapter; a recorded one that is not reachable from the working
    directory is refused (``BaseModelNotFoundError``) saying to pass it."""
    from judgetrain.models import ModelNotFoundError, load_model_and_processor
    from judgetrain.models.adapters import BaseModelNotFoundError, adapter_base, load_adapter, missing_base_hint

    adapter = Path(adapter)
    config_file = adapter / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{adapter}: no adapter_config.json; pass the output folder of `judgetrain train` (or a checkpoint-N in it)")
    recorded = base is None
    base = adapter_base(adapter, base)
    try:
        model, processor = load_model_and_processor(base, dtype=dtype)
    except ModelNotFoundError as e:
        if not recorded:
            raise
        # a name that could be a hub id, or a relative folder of the directory training ran in
        raise BaseModelNotFoundError(f"{e}\n{missing_base_hint(adapter, base)}") from e
    # with --base another model: refused before PEFT fails with a shape error, naming the adapter's base
    merged = load_adapter(model, adapter, base).merge_and_unload()
    out = Path(out)
    merged.save_pretrained(str(out), safe_serialization=True)
    if (adapter / "processor_config.json").is_file() or (adapter / "preprocessor_config.json").is_file():
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(str(adapter))
    processor.save_pretrained(str(out))
    return out


def make_parser():
    from judgetrain.config import make_parser as make_config_parser
    return make_config_parser(
        MergeConfig, "judgetrain merge", __doc__.strip().splitlines()[0],
        "examples:\n"
        "  judgetrain merge runs/tiny-qwen3vl-timecatch --out runs/tiny-qwen3vl-timecatch-merged\n"
        "  judgetrain merge runs/tiny-qwen3vl-timecatch/checkpoint-4 --out runs/merged-4 --dtype bfloat16\n"
        "  # from another working directory than training's, when the recipe named a relative base folder\n"
        "  judgetrain merge ~/judge/runs/tiny-qwen3vl-timecatch --out merged --base ~/judge/quickstart/models/qwen3-vl\n",
        usage="judgetrain merge ADAPTER --out DIR [--base MODEL] [--dtype DTYPE]")


def main(cfg: MergeConfig) -> int:
    if not (Path(cfg.adapter) / "adapter_config.json").is_file():
        raise ConfigError([f"adapter: {cfg.adapter}: no adapter_config.json; pass the output folder of `judgetrain train` "
                           "(or a checkpoint-N in it)"])
    out = merge_adapter(cfg.adapter, cfg.out, base=cfg.base, dtype=cfg.dtype)
    print(f"Merged model written to {out}")
    return 0
