"""PhaseFusion's arms and the fusion of content-space posteriors (paper 001 Eq. 2, App. E, F).

Pure functions of names, sizes and posteriors (no model, no video): which grids an
``--arms`` list needs, the origins a run shifts them to, and how an arm pools its views.
The views themselves (orderings, the prompt, grids) are :mod:`judgetrain.mcq.views`; the
evaluation that scores them is :mod:`judgetrain.eval.phasefusion`.
Docs: "concepts/phasefusion.md".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from judgetrain.mcq.views import Grid
from judgetrain.video import SAMPLERS, parse_fraction

__all__ = ["NAMED_ARMS", "POOLED", "Arm", "parse_arms", "parse_origins", "pool"]


def pool(posteriors: Sequence[Sequence[float]], how: str = "arithmetic") -> list[float]:
    """Pool the content-space posteriors of several views into one (paper 001 Eq. 2).

    ``"arithmetic"``: their mean (a distribution whenever the inputs are).
    ``"geometric"``: the normalised geometric mean (``exp`` of the mean log; an option
    some view gives probability 0 gets 0).
    """
    p = np.asarray(posteriors, dtype=np.float64)
    if p.ndim != 2 or not p.size:
        raise ValueError("pool needs a non-empty list of equally long posteriors")
    if how == "arithmetic":
        return p.mean(axis=0).tolist()
    if how == "geometric":
        with np.errstate(divide="ignore"):
            logp = np.log(p).mean(axis=0)
        if np.isneginf(logp).all():
            raise ValueError("geometric pooling: every option has probability 0 under some view")
        g = np.exp(logp - logp.max())
        return (g / g.sum()).tolist()
    raise ValueError(f"unknown pooling {how!r}; use 'arithmetic' or 'geometric'")


# --------------------------------------------------------------------------- arms


@dataclass(frozen=True)
class Arm:
    """An evaluated arm: which grid's passes it reads and how it pools their views.

    ``pool``: ``"single"`` (the grid's only view), ``"arithmetic"`` / ``"geometric"``
    (posterior pooling) or ``"vote"`` (plurality of the views' argmax answers, ties to
    the lowest content index).
    """

    name: str
    grid: str
    pool: str


# the arms over the S phase grids, and how each pools their views
POOLED = {"fusion": "arithmetic", "fusion-geo": "geometric", "vote": "vote"}
NAMED_ARMS = ("single", *POOLED, "union")  # besides dense<N> and the deployed samplers


def parse_arms(spec: str | Sequence[str], budget: int, phases: int) -> tuple[list[Arm], dict[str, Grid]]:
    """Arms from ``"single,fusion,vote,union,dense32"``-style names, and the grids they need.

    Names: ``single``, ``fusion``, ``fusion-geo``, ``vote``, ``union``, ``dense<N>``,
    and the deployed samplers ``left``, ``midpoint``, ``inclusive``, ``fps1``.
    """
    names = [x.strip() for x in spec.split(",")] if isinstance(spec, str) else [str(x).strip() for x in spec]
    names = [x for x in names if x]
    if not names:
        raise ValueError("--arms names no arm; e.g. --arms single,fusion,vote,union,dense32")
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise ValueError(f"--arms repeats {', '.join(dup)}")
    arms: list[Arm] = []
    grids: dict[str, Grid] = {}
    for name in names:
        if name in POOLED:
            grid, arm = Grid("phase", "phase", budget, phases), Arm(name, "phase", POOLED[name])
        elif name == "single":
            grid, arm = Grid("single", "dense", budget), Arm(name, "single", "single")
        elif name == "union":
            grid, arm = Grid("union", "dense", budget * phases), Arm(name, "union", "single")
        elif name.startswith("dense") and name[5:].isdigit() and int(name[5:]) >= 1:
            grid, arm = Grid(name, "dense", int(name[5:])), Arm(name, name, "single")
        elif name in SAMPLERS:
            grid, arm = Grid(name, name, budget), Arm(name, name, "single")
        else:
            raise ValueError(
                f"unknown arm {name!r}; arms are {', '.join(NAMED_ARMS)}, dense<N> "
                f"(e.g. dense32) and the samplers {', '.join(SAMPLERS)}"
            )
        grids.setdefault(grid.name, grid)
        arms.append(arm)
    return arms, grids


def parse_origins(spec: str | Sequence[Any] | None, phases: int) -> list[Fraction]:
    """Grid origins in steps of the b-frame grid: ``"0,1/6"``; ``None`` means ``0`` and the
    half-step shift ``1/(2S)`` (paper 001 App. F). Each must lie in [0, 1)."""
    if spec is None:
        return [Fraction(0), Fraction(1, 2 * phases)] if phases > 1 else [Fraction(0), Fraction(1, 2)]
    parts = [x.strip() for x in spec.split(",")] if isinstance(spec, str) else list(spec)
    out = [parse_fraction(x, "origin") for x in parts if str(x).strip()]
    if not out:
        raise ValueError("--origins names no origin; e.g. --origins 0,1/6")
    bad = [str(x) for x in out if x >= 1]
    if bad:
        raise ValueError(f"origin(s) {', '.join(bad)} not in [0, 1): an origin is a fraction of one grid step")
    if len(set(out)) != len(out):
        raise ValueError(f"--origins repeats a value: {spec}")
    return out
