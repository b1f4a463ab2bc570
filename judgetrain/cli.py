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
BUILDERS = {"timecatch": "judgetrain.data_builders.timecatch"}
COMMANDS = {"quickstart": "judgetrain.quickstart"}

EPILOG = """examples:
  judgetrain quickstart                                  # tiny models + a synthetic TimeCatch set, offline
  judgetrain build timecatch --out data/timecatch --synthetic 200
  judgetrain build timecatch --help
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
                           epilog="example:\n  judgetrain build timecatch --out data/timecatch --synthetic 200\n")
    builders = build.add_subparsers(dest="builder", metavar="BUILDER", required=True)
    for name, module in BUILDERS.items():
        mod = importlib.import_module(module)
        p = builders.add_parser(name, help=mod.__doc__.strip().splitlines()[0])
        mod.configure_parser(p)
        p.set_defaults(_main=mod.main)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from judgetrain.data_builders.timecatch import BuildError
    from judgetrain.models import ModelNotFoundError
    from judgetrain.perceptual import BackboneWeightsMissing
    from judgetrain.records import IncompleteDatasetError, RecordValidationError

    try:
        return args._main(args)
    # Errors whose message already says what to do: no traceback on top of it.
    except (BuildError, RecordValidationError, IncompleteDatasetError, ModelNotFoundError, BackboneWeightsMissing) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
