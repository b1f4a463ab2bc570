"""Which upstream releases are installed, how they differ from the lock, and the error that
names an upstream change.

``python -m judgetrain.compat.versions --lock requirements/lock.txt`` prints every package
whose installed version differs from the lock (what ``make test-latest`` runs before its
tests, so a failure can be read against the releases that changed).
Docs: "get-started/install.md".
"""

from __future__ import annotations

import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["UpstreamChanged", "installed_version", "lock_differences", "main"]


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``"transformers"``), or ``"not installed"``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


class UpstreamChanged(RuntimeError):
    """An upstream release no longer offers what judgetrain relies on.

    ``library`` is the distribution (``"transformers"``), ``relied_on`` names the thing
    (``"Trainer.save_model(_internal_call=...)"``) and ``purpose`` what judgetrain does with
    it; the message adds the installed version and what to do."""

    def __init__(self, library: str, relied_on: str, purpose: str, detail: str = ""):
        self.library, self.relied_on, self.purpose = library, relied_on, purpose
        version = installed_version(library)
        super().__init__(
            f"{library} {version} no longer offers {relied_on}, which judgetrain relies on to {purpose}"
            + (f" ({detail})" if detail else "")
            + f". Install the version requirements/lock.txt pins (make setup), or a judgetrain that supports {library} {version}."
        )


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path) -> dict[str, str]:
    """``{canonical name: version}`` of every ``name==version`` line of a pip-compile lock."""
    pins = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if m := _PIN.match(line.strip()):
            pins[_canonical(m.group(1))] = m.group(2)
    return pins


def lock_differences(lock: str | Path) -> list[tuple[str, str, str]]:
    """``(name, locked, installed)`` for every locked package installed at another version
    (``"not installed"`` when absent), sorted by name."""
    found = []
    for name, locked in sorted(read_lock(lock).items()):
        now = installed_version(name)
        if now != locked:
            found.append((name, locked, now))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m judgetrain.compat.versions",
        description="Print every package whose installed version differs from the lock.",
        epilog="example: python -m judgetrain.compat.versions --lock requirements/lock.txt",
    )
    parser.add_argument("--lock", required=True, help="a pip-compile lock file (requirements/lock.txt)")
    args = parser.parse_args(argv)
    differences = lock_differences(args.lock)
    if not differences:
        print(f"every package is installed at the version {args.lock} pins")
        return 0
    width = max(len(name) for name, _, _ in differences)
    print(f"installed versions that differ from {args.lock} ({len(differences)}):")
    for name, locked, now in differences:
        print(f"  {name:<{width}}  {locked} -> {now}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
