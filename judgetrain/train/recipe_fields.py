"""The recipe fields ``judgetrain train --help`` lists, without importing the training stack.

Every recipe field comes from a dataclass: judgetrain's own (:mod:`judgetrain.train.args`,
:mod:`judgetrain.consistency.args`) and TRL's ``SFTConfig`` with transformers'
``TrainingArguments``, whose import loads torch and takes seconds (tens of seconds on a busy
machine). So the listing is rendered once, at a fixed width, into ``recipe_fields.json`` beside
this module, keyed by what it depends on: the installed TRL and transformers versions and the
content of judgetrain's argument modules. :func:`recipe_help` prints that copy when the key
matches and renders it live otherwise (a changed install is never shown a stale listing).
``python -m judgetrain.train.recipe_fields --write`` rewrites the copy; a test checks that it
equals the live rendering.
README: "`judgetrain train`".
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

from judgetrain import config

__all__ = ["SNAPSHOT", "WIDTH", "recipe_help", "render_recipe_help", "snapshot_key", "write_snapshot"]

SNAPSHOT = Path(__file__).with_name("recipe_fields.json")
WIDTH = 100  # columns of the listing: fixed, so the copy does not depend on the terminal it was made in
# the modules whose dataclasses (and the registries their help texts name) make up the listing
_SOURCES = ("judgetrain/train/args.py", "judgetrain/consistency/args.py", "judgetrain/consistency/config.py",
            "judgetrain/models/registry.py", "judgetrain/train/recipe_fields.py")


def snapshot_key() -> dict[str, str]:
    """What the listing depends on: TRL's and transformers' installed versions, and the sha256 of
    each judgetrain module that defines recipe fields (read from disk, nothing imported)."""
    root = Path(__file__).resolve().parents[2]  # the folder holding the judgetrain package (checkout or site-packages)
    sources = {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in _SOURCES}
    return {"trl": metadata.version("trl"), "transformers": metadata.version("transformers"), **sources}


def render_recipe_help() -> str:
    """Every recipe field (:func:`judgetrain.train.parser.make_parser`), grouped by dataclass, at
    :data:`WIDTH` columns (imports TRL's SFTConfig: seconds)."""
    from trl import SFTConfig

    from judgetrain.consistency.args import ConsistencyArguments

    from .args import DataArguments, LoraArguments, ModelArguments

    groups = [(ModelArguments, "recipe fields: judgetrain's ModelArguments"),
              (DataArguments, "recipe fields: judgetrain's DataArguments"),
              (LoraArguments, "recipe fields: judgetrain's LoraArguments"),
              (ConsistencyArguments, "recipe fields: judgetrain's ConsistencyArguments (consistency tuning)"),
              (SFTConfig, "recipe fields: TRL's SFTConfig (with transformers' TrainingArguments)")]
    # a subclass per dataclass only to give HfArgumentParser a group title
    titled = tuple(type(cls.__name__, (cls,), {"_argument_group_name": title}) for cls, title in groups)
    formatter = functools.partial(argparse.ArgumentDefaultsHelpFormatter, width=WIDTH, max_help_position=40)
    parser = config.make_parser(titled, prog="judgetrain train", usage=argparse.SUPPRESS, add_help=False,
                                formatter_class=formatter,
                                description="Every field below is a recipe key (YAML) and, on the command line, an "
                                            "override (--field value) that wins over the recipe:")
    return parser.format_help()


def recipe_help() -> str:
    """The listing: the stored copy when its key matches this install, else rendered live."""
    try:
        stored = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = {}
    if stored.get("key") == snapshot_key():
        return stored["text"]
    return render_recipe_help()


def write_snapshot() -> Path:
    """Render the listing live and store it with its key (:data:`SNAPSHOT`)."""
    from judgetrain.io import write_json

    write_json(SNAPSHOT, {"key": snapshot_key(), "text": render_recipe_help()})
    return SNAPSHOT


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m judgetrain.train.recipe_fields --write  (re-renders judgetrain/train/recipe_fields.json)")
    print(f"wrote {write_snapshot()}")
