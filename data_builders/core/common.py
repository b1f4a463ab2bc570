"""What every builder shares: the build error, skipped-input entries, and the
rule that manifest paths stay inside the manifest's folder. Kept free of heavy
imports so that reading a manifest never pulls in torch.
Docs: "how-to/own-data.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judgetrain.errors import UserError

__all__ = [
    "BuildError",
    "Fractions",
    "Skip",
    "balance_table",
    "builder_parser",
    "csv",
    "finish_summary",
    "parse_splits",
    "save_build",
    "split_table",
]


class BuildError(UserError, RuntimeError):
    """A build that cannot go on (bad arguments, or bad input under --strict)."""


@dataclass
class Skip:
    """An input left out of the build, and why."""

    path: str
    line: int | None
    reason: str
    id: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


class Fractions(dict):
    """Split fractions, ``{"train": 0.7, "validation": 0.2, "test": 0.1}``, from a mapping, from
    ``(name, fraction)`` pairs or from the command-line form ``"train=0.7,validation=0.2,test=0.1"``
    (it is also the type of a ``--splits`` field, so argparse and YAML give the same value)."""

    def __init__(self, value: Any = ()):
        if isinstance(value, str):
            pairs = []
            for part in value.split(","):
                try:
                    k, x = part.split("=")
                    pairs.append((k.strip(), float(x)))
                except ValueError:
                    raise BuildError(f"--splits {value!r}: write NAME=FRACTION pairs, e.g. train=0.8,validation=0.2") from None
            value = pairs
        super().__init__(value)

    def __str__(self) -> str:
        return ",".join(f"{k}={v:g}" for k, v in self.items())


def parse_splits(value: str) -> dict[str, float]:
    """``"train=0.7,validation=0.2,test=0.1"`` → dict; BuildError naming the format otherwise."""
    return Fractions(value)


def csv(value: str) -> tuple[str, ...]:
    """A comma-separated command-line list, blanks dropped."""
    return tuple(x.strip() for x in value.split(",") if x.strip())


def split_table(title: str, label: str, counts: dict, key: str, *, total: bool = False):
    """A rich table of ``counts[split][key][row]`` with one column per split
    (``counts`` is build.json's ``counts.records``), optionally a total row."""
    from rich.table import Table

    splits = list(counts)
    t = Table(title=title)
    t.add_column(label)
    for s in splits:
        t.add_column(s, justify="right")
    for row in sorted({k for s in splits for k in counts[s][key]}):
        t.add_row(row, *[str(counts[s][key].get(row, 0)) for s in splits])
    if total:
        t.add_row("total", *[str(counts[s]["total"]) for s in splits])
    return t


def balance_table(counts: dict):
    """Pairwise A/B balance per split: gold letter, and gold shown first or second."""
    from rich.table import Table

    t = Table(title="Pairwise balance (gold letter; gold shown first / second)")
    for c in ("split", "gold = A", "gold = B", "gold first", "gold second"):
        t.add_column(c, justify="right")
    for s, c in counts.items():
        lab, pres = c["pairwise_label"], c["pairwise_presentation"]
        t.add_row(s, str(lab.get("A", 0)), str(lab.get("B", 0)), str(pres.get("gold_first", 0)), str(pres.get("gold_second", 0)))
    return t


def finish_summary(console, info: dict, out) -> None:
    """The last lines of every build summary: skipped inputs, and where the dataset went."""
    if info["skipped"]:
        console.print(f"[yellow]{len(info['skipped'])} input(s) skipped; reasons in build.json[/yellow]")
    print(f"Dataset written to {out} (build.json beside the splits)", flush=True)  # plain: never wrapped


def save_build(dataset, out, info: dict, cfg, work) -> dict:
    """Save a builder's records with :func:`judgetrain.records.save`, its identity
    (:func:`.identity.build_identity` of ``cfg`` and ``info``'s builder and version) in
    ``build.json``, then remove its ``OUT.work/`` folder unless ``cfg.keep_work``;
    returns build.json's content."""
    import shutil

    from judgetrain import records

    from .identity import build_identity

    info = records.save(dataset, out, info, identity=build_identity(cfg, info["builder"], info["version"]))
    if not cfg.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return info


def builder_parser(cls: type, name: str, description: str, examples: list[str]):
    """The typed parser of ``judgetrain build NAME``: ``examples`` (command lines after
    ``judgetrain build NAME``) in the epilog, with the ``--config`` one every builder shares."""
    from judgetrain.config import make_parser

    lines = [f"  judgetrain build {name} {e}" for e in examples]
    lines.append(f"  judgetrain build {name} --config build.yaml --seed 3   # YAML keys are the fields below")
    return make_parser(cls, f"judgetrain build {name}", description, "examples:\n" + "\n".join(lines) + "\n")
