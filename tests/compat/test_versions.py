"""The locked install: requirements/lock.txt covers every requirement pyproject.toml declares
(so a changed range cannot go unlocked), pins torch as requirements/torch.in says, and the
version report of ``make test-latest`` names what differs from it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

from judgetrain.compat.versions import UpstreamChanged, lock_differences, read_lock

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements" / "lock.txt"


def _declared() -> list[Requirement]:
    """Every requirement of the package and of the extras `make setup` installs (test pulls in the others)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    found = [Requirement(r) for r in project["dependencies"]]
    for name in extras:
        found += [Requirement(r) for r in extras[name] if not r.startswith("judgetrain[")]
    return found


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_lock_pins_every_declared_requirement_within_its_range():
    pins = read_lock(LOCK)
    problems = []
    for req in _declared():
        version = pins.get(_canonical(req.name))
        if version is None:
            problems.append(f"{req}: not in {LOCK.name}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req}: the lock pins {version}")
    assert not problems, "pyproject.toml changed without `make lock`:\n" + "\n".join(problems)


def test_lock_pins_torch_as_torch_in_says():
    pins = read_lock(LOCK)
    for line in (REPO / "requirements" / "torch.in").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.strip().split("==")
            assert pins[name] == version, (name, pins[name], version)


def test_version_report_names_each_difference(tmp_path):
    import pytest as installed

    lock = tmp_path / "lock.txt"
    lock.write_text(f"pytest==0.0.1\n    # via judgetrain\nno-such-dist-judgetrain==1.0\npackaging=={_packaging()}\n",
                    encoding="utf-8")
    assert lock_differences(lock) == [("no-such-dist-judgetrain", "1.0", "not installed"),
                                      ("pytest", "0.0.1", installed.__version__)]
    out = subprocess.run([sys.executable, "-m", "judgetrain.compat.versions", "--lock", str(lock)],
                         capture_output=True, text=True, check=True).stdout
    assert "differ from" in out and re.search(rf"pytest +0\.0\.1 -> {re.escape(installed.__version__)}\n", out), out
    assert "packaging" not in out


def _packaging() -> str:
    from importlib.metadata import version

    return version("packaging")


def test_upstream_changed_names_library_version_and_what_is_missing():
    from importlib.metadata import version

    err = UpstreamChanged("transformers", "Trainer.save_model(_internal_call=...)", "write the model card into checkpoints")
    text = str(err)
    assert text.startswith(f"transformers {version('transformers')} no longer offers Trainer.save_model(_internal_call=...)")
    assert "write the model card into checkpoints" in text and err.library == "transformers"


def test_the_docs_name_the_versions_the_lock_pins():
    """The "Tested with" line (docs/get-started/install.md, "Upstream versions"; README.md too while it
    has one) cannot drift from the lock a `make lock` rewrites."""
    pages = [p for p in ("README.md", "docs/get-started/install.md") if "Tested with" in (REPO / p).read_text(encoding="utf-8")]
    assert "docs/get-started/install.md" in pages, 'docs/get-started/install.md: no "Tested with" line'
    for page in pages:
        _check_tested_with(page)


def _check_tested_with(page: str) -> None:
    text = " ".join((REPO / page).read_text(encoding="utf-8").split())
    line = re.search(r"Tested with \(the lock of [0-9-]+\): (.*?)\.(?: |$)", text)
    assert line, f"{page}: no 'Tested with (the lock of DATE): …' line under \"Upstream versions\""
    pins = read_lock(LOCK)
    named = re.findall(r"([A-Za-z]+) ([0-9][0-9.]*[0-9])", line.group(1))
    assert len(named) >= 8, (page, named)
    assert {name: version for name, version in named} == {name: pins[_canonical(name)] for name, _ in named}
