"""The ``judgetrain`` command line.

One registry (:data:`COMMANDS`, a plain dict) maps each command to the module that
implements it. A module exposes ``make_parser()`` (its typed config, see
:mod:`judgetrain.config`) and ``main(cfg)``, the shape of TRL's ``scripts/sft.py``;
only the module of the command being run is imported.
Docs: "reference/configuration.md", "reference/commands/index.md".
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import sys
from pathlib import Path

# command words -> module (imported lazily: building TimeCatch should not import the trainer)
COMMANDS: dict[tuple[str, ...], str] = {
    ("quickstart",): "judgetrain.quickstart",
    ("train",): "judgetrain.train.launch",
    ("merge",): "judgetrain.train.merge",
    ("sweep",): "judgetrain.sweep.controller",
    ("dashboard",): "judgetrain.sweep.dashboard",
    ("build", "timecatch"): "judgetrain.data_builders.timecatch.command",
    ("build", "prism"): "judgetrain.data_builders.prism.command",
    ("build", "mirage"): "judgetrain.data_builders.mirage.command",
    ("build", "ordering-probe"): "judgetrain.data_builders.ordering",
    ("build", "video-mcq"): "judgetrain.data_builders.video_mcq.command",
    ("build", "rationales"): "judgetrain.data_builders.rationales.command",
    ("build", "consistency-views"): "judgetrain.data_builders.consistency_views",
    ("eval", "timecatch"): "judgetrain.eval.timecatch.command",
    ("eval", "judge"): "judgetrain.eval.judge.command",
    ("eval", "phasefusion"): "judgetrain.eval.phasefusion.command",
    ("eval", "bias"): "judgetrain.eval.bias.command",
    ("eval", "report"): "judgetrain.eval.core.rebuild",
    ("eval", "compare"): "judgetrain.eval.core.compare",
    ("eval", "view"): "judgetrain.eval.view.command",
    ("score",): "judgetrain.rank.command",
    ("slurm",): "judgetrain.cluster.command",
}
GROUPS = {"build": "build a dataset of task records", "eval": "evaluate models, rebuild reports, compare runs"}

EPILOG = """examples:
  judgetrain quickstart                                  # tiny models + a synthetic TimeCatch set, offline
  judgetrain train --config recipes/tiny/qwen3vl-timecatch-lora.yaml --accelerate_config zero3   # on the quickstart's set
  judgetrain merge runs/tiny-qwen3vl-timecatch --out runs/merged
  judgetrain eval timecatch --model runs/merged --data quickstart/timecatch --split validation --sample 40 --out results/merged
  judgetrain eval report results/merged

every command takes --config FILE.yaml (its fields as keys; flags win) and lists every field in --help.
"""


def command_summary(module: str) -> str:
    """The first sentence of ``module``'s docstring as plain text, read without importing it
    (importing every command would load torch and the training stack just to print help):
    a leading ``judgetrain NAME``: dropped, reStructuredText roles and literals unwrapped."""
    spec = importlib.util.find_spec(module)
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))) if spec and spec.origin else None
    if not doc:
        return ""
    text = " ".join(doc.strip().split("\n\n")[0].split())
    text = re.sub(r"^``judgetrain [^`]*``:\s*", "", text)
    text = re.sub(r":[a-z]+:`~?\.?([^`]*)`", r"\1", text).replace("``", "")
    depth = 0
    for i, ch in enumerate(text):  # the first full stop outside parentheses ("(paper 002 App. G)" stays whole)
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            text = text[: i + 1]
            break
    return text[:1].upper() + text[1:]


def command_listing(prefix: tuple[str, ...] = ()) -> str:
    """The commands under ``prefix`` with their one-line summaries."""
    rows = []
    seen = set()
    for words, module in COMMANDS.items():
        if words[: len(prefix)] != prefix or len(words) == len(prefix):
            continue
        head = words[: len(prefix) + 1]
        if head in seen:
            continue
        seen.add(head)
        text = command_summary(module) if head == words else GROUPS.get(head[-1], "")
        rows.append((" ".join(head), text))
    width = max(len(r[0]) for r in rows)
    name = " ".join(("judgetrain", *prefix))
    lines = [f"usage: {name} COMMAND [--config FILE.yaml] [--field value …]", "", "commands:"]
    lines += [f"  {w:<{width}}  {t}" for w, t in rows]
    return "\n".join(lines) + "\n\n" + (EPILOG if not prefix else f"`{name} COMMAND --help` lists a command's fields.\n")


def find_command(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The registered command that ``argv`` starts with, and the arguments after it.
    SystemExit with the list of commands (and a "did you mean") otherwise."""
    for n in (2, 1):
        words = tuple(argv[:n])
        if words in COMMANDS:
            return words, argv[n:]
    prefix = tuple(argv[:1]) if argv[:1] and argv[0] in GROUPS else ()
    wanted = argv[len(prefix)] if len(argv) > len(prefix) else None
    if wanted in (None, "-h", "--help"):
        print(command_listing(prefix), end="")
        raise SystemExit(0 if wanted else 2)
    names = sorted({w[len(prefix)] for w in COMMANDS if w[: len(prefix)] == prefix and len(w) > len(prefix)})
    from judgetrain.errors import did_you_mean

    hint = did_you_mean(wanted, names, sentence=True)
    print(f"error: unknown command {' '.join((*prefix, wanted))!r}.{hint} Commands: {', '.join(names)}\n", file=sys.stderr)
    print(command_listing(prefix), end="", file=sys.stderr)
    raise SystemExit(2)


def _silence_library_progress_bars() -> None:
    """``--no-progress`` silences the libraries' bars too (datasets' generating / saving
    bars, transformers' and the hub's loading bars), not only judgetrain's own."""
    import datasets
    import huggingface_hub.utils
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()


def _run(words: tuple[str, ...], rest: list[str]) -> int:
    from judgetrain import config

    module = importlib.import_module(COMMANDS[words])
    cfgs = config.parse(module.make_parser(), rest, help_hint=f"`judgetrain {' '.join(words)} --help`")
    if any(getattr(c, "progress", True) is False for c in cfgs):
        _silence_library_progress_bars()
    return module.main(*cfgs)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--version"]:
        from judgetrain import __version__

        print(f"judgetrain {__version__}")
        return 0
    words, rest = find_command(argv)
    from judgetrain.errors import UserError
    from judgetrain.noise import quiet_libraries

    quiet_libraries()

    try:
        return _run(words, rest)
    except UserError as e:  # its message already says what to do: no traceback on top of it
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
