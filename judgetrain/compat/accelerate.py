"""What judgetrain relies on in accelerate beyond its documented API, each reliance with a
contract test in ``tests/compat/test_accelerate.py`` that fails naming it when a release changes
it. Where a release no longer offers it, these raise
:class:`~judgetrain.compat.versions.UpstreamChanged`.
README: "Upstream versions".
"""

from __future__ import annotations

from pathlib import Path

from .versions import UpstreamChanged

__all__ = ["default_config_file", "launch"]

LIBRARY = "accelerate"


def launch(argv: list[str]) -> None:
    """Run ``accelerate launch ARGV`` in this process, as the ``accelerate`` command does
    (``accelerate.commands.launch``: ``launch_command_parser`` then ``launch_command``). A
    failed training process raises ``subprocess.CalledProcessError`` (one process) or torch's
    ``ChildFailedError`` (several)."""
    try:
        from accelerate.commands.launch import launch_command, launch_command_parser
    except ImportError as e:
        raise UpstreamChanged(LIBRARY, "accelerate.commands.launch.launch_command / launch_command_parser",
                              "start `judgetrain train`'s processes as `accelerate launch` does", str(e)) from None
    launch_command(launch_command_parser().parse_args(argv))


def default_config_file() -> Path:
    """Where ``accelerate config`` writes the config ``accelerate launch`` reads when none is
    named (``accelerate.commands.config.default_config_file``)."""
    try:
        from accelerate.commands import config
    except ImportError as e:
        raise UpstreamChanged(LIBRARY, "accelerate.commands.config", "find the accelerate config a launch reads",
                              str(e)) from None
    if not hasattr(config, "default_config_file"):
        raise UpstreamChanged(LIBRARY, "accelerate.commands.config.default_config_file",
                              "find the accelerate config a launch reads")
    return Path(config.default_config_file)
