"""The ``judgetrain`` command line.

Sub-commands are small registries (plain dicts) of modules exposing
``configure_parser(parser)`` and ``main(args) -> int``; an unknown name gets a
"did you mean" from argparse's choices.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from pathlib import Path

# builder name -> module (imported lazily: building TimeCatch should not import the trainer)
BUILDERS = {
    "timecatch": "judgetrain.data_builders.timecatch",
    "prism": "judgetrain.data_builders.prism",
    "mirage": "judgetrain.data_builders.mirage",
    "ordering-probe": "judgetrain.data_builders.ordering",
    "video-mcq": "judgetrain.data_builders.video_mcq",
    "rationales": "judgetrain.data_builders.rationales",
}
# judgetrain eval <name> -> (module, parser configurator, entry point, help)
EVALS = {
    "timecatch": ("judgetrain.eval.timecatch", "configure_parser", "main", "evaluate a model on a TimeCatch set (paper 000)"),
    "report": ("judgetrain.eval.report", "configure_report_parser", "report_main", "recompute metrics, report and plots from predictions.jsonl"),
    "compare": ("judgetrain.eval.report", "configure_compare_parser", "compare_main", "put evaluation runs side by side with per-cell differences"),
    "phasefusion": ("judgetrain.eval.phasefusion", "configure_parser", "main", "video MCQ over phase-offset frame grids and option orderings, fused posteriors (paper 001)"),
    "judge": ("judgetrain.eval.judge", "configure_parser", "main", "evaluate a judge on PRISM / MIRAGE pairwise, pointwise and ordering records (paper 002)"),
    "bias": ("judgetrain.eval.positional_bias", "configure_parser", "main", "positional and first-option bias of judge or TimeCatch runs"),
}
COMMANDS = {"quickstart": "judgetrain.quickstart", "train": "judgetrain.launch", "merge": "judgetrain.merge",
            "sweep": "judgetrain.sweep", "dashboard": "judgetrain.dashboard"}
# commands whose unknown arguments are passed on (recipe overrides for the trainer)
PASS_THROUGH = {"train", "sweep"}

EPILOG = """examples:
  judgetrain quickstart                                  # tiny models + a synthetic TimeCatch set, offline
  judgetrain build timecatch --out data/timecatch --synthetic 200
  judgetrain train recipes/tiny/qwen3vl-timecatch-lora.yaml --accelerate-config zero3
  judgetrain merge runs/tiny-qwen3vl-timecatch --out runs/merged
  judgetrain eval timecatch --model quickstart/models/qwen3-vl --data quickstart/timecatch --split validation --out results/zs
"""


def _summary(module: str) -> str:
    """First docstring line of ``module`` without importing it (importing every
    command would load torch and the training stack just to print help)."""
    spec = importlib.util.find_spec(module)
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) if spec and spec.origin else None
    return doc.strip().splitlines()[0] if doc else ""


def _requested(argv: list[str]) -> tuple[str | None, str | None]:
    """The command and sub-command named on the command line (the first two words)."""
    words = [a for a in argv if not a.startswith("-")][:2]
    return (words[0] if words else None), (words[1] if len(words) > 1 else None)


def _add(sub, name: str, module: str, configure: str, entry: str, help_text: str, wanted: bool) -> None:
    """Register a sub-command; only the one being run imports its module and gets its options."""
    p = sub.add_parser(name, help=help_text)
    if wanted:
        mod = importlib.import_module(module)
        getattr(mod, configure)(p)
        p.set_defaults(_main=getattr(mod, entry))


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser, with options only for the command in ``argv`` (every command's when ``None``)."""
    command, sub_command = _requested(argv) if argv is not None else (None, None)

    def wanted(*names: str | None) -> bool:
        return argv is None or tuple(names) == (command, sub_command)[: len(names)]

    parser = argparse.ArgumentParser(
        prog="judgetrain",
        description="Build temporally perturbed image-sequence datasets, fine-tune VLM judges, evaluate them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from judgetrain import __version__

    parser.add_argument("--version", action="version", version=f"judgetrain {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in COMMANDS.items():
        _add(sub, name, module, "configure_parser", "main", _summary(module), wanted(name))
    build = sub.add_parser("build", help="build a dataset of task records", formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="example:\n  judgetrain build timecatch --out data/timecatch --synthetic 200\n  judgetrain build prism --out data/prism --synthetic 40\n")
    builders = build.add_subparsers(dest="builder", metavar="BUILDER", required=True)
    for name, module in BUILDERS.items():
        _add(builders, name, module, "configure_parser", "main", _summary(module), wanted("build", name))
    evals = sub.add_parser("eval", help="evaluate models, rebuild reports, compare runs", formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="examples:\n  judgetrain eval timecatch --model M --data DIR --split test --out results/RUN\n"
                                  "  judgetrain eval report results/RUN\n  judgetrain eval compare results/A results/B --out cmp.md\n")
    evaluations = evals.add_subparsers(dest="evaluation", metavar="EVALUATION", required=True)
    for name, (module, configure, entry, help_text) in EVALS.items():
        _add(evaluations, name, module, configure, entry, help_text, wanted("eval", name))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in PASS_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from judgetrain.data_builders.common import BuildError
    from judgetrain.eval.report import EvalInputError, PredictionsError
    from judgetrain.models import ModelNotFoundError
    from judgetrain.perceptual import BackboneWeightsMissing
    from judgetrain.records import IncompleteDatasetError, RecordValidationError
    from judgetrain.train import ConfigError

    try:
        return args._main(args, extra) if args.command in PASS_THROUGH else args._main(args)
    # Errors whose message already says what to do: no traceback on top of it.
    except (BuildError, RecordValidationError, IncompleteDatasetError, ModelNotFoundError, BackboneWeightsMissing,
            ConfigError, PredictionsError, EvalInputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
