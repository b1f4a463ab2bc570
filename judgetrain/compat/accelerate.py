"""What judgetrain relies on in accelerate beyond its documented API, each reliance with a
contract test in ``tests/compat/test_accelerate.py`` that fails naming it when a release changes
it. Where a release no longer offers it, these raise
:class:`~judgetrain.compat.versions.UpstreamChanged`.
Docs: "get-started/install.md".
"""

from __future__ import annotations

from pathlib import Path

from .versions import UpstreamChanged

__all__ = ["default_config_file", "launch", "launch_command"]

LIBRARY = "accelerate"


def launch(argv: list[str]) -> None:
    """Run ``accelerate launch ARGV`` in this process, as the ``accelerate`` command does
    (``accelerate.commands.launch``: ``launch_command_parser`` then ``launch_command``). A
    failed training process raises ``subprocess.CalledProcessError`` (one process) or torch's
    ``ChildFailedError`` (several)."""
    try:
        from accelerate.commands.launch import launch_command, launch_command_parser
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY,
            "accelerate.commands.launch.launch_command / launch_command_parser",
            "start `judgetrain train`'s processes as `accelerate launch` does",
            str(e),
        ) from None
    launch_command(launch_command_parser().parse_args(argv))


def default_config_file() -> Path:
    """Where ``accelerate config`` writes the config ``accelerate launch`` reads when none is
    named (``accelerate.commands.config.default_config_file``)."""
    try:
        from accelerate.commands import config
    except ImportError as e:
        raise UpstreamChanged(
            LIBRARY, "accelerate.commands.config", "find the accelerate config a launch reads", str(e)
        ) from None
    if not hasattr(config, "default_config_file"):
        raise UpstreamChanged(
            LIBRARY, "accelerate.commands.config.default_config_file", "find the accelerate config a launch reads"
        )
    return Path(config.default_config_file)


def launch_command() -> list[str]:
    """The command line that runs ``accelerate launch`` in a new process with this interpreter
    (``[python, "-m", MODULE]``; append the launch's arguments): MODULE is the module of
    accelerate's own ``accelerate-launch`` console script (its entry point,
    ``accelerate.commands.launch:main``), which also runs as ``python -m`` (its ``__main__``
    guard calls ``main``). The console script itself may not be on ``PATH``, or be another
    environment's; nothing is imported here (importing accelerate loads torch)."""
    import sys
    from importlib.metadata import entry_points

    found = [e for e in entry_points(group="console_scripts", name="accelerate-launch") if e.dist and e.dist.name == LIBRARY]
    if not found or found[0].attr != "main":
        raise UpstreamChanged(
            LIBRARY,
            "the accelerate-launch console script (accelerate.commands.launch:main)",
            "run each sweep trial as `accelerate launch` in a fresh process",
        )
    return [sys.executable, "-m", found[0].module]
