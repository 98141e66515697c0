"""An index folder is only ever replaced when the index wrote it (marker + fingerprint); any other folder is a
clear error and is left exactly as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.retrieval.corpus import read_corpus
from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.index import META_FILE, CorpusIndex
from syntra_dspy.production import RunStore, produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from reliability.conftest import SMALL

MINI_CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "mini" / "corpus.jsonl"


def user_folder(root: Path) -> Path:
    folder = root / "runs"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"query": "mine"}\n', encoding="utf-8")
    return folder


def test_index_dir_on_a_folder_of_other_files_is_refused_and_kept(minilm, tmp_path):
    folder = user_folder(tmp_path)
    with pytest.raises(ConfigError, match="not an index folder"):
        CorpusIndex.load_or_build(read_corpus(MINI_CORPUS), minilm, folder, progress=False)
    assert (folder / "train.jsonl").read_text(encoding="utf-8") == '{"query": "mine"}\n'


def test_syntra_index_with_index_dir_on_a_runs_folder_keeps_it(tmp_path, capsys):
    folder = user_folder(tmp_path)
    code = main(["index", "--corpus", str(MINI_CORPUS), "--index-dir", str(folder), "--no-progress"])
    assert code == 2 and "not an index folder" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["train.jsonl"]


def test_resumed_produce_with_index_dir_on_the_store_folder_keeps_the_store(mini, minilm, store):
    art, _ = mini
    done = RunStore.open(store, readonly=True)
    before = done.document_counts()
    done.close()
    with pytest.raises(ConfigError, match="not an index folder"):
        produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=store.parent, encoder=minilm,
                progress=False, docs=2, **SMALL)
    with RunStore.open(store, readonly=True) as run:
        assert run.document_counts() == before


def test_index_dir_that_is_a_file_is_refused(minilm, tmp_path):
    file = tmp_path / "index"
    file.write_text("not a folder", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a folder"):
        CorpusIndex.load_or_build(read_corpus(MINI_CORPUS), minilm, file, progress=False)
    assert file.read_text(encoding="utf-8") == "not a folder"


def stale_index(minilm, folder: Path):
    """An index folder the index wrote, made stale (its fingerprint no longer matches): it would be rebuilt."""
    corpus = read_corpus(MINI_CORPUS)
    CorpusIndex.load_or_build(corpus, minilm, folder, progress=False)
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    meta["fingerprint"] = "0" * 64
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    return corpus


def test_index_folder_with_a_foreign_file_added_is_not_deleted(minilm, tmp_path):
    folder = tmp_path / "index"
    corpus = stale_index(minilm, folder)
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="notes.txt"):
        CorpusIndex.load_or_build(corpus, minilm, folder, progress=False)
    assert (folder / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_a_stale_index_the_index_wrote_is_still_rebuilt(minilm, tmp_path):
    folder = tmp_path / "index"
    corpus = stale_index(minilm, folder)
    index = CorpusIndex.load_or_build(corpus, minilm, folder, progress=False)
    assert json.loads((folder / META_FILE).read_text(encoding="utf-8"))["fingerprint"] == index.fingerprint
    empty = tmp_path / "empty"
    empty.mkdir()
    CorpusIndex.load_or_build(corpus, minilm, empty, progress=False)  # an empty folder is fine to fill
    assert (empty / META_FILE).is_file()
