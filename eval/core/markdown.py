"""The markdown every evaluation's report shares: the lines under its title (model, data,
items), its figures section, the short name of a model (+ adapter), numbers, rates and tables.

One unit across reports: rates are printed in % with one decimal, each with its Wilson 95%
interval and its n, as ``75.0 [30.1, 95.4] (n=4)`` (:func:`rate`).
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RATE_NOTE", "display_name", "figures_markdown", "fmt", "pct", "rate", "rate_of", "rows_markdown", "run_header"]

RATE_NOTE = "Rates in %, each as value [Wilson 95% interval] (n = the items it counts)."


def fmt(x: Any, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals; "–" for an absent (None) or NaN value."""
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _nan(x: Any) -> bool:
    return isinstance(x, float) and math.isnan(x)


def pct(x: float | None) -> str:
    """A fraction in 0..1 as a percentage with one decimal; "–" for an absent (None) or NaN value."""
    return "–" if x is None or _nan(x) else f"{100 * x:.1f}"


def rate(value: float | None, ci: Sequence[float] | None, n: int) -> str:
    """A rate as every report prints it: ``75.0 [30.1, 95.4] (n=4)`` (fractions in, % out);
    ``– (n=0)`` when undefined, the interval left out when there is none."""
    if value is None or _nan(value):
        return f"– (n={n})"
    interval = "" if not ci else f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
    return f"{100 * value:.1f}{interval} (n={n})"


def rate_of(k: int, n: int) -> str:
    """:func:`rate` of ``k`` successes in ``n`` (Wilson interval computed here)."""
    from .metrics import ci95

    return rate(k / n if n else None, ci95(k, n), n)


def rows_markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A markdown table: ``header``, then ``rows`` of strings (first column left-aligned, the others right)."""
    out = "| " + " | ".join(header) + " |\n|---|" + "---:|" * (len(header) - 1) + "\n"
    return out + "".join("| " + " | ".join(r) + " |\n" for r in rows)


def figures_markdown(figures: Sequence[tuple[str, str]]) -> str:
    """A report's "Figures" section: each (title, file name) as a heading and a linked image; "" for none."""
    if not figures:
        return ""
    return "\n## Figures\n\n" + "".join(f"### {title}\n\n[![{title}]({name})]({name})\n\n" for title, name in figures)


def run_header(info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], items: str) -> str:
    """The lines under a report's title: model (+ adapter), data and split, then ``items``
    (what the run evaluated) with the process count."""
    md = (
        f"- model: `{info.get('model') or _from_rows(rows, 'model')}`"
        + (f", adapter: `{info['adapter']}`" if info.get("adapter") else "")
        + "\n"
    )
    if info.get("data"):
        chosen = f" ({info['split_chosen']})" if info.get("split_chosen") else ""
        md += f"- data: `{info['data']}`, split `{info.get('split')}`{chosen}\n"
    md += f"- {items}" + (f", processes: {info['world_size']}" if info.get("world_size") else "") + "\n"
    if info.get("ignored_items"):
        md += (
            f"- left out: predictions of {info['ignored_items']} item(s) in predictions.jsonl that this run's "
            "config does not select (a larger --limit, other --tasks or another split wrote them)\n"
        )
    return md


def _from_rows(rows: Sequence[Mapping[str, Any]], key: str) -> Any:
    return rows[0].get(key) if rows else None


def display_name(info: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    model = info.get("model") or _from_rows(rows, "model") or "model"
    adapter = info.get("adapter") if info else _from_rows(rows, "adapter")
    name = Path(str(model).rstrip("/")).name or str(model)
    return f"{name} + {Path(str(adapter).rstrip('/')).name}" if adapter else name
