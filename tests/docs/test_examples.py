"""Every command example of the documentation site and of every ``--help`` runs as written,
top to bottom, in one shared folder, and none of them rewrites or removes a byte of what an
earlier one made outside its own outputs (issue 40).

The walk takes the README, then the pages in the site's navigation order (the command reference pages are
the ``--help`` texts, run after the pages from the parsers themselves, as
``tests/test_help_examples.py`` reads them). In the pages, a command spelled ``.venv/bin/…``
runs offline on the tiny models; one spelled plain ``judgetrain …`` is the same with a real
checkpoint on GPUs and is not run. Lines that need what only the user has (their videos, a
Gemini key) are listed in :data:`NEEDS` with the reason. CI's slow run takes the first walk (the
README, the Get started pages and every ``--help``, about 4 minutes); ``make test-examples`` the
whole one (about 10). A ``--help`` example that names a
configuration file (``build.yaml``) gets the file its command's help describes, written just
before it, as a user would.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from judgetrain import cli
from judgetrain.models.tiny import builder as tiny_builder
from tests.site_nav import nav_pages
from tests.test_help_examples import CONFIG_FILES, PLANS, docs_yaml, examples, help_texts, serve

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
BIN = Path(sys.executable).parent
# what a line needs that no fresh clone has, by a string the line holds
NEEDS = {
    "clevrer/": "the user's CLEVRER videos",
    "drivelm/": "the user's DriveLM frames",
    "coin/": "the user's COIN procedures",
    "mirage/mirage.jsonl": "the user's MIRAGE manifest",
    "--teacher gemini": "a Gemini API key",
    "--teacher local --model Qwen": "a GPU for a 32B teacher",
    "data/mirage-gemini": "an earlier Gemini export",
    "my-frames/": "the user's frame folders",
    "my-videos/": "the user's videos",
    "benchmarks/": "measurements of minutes to hours, not steps of the walk (reference/benchmarks.md)",
    "slurm ": "a SLURM cluster (tests/cluster run sbatch against a local slurmctld)",
}
OUTPUT_FLAGS = ("--out", "--output_dir", "--output-dir")


def docs_pages() -> list[Path]:
    """The site's pages in navigation order, less the generated command pages."""
    return [DOCS / p for p in nav_pages() if not p.startswith("reference/commands/")]


def make_quickstart() -> str:
    """What ``make quickstart`` runs once the set-up is done, spelled as the docs spell commands."""
    target = (REPO / "Makefile").read_text(encoding="utf-8").split("\nquickstart:", 1)[1]
    recipe = target.split("\n\t", 1)[1].split("\n", 1)[0]
    return recipe.replace("$(BIN)/", ".venv/bin/")


