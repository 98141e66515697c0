"""The files a run owns or reads, which no command may write over: the run store and every file SQLite keeps
beside it, the corpus and the artifact the run was produced from.

One answer for every command that writes (``export``, ``backup``, ``index --out``): SQLite keeps a run's
committed-but-not-checkpointed documents in ``RUN.db-wal``, so replacing that file while ``produce`` runs, or
before its next checkpoint, loses them as surely as replacing ``RUN.db`` itself.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syntra_dspy.outputs import Protected

#: Files SQLite (and, off Linux, the producer's lock) keeps beside a run store.
COMPANION_SUFFIXES = ("-wal", "-shm", "-journal", ".lock")
_SQLITE_HEADER = b"SQLite format 3\x00"


def store_files(store: Path) -> list[Protected]:
    """The run store and its companion files, beside the path given and beside its real file (SQLite names its
    WAL after the resolved path, so a store reached through a symlink keeps it beside the target)."""
    items = [Protected("run store", store)]
    places = dict.fromkeys([store, Path(os.path.realpath(store))])
    for place in places:
        items += [Protected("run store's companion file", place.with_name(place.name + suffix))
                  for suffix in COMPANION_SUFFIXES]
    return items


def run_inputs(store: Path, meta: dict[str, Any]) -> list[Protected]:
    """What a command reading the run store ``store`` (with its ``meta``) must never replace: the store and its
    companions, the corpus (by path and by content) and the artifact."""
    items = store_files(store)
    items += _corpus(store, meta.get("settings", {}).get("corpus") or {})
    artifact = meta.get("artifact", {}).get("path")
    if artifact:
        items.append(Protected("artifact of this run", Path(artifact)))
    return items


def _corpus(store: Path, record: dict[str, Any]) -> list[Protected]:
    """The corpus a run read. Stores record it as an absolute path; older ones as given to ``produce``, relative
    to a folder they did not record: those are taken relative to the current folder and to the store's. Either
    way a file holding the same documents (the recorded fingerprint) is the corpus too: it may have moved."""
    recorded, fingerprint = record.get("path"), record.get("fingerprint")
    if not isinstance(recorded, str) or not recorded or recorded.startswith("<"):  # "<memory>": no file
        return []
    path = Path(recorded)
    places = [path] if path.is_absolute() else list(dict.fromkeys([Path.cwd() / path, store.parent / path]))
    same = _same_documents(fingerprint) if isinstance(fingerprint, str) else None
    return [Protected("corpus of this run", place, same_content=same if i == 0 else None)  # read a file once
            for i, place in enumerate(places)]


def _same_documents(fingerprint: str) -> Callable[[Path], bool]:
    """A check that a file holds the corpus with this fingerprint, in any corpus format. Files that are not a
    corpus (an earlier export, a database) fail to parse on their first line, so this is cheap for them."""

    def check(path: Path) -> bool:
        from syntra_dspy.errors import SyntraError
        from syntra_dspy.retrieval.corpus import FORMATS, read_corpus

        for fmt in FORMATS:
            try:
                if read_corpus(path, fmt).fingerprint == fingerprint:
                    return True
            except (SyntraError, OSError, ValueError):
                continue
        return False

    return check


def run_store_behind(path: Path) -> Path | None:
    """The run store ``path`` is, or is a companion file of (``RUN.db-wal`` ...), or None: a file no other
    command's output may replace."""
    candidates = [path] + [path.with_name(path.name[:-len(s)]) for s in COMPANION_SUFFIXES
                           if path.name.endswith(s) and len(path.name) > len(s)]
    for candidate in candidates:
        if _is_run_store(candidate):
            return candidate
    return None


def _is_run_store(path: Path) -> bool:
    """True for an existing run store (read-only check; a foreign SQLite file or any other file is not)."""
    from syntra_dspy.production.store import KIND
    from syntra_dspy.production.store_file import StoreError, probe

    try:
        if not path.is_file():
            return False
        with path.open("rb") as fh:
            if fh.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                return False
        probe(path, kind=KIND)
    except (OSError, sqlite3.Error, StoreError):
        return False
    return True
