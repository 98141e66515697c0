"""Shared fixtures: the mini artifact compiled once, and a small finished run store over a corpus copy.

The corpus is copied into a temporary folder first, so a test that (before its fix) lets an export overwrite
"the corpus" can only ever destroy the copy, never the committed fixture.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from syntra_dspy.production import produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import mini_artifact

#: Small production settings: a document is 1 extract + 1 plan + 1 write + 1 annotate call.
SMALL = {"queries_per_doc": 1, "top_k": 2, "chunk_size": 2}


@pytest.fixture(scope="session")
def mini(tmp_path_factory) -> tuple[Path, Path]:
    """(artifact dir, index dir) of the mini task, compiled with the scripted brain."""
    return mini_artifact(tmp_path_factory)


@pytest.fixture(scope="session")
def produced(mini, minilm, tmp_path_factory) -> tuple[Path, Path]:
    """(run store, corpus copy) of a finished two-document run; copy the store before changing it."""
    from syntra_dspy.artifacts import load_artifact

    art, index = mini
    root = tmp_path_factory.mktemp("produced")
    corpus = root / "corpus.jsonl"
    shutil.copyfile(load_artifact(art).manifest["task_spec"]["corpus"]["path"], corpus)
    store = root / "run.db"
    produce(art, store, corpus=corpus, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
            progress=False, docs=2, **SMALL)
    return store, corpus


@pytest.fixture
def store(produced, tmp_path) -> Path:
    """A private copy of the finished run store."""
    copy = tmp_path / "run.db"
    shutil.copyfile(produced[0], copy)
    return copy


@pytest.fixture
def disk_fills_when_a_session_begins(monkeypatch) -> None:
    """The disk is full from the moment production opens its session (SQLite's ``max_page_count`` gives the same
    'database or disk is full' error a full disk does); ``monkeypatch.undo()`` frees it again."""
    from syntra_dspy.production.store import RunStore

    original = RunStore.begin_session

    def then_fill_the_disk(self, **kw):
        session = original(self, **kw)
        pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
        self._conn.execute(f"PRAGMA max_page_count = {pages}")
        return session

    monkeypatch.setattr(RunStore, "begin_session", then_fill_the_disk)
