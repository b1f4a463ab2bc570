"""What judgetrain relies on in datasets beyond its documented API, each reliance with a contract
test in ``tests/compat/test_datasets.py`` that fails naming it when a release changes it. Where a
release no longer offers it, these raise :class:`~judgetrain.compat.versions.UpstreamChanged`.
Docs: "get-started/install.md".
"""

from __future__ import annotations

from typing import Any

from .versions import UpstreamChanged

__all__ = ["dataset_dict_file", "reads_through_indices"]

LIBRARY = "datasets"


def reads_through_indices(ds: Any) -> bool:
    """Whether ``ds`` (a ``datasets.Dataset``) reads its rows through an indices mapping: what
    ``select``, ``shuffle``, ``sort``, ``filter`` and ``train_test_split`` return
    (``Dataset._indices`` is set), whose Arrow table ``ds.data`` is not its rows in order.
    ``ds.flatten_indices()`` makes one that does not; datasets says so publicly only by copying
    every row (``flatten_indices`` on any dataset), which doubles a save's memory."""
    if not hasattr(ds, "_indices"):
        raise UpstreamChanged(
            LIBRARY,
            "Dataset._indices (the indices mapping of a select/shuffle view)",
            "save a built split with its content hash as fingerprint",
        )
    return ds._indices is not None


def dataset_dict_file() -> str:
    """The name of the file that makes a folder of saved splits a ``DatasetDict`` for
    ``datasets.load_from_disk`` (``datasets.config.DATASETDICT_JSON_FILENAME``), which
    ``DatasetDict.save_to_disk`` writes as ``{"splits": [names]}`` before the splits; judgetrain
    writes it after them, so that a save killed halfway leaves no loadable folder."""
    import datasets.config

    name = getattr(datasets.config, "DATASETDICT_JSON_FILENAME", None)
    if not isinstance(name, str):
        raise UpstreamChanged(
            LIBRARY, "datasets.config.DATASETDICT_JSON_FILENAME", "write a built dataset's DatasetDict marker after its splits"
        )
    return name
