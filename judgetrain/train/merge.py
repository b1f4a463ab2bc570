"""Merge a trained LoRA adapter into its base model and save the result.

`judgetrain merge ADAPTER --out DIR` loads the base model named in the
adapter's config (or `--base`), applies the adapter with PEFT, folds it in
with `merge_and_unload()` and saves model (safetensors) and processor, so the
folder loads like any checkpoint (`judgetrain.models.load_model_and_processor`; a reward
model's, with its scalar head, by `judgetrain.models.load_reward_model`).
A base recorded as a relative folder (`quickstart/models/qwen3-vl`) is read from
the working directory; from anywhere else `--base` names it.

The weights are written in the key layout of the family's original hub
checkpoints (every renaming of transformers' conversion mapping reversed, e.g.
LLaVA-OneVision's `vision_tower.vision_model.*`), which is what serving engines
such as vLLM load, whatever layout the base folder had. The folder is written
whole or not at all, with `judgetrain_merge.json` recording what it was merged
from (the adapter's and the base's files by content); a rerun of the same merge
finds it done, another merge into it is refused unless `--overwrite`. An `--out` that is,
holds or lies inside the adapter or a local base is refused, `--overwrite` or not (the merge
replaces `--out` whole), and the merge holds `--out`'s writer lock (:mod:`judgetrain.writer`)
while it writes, so a second merge into it stops at once naming the first (`--wait`: waits).
Docs: "reference/commands/merge.md", "how-to/serving.md".
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain import writer
from judgetrain.config import ConfigError, arg
from judgetrain.errors import UserError
from judgetrain.models.registry import DTYPES
from judgetrain.overlap import overlap

MERGE_INFO = "judgetrain_merge.json"


class MergeOutError(UserError, FileExistsError):
    """``--out`` holds another merge or files that are no merge; the message says what differs and the ways out."""


@dataclass
class MergeConfig:
    """``judgetrain merge``'s options."""

    adapter: Path = arg(
        help="folder with adapter_config.json (a training output or checkpoint); the first word: `judgetrain merge ADAPTER`",
        positional=True,
    )
    out: Path = arg(help="folder for the merged model")
    base: str | None = arg(
        None,
        "base model folder or hub id (None: the one recorded in the adapter config, a relative "
        "folder read from the working directory)",
    )
    dtype: str = arg("auto", f"dtype to load the base in ({', '.join(DTYPES)})")
    overwrite: bool = arg(False, "replace --out (the whole folder) when it holds another merge or other files")
    wait: bool = arg(False, "when another process is writing --out, wait until it has finished instead of stopping at once")


def merge_identity(adapter: str | Path, base: str, dtype: str) -> dict[str, Any]:
    """What a merged folder is made of: the adapter and the base by content (their files'
    sha256, so another spelling of one folder is the same merge), and the dtype."""
    from judgetrain.identity import adapter_identity, model_identity

    return {"adapter": adapter_identity(adapter), "base": model_identity(base), "dtype": str(dtype)}


def _out_holds(out: Path, identity: dict[str, Any], overwrite: bool) -> bool:
    """Whether ``out`` already holds this very merge (nothing to do). A missing or empty
    folder, or any folder with ``overwrite``, is to be written; another merge or other
    files are refused (:class:`MergeOutError`), naming what differs (old → new)."""
    from judgetrain.identity import differences

    if out.exists() and not out.is_dir():
        raise MergeOutError(f"--out {out}: a file, not a folder; pass a folder for the merged model")
    if not out.is_dir() or not any(out.iterdir()):
        return False
    info_file = out / MERGE_INFO
    old = json.loads(info_file.read_text()).get("identity") if info_file.is_file() else None
    if old == identity and not overwrite:
        return True
    if overwrite:
        return False
    if old is None:
        names = sorted(p.name for p in out.iterdir())
        what = f"files that are no merge of judgetrain's ({', '.join(names[:5])}{', …' if len(names) > 5 else ''})"
    else:
        what = "another merge (old → new):\n" + "\n".join(f"  - {d}" for d in differences(old, identity))
    raise MergeOutError(
        f"--out {out} holds {what}\nWrite this merge elsewhere (--out NEW_FOLDER), or pass --overwrite to replace {out} whole."
    )


def _hub_layout(model: Any) -> None:
    """Make ``save_pretrained`` write the key layout of the family's original hub checkpoints.

    transformers renames a checkpoint's keys on load (its conversion mapping) and, on
    save, reverses only the renamings that load applied. A base that was itself saved by
    transformers from a model built in memory (the tiny models, a conversion) lacks, for
    LLaVA-OneVision, SigLIP's ``vision_model.`` level; its merge would then be written as
    ``vision_tower.*``, which vLLM does not load. Asking for every renaming of the model's
    mapping writes ``vision_tower.vision_model.*``, as the hub checkpoints have it, and
    leaves a base already in that layout as it is. A transformers that no longer works so
    fails here (``UpstreamChanged``) rather than write another layout
    (:func:`judgetrain.compat.transformers.hub_key_layout`)."""
    from judgetrain.compat.transformers import hub_key_layout

    hub_key_layout(model)


