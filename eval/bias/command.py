"""Positional, first-option and letter bias of judge and TimeCatch runs (paper 002 C.3, F.3).

``judgetrain eval bias RUN [RUN …]``: its config (:class:`BiasConfig`), ``make_parser`` and
``main``, which runs :func:`.report.bias` (holding the writer lock of the folder it writes,
:mod:`judgetrain.writer`) and prints each run's headline numbers: W_avg accuracy, the presentation
effect (:func:`.report.presentation_summary`: letter or first-option bias, whichever is significant,
and whether one explains the other), the ordering probe's signature. A run with nothing to analyse
stops it before anything is written (:class:`.report.NothingToAnalyseError`, exit status 2).
Docs: "reference/commands/eval-bias.md", "concepts/positional-bias.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgetrain import writer
from judgetrain.config import arg, comma_list
from judgetrain.config import make_parser as make_config_parser

from ..core.markdown import rate
from .report import BIAS_JSON, BIAS_REPORT, bias, presentation_summary

__all__ = ["BiasConfig", "main", "make_parser"]


@dataclass(kw_only=True)
class BiasConfig:
    """``judgetrain eval bias``: every field is a flag (``--field-name``) and a ``--config`` key."""

    runs: list[Path] = arg(
        help="run folders (the --out of `eval judge` or `eval timecatch`); also the leading bare words", positional=True
    )
    names: list[str] | None = arg(None, "display names, one per run (space- or comma-separated; default: model names)")
    out: Path | None = arg(None, "output folder (default: the run folder when there is one run)")
    wait: bool = arg(
        False,
        "when another process is writing that folder, wait until it has finished instead of stopping at once (docs: concepts/identity.md)",
    )

    def __post_init__(self) -> None:
        from judgetrain.config import ConfigError

        self.runs = [Path(r) for r in (self.runs or [])]
        self.names = comma_list(self.names) or None
        self.out = Path(self.out) if self.out is not None else None
        problems = []
        if not self.runs:
            problems.append("runs: give at least one run folder")
        if len(self.runs) > 1 and self.out is None:
            problems.append(f"out: {len(self.runs)} runs: pass --out DIR for the combined analysis")
        if self.names is not None and len(self.names) != len(self.runs):
            problems.append(f"names: {len(self.names)} name(s) for {len(self.runs)} run(s); give one per run")
        if problems:
            raise ConfigError(problems, "eval bias configuration")


def make_parser():
    return make_config_parser(
        BiasConfig,
        "judgetrain eval bias",
        "Positional bias of judge or TimeCatch runs from their predictions.jsonl: accuracy and macro-F1 per outlier / swap "
        "position (PRISM Type-1) with W_avg, TimeCatch accuracy per true position, first-option and letter bias "
        "(each with a binomial test, split by the letter shown first to tell them apart), and the ordering probe's "
        "answers-by-position signature.",
        "examples:\n"
        "  judgetrain eval bias results/ov                      # writes bias.md, bias.json and PNGs into the run\n"
        "  judgetrain eval bias results/ov results/q25 --names ov,qwen2.5 --out results/bias\n"
        "\nresults/ov and results/q25: the judge runs of `judgetrain eval judge --help`'s examples.\n",
    )


def main(cfg: BiasConfig) -> int:
    out = cfg.out or cfg.runs[0]
    with writer.held(out, flag="--out" if cfg.out else "eval bias", wait=cfg.wait, elsewhere=cfg.out is not None):
        result = bias(cfg.runs, cfg.names, cfg.out)
    for name, r in result["runs"].items():
        parts = []
        for kind, block in (r.get("prism_positions") or {}).items():
            w = block["all"]["w_avg"]
            parts.append(f"{kind} W_avg acc % {rate(w['accuracy'], w.get('accuracy_ci95'), w['n_valid'])}")
        if r.get("first_option"):
            parts.append(presentation_summary(r["first_option"]))
        if r.get("ordering"):
            o = r["ordering"]
            parts.append(
                f"ordering exact % {rate(o['exact_match'], o.get('exact_match_ci95'), o['n'])}, "
                f"by position % {rate(o['by_position_share'], o.get('by_position_share_ci95'), o['n'])}"
            )
        print(f"{name}: " + "; ".join(parts), flush=True)  # bias() refuses a run with nothing to analyse
    print(f"Bias report in {Path(out) / BIAS_REPORT} (data in {Path(out) / BIAS_JSON})", flush=True)
    return 0
