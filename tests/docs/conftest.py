"""What the documentation-site tests share: the site built once with ``mkdocs build --strict``
(the mkdocs next to this Python) into a temporary folder, and one headless Chromium (Selenium)
to open it from disk."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browsers import start_chromium

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SiteBuild:
    """One ``mkdocs build --strict``: where it wrote, its exit status, what it printed (stdout and
    stderr together) and the WARNING lines among that."""

    site: Path
    returncode: int
    output: str

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.output.splitlines() if line.startswith("WARNING")]

    def require_clean(self) -> Path:
        """The site folder, or the test fails with what the build printed."""
        if self.returncode != 0 or self.warnings:
            pytest.fail(f"mkdocs build --strict exited {self.returncode}:\n{self.output}", pytrace=False)
        return self.site


def mkdocs() -> Path:
    """The ``mkdocs`` of this environment (installed with the test extra, beside ``sys.executable``)."""
    exe = Path(sys.executable).parent / "mkdocs"
    if not exe.exists():
        pytest.fail(f"no {exe}: mkdocs comes with the test extra (pip install -e '.[test]')", pytrace=False)
    return exe


@pytest.fixture(scope="session")
def site_build(tmp_path_factory) -> SiteBuild:
    """The documentation site as ``make docs`` builds it (mkdocs.yml and docs/ of this checkout), into a
    temporary folder; built once for the session."""
    site = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [str(mkdocs()), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return SiteBuild(site, done.returncode, done.stdout)


@pytest.fixture(scope="module")
def offline_browser():
    """One headless Chromium for the module's tests that resolves no host name: what the site
    needs must come from disk (a remote stylesheet or script fails at once, as it would offline)."""
    driver = start_chromium("--host-resolver-rules=MAP * ~NOTFOUND")
    yield driver
    driver.quit()
