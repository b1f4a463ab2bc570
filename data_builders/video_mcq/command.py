"""``judgetrain build video-mcq``: a video multiple-choice manifest for PhaseFusion (paper 001),
which samples frames at evaluation time, so the items are videos plus questions, not task
records. ``--synthetic N`` writes physics questions whose answers follow from the simulation
(:mod:`.synthetic`, :mod:`.questions`); ``--from egoschema|mvbench|videomme|nextqa`` converts a
benchmark's annotations (:mod:`.converters`). This module is the command: its config (the
two modes' settings, each refused in the other mode), ``make_parser``, ``main`` and the
summary. The manifest format and its reader: :mod:`judgetrain.mcq.manifest`.
Docs: "reference/commands/build-video-mcq.md", "concepts/phasefusion.md".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from judgetrain.config import make_parser as make_config_parser

from ..core.args import BuildArgs
from ..core.outfolder import build_in_place
from .common import BUILD_INFO, BUILDER, MANIFEST, VERSION, raise_problems
from .converters import CONVERTERS, ConvertConfig, build_converted
from .synthetic import SyntheticConfig, build_synthetic

__all__ = ["VideoMcqConfig", "build", "main", "make_parser"]


@dataclass(kw_only=True)
class VideoMcqConfig(ConvertConfig, SyntheticConfig):
    """``judgetrain build video-mcq``: both modes' settings, each a flag (``--field-name``) and a
    ``--config`` key; ``--synthetic N`` or ``--from BENCHMARK`` picks the mode, and the other
    mode's options must stay unset."""

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        problems = []
        if self.synthetic is None and self.source is None:
            problems.append(
                f"give --synthetic N (synthetic physics questions) or --from {'|'.join(CONVERTERS)} (a benchmark's annotations)"
            )
        elif self.synthetic is not None and self.source is not None:
            problems.append("--synthetic and --from: give one of them, not both")
        elif self.synthetic is not None:
            problems += _given(self, _CONVERTER_ONLY, "with --from (benchmark conversion)") + self.synthetic_problems()
        else:
            problems += _given(self, _SYNTHETIC_ONLY, "with --synthetic") + self.convert_problems()
        raise_problems(problems)


def _mode_fields(cls: type, mode: str) -> list:
    """The fields ``cls`` adds to :class:`BuildArgs`, but the one that picks the mode."""
    shared = {f.name for f in fields(BuildArgs)}
    return [f for f in fields(cls) if f.name not in shared | {mode}]


# options of one mode, refused in the other unless left at their defaults (--strict is BuildArgs' but converter-only)
_SYNTHETIC_ONLY = _mode_fields(SyntheticConfig, "synthetic")
_CONVERTER_ONLY = _mode_fields(ConvertConfig, "source") + [f for f in fields(BuildArgs) if f.name == "strict"]


def _given(cfg: Any, options: list, mode: str) -> list[str]:
    def default(f):
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default

    given = [f"--{f.name.replace('_', '-')}" for f in options if getattr(cfg, f.name) != default(f)]
    return [f"{', '.join(given)} only apply {mode}"] if given else []


def build(cfg: VideoMcqConfig) -> dict[str, Any]:
    """The synthetic questions or the benchmark conversion ``cfg`` asks for; returns build.json's content.
    The same build twice does nothing; another into the same --out is refused (:func:`build_in_place`)."""
    cfg.check()  # option problems first, before --out is looked at
    return build_in_place(
        cfg,
        BUILDER,
        VERSION,
        build_synthetic if cfg.synthetic is not None else build_converted,
        movable=cfg.synthetic is not None,
        writes=(MANIFEST,),
    )


def make_parser():
    return make_config_parser(
        VideoMcqConfig,
        "judgetrain build video-mcq",
        "Build a video multiple-choice manifest for PhaseFusion (paper 001): synthetic physics questions whose answers "
        "follow from the simulation, or a conversion of EgoSchema / MVBench / Video-MME / NExT-QA annotations.",
        "examples:\n"
        "  judgetrain build video-mcq --out data/vmcq --synthetic 6\n"
        "  judgetrain build video-mcq --out data/vmcq-long --synthetic 6 --seed 1 --frames 128 --options 4-5\n"
        "  judgetrain build video-mcq --config vmcq.yaml --seed 3   # YAML keys are the fields below (--from's is source)\n"
        "\nfrom EgoSchema, MVBench, NExT-QA or Video-MME: --from NAME --annotations FILE --videos DIR, the commands per benchmark\n"
        "in the docs (concepts/phasefusion.md).\n",
    )


def main(cfg: VideoMcqConfig) -> int:
    info = build(cfg)
    print_summary(info, Path(cfg.out))
    return 0


def print_summary(info: dict[str, Any], out: Path) -> None:
    """Counts per question type, the gold-position balance, skipped questions, and where the manifest went."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    counts = info["counts"]
    if "source" in info:
        console.print(
            f"{info['benchmark']}: {counts['annotated']} annotated, {counts['usable']} usable, "
            f"{counts['questions']} in the manifest"
        )
        by_k = {"all": [counts["answer_position"].get(str(p), 0) for p in range(1 + max(map(int, counts["answer_position"])))]}
    else:
        t = Table(title="Questions per type")
        t.add_column("question type")
        t.add_column("questions", justify="right")
        for qtype, n in counts["qtype"].items():
            t.add_row(qtype, str(n))
        console.print(t)
        console.print(
            f"{counts['clips_rejected']} simulated clip(s) rejected as ambiguous; videos written "
            f"{counts['videos_written']}, kept from an earlier run {counts['videos_kept']}"
        )
        by_k = counts["answer_position"]
    b = Table(title="Gold position (0-based)")
    b.add_column("options")
    width = max(len(v) for v in by_k.values())
    for p in range(width):
        b.add_column(str(p), justify="right")
    for k, v in by_k.items():
        b.add_row(k, *[str(x) for x in v], *[""] * (width - len(v)))
    console.print(b)
    if info["skipped"]:
        console.print(
            f"[yellow]{len(info['skipped'])} question(s) skipped "
            f"({', '.join(f'{k}: {n}' for k, n in counts['skipped_by_reason'].items())}):[/yellow]"
        )
        for s in info["skipped"][:10]:
            where = f"{s['path']}:{s['line']}" if s.get("line") else s["path"]
            named = f" (id {s['id']})" if s["id"] is not None else ""
            console.print(f"  {where}{named}: {s['reason']}", highlight=False, soft_wrap=True)
        if len(info["skipped"]) > 10:
            console.print(f"  … all {len(info['skipped'])} in {out / BUILD_INFO}")
    print(f"Manifest written to {out / MANIFEST} ({counts['questions']} questions; build.json beside it)", flush=True)
