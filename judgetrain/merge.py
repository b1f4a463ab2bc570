"""Merge a trained LoRA adapter into its base model and save the result.

`judgetrain merge ADAPTER --out DIR` loads the base model named in the
adapter's config (or `--base`), applies the adapter with PEFT, folds it in
with `merge_and_unload()` and saves model (safetensors) and processor, so the
folder loads like any checkpoint (`judgetrain.models.load_model_and_processor`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def merge_adapter(adapter: str | Path, out: str | Path, *, base: str | None = None, dtype: str = "auto") -> Path:
    """Write base + adapter, merged, to ``out``; returns ``out``."""
    from peft import PeftModel

    from judgetrain.models import load_model_and_processor

    adapter = Path(adapter)
    config_file = adapter / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"{adapter}: no adapter_config.json; pass the output folder of `judgetrain train` (or a checkpoint-N in it)")
    base = base or json.loads(config_file.read_text())["base_model_name_or_path"]
    model, processor = load_model_and_processor(base, dtype=dtype)
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    out = Path(out)
    merged.save_pretrained(str(out), safe_serialization=True)
    if (adapter / "processor_config.json").is_file() or (adapter / "preprocessor_config.json").is_file():
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(str(adapter))
    processor.save_pretrained(str(out))
    return out


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.strip().splitlines()[0]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = "example:\n  judgetrain merge runs/tiny-qwen3vl-timecatch --out runs/tiny-qwen3vl-timecatch-merged\n"
    p.add_argument("adapter", type=Path, help="folder with adapter_config.json (a training output or checkpoint)")
    p.add_argument("--out", type=Path, required=True, help="folder for the merged model")
    p.add_argument("--base", default=None, help="base model (default: the one recorded in the adapter config)")
    p.add_argument("--dtype", default="auto", help="dtype to load the base in (auto, float32, bfloat16)")


def main(args: argparse.Namespace) -> int:
    out = merge_adapter(args.adapter, args.out, base=args.base, dtype=args.dtype)
    print(f"Merged model written to {out}")
    return 0
