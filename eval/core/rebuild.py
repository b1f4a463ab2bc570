"""Rebuild a run's metrics.json, report.md and figures from its predictions.jsonl and run.json.

``judgetrain eval report RUN`` works on the folder of any evaluation: it reads
``run.json["evaluation"]`` and calls that evaluation's own report
(:mod:`judgetrain.eval.core.registry`), so a judge run gets a judge report and a TimeCatch
run a TimeCatch one. Nothing is scored. It holds the run folder's writer lock
(:mod:`judgetrain.writer`) while it writes, so it never rewrites the report of a run that is
still being written (``--wait``: wait for that run to finish); predictions that repeat a row
(:func:`~judgetrain.eval.core.runs.check_unique`) are refused, never counted twice.
Docs: "reference/commands/eval-report.md", "concepts/timecatch.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgetrain import writer
from judgetrain.config import ConfigError, arg
from judgetrain.config import make_parser as make_config_parser

from .args import ReportToArgs
from .registry import evaluation_of, module_for
from .runs import METRICS, REPORT
from .wandb_report import reports_to_wandb

__all__ = ["ReportConfig", "main", "make_parser", "rebuild"]


@dataclass(kw_only=True)
class ReportConfig(ReportToArgs):
    """``judgetrain eval report``."""

    run: Path = arg(help="run folder (the --out of a `judgetrain eval …` run); also the first bare word", positional=True)
    human: Path | None = arg(
        None,
        "TimeCatch runs: human reference accuracies, JSON {task: {source: acc}} or CSV task,source,accuracy (adds a Human row)",
    )
    rerun_of: Path | None = arg(
        None, "PhaseFusion runs: a second run of the same model, manifest and settings; reports the re-run floor across the two"
    )
    wait: bool = arg(False, "when an evaluation is still writing RUN, wait until it has finished instead of stopping at once")

    def __post_init__(self) -> None:
        self.run = Path(self.run)
        problems = self.report_to_problems()
        if problems:
            raise ConfigError(problems)


def rebuild(cfg: ReportConfig) -> dict:
    """The evaluation's own report of ``cfg.run``; returns its metrics."""
    from .runs import PredictionsError

    name, _ = evaluation_of(cfg.run)
    extra = {"human": cfg.human} if cfg.human else {}
    if cfg.rerun_of:
        extra["rerun_of"] = cfg.rerun_of
    wrong = {"human": "timecatch", "rerun_of": "phasefusion"}
    bad = [f"--{k.replace('_', '-')} goes with {wrong[k]} runs" for k in extra if wrong[k] != name]
    if bad:
        raise PredictionsError(f"{cfg.run} holds a {name} run: " + "; ".join(bad))
    with writer.held(cfg.run, flag="eval report", wait=cfg.wait, elsewhere=False):
        return module_for(name).report(cfg.run, **extra)


def make_parser():
    return make_config_parser(
        ReportConfig,
        "judgetrain eval report",
        "Recompute metrics.json, report.md and the figures of any evaluation run from its predictions.jsonl.",
        "examples:\n  judgetrain quickstart        # first: its runs under quickstart/results\n"
        "  judgetrain eval report quickstart/results/lora\n"
        "\n--human FILE.csv adds a Human row (TimeCatch); --rerun-of RUN the re-run floor (PhaseFusion, see\n"
        "`judgetrain eval phasefusion --help`).\n",
    )


def main(cfg: ReportConfig) -> int:
    rebuild(cfg)
    if reports_to_wandb(cfg.report_to):  # the rebuilt report, logged as every evaluation logs its finished run
        from .wandb_report import log_run

        log_run(cfg.run)
    print(f"Report written to {cfg.run / REPORT} (metrics in {cfg.run / METRICS})", flush=True)
    return 0
