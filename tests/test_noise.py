"""A command prints its own progress and results: the library messages judgetrain.noise filters
are gone from a command's output, one message at a time, and any other warning still gets through."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from judgetrain import cli

_FILTERED = r"""
import logging, os, sys, warnings
from judgetrain.noise import quiet_libraries
quiet_libraries()
warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
warnings.warn("`gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
warnings.warn("a real deprecation the user must see", FutureWarning)
warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned memory won't be used.")
warnings.warn("`gradient_checkpointing` is deprecated (said by the user's own code)", UserWarning)
from deepspeed.utils import logger  # DeepSpeed's own logger, with its own handler
import torch
logger.warning("Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.")
logger.warning("ZeRO stage 3 gathers parameters")  # any other DeepSpeed warning stays
print("datasets bars:", os.environ.get("HF_DATASETS_DISABLE_PROGRESS_BARS"))
"""


def test_listed_messages_are_filtered_and_every_other_warning_gets_through():
    out = subprocess.run([sys.executable, "-c", _FILTERED], capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    assert "is_gradient_checkpointing" not in text and "`gradient_checkpointing` is deprecated and" not in text
    assert "a real deprecation the user must see" in text and "pin_memory" not in text
    assert "said by the user's own code" in text  # same words, another category: not filtered
    assert "Setting accelerator to CPU" not in text
    assert "ZeRO stage 3 gathers parameters" in text
    assert "datasets bars: 1" in text


def test_a_users_choice_of_progress_bars_wins():
    code = "import os; from judgetrain.noise import quiet_libraries; quiet_libraries(); print(os.environ['HF_DATASETS_DISABLE_PROGRESS_BARS'])"
    env = {"HF_DATASETS_DISABLE_PROGRESS_BARS": "0", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "0"


def test_importing_judgetrain_filters_nothing():
    code = "import warnings, judgetrain, judgetrain.eval, judgetrain.noise; print(len(warnings.filters))"
    bare = "import warnings; print(len(warnings.filters))"
    counts = [subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, check=True).stdout for c in (code, bare)]
    assert counts[0] == counts[1]


@pytest.mark.parametrize("prefix", [[], ["build"], ["eval"]])
def test_command_summaries_are_plain_sentences(prefix, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([*prefix, "--help"])
    assert stop.value.code == 0
    listing = capsys.readouterr().out.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    rows = listing.splitlines()
    assert len(rows) >= 7
    for row in rows:
        summary = re.split(r"\s{2,}", row.strip(), maxsplit=1)[1]
        assert "``" not in summary and not re.search(r":[a-z]+:`", summary), row
        assert summary[0].isupper() or summary in (
            "build a dataset of task records",
            "evaluate models, rebuild reports, compare runs",
        ), row
