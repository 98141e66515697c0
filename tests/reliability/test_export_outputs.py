"""`syntra export --out`: never the run store, the corpus or another input; never an existing file unless
--overwrite; never a directory, FIFO or symlink; always written whole or not at all."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.production import RunStore, export_records


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export(store: Path, out: Path, *extra: str) -> int:
    return main(["export", str(store), "--out", str(out), *extra])


def assert_store_intact(store: Path, before: str) -> None:
    assert digest(store) == before
    with RunStore.open(store, readonly=True) as run:
        assert run.document_counts()["done"] == 2


def test_export_out_equal_to_the_run_store_is_refused(store, capsys):
    before = digest(store)
    assert export(store, store) == 2
    assert "run store" in capsys.readouterr().err
    assert export(store, store, "--overwrite") == 2  # not even when asked to overwrite
    assert_store_intact(store, before)


def test_export_out_resolving_to_the_run_store_is_refused(store, tmp_path, capsys):
    before = digest(store)
    link = tmp_path / "alias.jsonl"
    link.symlink_to(store)
    assert export(store, link, "--overwrite") == 2
    assert export(store, tmp_path / "sub" / ".." / "run.db", "--overwrite") == 2
    assert "run store" in capsys.readouterr().err
    assert_store_intact(store, before)


def test_export_out_equal_to_the_stores_wal_or_lock_file_is_refused(store, tmp_path):
    for name in ("run.db-wal", "run.db-shm", "run.db.lock"):
        assert export(store, tmp_path / name, "--overwrite") == 2


def test_export_out_equal_to_the_corpus_is_refused(store, produced, capsys):
    corpus = produced[1]
    before = digest(corpus)
    assert export(store, corpus, "--overwrite") == 2
    assert "corpus" in capsys.readouterr().err
    assert digest(corpus) == before


def test_export_refuses_an_existing_out_unless_overwrite(store, tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    out.write_text("precious\n", encoding="utf-8")
    assert export(store, out) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert export(store, out, "--overwrite") == 0
    assert out.read_text(encoding="utf-8") != "precious\n"
    assert json.loads((tmp_path / "train.jsonl.meta.json").read_text(encoding="utf-8"))["counts"]["queries"] == 2


def test_export_refuses_an_existing_sidecar_unless_overwrite(store, tmp_path):
    out = tmp_path / "train.jsonl"
    sidecar = tmp_path / "train.jsonl.meta.json"
    sidecar.write_text("{}", encoding="utf-8")
    assert export(store, out) == 2
    assert not out.exists() and sidecar.read_text(encoding="utf-8") == "{}"


def test_export_refuses_a_symlink_out_even_with_overwrite(store, tmp_path, capsys):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n", encoding="utf-8")
    link = tmp_path / "train.jsonl"
    link.symlink_to(target)
    assert export(store, link, "--overwrite") == 2
    assert "symlink" in capsys.readouterr().err
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "keep me\n"


def test_export_refuses_a_fifo_out(store, tmp_path, capsys):
    fifo = tmp_path / "train.jsonl"
    os.mkfifo(fifo)
    assert export(store, fifo, "--overwrite") == 2
    assert "not a regular file" in capsys.readouterr().err
    assert fifo.exists() and not fifo.is_file()


def test_export_out_directory_is_a_clear_error(store, tmp_path, capsys):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "keep.txt").write_text("x", encoding="utf-8")
    assert export(store, folder) == 2
    assert export(store, folder, "--overwrite") == 2
    assert "is a directory" in capsys.readouterr().err
    assert (folder / "keep.txt").read_text(encoding="utf-8") == "x"


def test_export_that_fails_midway_leaves_the_old_file_and_no_temporary(store, tmp_path, monkeypatch):
    from syntra_dspy.production import export as export_module

    out = tmp_path / "train.jsonl"
    assert export(store, out) == 0
    before = out.read_bytes()

    def broken(*args, **kwargs):
        yield {"query": "half"}
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "_records", broken)
    with pytest.raises(OSError):
        export_records(store, out, overwrite=True)
    assert out.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_export_records_api_refuses_the_store_too(store):
    with pytest.raises(ConfigError, match="run store"):
        export_records(store, store, overwrite=True)
