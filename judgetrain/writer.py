"""One writer per output folder: a lock beside the folder, held while a command writes it.

Every command that writes a folder (``build *`` and ``merge`` into ``--out``, ``eval
timecatch|judge|phasefusion`` into ``--out`` and ``eval report`` into its run, ``train`` into
``--output_dir``, and so every sweep trial) first takes that folder's writer lock with
:func:`hold`: an OS lock (``flock``, through ``filelock``) on ``.NAME.lock`` beside the
folder, which the kernel drops when the process ends however it ends (``kill -9`` too), so
nothing stale is ever left to clear. Beside the folder, not in it, because builds and merges
replace their folder whole. Who holds it (pid, host, command line, since when) is written
next to it, ``.NAME.lock.json``, and read back when a second process asks: that one stops at
once, having written nothing, with a message naming the holder and the ways out, or, asked
to wait (``--wait``), says whom it waits for and starts once the lock is free.

Taking the lock is also the first write into the folder's parent, so a parent that cannot be
written (no permission, a file where a folder should be, a read-only file system) ends here
in one :class:`FolderNotWritableError` naming the folder and the fix, never a traceback.
Docs: "concepts/identity.md".
"""

from __future__ import annotations

import atexit
import datetime as dt
import errno
import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from judgetrain.errors import UserError
from judgetrain.io import write_json

__all__ = [
    "FolderBusyError",
    "FolderNotWritableError",
    "hold",
    "held",
    "holder",
    "holder_file",
    "lock_file",
    "probe",
    "process_alive",
    "release",
    "release_all",
]


class FolderBusyError(UserError, RuntimeError):
    """Another process holds the folder's writer lock; the message names it and the ways out."""


class FolderNotWritableError(UserError, OSError):
    """The folder (or the parent it goes into) cannot be written; the message says why and the fix."""


# lock file -> [its FileLock, how many holds this process has on it]; a process re-entering a folder
# it holds (a test building twice, the quickstart's stages) counts up instead of locking itself out
_HELD: dict[str, list[Any]] = {}


def _folder(folder: str | os.PathLike) -> Path:
    """The folder as the file system has it: a relative and an absolute spelling, or a link and
    its target, are one folder with one lock (``realpath`` never raises on a link loop)."""
    return Path(os.path.realpath(folder))


def lock_file(folder: str | os.PathLike) -> Path:
    """The lock of ``folder``: ``.NAME.lock`` beside it."""
    path = _folder(folder)
    return path.with_name(f".{path.name or 'root'}.lock")


