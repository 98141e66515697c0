"""The run store: a foreign file is refused before anything is written to it, the single-writer lock cannot
be sidestepped, and a full disk is a clear error that leaves the store intact."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.production import RunStore, StoreError, produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from reliability.conftest import SMALL


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_foreign_sqlite_file_is_refused_before_it_is_switched_to_wal(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (text TEXT)")
    conn.execute("INSERT INTO notes VALUES ('mine')")
    conn.commit()
    conn.close()
    before = digest(path)
    with pytest.raises(StoreError, match="not a syntra-dspy run store"):
        RunStore.open(path)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal, -shm or .lock appeared
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


@pytest.mark.parametrize("readonly", [False, True])
def test_store_that_is_a_text_file_is_a_clear_error(tmp_path, readonly):
    path = tmp_path / "run.db"
    path.write_text("not a database\n" * 100, encoding="utf-8")
    with pytest.raises(StoreError, match="not a run store"):
        RunStore.open(path, readonly=readonly)
    assert path.read_text(encoding="utf-8") == "not a database\n" * 100


def test_produce_into_a_text_file_store_is_a_clear_cli_error(mini, tmp_path, capsys):
    art, index = mini
    path = tmp_path / "run.db"
    path.write_text("notes\n", encoding="utf-8")
    code = main(["produce", str(art), "--store", str(path), "--generator", "hosted_vllm/x@http://127.0.0.1:9/v1",
                 "--index-dir", str(index), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "not a run store" in err and "Traceback" not in err
    assert path.read_text(encoding="utf-8") == "notes\n"


def test_store_that_is_a_directory_is_a_clear_error(tmp_path):
    folder = tmp_path / "run.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="not a file"):
        RunStore.open(folder)


def test_store_lock_holds_through_a_symlinked_path(tmp_path):
    real = tmp_path / "run.db"
    link = tmp_path / "alias.db"
    link.symlink_to(real)
    with RunStore.open(real):
        with pytest.raises(StoreError, match="another `syntra produce`"):
            RunStore.open(link)
    with RunStore.open(link):
        with pytest.raises(StoreError, match="another `syntra produce`"):
            RunStore.open(real)


def test_store_lock_holds_through_a_hard_link(tmp_path):
    real = tmp_path / "run.db"
    RunStore.open(real).close()
    hard = tmp_path / "hard.db"
    os.link(real, hard)
    with RunStore.open(real), pytest.raises(StoreError, match="another `syntra produce`"):
        RunStore.open(hard)


def test_store_lock_holds_after_the_lock_file_is_deleted(tmp_path):
    path = tmp_path / "run.db"
    with RunStore.open(path):
        for lock in tmp_path.glob("*.lock"):
            lock.unlink()
        with pytest.raises(StoreError, match="another `syntra produce`"):
            RunStore.open(path)
    RunStore.open(path).close()  # released when the writer closes


def test_readers_work_while_a_writer_holds_the_lock(store):
    with RunStore.open(store):
        with RunStore.open(store, readonly=True) as reader:
            assert reader.document_counts()["done"] == 2


def test_disk_full_during_produce_is_a_clear_error_and_keeps_the_store(mini, minilm, store, monkeypatch, capsys,
                                                                        disk_fills_when_a_session_begins):
    art, index = mini
    with pytest.raises(StoreError, match="disk is full") as raised:
        produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
                progress=False, docs=4, **SMALL)
    assert "finished documents are kept" in str(raised.value)
    monkeypatch.undo()
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM documents WHERE status = 'done'").fetchone()[0] == 2
    conn.close()
