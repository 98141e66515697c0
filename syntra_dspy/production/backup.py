"""A consistent copy of a run store, taken while ``syntra produce`` may still be writing to it.

Why: a production run on the embedded model lasts many hours, longer than a spot instance, a CI job or a
work session lives. Copying the ``.db`` file while a run writes can miss what sits in its WAL file or catch a
page half written; SQLite's online backup copies the committed state under one read transaction instead. The
copy is a standalone file (rollback journal, no ``-wal``/``-shm`` beside it), checked before it replaces
anything, and ``syntra produce --store COPY`` resumes from it on any machine: finished documents are kept and
none is done twice. A ``.gz`` destination is compressed (stores are mostly text), for keeping or moving a run;
decompress it before resuming.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from syntra_dspy.cache import sha256_file
from syntra_dspy.outputs import Protected, clash
from syntra_dspy.production.owned import run_inputs, store_files
from syntra_dspy.production.store import RunStore
from syntra_dspy.production.store_file import StoreError


@dataclass(frozen=True)
class BackupSummary:
    """What the copy holds: the documents by status, the exportable records, and the file written."""

    out: Path
    documents: dict[str, int]
    queries: int
    records: int
    bytes: int
    sha256: str

    def line(self) -> str:
        docs = self.documents
        return (f"backed up {docs['planned']} planned documents ({docs['done']} done, {docs['partial']} partial, "
                f"{docs['failed']} failed, {docs['pending']} pending), {self.queries} queries, {self.records} "
                f"records to {self.out} ({self.bytes:,} bytes, sha256 {self.sha256})")


def backup_store(store: str | Path, out: str | Path, *, overwrite: bool = False) -> BackupSummary:
    """Copy the run store ``store`` to ``out`` (gzip-compressed when ``out`` ends in ``.gz``).

    The source is opened read-only (a running producer keeps writing); the copy is written beside ``out``,
    integrity-checked and read back as a run store before it is moved into place, so a failed backup leaves
    any earlier copy untouched."""
    store, out = Path(store), Path(out)
    _check_destination(store, out, store_files(store), overwrite)  # before the store is opened, as files go
    with RunStore.open(store, readonly=True) as source:
        _check_destination(store, out, run_inputs(store, source.meta()), overwrite)  # its corpus, its artifact
        out.parent.mkdir(parents=True, exist_ok=True)
        return _copy(source, store, out)


def _check_destination(store: Path, out: Path, owned: list[Protected], overwrite: bool) -> None:
    """Refuse, before anything is written, a destination that is one of the run's own files (the store, a file
    SQLite keeps beside it such as ``-wal``, its corpus or artifact: --overwrite never allows those), an existing
    file without ``overwrite``, or a folder."""
    if out.exists() and _same_file(store, out):
        raise StoreError("the backup destination is the run store itself", path=out, hint="name another file")
    item = clash(out, owned)
    if item is not None:
        raise StoreError(f"the backup destination is the {item.label} ({item.path}); refusing to write over it, "
                         "even with --overwrite", path=out, hint="name another file, e.g. run-copy.db")
    if out.exists() and not overwrite:
        raise StoreError("the backup destination exists", path=out, hint="pass --overwrite to replace it")
    if out.is_dir():
        raise StoreError("the backup destination is a folder", path=out, hint="name a file, e.g. run-copy.db")


def _copy(source: RunStore, store: Path, out: Path) -> BackupSummary:
    """Copy, check and compress beside ``out``, then rename into place."""
    compress = out.suffix == ".gz"
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        plain = Path(tmp) / "store.db"
        problems = source.copy_to(plain)
        if problems != ["ok"]:
            raise StoreError(f"the copy failed SQLite's integrity check: {'; '.join(problems[:3])}", path=store,
                             hint="check the disk; the run store itself was only read")
        with RunStore.open(plain, readonly=True) as check:
            documents = check.document_counts()
            queries = check.scalar("SELECT count(*) FROM queries")
            records = check.count_records()
        written = plain
        if compress:
            written = Path(tmp) / "store.db.gz"
            with plain.open("rb") as src, gzip.GzipFile(written, "wb", mtime=0) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        digest = sha256_file(written)
        size = written.stat().st_size
        with written.open("rb") as f:
            os.fsync(f.fileno())
        os.replace(written, out)
    return BackupSummary(out=out, documents=documents, queries=queries, records=records, bytes=size, sha256=digest)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False

