"""``syntra backup``: a copy taken while a producer holds the store is complete, standalone and resumes exactly
like the original; a failed or refused backup writes nothing."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.production import RunStore, StoreError, backup_store, export_records, produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import mini_artifact, rows


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


def run(mini, minilm, store, brain, docs):
    art, index = mini
    return produce(art, store, generator=scripted_lm(brain), index_dir=index, encoder=minilm, progress=False,
                   docs=docs, queries_per_doc=2, top_k=6, chunk_size=3, concurrency=2)


@pytest.fixture(scope="module")
def three(mini, minilm, tmp_path_factory):
    """A run store with 3 of its documents produced."""
    store = tmp_path_factory.mktemp("three") / "run.db"
    run(mini, minilm, store, SyntraBrain(), docs=3)
    return store


def records(store: Path, out: Path) -> bytes:
    export_records(store, out)
    return out.read_bytes()


def test_a_copy_taken_while_a_producer_writes_holds_what_it_committed_and_resumes_like_the_original(
        three, mini, minilm, tmp_path):
    original = tmp_path / "run.db"
    shutil.copy(three, original)
    with RunStore.open(original) as writer:  # a producer holds the lock; its latest commit sits in the WAL
        session = writer.begin_session(concurrency=1, generator={"model": "still-running"}, options={})
        assert Path(f"{original}-wal").stat().st_size > 0
        summary = backup_store(original, tmp_path / "elsewhere" / "copy.db")
    copy = tmp_path / "elsewhere" / "copy.db"
    assert summary.out == copy and summary.bytes == copy.stat().st_size
    assert summary.documents["planned"] == 3 and summary.documents["pending"] == 0
    assert summary.records > 0
    assert session in [r[0] for r in rows(copy, "SELECT id FROM sessions")]
    assert rows(copy, "PRAGMA journal_mode") == [("delete",)]
    assert not Path(f"{copy}-wal").exists()

    assert records(copy, tmp_path / "copy.jsonl") == records(original, tmp_path / "original.jsonl")
    # both go on to 5 documents: the copy has the same work left, and the same records come out
    left = {}
    for name, store in (("original", original), ("copy", copy)):
        brain = SyntraBrain()
        summary_more = run(mini, minilm, store, brain, docs=5)
        left[name] = (summary_more.processed, brain.calls["extract"])
        records(store, tmp_path / f"{name}-5.jsonl")
    assert left["original"] == left["copy"] == (2, 2)
    assert (tmp_path / "copy-5.jsonl").read_bytes() == (tmp_path / "original-5.jsonl").read_bytes()


def test_a_gzip_copy_is_reproducible_and_decompresses_to_a_run_store(three, tmp_path):
    first = backup_store(three, tmp_path / "a.db.gz")
    second = backup_store(three, tmp_path / "b.db.gz")
    assert first.sha256 == second.sha256 and first.records == second.records
    plain = tmp_path / "a.db"
    plain.write_bytes(gzip.decompress((tmp_path / "a.db.gz").read_bytes()))
    assert records(plain, tmp_path / "a.jsonl") == records(three, tmp_path / "three.jsonl")


def test_a_refused_backup_writes_nothing_and_leaves_an_earlier_copy(three, tmp_path):
    earlier = tmp_path / "copy.db"
    earlier.write_bytes(b"an earlier copy")
    with pytest.raises(StoreError, match="exists.*--overwrite"):
        backup_store(three, earlier)
    assert earlier.read_bytes() == b"an earlier copy"

    store = tmp_path / "run.db"
    shutil.copy(three, store)
    with pytest.raises(StoreError, match="run store itself"):
        backup_store(store, store, overwrite=True)

    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    with pytest.raises(StoreError, match="not a run store"):
        backup_store(notes, tmp_path / "notes.db")
    foreign = tmp_path / "other.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="not a syntra-dspy run store"):
        backup_store(foreign, tmp_path / "other-copy.db")
    with pytest.raises(StoreError, match="not found"):
        backup_store(tmp_path / "missing.db", tmp_path / "missing-copy.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "notes.txt", "other.sqlite", "run.db"]


def test_cli_backup_prints_what_the_copy_holds(three, tmp_path, capsys):
    assert main(["backup", str(three), str(tmp_path / "copy.db"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["out"] == str(tmp_path / "copy.db") and summary["documents"]["planned"] == 3
    assert summary["records"] == RunStore.open(three, readonly=True).count_records()
    assert main(["backup", str(three), str(tmp_path / "copy.db")]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["backup", str(three), str(tmp_path / "copy.db"), "--overwrite"]) == 0
    assert "records to" in capsys.readouterr().out