def holder_file(folder: str | os.PathLike) -> Path:
    """Where the holder of ``folder``'s lock says who it is: ``.NAME.lock.json`` beside it."""
    lock = lock_file(folder)
    return lock.with_name(lock.name + ".json")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def holder(folder: str | os.PathLike) -> dict[str, Any] | None:
    """What the process holding ``folder``'s lock wrote of itself (``pid``, ``host``, ``command``,
    ``since``), or None when nothing current is there (not written yet, or left by a process of
    this host that has ended)."""
    try:
        info = json.loads(holder_file(folder).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    if info.get("host") == socket.gethostname() and not process_alive(info["pid"]):
        return None
    return info


def _holder_words(folder: Path) -> str:
    info = holder(folder)
    if info is None:
        return "another process (it has not written who it is yet)"
    return f"process {info['pid']} on {info.get('host')}, since {info.get('since')}: {info.get('command')}"


def _busy(folder: Path, shown: str, flag: str, elsewhere: bool) -> str:
    ways = ["wait for it to finish and rerun", "add --wait to start as soon as it has finished"]
    if elsewhere:
        ways.append(f"write elsewhere ({flag} NEW_FOLDER)")
    return (
        f"{flag} {shown}: another judgetrain process is writing this folder: {_holder_words(folder)}\n"
        "Two writers would mix their files, so this one stops here, having written nothing. "
        f"Either {'; or '.join(ways)}."
    )


def _nearest(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def _unwritable(folder: Path, shown: str, flag: str, error: OSError) -> str:
    there = _nearest(folder)
    if error.errno == errno.ENOTDIR or (there.exists() and not there.is_dir()):
        why, fix = f"{there} is a file, not a folder", f"give {flag} a path under a folder (or move the file {there} away)"
    elif error.errno in (errno.EACCES, errno.EPERM):
        why, fix = (
            f"this user may not create or write files in {there} ({error.strerror})",
            f"give {flag} a folder you can write (or change the permissions of {there})",
        )
    elif error.errno == errno.EROFS:
        why, fix = f"{there} is on a read-only file system", f"give {flag} a folder on a writable file system"
    else:
        why, fix = f"creating it in {there} fails ({error.strerror or error})", f"give {flag} a folder you can write"
    return f"{flag} {shown}: cannot be written: {why}. Nothing was written; {fix}."


def _command() -> str:
    return shlex.join([Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])


def hold(folder: str | os.PathLike, *, flag: str = "--out", wait: bool = False, elsewhere: bool = True) -> None:
    """Take ``folder``'s writer lock for this process, until :func:`release` (or
    :func:`release_all`, or the process's end). Another process holding it raises
    :class:`FolderBusyError` naming it (``flag``: the option that named the folder;
    ``elsewhere``: whether writing to another folder is a way out), or, with ``wait``, a
    line on stderr says whom this one waits for and it blocks until the lock is free. A
    parent that cannot be written raises :class:`FolderNotWritableError`. A folder this
    process holds already is held once more (re-entrant)."""
    from filelock import FileLock, Timeout

    path, shown = _folder(folder), os.fspath(folder)
    key = str(lock_file(path))
    if key in _HELD:
        _HELD[key][1] += 1
        return
    try:
        if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(key, thread_local=False)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            if not wait:
                raise FolderBusyError(_busy(path, shown, flag, elsewhere)) from None
            print(f"{flag} {shown}: {_holder_words(path)} is writing it; waiting (--wait)", file=sys.stderr, flush=True)
            lock.acquire()
        try:
            since = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            write_json(
                holder_file(path), {"pid": os.getpid(), "host": socket.gethostname(), "command": _command(), "since": since}
            )
        except BaseException:
            lock.release()
            raise
    except OSError as e:  # PermissionError, NotADirectoryError, a read-only file system, ENOENT under /proc, …
        raise FolderNotWritableError(_unwritable(path, shown, flag, e)) from None
    _HELD[key] = [lock, 1]


def release(folder: str | os.PathLike) -> None:
    """Give back one hold on ``folder``'s lock; the last one frees it (the holder's note goes first,
    so a waiting process that takes the lock next never has its own note removed)."""
    key = str(lock_file(folder))
    entry = _HELD.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] > 0:
        return
    del _HELD[key]
    holder_file(folder).unlink(missing_ok=True)
    entry[0].release()


def release_all() -> None:
    """Free every lock this process holds: the end of a command run in a longer-lived process."""
    for key in list(_HELD):
        lock = _HELD.pop(key)[0]
        Path(key + ".json").unlink(missing_ok=True)
        lock.release(force=True)


atexit.register(release_all)  # the holder notes go with the process (the kernel frees the locks themselves)


@contextmanager
def held(folder: str | os.PathLike, *, flag: str = "--out", wait: bool = False, elsewhere: bool = True) -> Iterator[None]:
    """:func:`hold` for the block's duration."""
    hold(folder, flag=flag, wait=wait, elsewhere=elsewhere)
    try:
        yield
    finally:
        release(folder)


def probe(folder: str | os.PathLike, *, flag: str = "--out", wait: bool = False) -> None:
    """Check that ``folder`` can be taken now (or, with ``wait``, wait until it can) without keeping
    it: what a launcher does before starting the processes that will take it."""
    with held(folder, flag=flag, wait=wait):
        pass
