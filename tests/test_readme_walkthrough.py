"""The README followed top to bottom, as a new user would: every offline command it shows
(those spelled ``.venv/bin/…``) runs as written, in order, in one fresh folder, and none of
them rewrites or removes a byte of what an earlier one made outside its own output folder.

Lines that need what only the user has (their videos and procedures, a Gemini key, a GPU
for a 32B teacher) are listed in :data:`NEEDS` with the reason and not run. This walk
builds the README's full-size sets (200 clips, 100 procedures, 300 questions at 128
frames, …) and trains, sweeps and evaluates: about 15 minutes on 2 cores, so it has its
own marker and make target (``make test-readme``) instead of a place in CI's runs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# what a line needs that no fresh clone has, by a string the line holds
NEEDS = {
    "clevrer/": "the user's CLEVRER videos", "drivelm/": "the user's DriveLM frames", "coin/": "the user's COIN procedures",
    "mirage/mirage.jsonl": "the user's MIRAGE manifest", "--teacher gemini": "a Gemini API key",
    "--teacher local": "a GPU for a 32B teacher", "data/mirage-gemini": "an earlier Gemini export",
    "judgetrain dashboard": "a server that runs until stopped (tests/test_help_examples.py starts and stops it)",
    "benchmarks/": "measurements of minutes to hours, not steps of the walk (benchmarks/README.md)",
}
OUTPUT_FLAGS = ("--out", "--output_dir", "--output-dir")


def readme_commands(text: str) -> list[str]:
    """The ``.venv/bin/…`` command lines of the README's bash blocks, in order: continuation
    lines joined, a ``<<'PY'`` here-document kept whole, a block's ``NAME=value`` lines
    set before the commands that follow them."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        lines = block.splitlines()
        settings: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if re.match(r"^[A-Z_]+=", line):
                settings.append(line)
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


def _outputs(command: str, work: Path) -> list[Path]:
    """The folders and files a command names as what it writes."""
    words = shlex.split(command.split("<<")[0].replace("\\\n", " "), comments=True)
    found = [words[i + 1] for i, w in enumerate(words[:-1]) if w in OUTPUT_FLAGS]
    found += [w.split("=", 1)[1] for w in words if w.startswith(tuple(f + "=" for f in OUTPUT_FLAGS))]
    found += [w[len("sqlite:///"):] for w in words if w.startswith("sqlite:///")]
    if "report" in words[:3]:  # `eval report RUN` rewrites RUN's report
        found.append(words[words.index("report") + 1])
    return [(work / f).resolve() for f in found]


def _inside(path: Path, output: Path) -> bool:
    """Whether ``path`` is ``output``'s or its siblings' (``OUT.work/``, ``runs/sweeps.db-journal``)."""
    return path.is_relative_to(output.parent) and path.relative_to(output.parent).parts[0].startswith(output.name)


def _state(work: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in work.rglob("*")
            if p.is_file() and not p.is_symlink() and ".venv" not in p.parts}


def test_the_readme_lists_its_offline_commands():
    commands = readme_commands(README.read_text())
    assert commands[0].startswith(".venv/bin/judgetrain quickstart")
    assert any("<<'PY'" in c and c.endswith("PY") for c in commands)
    assert sum(any(k in c for k in NEEDS) for c in commands) < len(commands) // 3


@pytest.mark.readme
def test_the_readme_runs_top_to_bottom_without_losing_earlier_outputs(tmp_path):
    work = tmp_path / "clone"
    work.mkdir()
    for name in ("recipes", "deepspeed_configs"):
        os.symlink(REPO / name, work / name)
    os.symlink(REPO / ".venv", work / ".venv")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    for command in readme_commands(README.read_text()):
        if any(k in command for k in NEEDS):
            continue
        before = _state(work)
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        after, mine = _state(work), _outputs(command, work)
        lost = [p for p, st in before.items() if after.get(p) != st and not any(_inside(p, o) for o in mine)]
        assert not lost, f"{command}\nchanged or removed earlier outputs: {[str(p.relative_to(work)) for p in lost[:10]]}"
