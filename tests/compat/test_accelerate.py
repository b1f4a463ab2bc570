"""Contracts with accelerate (judgetrain.compat.accelerate): what judgetrain relies on, run through
accelerate's real launcher, failing naming accelerate and the name it relies on."""

from __future__ import annotations

import contextlib
import subprocess
import zipfile

import pytest

from judgetrain.compat import accelerate as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming accelerate, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, ImportError, TypeError, UpstreamChanged) as e:
        pytest.fail(f"accelerate {installed_version('accelerate')} changed {name}, which judgetrain relies on: "
                    f"{type(e).__name__}: {e}")


def test_launch_runs_a_module_as_accelerate_launch_does(tmp_path, monkeypatch):
    """launch: ``accelerate launch … -m MODULE ARGS`` in this process runs the module to the end
    and raises CalledProcessError for one that fails (what `judgetrain train` reports)."""
    config = tmp_path / "cpu.yaml"
    config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n"
                      "mixed_precision: 'no'\n")
    (tmp_path / "a.txt").write_text("judgetrain")
    monkeypatch.chdir(tmp_path)
    options = ["--config_file", str(config), "--num_processes", "1"]
    with relied_on("accelerate.commands.launch.launch_command / launch_command_parser"):
        compat.launch([*options, "-m", "zipfile", "-c", "out.zip", "a.txt"])
        assert zipfile.ZipFile(tmp_path / "out.zip").namelist() == ["a.txt"]
        with pytest.raises(subprocess.CalledProcessError):
            compat.launch([*options, "-m", "zipfile", "-t", "missing.zip"])


def test_the_default_config_file_is_the_one_accelerate_launch_reads():
    """default_config_file: the file `accelerate config` writes and `accelerate launch` reads
    when no --config_file is named (what `judgetrain train` counts processes from)."""
    import importlib
    from pathlib import Path

    with relied_on("accelerate.commands.config.default_config_file"):
        path = compat.default_config_file()
        assert path.name in ("default_config.yaml", "default_config.json") and path.parent.name == "accelerate"
        assert Path(importlib.import_module("accelerate.commands.launch").default_config_file) == path


def test_a_removed_launcher_is_named(monkeypatch):
    import importlib

    monkeypatch.delattr(importlib.import_module("accelerate.commands.launch"), "launch_command")
    with pytest.raises(UpstreamChanged, match=r"^accelerate \S+ no longer offers accelerate\.commands\.launch\.launch_command"):
        compat.launch(["-m", "zipfile"])


def test_the_launch_command_runs_accelerate_launch_in_a_new_process(tmp_path):
    """launch_command: ``python -m MODULE`` of accelerate's own accelerate-launch entry point is
    `accelerate launch` in a fresh process, run by this interpreter (each sweep trial's launch):
    it runs a module to the end, and fails with the module's exit code."""
    import sys

    config = tmp_path / "cpu.yaml"
    config.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\nuse_cpu: true\n"
                      "mixed_precision: 'no'\n")
    (tmp_path / "a.txt").write_text("judgetrain")
    with relied_on("the accelerate-launch entry point's module (accelerate.commands.launch) run as python -m"):
        command = compat.launch_command()
        assert command[:2] == [sys.executable, "-m"]
        options = ["--config_file", str(config), "--num_processes", "1"]
        done = subprocess.run([*command, *options, "-m", "zipfile", "-c", "out.zip", "a.txt"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert zipfile.ZipFile(tmp_path / "out.zip").namelist() == ["a.txt"]
        failed = subprocess.run([*command, *options, "-m", "zipfile", "-t", "missing.zip"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)
        assert failed.returncode != 0


def test_a_missing_launch_entry_point_is_named(monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])
    with pytest.raises(UpstreamChanged, match=r"^accelerate \S+ no longer offers the accelerate-launch console script"):
        compat.launch_command()
