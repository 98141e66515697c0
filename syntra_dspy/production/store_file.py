"""The run store's file: checked before it is opened for writing, and held by one producer at a time.

A path given as ``--store`` may be a symlink, another program's SQLite file, a text file or a folder. The
writer resolves it to the real file, refuses anything that is not a run store before a single byte is written
(opening it for writing would switch it to WAL mode), and locks the file itself, so no second path to it and
no deleted lock file lets a second producer in. SQLite errors while writing become a StoreError that says
what to do.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

from syntra_dspy.errors import SyntraError


class StoreError(SyntraError):
    """The run store is unreadable, from another schema, locked, or was asked to do something unsafe."""


class StoreLock:
    """An exclusive ``flock`` on the database file itself (its real path, symlinks resolved).

    Locking the file, not a ``<store>.lock`` beside it, means neither a second path to the same store (a
    symlink, ``..``) nor deleting a lock file lets a second producer in. The OS drops the lock when the process
    dies, even by ``kill -9``. On Linux flock and SQLite's own (POSIX ``fcntl``) locks are independent; the
    descriptor is closed only after the writer's SQLite connection. On BSD and macOS the two kinds of lock
    interact, so there a ``<real path>.lock`` file is locked instead (symlink-proof, not deletion-proof).
    """

    def __init__(self, store: Path) -> None:
        self.store = store
        self.path = store if sys.platform.startswith("linux") else store.with_name(store.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock; one producer per store is then the user's job
            return
        fd = os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StoreError("another `syntra produce` is writing to this store", path=self.store,
                             hint="wait for it to finish, or stop it; a killed run releases the lock") from None
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def writable_path(path: Path) -> Path:
    """The real file a writer would open: symlinks resolved, and a directory or special file refused."""
    real = Path(os.path.realpath(path))
    if real.exists() and not real.is_file():
        raise StoreError("the run store path exists and is not a file", path=path,
                         hint="pass --store a file path, e.g. runs/run.db")
    return real


def probe(path: Path, *, kind: str) -> None:
    """Check, read-only, that an existing non-empty file is one of our run stores before anything writes to it
    (opening it for writing would already switch a foreign SQLite file to WAL mode). The schema version is
    left to the writer, which may know how to upgrade an older one."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        check_schema(conn, path, kind=kind)
    finally:
        conn.close()


def check_schema(conn: sqlite3.Connection, path: Path, *, kind: str, version: int | None = None) -> None:
    """Refuse a file that is not a run store of this schema (a text file, another program's SQLite file)."""
    try:
        found_version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        found_kind = None
        if "meta" in tables:
            row = conn.execute("SELECT value FROM meta WHERE key = 'kind'").fetchone()
            found_kind = json.loads(row[0]) if row else None
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise StoreError(f"not a run store: {exc}", path=path,
                         hint="pass --store a new file, or a run store written by `syntra produce`") from None
    if found_kind != kind:
        raise StoreError(f"not a syntra-dspy run store (kind={found_kind!r})", path=path,
                         hint="pass --store a new file; this one was left unchanged")
    if version is not None and found_version != version:
        raise StoreError(f"unsupported run-store schema {found_version} (this syntra-dspy reads {version})",
                         path=path, hint="use the syntra-dspy version that wrote it")


def storage_error(exc: sqlite3.Error, path: Path) -> StoreError:
    """A failed write as an error that says what happened and what to do (SQLite rolled the write back)."""
    text = str(exc)
    what = "the disk is full" if "full" in text.lower() else "the run store could not be written"
    return StoreError(f"{what} (SQLite: {text}); the document being written was not stored", path=path,
                      hint="free some space or fix the file system, then rerun the same command; "
                           "finished documents are kept")
