"""Write a demo candidate manifest for ``judgetrain score``: synthetic procedures, each shown as a
group of candidate orders (gold, one adjacent swap, a shuffle, reversed).

``python -m judgetrain.rank.candidates --out DIR --groups N`` renders N synthetic procedures
(the offline set ``judgetrain build prism --synthetic`` draws, :mod:`judgetrain.data_builders.procedures`)
under ``DIR/procedures`` and writes ``DIR/candidates.jsonl``: per procedure, a group of four
candidates over its step images, each line with ``order`` (the gold step shown at each position,
1-based), so a ranking can be checked against the gold. The same ``--seed`` writes the same files.
Docs: "how-to/reward-models.md".
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from judgetrain.config import arg
from judgetrain.seeding import derive_seed

__all__ = ["CandidatesConfig", "KINDS", "candidate_orders", "main", "make_parser", "write_candidates"]

KINDS = ("gold", "swap", "shuffle", "reversed")
MANIFEST = "candidates.jsonl"


@dataclass
class CandidatesConfig:
    """``python -m judgetrain.rank.candidates``'s options."""

    out: Path = arg(help="folder for candidates.jsonl and the procedures' images (procedures/)")
    groups: int = arg(3, "synthetic procedures to write, one group of candidates each", minimum=1)
    seed: int = arg(0, "seed of the procedures and of the swapped and shuffled orders")
    size: int = arg(128, "side of the step images in pixels", minimum=64)
    progress: bool = arg(True, "show progress bars (--no-progress: none)")


def candidate_orders(n: int, seed: int, group: str) -> dict[str, list[int]]:
    """The 0-based gold step shown at each position of each candidate kind of an ``n``-step sequence
    (``n`` ≥ 3): the swap exchanges two adjacent steps, the shuffle is neither the gold nor the
    reverse; both drawn from (``seed``, ``group``)."""
    rng = np.random.default_rng(derive_seed("rank-candidates", seed, group))
    k = int(rng.integers(0, n - 1))
    swap = list(range(n))
    swap[k], swap[k + 1] = swap[k + 1], swap[k]
    gold, reverse = list(range(n)), list(range(n))[::-1]
    shuffle = gold
    while shuffle in (gold, reverse):
        shuffle = [int(i) for i in rng.permutation(n)]
    return {"gold": gold, "swap": swap, "shuffle": shuffle, "reversed": reverse}


def write_candidates(out: str | Path, groups: int = 3, *, seed: int = 0, size: int = 128, progress: bool = True) -> Path:
    """Write the demo manifest (module docstring) into ``out``; returns its path."""
    from judgetrain import writer
    from judgetrain.data_builders.procedures import write_procedures
    from judgetrain.io import write_rows

    out = Path(out)
    with writer.held(out):
        procedures = write_procedures(out / "procedures", groups, seed, size=size, progress=progress)
        rows: list[dict[str, Any]] = []
        for line in procedures.read_text().splitlines():
            proc = json.loads(line)
            images = [f"procedures/{step['image']}" for step in proc["steps"]]
            texts = [step["text"] for step in proc["steps"]]
            for kind, order in candidate_orders(len(images), seed, proc["id"]).items():
                rows.append(
                    {
                        "id": f"{proc['id']}-{kind}",
                        "group": proc["id"],
                        "frames": [images[i] for i in order],
                        "title": proc["title"],
                        "steps": texts,
                        "kind": kind,
                        "order": [i + 1 for i in order],
                    }
                )
        write_rows(out / MANIFEST, rows)
    return out / MANIFEST


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        CandidatesConfig,
        "python -m judgetrain.rank.candidates",
        __doc__.strip().splitlines()[0],
        "examples:\n  python -m judgetrain.rank.candidates --out data/candidates --groups 3\n",
    )


def main(cfg: CandidatesConfig) -> int:
    manifest = write_candidates(cfg.out, cfg.groups, seed=cfg.seed, size=cfg.size, progress=cfg.progress)
    print(f"Candidate manifest written to {manifest} ({cfg.groups} groups of {len(KINDS)})")
    return 0


def run(argv: list[str] | None = None) -> int:
    """The ``python -m`` entry: parse, run, and a user error as one ``error:`` line (exit 2)."""
    from judgetrain import config
    from judgetrain.errors import UserError

    try:
        (cfg,) = config.parse(make_parser(), list(sys.argv[1:] if argv is None else argv))
        return main(cfg)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(run())
