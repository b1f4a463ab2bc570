"""The base model a run trains, as ``run.json`` and the model card identify it: a local folder
by the sha256 of its files (:func:`judgetrain.identity.model_identity`), a hub id by the commit
its ``model_revision`` resolves to (as lm-eval records ``model_sha``), so a branch that moved on
the hub is another base.

The commit comes from the hub (``HfApi().model_info``) unless ``HF_HUB_OFFLINE`` is set, else
(or when the hub cannot be reached) from the local Hugging Face cache, the way
``from_pretrained`` resolves a revision offline: ``snapshot_download(..., local_files_only=True)``
gives the snapshot folder, which the cache names by its commit (the cache layout
huggingface_hub documents, ``snapshots/<commit>``).
Docs: "reference/recipes.md".
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["base_model_identity", "hub_commit"]

logger = logging.getLogger("judgetrain.train")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def hub_commit(repo_id: str, revision: str | None = None, cache_dir: str | os.PathLike | None = None) -> str | None:
    """The commit ``revision`` (a branch, tag or commit; None: ``main``) of the hub model
    ``repo_id`` resolves to, from the hub unless offline, else from the local cache
    (``cache_dir``, default the Hugging Face cache); None when neither knows it (the model
    loader then says how to get the files)."""
    from huggingface_hub import HfApi, constants, snapshot_download

    if not constants.HF_HUB_OFFLINE:
        try:
            return HfApi().model_info(repo_id, revision=revision).sha
        except (OSError, ValueError) as e:  # no network, no such repo or revision: what the cache knows
            logger.info("hub: no commit for %s@%s from the hub (%s); reading the local cache", repo_id, revision or "main", e)
    try:
        folder = Path(
            snapshot_download(
                repo_id, revision=revision, cache_dir=None if cache_dir is None else Path(cache_dir), local_files_only=True
            )
        )
    except (OSError, ValueError):  # not cached, or not a hub id at all
        return None
    return folder.name if _COMMIT.fullmatch(folder.name) else None


def base_model_identity(
    name_or_path: str | os.PathLike, revision: str | None = None, cache_dir: str | os.PathLike | None = None
) -> dict[str, Any]:
    """A local folder: ``{"files": {name: sha256}}``; a hub id: ``{"hub_id": id, "sha": commit}``
    (:func:`hub_commit`; None when the commit cannot be known)."""
    from judgetrain.identity import model_identity

    identity = model_identity(name_or_path)
    if "hub_id" in identity:
        identity["sha"] = hub_commit(str(name_or_path), revision, cache_dir)
    return identity
