"""The README's evaluation examples as a new user runs them (the offline commands of "`judgetrain
eval judge`, `eval bias`" and "`judgetrain eval phasefusion`", in order, in one folder), and what
they print: a command's own progress, tables and "written to" lines, and no line of library noise
(a logger's ``[WARNING]``, a Python warning, a library's own progress bars) but those listed in
:data:`EXPECTED` with why the user wants them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("### `judgetrain eval judge`, `eval bias`", "### `judgetrain eval phasefusion`")
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
    """The ``.venv/bin/…`` lines (continuations joined) of the bash blocks under ``heading``."""
    body = text.split(heading, 1)[1]
    body = body.split("\n### ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", body, re.S):
        joined = block.replace("\\\n", " ")
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


def test_the_readme_evaluation_examples_print_no_library_noise(tmp_path, tiny_model):
    text = (REPO / "README.md").read_text()
    commands = [c for heading in SECTIONS for c in section_commands(text, heading)]
    assert len(commands) >= 9
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
