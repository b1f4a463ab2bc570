"""The overview's one table of several runs side by side, from ``judgetrain eval compare``'s numbers.

:func:`compare_table` calls :func:`judgetrain.eval.core.compare.compare` on the page's runs (runs
on other data are marked, as ``--allow-different-data`` marks them, rather than refused) and
lays its result out for the page: a row per run (each cell its value, Wilson 95% interval and
n, as ``eval compare`` prints it), a Δ row per later run (the difference to the first run in
percentage points, with its 95% interval where it is the difference of two rates) and the p rows
of an evaluation with paired tests, every cell as ``eval compare`` prints it
(:func:`~judgetrain.eval.core.compare.rate_cell`, :func:`~judgetrain.eval.core.compare.delta_cell`).
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["compare_table"]


def compare_table(run_dirs: Sequence[str | os.PathLike], names: Sequence[str]) -> dict[str, Any]:
    """``{"columns", "rows": [{"label", "kind" (run, delta, p), "run", "cells"}], "notes"}`` of the
    runs side by side, or ``{"error"}`` saying why they cannot be (other evaluations, no metrics)."""
    from ..core.compare import compare, table_rows
    from ..core.runs import PredictionsError

    try:
        result = compare(run_dirs, names, allow_different_data=True)
    except (PredictionsError, OSError, ValueError, KeyError) as e:
        return {"error": f"these runs are not compared side by side: {e}"}
    names = result["names"]
    rows = [{"label": label, "kind": kind, "run": run, "cells": cells} for label, cells, kind, _, run in table_rows(result)]
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
