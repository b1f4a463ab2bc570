"""Serve optuna-dashboard for a sweep's storage on this machine.

`judgetrain dashboard runs/sweeps.db` is `optuna-dashboard sqlite:///runs/sweeps.db`
with judgetrain's storage forms (a .db file, a journal file, any URL).
Docs: "reference/commands/dashboard.md", "how-to/sweeps.md".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import arg

from .space import SweepError

__all__ = ["DashboardConfig", "dashboard_storage", "main", "make_parser"]


@dataclass
class DashboardConfig:
    """``judgetrain dashboard``'s options."""

    storage: str = arg(
        help="sqlite .db file, journal file, or storage URL; the first word: `judgetrain dashboard STORAGE`", positional=True
    )
    host: str = arg("127.0.0.1", "address to listen on (127.0.0.1: this machine only)")
    port: int = arg(8080, "port to listen on", minimum=1, maximum=65535)


def dashboard_storage(target: str) -> str:
    """A dashboard argument (URL, ``.db`` file or journal file) as a storage URL."""
    if "://" in target or target.startswith("journal:"):
        return target
    if target.endswith((".journal", ".log")):
        return f"journal:{target}"
    if not Path(target).is_file():
        raise SweepError(
            f"{target}: no such database file; give a storage URL (sqlite:///…, postgresql://…) or a .db/.journal file"
        )
    return f"sqlite:///{target}"


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        DashboardConfig,
        "judgetrain dashboard",
        __doc__.strip().splitlines()[0],
        "examples:\n  judgetrain dashboard runs/sweeps.db                 # then open http://127.0.0.1:8080\n"
        "  judgetrain dashboard journal:runs/sweeps.journal --port 8081\n"
        "  judgetrain dashboard sqlite:///runs/sweeps.db --host 0.0.0.0 --port 8082   # reachable from other machines\n"
        "\nSTORAGE: a SQLite file, journal:FILE, or any database URL a sweep's --storage takes (postgresql://…).\n",
        usage="judgetrain dashboard STORAGE [--host HOST] [--port PORT]",
    )


def main(cfg: DashboardConfig) -> int:
    from .storage import storage_from_url

    storage = storage_from_url(dashboard_storage(cfg.storage), heartbeat_interval=None)  # SweepError: the CLI prints it
    try:
        from optuna_dashboard import run_server
    except ImportError:
        print("error: optuna-dashboard is not installed: pip install 'judgetrain[dashboard]'", file=sys.stderr)
        return 2
    print(f"optuna-dashboard for {cfg.storage} at http://{cfg.host}:{cfg.port}/ (Ctrl-C to stop)", flush=True)
    run_server(storage, host=cfg.host, port=cfg.port)
    return 0
