"""`--collective_timeout` of the data-parallel evaluations: 600 s unless given (training's
`ddp_timeout` is 1800), a positive number, and not part of a run's identity (it changes how
long a hung machine holds the job, not the results). Its effect on a process group is the
training's (tests/train/test_multinode.py, a hung node)."""

from __future__ import annotations

import importlib

import pytest

from judgetrain import config
from judgetrain.config import ConfigError


@pytest.mark.parametrize("name", ["timecatch", "judge", "phasefusion"])
def test_collective_timeout_defaults_short_and_stays_out_of_the_identity(name, tmp_path):
    command = importlib.import_module(f"judgetrain.eval.{name}.command")
    needed = {"timecatch": ["--data", str(tmp_path)], "judge": ["--data", str(tmp_path)],
              "phasefusion": ["--manifest", str(tmp_path / "m.jsonl")]}[name]
    base = ["--model", "m", "--out", str(tmp_path / "out"), *needed]
    (default,) = config.parse(command.make_parser(), base)
    (given,) = config.parse(command.make_parser(), [*base, "--collective_timeout", "30"])
    assert (default.collective_timeout, given.collective_timeout) == (600, 30)
    assert "collective_timeout" not in config.identity(given)
    assert config.identity(given) == config.identity(default)
    with pytest.raises((ConfigError, SystemExit)):
        config.parse(command.make_parser(), [*base, "--collective_timeout", "0"])
