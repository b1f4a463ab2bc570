"""judgetrain.lazy: a package face built with ``attach`` (lazy_loader underneath) imports a module
when one of its names is first read, never before, and refuses a face that names one thing twice."""

from __future__ import annotations

import importlib
import sys

import pytest

from judgetrain.lazy import attach


def _package(tmp_path, monkeypatch, name: str, face: str) -> None:
    """A package ``name`` on sys.path whose ``__init__`` is ``face``, with modules ``heavy`` and ``light``."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "__init__.py").write_text("from judgetrain.lazy import attach\n" + face)
    for module in ("heavy", "light"):
        (folder / f"{module}.py").write_text(f"def {module}_fn():\n    return {module!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("EAGER_IMPORT", raising=False)  # lazy_loader's switch to import everything up front


def _imported(name: str) -> list[str]:
    return sorted(k.split(".")[1] for k in sys.modules if k.startswith(name + "."))


FACE = '__getattr__, __dir__, __all__ = attach(__name__, {"heavy": ["heavy_fn"], "light": ["light_fn"]})\n'


def test_a_name_imports_its_module_on_first_read_and_only_it(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "lazy_face_a", FACE)
    pkg = importlib.import_module("lazy_face_a")
    assert _imported("lazy_face_a") == [] and pkg.__all__ == dir(pkg) == ["heavy_fn", "light_fn"]  # names, not modules
    assert pkg.light_fn() == "light" and _imported("lazy_face_a") == ["light"]
    assert "light_fn" in vars(pkg)  # kept in the package: a second read does not go through __getattr__
    assert pkg.heavy.__name__ == "lazy_face_a.heavy" and _imported("lazy_face_a") == ["heavy", "light"]  # a module
    with pytest.raises(AttributeError):
        pkg.missing  # noqa: B018


def test_import_star_gives_the_names_and_no_module(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "lazy_face_b", FACE)
    namespace: dict = {}
    exec("from lazy_face_b import *", namespace)  # noqa: S102
    assert sorted(k for k in namespace if not k.startswith("__")) == ["heavy_fn", "light_fn"]
    assert namespace["heavy_fn"]() == "heavy"


def test_a_name_under_two_modules_or_named_like_a_module_is_refused():
    with pytest.raises(ValueError, match="names listed under two modules: run"):
        attach("pkg", {"a": ["run", "x"], "b": ["run"]})
    with pytest.raises(ValueError, match="names that are also modules of the package: report"):
        attach("pkg", {"report": ["render"], "core": ["report"]})
