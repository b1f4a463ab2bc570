"""Where a study lives: an Optuna storage from a URL, with its schema created one process at a
time, and a lock under which a controller reads and records what defines a study (whether a
trial's process still runs is :func:`judgetrain.writer.process_alive`).

``sqlite:///path.db`` (one machine), ``postgresql://…`` / ``mysql://…`` (many machines),
``journal:path`` or a ``*.journal`` / ``*.log`` file (a journal file on a shared file system).
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import hashlib
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .space import SweepError

__all__ = ["DEFAULT_STORAGE", "SCHEMA_LOCK_KEY", "schema_lock", "storage_from_url", "study_lock"]

DEFAULT_STORAGE = "sqlite:///runs/sweeps.db"
# the PostgreSQL advisory-lock key of schema_lock: the first 8 bytes of sha256("judgetrain optuna schema")
SCHEMA_LOCK_KEY = int.from_bytes(hashlib.sha256(b"judgetrain optuna schema").digest()[:8], "big", signed=True)


def storage_from_url(url: str, *, heartbeat_interval: int | None = 60, retries: int = 0):
    """An Optuna storage for ``url`` (the module docstring lists the forms)."""
    import optuna

    path = _journal(url)
    if path is not None:
        from optuna.storages.journal import JournalFileBackend

        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    if "://" not in url:
        raise SweepError(
            f"--storage {url!r}: give sqlite:///runs/sweeps.db, postgresql://user@host/db, mysql://…, "
            "or journal:path/to/study.journal"
        )
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {}
    if heartbeat_interval:
        from optuna.storages import RetryHeartbeatStaleTrialCallback

        # a deliberate use (the heartbeat fails a dead controller's trials): Optuna's note that the argument is
        # experimental is for whoever chose it, here, not the user of the sweep
        warnings.filterwarnings(
            "ignore", r"Argument ``(heartbeat_interval|grace_period)`` is an experimental", optuna.exceptions.ExperimentalWarning
        )
        kwargs.update(
            heartbeat_interval=heartbeat_interval,
            grace_period=2 * heartbeat_interval,
            heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=retries) if retries else None,
        )
    try:
        with schema_lock(url):
            return optuna.storages.RDBStorage(url, **kwargs)
    except ImportError as e:  # the database driver
        raise SweepError(
            f"--storage {url.split('://')[0]}://…: {e}. PostgreSQL needs `pip install judgetrain[postgres]` "
            "(psycopg 3; `postgresql+psycopg2://` URLs use psycopg2 if you have it); MySQL needs a driver such as PyMySQL"
        ) from None


def _journal(url: str) -> Path | None:
    """The journal file of a journal storage URL, ``None`` for a database URL."""
    if url.startswith("journal:") or url.endswith((".journal", ".log")):
        return Path(url.removeprefix("journal:"))
    return None


@contextmanager
def study_lock(url: str):
    """Hold a lock that every judgetrain controller of a study in ``url`` takes while it reads
    and records what defines the study, so that two controllers opening a new study at the
    same moment with other settings cannot both find it undefined and both record their own:
    a journal file's lock is ``JOURNAL.judgetrain-lock`` (``filelock``; Optuna's own is
    ``JOURNAL.lock``), a database's is :func:`schema_lock`'s."""
    path = _journal(url)
    if path is None:
        with schema_lock(url):
            yield
        return
    from filelock import FileLock

    with FileLock(path.with_name(path.name + ".judgetrain-lock")):
        yield


@contextmanager
def schema_lock(url: str):
    """Hold a lock that every judgetrain process opening ``url`` takes while Optuna creates
    and stamps its schema. Controllers started at the same moment on an empty database
    would otherwise race: both create the tables, and the second to stamp Optuna's
    alembic version fails (``UNIQUE constraint failed: alembic_version``). SQLite takes a
    file lock (``filelock``: ``flock`` on ``DB.lock`` beside the file); PostgreSQL and MySQL take
    a named server-side lock (``pg_advisory_lock`` / ``GET_LOCK``) on a connection of their own."""
    import sqlalchemy

    backend = sqlalchemy.engine.make_url(url).get_backend_name()
    if backend == "sqlite":
        db = sqlalchemy.engine.make_url(url).database
        if not db or db == ":memory:":
            yield
            return
        from filelock import FileLock

        lock = FileLock(Path(db).expanduser().with_name(Path(db).name + ".lock"))
        try:
            lock.acquire()
        except OSError:  # a folder this user cannot write: reading a study, never creating a schema
            yield
            return
        try:
            yield
        finally:
            lock.release()
        return
    statements = {
        "postgresql": (f"SELECT pg_advisory_lock({SCHEMA_LOCK_KEY})", f"SELECT pg_advisory_unlock({SCHEMA_LOCK_KEY})"),
        "mysql": ("SELECT GET_LOCK('judgetrain_optuna_schema', 600)", "SELECT RELEASE_LOCK('judgetrain_optuna_schema')"),
    }
    if backend not in statements:
        yield
        return
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    take, release = statements[backend]
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text(take))
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text(release))
    finally:
        engine.dispose()
