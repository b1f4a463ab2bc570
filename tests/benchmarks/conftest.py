"""The benchmark scripts (benchmarks/*.py are scripts, not a package), loaded as modules by their tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def load_benchmark():
    """``load_benchmark("bench_train")``: benchmarks/bench_train.py as a module."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
