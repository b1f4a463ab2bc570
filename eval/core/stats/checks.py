"""What every statistic of :mod:`judgetrain.eval.core.stats` shares: :class:`StatsError`, the
checks that turn its input into flat, finite, aligned arrays (or name the argument that is
not), question clusters as integer codes, and :func:`or_none` for reports that print "–"
where a statistic is undefined.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["StatsError", "as_array", "as_bools", "check_aligned", "cluster_codes", "or_none"]


class StatsError(ValueError):
    """A statistic that cannot be computed from the given input (empty, misaligned, one class only)."""


def or_none(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, or ``None`` where the data leave the statistic undefined
    (:class:`StatsError`: one class only, no variance…; or a non-finite float), for
    reports that print "–" there."""
    try:
        out = fn(*args, **kwargs)
    except StatsError:
        return None
    if isinstance(out, float) and not np.isfinite(out):
        return None
    return out


def as_array(values: Sequence[Any], name: str, *, dtype: Any = float) -> np.ndarray:
    """``values`` as a 1-D array of ``dtype``, one value per item; :class:`StatsError` naming the
    argument ``name`` when it is not flat, is empty, or (for floats) holds NaN or infinity."""
    arr = np.asarray(values, dtype=dtype)
    if arr.ndim != 1:
        raise StatsError(f"{name}: expected a flat sequence (one value per item), got shape {arr.shape}")
    if arr.size == 0:
        raise StatsError(f"{name}: no items; a statistic needs at least one")
    if dtype is float and not np.isfinite(arr).all():
        raise StatsError(f"{name}: {int((~np.isfinite(arr)).sum())} value(s) are NaN or infinite; drop or fix those items first")
    return arr


def as_bools(values: Sequence[Any], name: str) -> np.ndarray:
    """``values`` (booleans, or 0/1) as a 1-D bool array, checked as :func:`as_array` does;
    any other value raises :class:`StatsError` naming ``name`` and the first such value."""
    arr = np.asarray(values)
    if arr.ndim == 1 and arr.size and not np.isin(arr, (0, 1)).all():
        raise StatsError(f"{name}: expected booleans (or 0/1), got values like {arr[~np.isin(arr, (0, 1))][0]!r}")
    return as_array(values, name, dtype=bool)


def check_aligned(*pairs: tuple[str, np.ndarray]) -> None:
    """Raise :class:`StatsError` unless the ``(name, array)`` pairs all have one length (aligned item by item)."""
    lengths = {name: len(arr) for name, arr in pairs}
    if len(set(lengths.values())) > 1:
        raise StatsError(f"arrays must be aligned item by item, got lengths {lengths}")


def cluster_codes(clusters: Sequence[Any], n: int) -> np.ndarray:
    """One integer code per item for ``n`` items' cluster labels (e.g. question ids): 0, 1, …
    in order of each label's first appearance; :class:`StatsError` unless there are ``n`` labels."""
    labels = list(clusters)
    if len(labels) != n:
        raise StatsError(f"clusters: need one label per item ({n}), got {len(labels)}")
    codes: dict[Any, int] = {}
    return np.array([codes.setdefault(label, len(codes)) for label in labels], dtype=int)
