"""The documentation's evaluation examples as a new user runs them (the offline commands of
"`judgetrain eval judge`" in docs/concepts/prism-mirage.md and "`judgetrain eval phasefusion`" in
docs/concepts/phasefusion.md, in order, in one folder), and what they print: a command's own
progress, tables and "written to" lines, and no line of library noise (a logger's ``[WARNING]``, a
Python warning, a library's own progress bars) but those listed in :data:`EXPECTED` with why the
user wants them. The pages are read when the test runs: the commands are whatever they say now.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# (page, heading of the section whose commands run)
SECTIONS = (
    ("docs/concepts/prism-mirage.md", "## `judgetrain eval judge`"),
    ("docs/concepts/phasefusion.md", "## `judgetrain eval phasefusion`"),
)
# what marks a line as some library's, not the command's own
NOISE = (
    r"\[(WARNING|INFO|DEBUG)\]",  # DeepSpeed's, accelerate's and wandb's logging formats
    r"\b[A-Z]\w*Warning\b",  # warnings.warn (FutureWarning, UserWarning, ExperimentalWarning, …)
    r"^\s*warnings\.warn\(",
    r"^(Generating \w+ split|Saving the dataset|Map|Filter|Casting|Loading checkpoint shards)\b",  # datasets, transformers
    r"^wandb:",
    r"Traceback \(most recent call last\)",
)
# library output kept on purpose
EXPECTED = (
    # transformers' bar over a checkpoint's tensors: progress on the long part of loading a real model
    r"^Loading weights:",
)


def section_commands(text: str, heading: str) -> list[str]:
    """The ``.venv/bin/…`` lines (continuations joined) of the bash blocks under ``heading`` (a line
    of the page), up to the next heading of the same or a higher level (outside code blocks, where
    a ``#`` line is a shell comment)."""
    lines = text.splitlines()
    assert heading in lines, f"no section {heading!r}"
    level = len(heading) - len(heading.lstrip("#"))
    blocks, fence = [], None  # fence: the language of the code block the line is in, None outside one
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            if fence == "bash":
                blocks.append([])
        elif fence is None and re.match(rf"#{{1,{level}}} ", line):
            break
        elif fence == "bash":
            blocks[-1].append(line)
    commands = []
    for block in blocks:
        joined = "\n".join(block).replace("\\\n", " ")
        commands += [line for line in joined.splitlines() if line.startswith(".venv/bin/")]
    return commands


def noise(output: str) -> list[str]:
    """The lines of ``output`` (carriage-return redraws split) that are library noise."""
    lines = [part for line in output.splitlines() for part in line.split("\r") if part.strip()]
    return [line for line in lines if any(re.search(p, line) for p in NOISE) and not any(re.search(p, line) for p in EXPECTED)]


def test_noise_finds_what_the_issue_saw():
    seen = (
        "[2026-12-05 16:15:44,044] [WARNING] [real_accelerator.py:213:get_accelerator] Setting accelerator to CPU.\n"
        "Generating train split: 3 examples [00:00, 26.80 examples/s]\r"
        "ordering-probe:  12%|█▎        | 3/24 [00:00<00:00, 26.89seq/s]\n"
        "/x/optuna/_experimental.py:32: ExperimentalWarning: Argument ``heartbeat_interval`` is experimental.\n"
        "Loading weights: 100%|██████████| 64/64 [00:00<00:00, 8626.37it/s]\n"
        "Bias report in results/prism-tiny/bias.md (data in results/prism-tiny/bias.json)\n"
    )
    assert len(noise(seen)) == 3


def test_the_docs_evaluation_examples_print_no_library_noise(tmp_path, tiny_model):
    commands = [c for page, heading in SECTIONS for c in section_commands((REPO / page).read_text(encoding="utf-8"), heading)]
    assert len(commands) >= 9, commands
    (tmp_path / "quickstart" / "models").mkdir(parents=True)  # what `make quickstart` builds, the phasefusion example reads
    os.symlink(tiny_model("qwen3-vl"), tmp_path / "quickstart" / "models" / "qwen3-vl")
    os.symlink(Path(sys.executable).parents[1], tmp_path / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB", "HF_DATASETS_DISABLE"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONWARNINGS="default")  # every warning shown once, as a user's shell shows them
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        found = noise(done.stdout + "\n" + done.stderr)
        assert not found, f"{command}\nprinted library noise:\n" + "\n".join(found[:20])
