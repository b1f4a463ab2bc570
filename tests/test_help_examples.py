"""Every example in every ``--help`` runs as written (issue 24): ``judgetrain --help``, each
command of :data:`judgetrain.cli.COMMANDS`, the ``build`` / ``eval`` groups and
``python -m judgetrain.models.tiny``. (``python -m judgetrain.eval.*`` parse with their
command's parser, so they show the same examples; ``python -m judgetrain.train`` /
``.sweep`` show the recipe fields and no examples.)

Each plan below runs the examples of one or more epilogs top to bottom in a fresh working
directory that holds a copy of ``recipes/`` and the configuration files the examples name
(``build.yaml``, ``vmcq.yaml``; ``eval.yaml`` is the README's), nothing else: every other
path an example reads is made by an earlier example. An epilog whose first example is
``judgetrain quickstart`` gets the outputs of one session-wide run of exactly that command.
``judgetrain`` lines run in this process (``cli.main``, what the console script calls),
``python -m`` and ``accelerate launch`` lines as subprocesses; a ``dashboard`` line must
answer HTTP on its port, then is stopped.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import shlex
import shutil
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
PLANS: dict[str, tuple[tuple[str, ...], bool]] = {
    "tiny-models": (("python -m judgetrain.models.tiny",), True),
    "build-mirage": (("build mirage",), False),
    "build-ordering-probe": (("build ordering-probe",), False),
    "build-video-mcq-then-views": (("build video-mcq", "build consistency-views"), False),
    "build-prism-then-rationales": (("build prism", "build rationales"), True),
    "build-timecatch": (("build timecatch",), True),
    "dashboard": (("dashboard",), False),
    "judgetrain": (("judgetrain",), True),
    "quickstart": (("quickstart",), True),
    "train": (("train",), True),
    "merge": (("merge",), True),
    "score": (("score",), True),
    "sweep": (("sweep",), True),
    "eval-timecatch": (("eval timecatch",), True),
    "eval-judge-then-bias": (("eval judge", "eval bias"), True),
    "eval-phasefusion": (("eval phasefusion",), True),
    "eval-report": (("eval report",), True),
    "eval-compare": (("eval compare",), True),
    "eval-view": (("eval view",), True),
    "slurm": (("slurm",), False),
}

# the files a `--config FILE` example names, written before its epilog runs
CONFIG_FILES = {
    "build timecatch": {"build.yaml": "out: data/timecatch-yaml\nsynthetic: 4\nlpips_random_backbone: true\n"},
    "build prism": {"build.yaml": "out: data/prism-yaml\nsynthetic: 6\nlayouts: [P0]\n"},
    "build mirage": {"build.yaml": "out: data/mirage-yaml\nsynthetic: 12\nlayouts: [P0]\n"},
    "build ordering-probe": {"build.yaml": "out: data/ordering-yaml\nsynthetic: 6\n"},
    "build video-mcq": {"vmcq.yaml": "out: data/vmcq-yaml\nsynthetic: 4\nframes: 32\n"},
    "build consistency-views": {"build.yaml": "manifest: data/vmcq/manifest.jsonl\nout: data/vmcq-views-yaml\n"},
}


def readme_yaml(name: str) -> str:
    """The README's example ``name`` (its "Configuration files" section), as a user copies it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = next(b for b in text.split("```yaml\n")[1:] if b.startswith(f"# {name} "))
    return block.split("```", 1)[0]


def test_every_example_of_every_help_is_planned():
    """No help text shows an example no plan runs, and the plans name only real help texts."""
    texts = help_texts()
    with_examples = {name for name, text in texts.items() if examples(text)}
    planned = [name for epilogs, _ in PLANS.values() for name in epilogs]
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


# --------------------------------------------------------------------------- running them


@pytest.fixture(scope="session")
def quickstart_run(tmp_path_factory):
    """One run of ``judgetrain quickstart`` as written, in its own working directory."""
    cwd = tmp_path_factory.mktemp("quickstart-run")
    _run_line(QUICKSTART, cwd)
    return cwd / "quickstart"


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _run_line(line: str, cwd: Path) -> None:
    argv = shlex.split(line)
    if argv[:2] == ["judgetrain", "dashboard"]:
        return _serve(argv, cwd)
    if argv[0] == "judgetrain":
        before = Path.cwd()
        os.chdir(cwd)
        try:
            rc = cli.main(argv[1:])
        except SystemExit as e:
            rc = e.code
        finally:
            os.chdir(before)
        assert rc == 0, f"`{line}` exited {rc} (its output is above)"
        return
    exe = {"python": sys.executable, "accelerate": str(BIN / "accelerate")}[argv[0]]
    done = subprocess.run([exe, *argv[1:]], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"`{line}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def _serve(argv: list[str], cwd: Path) -> None:
    """Start ``judgetrain dashboard …``; it must answer HTTP on its port within a minute."""
    port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8080
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip(f"port {port} is taken on this machine")
    proc = subprocess.Popen([sys.executable, "-m", "judgetrain", *argv[1:]], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
                    assert s.recv(12).startswith(b"HTTP/1."), argv
                    return
            except OSError:
                time.sleep(0.5)
        pytest.fail(f"`{shlex.join(argv)}` did not serve on port {port}: {proc.poll()=}")
    finally:
        proc.terminate()
        try:
            out = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        print(out[-2000:])


def _prepare(cwd: Path, epilogs: tuple[str, ...]) -> None:
    shutil.copytree(REPO / "recipes", cwd / "recipes")
    if "dashboard" in epilogs:  # the storages it shows: those a sweep writes
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        (cwd / "runs").mkdir()
        for storage in (f"sqlite:///{cwd / 'runs' / 'sweeps.db'}",
                        JournalStorage(JournalFileBackend(str(cwd / "runs" / "sweeps.journal")))):
            optuna.create_study(storage=storage, study_name="tiny").optimize(lambda t: t.suggest_float("x", 0, 1), 2)


def run_plan(epilogs: tuple[str, ...], cwd: Path, quickstart_dir=None) -> list[str]:
    """Run the examples of ``epilogs`` in order in ``cwd``; returns the lines that ran."""
    texts = help_texts()
    _prepare(cwd, epilogs)
    ran = []
    for name in epilogs:
        for file, content in {**CONFIG_FILES.get(name, {}), **({"eval.yaml": readme_yaml("eval.yaml")}
                                                             if name == "eval timecatch" else {})}.items():
            (cwd / file).write_text(content)
        lines = examples(texts[name])
        if lines[0] == QUICKSTART:  # served by the session's one run of it
            shutil.copytree(quickstart_dir(), cwd / "quickstart", symlinks=True)
            lines = lines[1:]
        for line in lines:
            print(f"$ {line}", flush=True)
            _run_line(line, cwd)
            ran.append(line)
    return ran


def _plan_params():
    for name, (epilogs, slow) in PLANS.items():
        yield pytest.param(epilogs, id=name, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("epilogs", list(_plan_params()))
def test_help_examples_run_as_written(epilogs, tmp_path, request):
    ran = run_plan(epilogs, tmp_path, lambda: request.getfixturevalue("quickstart_run"))
    assert ran


@pytest.mark.slow
def test_the_quickstart_example_built_what_the_others_read(quickstart_run):
    """The session's ``judgetrain quickstart`` (the first example of several epilogs) left what
    their later examples name."""
    for path in ("models/qwen3-vl", "timecatch/build.json", "runs/tiny-qwen3vl-timecatch/checkpoint-4",
                 "results/zero-shot/metrics.json", "results/lora/metrics.json"):
        assert (quickstart_run / path).exists(), path

