"""The ``judgetrain`` command line.

Sub-commands are small registries (plain dicts) of modules exposing
``configure_parser(parser)`` and ``main(args) -> int``; an unknown name gets a
"did you mean" from argparse's choices.
"""

from __future__ import annotations

import argparse
import importlib
import sys

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


def build_parser() -> argparse.ArgumentParser:
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
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=mod.__doc__.strip().splitlines()[0])
        mod.configure_parser(p)
        p.set_defaults(_main=mod.main)
    build = sub.add_parser("build", help="build a dataset of task records", formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="example:\n  judgetrain build timecatch --out data/timecatch --synthetic 200\n  judgetrain build prism --out data/prism --synthetic 40\n")
    builders = build.add_subparsers(dest="builder", metavar="BUILDER", required=True)
    for name, module in BUILDERS.items():
        mod = importlib.import_module(module)
        p = builders.add_parser(name, help=mod.__doc__.strip().splitlines()[0])
        mod.configure_parser(p)
        p.set_defaults(_main=mod.main)
    evals = sub.add_parser("eval", help="evaluate models, rebuild reports, compare runs", formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="examples:\n  judgetrain eval timecatch --model M --data DIR --split test --out results/RUN\n"
                                  "  judgetrain eval report results/RUN\n  judgetrain eval compare results/A results/B --out cmp.md\n")
    evaluations = evals.add_subparsers(dest="evaluation", metavar="EVALUATION", required=True)
    for name, (module, configure, entry, help_text) in EVALS.items():
        mod = importlib.import_module(module)
        p = evaluations.add_parser(name, help=help_text)
        getattr(mod, configure)(p)
        p.set_defaults(_main=getattr(mod, entry))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in PASS_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from judgetrain.data_builders.common import BuildError
    from judgetrain.eval.report import PredictionsError
    from judgetrain.models import ModelNotFoundError
    from judgetrain.perceptual import BackboneWeightsMissing
    from judgetrain.records import IncompleteDatasetError, RecordValidationError
    from judgetrain.train import ConfigError

    try:
        return args._main(args, extra) if args.command in PASS_THROUGH else args._main(args)
    # Errors whose message already says what to do: no traceback on top of it.
    except (BuildError, RecordValidationError, IncompleteDatasetError, ModelNotFoundError, BackboneWeightsMissing,
            ConfigError, PredictionsError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