def merge_adapter(
    adapter: str | Path,
    out: str | Path,
    *,
    base: str | None = None,
    dtype: str = "auto",
    overwrite: bool = False,
    wait: bool = False,
) -> Path:
    """Write base + adapter, merged, to ``out`` in the hub's key layout; returns ``out``.
    ``base`` overrides the base recorded in the adapter; a recorded one that is not
    reachable from the working directory is refused (``BaseModelNotFoundError``) saying to
    pass it. ``out`` holding this same merge is left as it is; holding another merge or
    other files, it is refused (:class:`MergeOutError`) unless ``overwrite``, which
    replaces it whole once the new merge is written. An ``out`` that is, holds or lies inside
    the adapter or a local base is refused (:class:`MergeOutError`); ``out``'s writer lock is
    held while it is looked at and written (``wait``: wait for another writer, else
    :class:`judgetrain.writer.FolderBusyError`)."""
    from judgetrain.models.adapters import adapter_base

    adapter, out = Path(adapter), Path(out)
    config_file = adapter / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(
            f"{adapter}: no adapter_config.json; pass the output folder of `judgetrain train` (or a checkpoint-N in it)"
        )
    recorded = base is None
    base = adapter_base(adapter, base)
    clash = overlap(out, {"ADAPTER": adapter, "--base" if not recorded else "the base model (adapter_config.json)": base})
    if clash:
        raise MergeOutError(clash)
    with writer.held(out, wait=wait):
        return _merge(adapter, out, base, dtype, overwrite, recorded)


def _merge(adapter: Path, out: Path, base: str, dtype: str, overwrite: bool, recorded: bool) -> Path:
    """:func:`merge_adapter` once ``out`` is this process's to write."""
    from judgetrain.identity import git_state
    from judgetrain.io import atomic_folder, write_json
    from judgetrain.models import ModelNotFoundError, is_reward_adapter, load_model_and_processor
    from judgetrain.models.adapters import BaseModelNotFoundError, load_adapter, missing_base_hint

    identity = merge_identity(adapter, base, dtype)
    if _out_holds(out, identity, overwrite):
        return out
    try:
        # a reward model's adapter merges into the decoder with its scalar head (judgetrain.models.reward)
        head = "reward" if is_reward_adapter(adapter) else "generate"
        model, processor = load_model_and_processor(base, dtype=dtype, head=head)
    except ModelNotFoundError as e:
        if not recorded:
            raise
        # a name that could be a hub id, or a relative folder of the directory training ran in
        raise BaseModelNotFoundError(f"{e}\n{missing_base_hint(adapter, base)}") from e
    # with --base another model: refused before PEFT fails with a shape error, naming the adapter's base
    merged = load_adapter(model, adapter, base).merge_and_unload()
    _hub_layout(merged)
    if (adapter / "processor_config.json").is_file() or (adapter / "preprocessor_config.json").is_file():
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(str(adapter))
    with atomic_folder(out) as tmp:  # complete or absent: a killed merge leaves no half-written model
        merged.save_pretrained(str(tmp), safe_serialization=True)
        processor.save_pretrained(str(tmp))
        git = git_state()
        write_json(
            tmp / MERGE_INFO,
            {
                "identity": identity,
                "adapter": str(adapter),
                "base": str(base),
                "git_commit": git["commit"],
                "git_dirty": git["dirty"],
                "written": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            },
        )
    return out


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        MergeConfig,
        "judgetrain merge",
        __doc__.strip().splitlines()[0],
        "examples:\n"
        "  judgetrain quickstart        # first: a LoRA run to merge (quickstart/runs/tiny-qwen3vl-timecatch)\n"
        "  judgetrain merge quickstart/runs/tiny-qwen3vl-timecatch --out runs/tiny-qwen3vl-timecatch-merged\n"
        "  judgetrain merge quickstart/runs/tiny-qwen3vl-timecatch/checkpoint-4 --out runs/merged-4 --dtype bfloat16\n"
        "  # --base: from another working directory than training's, when the recipe named a relative base folder\n"
        "  judgetrain merge quickstart/runs/tiny-qwen3vl-timecatch --out runs/merged-base --base quickstart/models/qwen3-vl\n",
        usage="judgetrain merge ADAPTER --out DIR [--base MODEL] [--dtype DTYPE] [--overwrite] [--wait]",
    )


def main(cfg: MergeConfig) -> int:
    if not (Path(cfg.adapter) / "adapter_config.json").is_file():
        raise ConfigError(
            [
                f"adapter: {cfg.adapter}: no adapter_config.json; pass the output folder of `judgetrain train` "
                "(or a checkpoint-N in it)"
            ]
        )
    info = Path(cfg.out) / MERGE_INFO
    before = info.read_bytes() if info.is_file() else None
    out = merge_adapter(cfg.adapter, cfg.out, base=cfg.base, dtype=cfg.dtype, overwrite=cfg.overwrite, wait=cfg.wait)
    if before is not None and info.read_bytes() == before:
        print(f"Nothing to do: {out} already holds this merge (pass --overwrite to write it again)")
    else:
        print(f"Merged model written to {out}")
    return 0
