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
}
COMMANDS = {"quickstart": "judgetrain.quickstart", "train": "judgetrain.launch", "merge": "judgetrain.merge"}
# commands whose unknown arguments are passed on (recipe overrides for the trainer)
PASS_THROUGH = {"train"}

EPILOG = """examples:
  judgetrain quickstart                                  # tiny models + a synthetic TimeCatch set, offline
  judgetrain build timecatch --out data/timecatch --synthetic 200
  judgetrain train recipes/tiny/qwen3vl-timecatch-lora.yaml --accelerate-config zero3
  judgetrain merge runs/tiny-qwen3vl-timecatch --out runs/merged
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in PASS_THROUGH:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from judgetrain.data_builders.common import BuildError
    from judgetrain.models import ModelNotFoundError
    from judgetrain.perceptual import BackboneWeightsMissing
    from judgetrain.records import IncompleteDatasetError, RecordValidationError
    from judgetrain.train import ConfigError

    try:
        return args._main(args, extra) if args.command in PASS_THROUGH else args._main(args)
    # Errors whose message already says what to do: no traceback on top of it.
    except (BuildError, RecordValidationError, IncompleteDatasetError, ModelNotFoundError, BackboneWeightsMissing,
            ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
