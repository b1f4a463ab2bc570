"""Serve optuna-dashboard for a sweep's storage on this machine.

`judgetrain dashboard runs/sweeps.db` is `optuna-dashboard sqlite:///runs/sweeps.db`
with judgetrain's storage forms (a .db file, a journal file, any URL).
"""

from __future__ import annotations

import argparse
import sys


def configure_parser(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.strip().splitlines()[0]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = ("examples:\n  judgetrain dashboard runs/sweeps.db                 # then open http://127.0.0.1:8080\n"
                "  judgetrain dashboard journal:/shared/sweeps/prism.journal --port 8081\n"
                "  judgetrain dashboard postgresql://optuna@db-host/sweeps --host 0.0.0.0\n")
    p.add_argument("storage", help="sqlite .db file, journal file, or storage URL")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=8080)


def main(args: argparse.Namespace) -> int:
    from judgetrain.sweep import SweepError, dashboard_storage, storage_from_url

    try:
        storage = storage_from_url(dashboard_storage(args.storage), heartbeat_interval=None)
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        from optuna_dashboard import run_server
    except ImportError:
        print("error: optuna-dashboard is not installed: pip install 'judgetrain[dashboard]'", file=sys.stderr)
        return 2
    print(f"optuna-dashboard for {args.storage} at http://{args.host}:{args.port}/ (Ctrl-C to stop)", flush=True)
    run_server(storage, host=args.host, port=args.port)
    return 0