def page_commands(text: str) -> list[str]:
    """The ``.venv/bin/…`` command lines of a page's bash blocks, in order: continuation lines
    joined, a ``<<'PY'`` here-document kept whole, a block's ``NAME=value`` lines set before
    the commands that follow them; ``make quickstart`` as what it runs; a Python block as
    ``.venv/bin/python`` reading it."""
    commands: list[str] = []
    for language, block in re.findall(r"```(bash|python)\n(.*?)```", text, re.S):
        if language == "python":
            commands.append(f".venv/bin/python - <<'PY'\n{block}PY")
            continue
        lines = block.splitlines()
        settings: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if re.match(r"^[A-Z_]+=", line):
                settings.append(line)
            if line.split("#")[0].split() == ["make", "quickstart"]:
                commands.append(make_quickstart())
            if not line.startswith(".venv/bin/"):
                i += 1
                continue
            cmd = [line]
            while cmd[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd.append(lines[i])
            heredoc = re.search(r"<<'(\w+)'", line)
            if heredoc:
                while i + 1 < len(lines) and lines[i] != heredoc.group(1):
                    i += 1
                    cmd.append(lines[i])
            commands.append("\n".join([*settings, *cmd]))
            i += 1
    return commands


# the pages of the first walk, the one CI runs: what a new user reads first
FIRST_PAGES = ("get-started/",)


def walk(first: bool = False) -> list[tuple[str, str, dict[str, str]]]:
    """(where, command, files to write first) for every example, docs then ``--help`` texts;
    ``first``: only the README's, the Get started pages' and the ``--help`` texts'."""
    pages = [REPO / "README.md", *(p for p in docs_pages() if not first or str(p.relative_to(DOCS)).startswith(FIRST_PAGES))]
    steps = [(str(p.relative_to(REPO)), c, {}) for p in pages for c in page_commands(p.read_text(encoding="utf-8"))]
    texts = help_texts()
    for name in PLANS:
        files = {**CONFIG_FILES.get(name, {}), **({"eval.yaml": docs_yaml("eval.yaml")} if name == "eval timecatch" else {})}
        for i, line in enumerate(examples(texts[name])):
            steps.append((f"{name} --help", line, files if i == 0 else {}))
    return steps


def _config_outputs(words: list[str], work: Path) -> list[str]:
    """What a ``--config FILE`` (or a recipe as the first word) names as its output folder."""
    files = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--config"]
    files += [w for w in words[1:4] if w.endswith(".yaml") and not w.startswith("-")]
    found = []
    for f in files:
        with contextlib.suppress(OSError, yaml.YAMLError, AttributeError):
            data = yaml.safe_load((work / f).read_text(encoding="utf-8")) or {}
            found += [str(data[k]) for k in ("out", "output_dir") if k in data]
    return found


def outputs(command: str, work: Path) -> list[Path]:
    """The folders and files a command names as what it writes."""
    words = shlex.split(command.split("<<")[0].replace("\\\n", " "), comments=True)
    found = [words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_FLAGS]
    found += [w.split("=", 1)[1] for w in words if w.startswith(tuple(f + "=" for f in OUTPUT_FLAGS))]
    found += [w[len("sqlite:///") :] for w in words if w.startswith("sqlite:///")]
    if not any(w in OUTPUT_FLAGS for w in words):
        found += _config_outputs(words, work)
    if "report" in words[:4]:  # `eval report RUN` rewrites RUN's report
        found.append(words[words.index("report") + 1])
    for command, default in (("bias", "bias"), ("view", "view")):  # `eval bias RUN`: RUN/bias.md, RUN/bias.json
        if command in words[:4] and "--out" not in words:  # `eval view RUN`: RUN/view/
            found.append(f"{words[words.index(command) + 1]}/{default}")
    if "quickstart" in words[:2] and "--out" not in words:
        found.append("quickstart")
    return [(work / f).resolve() for f in found]


def inside(path: Path, output: Path) -> bool:
    """Whether ``path`` is ``output``'s or its siblings' (``OUT.work/``, ``runs/sweeps.db-journal``)."""
    return path.is_relative_to(output.parent) and path.relative_to(output.parent).parts[0].startswith(output.name)


def state(work: Path) -> dict[Path, tuple[int, int]]:
    return {
        p: (p.stat().st_size, p.stat().st_mtime_ns)
        for p in work.rglob("*")
        if p.is_file() and not p.is_symlink() and ".venv" not in p.parts
    }


def in_process(main, argv: list[str], work: Path) -> str | None:
    """``main(argv)`` with ``work`` as the working directory; why it failed, or None."""
    before = Path.cwd()
    os.chdir(work)
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    finally:
        os.chdir(before)
    return None if rc in (0, None) else f"exited {rc} (its output is above)"


def run(command: str, work: Path, env: dict[str, str]) -> str | None:
    """Run one example in ``work``; the reason it failed, or None. A plain ``judgetrain`` line
    runs in this process (``cli.main``, what the console script calls), as does the tiny-model
    builder (its ``main``, what ``python -m`` calls); the rest in bash."""
    argv = shlex.split(command, comments=True) if "\n" not in command and not re.search(r"[|;&<>$]", command) else []
    if argv[:1] in (["judgetrain"], [".venv/bin/judgetrain"]):
        if argv[1:2] == ["dashboard"]:
            return serve(argv[1:], work)
        return in_process(cli.main, argv[1:], work)
    if argv[:1] in (["python"], [".venv/bin/python"]) and argv[1:3] == ["-m", "judgetrain.models.tiny"]:
        return in_process(tiny_builder.main, argv[3:], work)
    if argv[:1] == ["python"] or argv[:1] == ["accelerate"]:
        command = f".venv/bin/{command}"
    done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=900)
    return None if done.returncode == 0 else f"exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_docs_list_offline_commands_from_the_quickstart_on():
    steps = walk()
    assert steps[0][1].startswith(".venv/bin/judgetrain quickstart")
    assert any("<<'PY'" in c and c.endswith("PY") for _, c, _ in steps)
    assert sum(any(k in c for k in NEEDS) for _, c, _ in steps) < len(steps) // 4
    assert {w for w, _, _ in steps if w.endswith("--help")} == {f"{name} --help" for name in PLANS}


def walk_in_one_folder(steps: list[tuple[str, str, dict[str, str]]], work: Path) -> list[str]:
    """Run ``steps`` in order in ``work``; what went wrong, step by step."""
    work.mkdir()
    for name in ("recipes", "deepspeed_configs"):  # copies: an example may write there (`sweep best --out recipes/…`)
        shutil.copytree(REPO / name, work / name)
    os.symlink(BIN.parent, work / ".venv")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    problems: list[str] = []
    for where, command, files in steps:
        if any(k in command for k in NEEDS):
            continue
        for name, content in files.items():
            (work / name).write_text(content, encoding="utf-8")
        print(f"[{where}] $ {command}", flush=True)
        before, start = state(work), time.monotonic()
        failed = run(command, work, env)
        print(f"  {time.monotonic() - start:.1f} s", flush=True)
        if failed:
            problems.append(f"[{where}] {command}\n{failed}")
            continue
        after, mine = state(work), outputs(command, work)
        lost = [p for p, st in before.items() if after.get(p) != st and not any(inside(p, o) for o in mine)]
        if lost:
            problems.append(
                f"[{where}] {command}\nchanged or removed earlier outputs: {[str(p.relative_to(work)) for p in lost[:10]]}"
            )
    return problems


@pytest.mark.slow
def test_the_readme_get_started_and_every_help_example_run_in_one_folder(tmp_path):
    """CI's walk (about 4 minutes on 2 cores): what a new user runs first, and every --help."""
    problems = walk_in_one_folder(walk(first=True), tmp_path / "clone")
    assert not problems, "\n\n".join(problems)


@pytest.mark.examples
def test_every_example_runs_in_one_folder_without_losing_earlier_outputs(tmp_path):
    """The whole walk, every page of the site too (about 10 minutes on 2 cores; make test-examples)."""
    problems = walk_in_one_folder(walk(), tmp_path / "clone")
    assert not problems, "\n\n".join(problems)
