"""Every example in every ``--help`` (issue 24): ``judgetrain --help``, each command of
:data:`judgetrain.cli.COMMANDS`, the ``build`` / ``eval`` groups and
``python -m judgetrain.models.tiny``. (``python -m judgetrain.eval.*`` parse with their
command's parser, so they show the same examples; ``python -m judgetrain.train`` /
``.sweep`` show the recipe fields and no examples.)

This module collects them and checks that each epilog is planned once; they run, after the
documentation's examples and in the order of :data:`PLANS`, in one shared folder in
``tests/docs/test_examples.py``. An example that names a configuration file (``build.yaml``,
``vmcq.yaml``, ``eval.yaml``) gets the file of :data:`CONFIG_FILES` (``eval.yaml`` is the
documentation's) written just before its epilog; every other path an example reads is made
by an earlier example. A ``dashboard`` line must answer HTTP on its port, then is stopped.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgetrain import cli

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
QUICKSTART = "judgetrain quickstart"


# --------------------------------------------------------------------------- collecting the examples


def _printed_help(call) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        call()
    return out.getvalue()


def help_texts() -> dict[str, str]:
    """Command name (``judgetrain`` for the top level) -> its ``--help`` text."""
    from judgetrain.models.tiny import builder

    texts = {"judgetrain": _printed_help(lambda: cli.main(["--help"]))}
    for group in cli.GROUPS:
        texts[group] = _printed_help(lambda g=group: cli.main([g, "--help"]))
    for words, module in cli.COMMANDS.items():
        texts[" ".join(words)] = importlib.import_module(module).make_parser().format_help()
    texts["python -m judgetrain.models.tiny"] = _printed_help(lambda: builder.main(["--help"]))
    return texts


def examples(text: str) -> list[str]:
    """The command lines of a help text's ``examples:`` block (up to its first blank line),
    continuation lines joined, comments dropped."""
    if "examples:\n" not in text:
        return []
    block = text.split("examples:\n", 1)[1].split("\n\n", 1)[0].replace("\\\n", " ")
    lines = [shlex.split(line, comments=True) for line in block.splitlines()]
    return [shlex.join(words) for words in lines if words]


# test id -> the epilogs it runs in order in one working directory, and whether it is slow
# the order the epilogs run in, after the documentation's examples: an epilog's examples may
# read what an earlier one made
PLANS: tuple[str, ...] = (
    "python -m judgetrain.models.tiny", "build mirage", "build ordering-probe", "build video-mcq",
    "build consistency-views", "build prism", "build rationales", "build timecatch", "judgetrain",
    "quickstart", "train", "merge", "score", "sweep", "eval timecatch", "eval judge", "eval bias",
    "eval phasefusion", "eval report", "eval compare", "eval view", "dashboard", "slurm",
)

# the files a `--config FILE` example names, written before its epilog runs
CONFIG_FILES = {
    "build timecatch": {"build.yaml": "out: data/timecatch-yaml\nsynthetic: 4\nlpips_random_backbone: true\n"},
    "build prism": {"build.yaml": "out: data/prism-yaml\nsynthetic: 6\nlayouts: [P0]\n"},
    "build mirage": {"build.yaml": "out: data/mirage-yaml\nsynthetic: 12\nlayouts: [P0]\n"},
    "build ordering-probe": {"build.yaml": "out: data/ordering-yaml\nsynthetic: 6\n"},
    "build video-mcq": {"vmcq.yaml": "out: data/vmcq-yaml\nsynthetic: 4\nframes: 32\n"},
    "build consistency-views": {"build.yaml": "manifest: data/vmcq/manifest.jsonl\nout: data/vmcq-views-yaml\n"},
}


def docs_yaml(name: str) -> str:
    """The documentation's example ``name`` (reference/configuration.md), as a user copies it."""
    text = (REPO / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    block = next(b for b in text.split("```yaml\n")[1:] if b.startswith(f"# {name} "))
    return block.split("```", 1)[0]


def test_every_example_of_every_help_is_planned():
    """No help text shows an example no plan runs, and the plans name only real help texts."""
    texts = help_texts()
    with_examples = {name for name, text in texts.items() if examples(text)}
    planned = list(PLANS)
    assert sorted(planned) == sorted(with_examples)  # each epilog once
    assert set(texts) - with_examples == set(cli.GROUPS)  # the groups point to their commands' help
    for group in cli.GROUPS:
        assert f"`judgetrain {group} COMMAND --help` lists a command's fields" in texts[group]
    assert all(examples(texts[name]) for name in planned)


def test_examples_are_read_as_written():
    text = ("usage: x\n\nexamples:\n  judgetrain a --b c   # why\n  # a comment line\n"
            "  judgetrain d \\\n      --e 'f g'\n\nmore text\n  judgetrain not-an-example\n")
    assert examples(text) == ["judgetrain a --b c", "judgetrain d --e 'f g'"]
    assert examples("no examples here\n") == []


# --------------------------------------------------------------------------- a dashboard line


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def serve(argv: list[str], cwd: Path) -> str | None:
    """Start ``judgetrain dashboard …`` (``argv`` without ``judgetrain``); it must answer HTTP
    on its port within a minute: why it did not, or None."""
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8080
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            print(f"port {port} is taken on this machine: `{shlex.join(argv)}` not started")
            return None
    proc = subprocess.Popen([sys.executable, "-m", "judgetrain", *argv], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    answer = s.recv(12)
                    return None if answer.startswith(b"HTTP/1.") else f"answered {answer!r}, not HTTP"
            except OSError:
                time.sleep(0.5)
        return f"did not serve on port {port}: {proc.poll()=}"
    finally:
        proc.terminate()
        try:
            out = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        print(out[-2000:])
