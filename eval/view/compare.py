"""The overview's one table of several runs side by side, from ``judgetrain eval compare``'s numbers.

:func:`compare_table` calls :func:`judgetrain.eval.core.compare.compare` on the page's runs (runs
on other data are marked, as ``--allow-different-data`` marks them, rather than refused) and
lays its result out for the page: a row per run (each cell its value, Wilson 95% interval and
n, as ``eval compare`` prints it), a Δ row per later run (the difference to the first run in
percentage points, as ``eval compare`` computes it) and the p rows of an evaluation with paired
tests. Each Δ of two rates also gets its 95% interval: Newcombe's hybrid score interval, made
from the two cells' own Wilson intervals (:func:`newcombe`).
README: "`judgetrain eval view`".
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

__all__ = ["compare_table", "newcombe"]

COUNTED = tuple[int | None, int] | None


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float] | None:
    """The 95% interval of ``k2/n2 − k1/n1`` by Newcombe's hybrid score method (his method 10):
    each end moves from the difference by the root of the squared distances to the two
    proportions' Wilson interval ends (:func:`judgetrain.eval.core.metrics.ci95`). It treats the
    runs as independent samples, so on the same items (paired) it is the wider, safe side."""
    from ..core.metrics import ci95

    a, b = ci95(k1, n1), ci95(k2, n2)
    if a is None or b is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p2 - p1
    return d - math.hypot(p2 - b[0], a[1] - p1), d + math.hypot(b[1] - p2, p1 - a[0])


def _cell(v: float | None, count: COUNTED) -> str:
    """A run's cell as ``eval compare`` prints it: value, Wilson interval (a rate) and n."""
    from ..core.metrics import ci95

    if count is None:
        return "–" if v is None else f"{v:.1f}"
    k, n = count
    if v is None:
        return f"– (n={n})"
    interval = ci95(k, n) if k is not None else None
    return f"{v:.1f}" + ("" if interval is None else f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]") + f" (n={n})"


def _delta(v: float | None, name: str, first: str, count: COUNTED, first_count: COUNTED) -> str:
    """A Δ cell: the signed difference, its Newcombe interval (two rates) and which runs with each one's n."""
    if v is None:
        return "–"
    if count is None or first_count is None:
        return f"{v:+.1f}"
    interval = None
    if count[0] is not None and first_count[0] is not None:
        interval = newcombe(first_count[0], first_count[1], count[0], count[1])
    shown = "" if interval is None else f" [{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]"
    return f"{v:+.1f}{shown} ({name} vs {first}, n={count[1]}/{first_count[1]})"


def _p(p: float | None) -> str:
    return "–" if p is None else f"{p:.1e}" if p < 0.001 else f"{p:.3f}"


def compare_table(run_dirs: Sequence[str | os.PathLike], names: Sequence[str]) -> dict[str, Any]:
    """``{"columns", "rows": [{"label", "kind" (run, delta, p), "run", "cells"}], "notes"}`` of the
    runs side by side, or ``{"error"}`` saying why they cannot be (other evaluations, no metrics)."""
    from ..core.compare import compare
    from ..core.runs import PredictionsError

    try:
        result = compare(run_dirs, names, allow_different_data=True)
    except (PredictionsError, OSError, ValueError, KeyError) as e:
        return {"error": f"these runs are not compared side by side: {e}"}
    names = result["names"]
    counts = result["counts"] or [[None] * len(result["columns"]) for _ in names]
    p_rows, rows, k = iter(result["paired"]), [], -1
    for label, values, is_delta in result["rows"]:
        if not is_delta:
            k += 1
            cells = [_cell(v, c) for v, c in zip(values, counts[k], strict=False)]
        else:
            cells = [_delta(v, names[k], names[0], c, c0) for v, c, c0 in zip(values, counts[k], counts[0], strict=True)]
        rows.append({"label": label, "kind": "delta" if is_delta else "run", "run": k, "cells": cells})
        if is_delta and (p := next(p_rows, None)) is not None:
            rows.append({"label": p["label"], "kind": "p", "run": k, "cells": [_p(x) for x in p["pvalues"]]})
    notes = [
        f"Values in %; run cells: value [Wilson 95% interval] (n); Δ rows: difference to {names[0]} in percentage "
        "points, as `judgetrain eval compare` computes it, with its 95% interval (Newcombe's score interval from the "
        "two cells' Wilson intervals; it treats the runs as independent, so on the same items it errs wide)."
    ]
    if result["paired"]:
        by_test: dict[str, list[str]] = {}
        for column, test in result["tests"].items():
            by_test.setdefault(test, []).append(column)
        tests = "; ".join(f"{t}: {', '.join(cs)}" for t, cs in by_test.items())
        notes.append(f"p rows: two-sided p of the paired test against {names[0]}, uncorrected ({tests}).")
    notes += [f"* {n}: other data than {names[0]} ({'; '.join(d)})" for n, d in result["differences"].items()]
    return {"evaluation": result["evaluation"], "columns": result["columns"], "rows": rows, "notes": notes}
