"""Contracts with datasets (judgetrain.compat.datasets): what judgetrain relies on, checked on
datasets' real views, failing naming datasets and the name it relies on."""

from __future__ import annotations

import contextlib

import datasets
import pytest

from judgetrain.compat import datasets as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming datasets, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, TypeError, UpstreamChanged) as e:
        pytest.fail(f"datasets {installed_version('datasets')} changed {name}, which judgetrain relies on: "
                    f"{type(e).__name__}: {e}")


def _rows(ds) -> list[int]:
    return list(ds["n"])


def test_views_read_through_indices_and_their_table_is_not_their_rows(tmp_path):
    """reads_through_indices: every kind of view says so, and for a view the Arrow table
    (``ds.data``) is not its rows, so ``Dataset(ds.data, …)`` would save the wrong rows; for a
    dataset that is no view the table is its rows, which judgetrain.records.save relies on."""
    ds = datasets.Dataset.from_dict({"n": list(range(8))})
    ds.save_to_disk(str(tmp_path / "saved"))
    views = {"select": ds.select([5, 1]), "shuffle": ds.shuffle(seed=0), "sort": ds.sort("n", reverse=True),
             "filter": ds.filter(lambda r: r["n"] % 2 == 0), "train_test_split": ds.train_test_split(0.5, seed=0)["train"]}
    plain = {"from_dict": ds, "flatten_indices": views["select"].flatten_indices(),
             "load_from_disk": datasets.load_from_disk(str(tmp_path / "saved")), "shard": ds.shard(2, 0)}
    with relied_on("Dataset._indices (set on select/shuffle/sort/filter views, unset once flattened)"):
        for name, view in views.items():
            assert compat.reads_through_indices(view), name
            assert _rows(datasets.Dataset(view.data)) != _rows(view), name
        for name, d in plain.items():
            assert not compat.reads_through_indices(d), name
            assert _rows(datasets.Dataset(d.data, info=d.info, split=d.split, fingerprint="f")) == _rows(d), name


def test_a_dataset_without_the_mapping_attribute_is_named(monkeypatch):
    ds = datasets.Dataset.from_dict({"n": [1]})
    monkeypatch.delattr(ds, "_indices")
    with pytest.raises(UpstreamChanged, match=r"^datasets \S+ no longer offers Dataset\._indices"):
        compat.reads_through_indices(ds)


def test_the_dataset_dict_file_makes_a_folder_of_splits_a_dataset_dict(tmp_path):
    """dataset_dict_file: DatasetDict.save_to_disk writes it as {"splits": [...]}, and split
    folders saved one by one load as a DatasetDict once it is beside them (judgetrain.records.save)."""
    import json

    dd = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"n": [1, 2]}),
                               "test": datasets.Dataset.from_dict({"n": [3]})})
    with relied_on("datasets.config.DATASETDICT_JSON_FILENAME"):
        name = compat.dataset_dict_file()
        dd.save_to_disk(str(tmp_path / "whole"))
        assert json.loads((tmp_path / "whole" / name).read_text()) == {"splits": ["train", "test"]}
        for split, ds in dd.items():
            ds.save_to_disk(str(tmp_path / "by-split" / split))
        with pytest.raises(FileNotFoundError):
            datasets.load_from_disk(str(tmp_path / "by-split"))
        (tmp_path / "by-split" / name).write_text(json.dumps({"splits": list(dd)}))
        loaded = datasets.load_from_disk(str(tmp_path / "by-split"))
        assert isinstance(loaded, datasets.DatasetDict) and {k: _rows(v) for k, v in loaded.items()} == {"train": [1, 2], "test": [3]}
