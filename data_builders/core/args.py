"""What every ``judgetrain build *`` command takes: the fields its typed config inherits.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import arg

__all__ = ["BuildArgs", "OutputArgs", "WorkBuildArgs"]


@dataclass(kw_only=True)
class OutputArgs:
    """What every command that writes a folder takes."""

    out: Path = arg(
        help="output folder (written atomically; rerunning the same command resumes, or does nothing "
        "once built; a folder holding other work is refused)"
    )
    progress: bool = arg(True, "progress bars (--no-progress to silence them)")
    overwrite: bool = arg(
        False,
        "replace what --out holds (a build with other settings, or other files) with this build; "
        "the old build stays until the new one is complete",
    )
    wait: bool = arg(
        False,
        "when another process is writing --out, wait until it has finished instead of stopping at once (docs: concepts/identity.md)",
    )


@dataclass(kw_only=True)
class BuildArgs(OutputArgs):
    """What every ``judgetrain build *`` command takes."""

    seed: int = arg(
        42, "seed of every random choice the builder makes (hash-based: same seed, same bytes)", minimum=0, maximum=2**32 - 1
    )
    strict: bool = arg(False, "fail on the first bad input instead of skipping and counting it in build.json")


@dataclass(kw_only=True)
class WorkBuildArgs(BuildArgs):
    """Builders that keep intermediate work in ``OUT.work/`` until the build succeeds."""

    keep_work: bool = arg(False, "keep OUT.work/ (synthetic sources, decoded frames, arrow cache) after a successful build")
