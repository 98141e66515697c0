"""No command writes over a file the run owns or reads: `backup` never onto the store's `-wal`/`-shm`/`-journal`
(by name, symlink or hard link) or the run's corpus and artifact; the corpus guard holds from any folder; `index
--out` follows export's rules; `export --format hf --overwrite` replaces only what an earlier export wrote."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.production import RunStore, produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from reliability.conftest import SMALL

MINI_CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "mini" / "corpus.jsonl"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_store_intact(store: Path) -> None:
    with RunStore.open(store, readonly=True) as run:
        assert run.document_counts()["done"] == 2


def own_inputs(store: Path, root: Path, *, corpus_path: str | None = None) -> tuple[Path, Path]:
    """Point the store copy at a private corpus copy and artifact copy (so a test that fails can only destroy
    those): returns (corpus, artifact). ``corpus_path``: the text to record instead of the absolute path."""
    with RunStore.open(store) as run:
        meta = run.meta()
        corpus = root / "corpus.jsonl"
        shutil.copyfile(MINI_CORPUS, corpus)
        artifact = root / "artifact"
        shutil.copytree(meta["artifact"]["path"], artifact)
        settings = meta["settings"]
        run.set_meta(settings={**settings, "corpus": {**settings["corpus"], "path": corpus_path or str(corpus)}},
                     artifact={**meta["artifact"], "path": str(artifact)})
    return corpus, artifact


# -- backup never writes over a file SQLite keeps for the store, nor the run's inputs --------------------------------

@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", ".lock"])
def test_backup_onto_a_file_sqlite_keeps_for_the_store_is_refused_while_produce_writes(store, suffix, capsys):
    target = store.with_name(store.name + suffix)
    with RunStore.open(store) as writer:  # as while `syntra produce` runs: -wal and -shm exist
        writer.set_meta(note="written, not yet checkpointed")
        before = target.read_bytes() if target.exists() and suffix != "-shm" else None  # readers write -shm
        assert main(["backup", str(store), str(target), "--overwrite"]) == 2
        assert "companion file" in capsys.readouterr().err
        if suffix != "-shm":
            assert (target.read_bytes() if target.exists() else None) == before
        assert not (target.exists() and target.read_bytes().startswith(b"SQLite format 3"))
    assert_store_intact(store)


def test_backup_onto_the_wal_through_a_symlink_or_a_hard_link_is_refused(store, tmp_path, capsys):
    wal = store.with_name(store.name + "-wal")
    with RunStore.open(store) as writer:
        writer.set_meta(note="written, not yet checkpointed")
        assert wal.exists()
        link = tmp_path / "copy.db"
        link.symlink_to(wal)
        hard = tmp_path / "hard.db"
        os.link(wal, hard)
        before = wal.read_bytes()
        assert main(["backup", str(store), str(link), "--overwrite"]) == 2
        assert main(["backup", str(store), str(hard), "--overwrite"]) == 2
        assert capsys.readouterr().err.count("companion file") == 2
        assert wal.read_bytes() == before and link.is_symlink()
    with RunStore.open(store, readonly=True) as run:
        assert run.meta()["note"] == "written, not yet checkpointed"


def test_backup_onto_the_runs_corpus_or_artifact_is_refused(store, tmp_path, capsys):
    corpus, artifact = own_inputs(store, tmp_path)
    manifest = next(p for p in artifact.iterdir() if p.is_file())
    before = digest(corpus), digest(manifest)
    assert main(["backup", str(store), str(corpus), "--overwrite"]) == 2
    assert "corpus of this run" in capsys.readouterr().err
    assert main(["backup", str(store), str(manifest), "--overwrite"]) == 2
    assert "artifact of this run" in capsys.readouterr().err
    assert (digest(corpus), digest(manifest)) == before
    assert main(["backup", str(store), str(tmp_path / "copy.db")]) == 0  # an ordinary copy still works


# -- the corpus guard holds from any folder --------------------------------------------------------------------------

def test_produce_records_the_corpus_absolute_and_export_refuses_it_from_another_folder(mini, minilm, tmp_path,
                                                                                     monkeypatch, capsys):
    """The audit's case: `produce --corpus ../corpus.jsonl` in one folder, `export --out CORPUS` in another."""
    art, index = mini
    corpus = tmp_path / "corpus.jsonl"
    shutil.copyfile(MINI_CORPUS, corpus)
    (tmp_path / "work").mkdir()
    (tmp_path / "elsewhere" / "deeper").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    produce(art, "run.db", corpus=Path("../corpus.jsonl"), generator=scripted_lm(SyntraBrain()), index_dir=index,
            encoder=minilm, progress=False, docs=1, **SMALL)
    store = tmp_path / "work" / "run.db"
    with RunStore.open(store, readonly=True) as run:
        assert run.meta()["settings"]["corpus"]["path"] == str(corpus.resolve())
    monkeypatch.chdir(tmp_path / "elsewhere" / "deeper")
    before = digest(corpus)
    assert main(["export", str(store), "--out", str(corpus), "--overwrite"]) == 2
    assert "corpus of this run" in capsys.readouterr().err
    assert main(["backup", str(store), "../../corpus.jsonl", "--overwrite"]) == 2
    assert digest(corpus) == before


