"""Write the command reference of the documentation site from the commands' own parsers.

One Markdown page per command of ``judgetrain.cli.COMMANDS`` (``docs/reference/commands/``),
each holding what ``judgetrain WORDS --help`` prints (``make_parser().format_help()`` of the
command's module), plus an index with ``judgetrain --help``, ``judgetrain build --help`` and
``judgetrain eval --help`` (``judgetrain.cli``'s own listing). The pages are never edited by
hand: ``make docs`` rewrites them before every build, so they cannot drift from the parsers.

    python docs/gen_commands.py            # (re)write the pages
    python docs/gen_commands.py --check    # exit 1 naming every page that differs or is missing,
                                           # and every page mkdocs.yml's nav does not list

Run it with judgetrain's environment (``.venv/bin/python``, as ``make docs`` does): the parsers
import TRL. The modules are imported from this checkout, whatever judgetrain another
environment has installed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "reference" / "commands"
NAV_FILE = ROOT / "mkdocs.yml"

# packages that pyproject.toml's [tool.setuptools.package-dir] maps outside judgetrain/
PACKAGE_DIRS = {
    "judgetrain.data_builders": "data_builders",
    "judgetrain.eval": "eval",
    "judgetrain.deepspeed_configs": "deepspeed_configs",
}

# where the guide to each command lives (the pages under docs/), for the "See also" line
GUIDES: dict[tuple[str, ...], str] = {
    ("quickstart",): "../../get-started/quickstart.md",
    ("train",): "../recipes.md",
    ("merge",): "../../how-to/serving.md",
    ("sweep",): "../../how-to/sweeps.md",
    ("dashboard",): "../../how-to/sweeps.md",
    ("build", "timecatch"): "../../concepts/timecatch.md",
    ("build", "prism"): "../../concepts/prism-mirage.md",
    ("build", "mirage"): "../../concepts/prism-mirage.md",
    ("build", "ordering-probe"): "../../concepts/ordering-probe.md",
    ("build", "video-mcq"): "../../concepts/phasefusion.md",
    ("build", "rationales"): "../../concepts/prism-mirage.md",
    ("build", "consistency-views"): "../../how-to/consistency-tuning.md",
    ("eval", "timecatch"): "../../concepts/timecatch.md",
    ("eval", "judge"): "../../concepts/prism-mirage.md",
    ("eval", "phasefusion"): "../../concepts/phasefusion.md",
    ("eval", "bias"): "../../concepts/positional-bias.md",
    ("eval", "report"): "../../concepts/identity.md",
    ("eval", "compare"): "../../concepts/identity.md",
    ("eval", "view"): "../../how-to/run-browser.md",
    ("score",): "../../how-to/reward-models.md",
    ("slurm",): "../../how-to/cluster.md",
}

TITLES = {
    "quickstart": "Quickstart",
    "recipes": "Training recipes",
    "serving": "Merging and serving an adapter",
    "sweeps": "Sweeps on a shared database",
    "timecatch": "TimeCatch",
    "prism-mirage": "PRISM and MIRAGE",
    "ordering-probe": "The ordering probe",
    "phasefusion": "PhaseFusion",
    "consistency-tuning": "Consistency tuning",
    "positional-bias": "Positional bias",
    "identity": "Build and run identity",
    "run-browser": "The run browser",
    "reward-models": "Reward models",
    "cluster": "Multi-GPU, multi-node and SLURM",
}


class _ThisCheckout(importlib.abc.MetaPathFinder):
    """Finds judgetrain.data_builders, judgetrain.eval, … in this checkout: an editable install
    of another checkout maps them to its own folders, which would document that checkout."""

    def find_spec(self, name, path=None, target=None):
        folder = PACKAGE_DIRS.get(name)
        if folder is None:
            return None
        init = ROOT / folder / "__init__.py"
        return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(ROOT / folder)])


def _import_from_checkout() -> None:
    sys.path.insert(0, str(ROOT))
    sys.meta_path.insert(0, _ThisCheckout())
    import judgetrain

    if Path(judgetrain.__file__).resolve().parent != ROOT / "judgetrain":
        raise SystemExit(f"judgetrain imports from {judgetrain.__file__}, not from this checkout {ROOT}")


def page_name(words: tuple[str, ...]) -> str:
    return "-".join(words) + ".md"


def _fence(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


def pages() -> dict[str, str]:
    """File name under docs/reference/commands/ -> its Markdown."""
    from judgetrain import cli

    out: dict[str, str] = {}
    for words, module_name in cli.COMMANDS.items():
        module = importlib.import_module(module_name)
        module_file = Path(module.__file__).resolve()
        if ROOT not in module_file.parents:
            raise SystemExit(f"{module_name} imports from {module_file}, not from this checkout {ROOT}")
        help_text = module.make_parser().format_help()
        name = " ".join(("judgetrain", *words))
        lines = [
            f"# `{name}`",
            "",
            "<!-- written by docs/gen_commands.py from the command's parser: do not edit -->",
            "",
            cli.command_summary(module_name),
            "",
        ]
        if words in GUIDES:
            guide = GUIDES[words]
            lines += [f"Guide: [{TITLES[guide.rsplit('/', 1)[-1][:-3]]}]({guide}).", ""]
        lines += [f"`{name} --help`:", "", _fence(help_text)]
        out[page_name(words)] = "\n".join(lines)

    index = [
        "# Commands",
        "",
        "<!-- written by docs/gen_commands.py from judgetrain.cli: do not edit -->",
        "",
        "One page per command, each the command's own `--help` (its parser's, so the pages cannot",
        "drift from the code: `make docs` writes them again before every build). Every command",
        "takes `--config FILE.yaml` as well as flags; see [configuration](../configuration.md).",
        "",
    ]
    for words in cli.COMMANDS:
        index.append(f"- [`judgetrain {' '.join(words)}`]({page_name(words)}): {cli.command_summary(cli.COMMANDS[words])}")
    index += ["", "`judgetrain --help`:", "", _fence(cli.command_listing())]
    for group in cli.GROUPS:
        index += [f"`judgetrain {group} --help`:", "", _fence(cli.command_listing((group,)))]
    out["index.md"] = "\n".join(index)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs or is missing")
    args = ap.parse_args(argv)

    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal's width: one width for every machine
    _import_from_checkout()
    from judgetrain.noise import quiet_libraries

    quiet_libraries()
    wanted = pages()
    nav = NAV_FILE.read_text(encoding="utf-8") if NAV_FILE.exists() else ""
    problems = [f"mkdocs.yml: nav does not list reference/commands/{n}" for n in wanted if f"reference/commands/{n}" not in nav]
    existing = {p.name for p in OUT.glob("*.md")}
    if args.check:
        for name, text in wanted.items():
            path = OUT / name
            if not path.exists():
                problems.append(f"{path.relative_to(ROOT)}: missing")
            elif path.read_text(encoding="utf-8") != text:
                problems.append(f"{path.relative_to(ROOT)}: differs from the parser's help")
        problems += [f"{(OUT / n).relative_to(ROOT)}: no such command" for n in sorted(existing - set(wanted))]
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name in sorted(existing - set(wanted)):
        (OUT / name).unlink()
    for name, text in wanted.items():
        path = OUT / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    print(f"{len(wanted)} pages in {OUT.relative_to(ROOT)}")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