def test_an_older_store_with_a_relative_corpus_path_is_guarded_by_the_corpus_fingerprint(store, tmp_path,
                                                                                       monkeypatch, capsys):
    """Stores made before the path was recorded absolute say `../corpus.jsonl` relative to a folder they did not
    record (here neither the current folder nor the store's): the file holding the same documents is refused."""
    corpus, _ = own_inputs(store, tmp_path, corpus_path="../corpus.jsonl")
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    before = digest(corpus)
    assert main(["export", str(store), "--out", str(corpus), "--overwrite"]) == 2
    assert "corpus of this run" in capsys.readouterr().err
    assert digest(corpus) == before
    other = tmp_path / "notes.jsonl"
    other.write_text('{"query": "mine"}\n', encoding="utf-8")
    assert main(["export", str(store), "--out", str(other), "--overwrite"]) == 0  # any other file: as asked


def test_resuming_an_older_store_records_its_corpus_absolute(mini, minilm, store, tmp_path):
    art, index = mini
    corpus, _ = own_inputs(store, tmp_path, corpus_path="../corpus.jsonl")
    produce(art, store, corpus=corpus, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
            progress=False, docs=2, **SMALL)  # nothing left to do: only the record changes
    with RunStore.open(store, readonly=True) as run:
        assert run.meta()["settings"]["corpus"]["path"] == str(corpus.resolve())


# -- index --select --out: export's rules -----------------------------------------------------------------------------

def index_out(mini, out: Path, *extra: str, corpus: Path = MINI_CORPUS) -> int:
    return main(["index", "--corpus", str(corpus), "--index-dir", str(mini[1]), "--no-progress", "--select", "5",
                 "--out", str(out), *extra])


@pytest.fixture
def fast_encoder(minilm, monkeypatch):
    """`syntra index` loads its encoder by name: hand it the session's (the mini index was built with it)."""
    monkeypatch.setattr("syntra_dspy.retrieval.encoder.load_encoder", lambda *args, **kwargs: minilm)


def test_index_out_refuses_an_existing_file_unless_overwrite(mini, fast_encoder, tmp_path, capsys):
    out = tmp_path / "notes.txt"
    out.write_text("precious\n", encoding="utf-8")
    assert index_out(mini, out) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "precious\n"
    assert index_out(mini, out, "--overwrite") == 0
    assert len(out.read_text(encoding="utf-8").split()) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # written whole: no temporary left


def test_index_out_never_replaces_the_corpus_or_a_run_store(mini, fast_encoder, store, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    shutil.copyfile(MINI_CORPUS, corpus)
    before = digest(corpus), digest(store)
    assert index_out(mini, corpus, "--overwrite", corpus=corpus) == 2
    assert "corpus being indexed" in capsys.readouterr().err
    assert index_out(mini, store, "--overwrite") == 2
    assert "run store" in capsys.readouterr().err
    with RunStore.open(store):  # while a producer writes: its WAL is the run store's too
        assert index_out(mini, store.with_name(store.name + "-wal"), "--overwrite") == 2
    assert (digest(corpus), digest(store)) == before
    assert_store_intact(store)


# -- export --format hf --overwrite replaces only what an earlier export wrote ----------------------------------------

def test_hf_export_overwrite_keeps_files_it_did_not_write(store, tmp_path, capsys):
    out = tmp_path / "records"
    assert main(["export", str(store), "--out", str(out), "--format", "hf"]) == 0
    written = json.loads((out / "syntra-export.json").read_text(encoding="utf-8"))["files"]
    assert "dataset_info.json" in written
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    shutil.copyfile(store, out / "run-copy.db")
    assert main(["export", str(store), "--out", str(out), "--format", "hf", "--overwrite"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine" and (out / "run-copy.db").is_file()
    (out / "notes.txt").unlink()
    (out / "run-copy.db").unlink()
    assert main(["export", str(store), "--out", str(out), "--format", "hf", "--overwrite"]) == 0  # its own: replaced


def test_hf_export_refuses_a_folder_that_only_looks_like_a_dataset(store, tmp_path, capsys):
    out = tmp_path / "records"
    out.mkdir()
    (out / "dataset_info.json").write_text("{}", encoding="utf-8")
    (out / "state.json").write_text("{}", encoding="utf-8")
    assert main(["export", str(store), "--out", str(out), "--format", "hf", "--overwrite"]) == 2
    assert "refusing to delete it" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["dataset_info.json", "state.json"]
