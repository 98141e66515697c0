from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from syntra_dspy.retrieval.corpus import Document, corpus_from_documents, read_corpus
from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.retrieval.index import CorpusIndex, index_fingerprint


class CountingEncoder:
    """Wraps a real encoder and counts document encodings; can be told to refuse."""

    def __init__(self, inner, *, refuse: bool = False) -> None:
        self.inner = inner
        self.refuse = refuse
        self.calls = 0
        self.id = inner.id
        self.dim = inner.dim

    def encode_documents(self, texts, batch_size: int = 32, show_progress: bool = False):
        if self.refuse:
            raise AssertionError("the index should have been reused, not re-encoded")
        self.calls += 1
        return self.inner.encode_documents(texts, batch_size=batch_size)

    def encode_queries(self, texts, batch_size: int = 32, show_progress: bool = False):
        return self.inner.encode_queries(texts, batch_size=batch_size)


@pytest.fixture(scope="module")
def corpus(fixtures: Path):
    return read_corpus(fixtures / "corpus" / "scifact_head.jsonl")


def test_encoder_basics(minilm) -> None:
    assert minilm.dim == 384
    assert minilm.id.startswith("all-MiniLM-L6-v2@") and minilm.id == minilm.id
    vecs = minilm.encode_documents(["a cat sat on the mat", "stock markets fell"])
    assert vecs.dtype == np.float32 and vecs.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    assert minilm.encode_queries([]).shape == (0, 384)


def test_encoder_unknown_name_is_config_error() -> None:
    from syntra_dspy.retrieval.encoder import load_encoder

    with pytest.raises(ConfigError, match="cannot load encoder"):
        load_encoder("no-such-org/no-such-model-xyz")


def test_build_then_reuse_then_rebuild(tmp_path: Path, corpus, minilm, caplog) -> None:
    index_dir = tmp_path / "idx"
    enc = CountingEncoder(minilm)
    built = CorpusIndex.load_or_build(corpus, enc, index_dir, progress=False)
    assert enc.calls == 1 and len(built) == len(corpus) and built.dim == 384
    assert sorted(p.name for p in index_dir.iterdir()) == ["ids.json", "index.faiss", "meta.json",
                                                           "vectors.npy"]
    meta = json.loads((index_dir / "meta.json").read_text())
    assert meta["fingerprint"] == index_fingerprint(corpus, enc) == built.fingerprint
    assert meta["count"] == len(corpus) and meta["dims"] == 384 and meta["encoder_id"] == minilm.id
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folders left

    reused = CorpusIndex.load_or_build(corpus, CountingEncoder(minilm, refuse=True), index_dir)
    assert reused.ids == built.ids
    np.testing.assert_array_equal(reused.vectors, built.vectors)

    docs = list(corpus)
    changed = corpus_from_documents(docs[:-1] + [Document("new-doc", "", "A brand new abstract.")])
    enc2 = CountingEncoder(minilm)
    with caplog.at_level("INFO", logger="syntra_dspy.retrieval.index"):
        rebuilt = CorpusIndex.load_or_build(changed, enc2, index_dir, progress=False)
    assert enc2.calls == 1 and "new-doc" in rebuilt.ids
    assert "fingerprint mismatch" in caplog.text
    assert json.loads((index_dir / "meta.json").read_text())["fingerprint"] == rebuilt.fingerprint


def test_corrupt_index_is_rebuilt(tmp_path: Path, corpus, minilm) -> None:
    index_dir = tmp_path / "idx"
    CorpusIndex.load_or_build(corpus, minilm, index_dir, progress=False)
    (index_dir / "ids.json").write_text("[]")
    with pytest.raises(InputError, match="disagree"):
        CorpusIndex.load(index_dir)
    enc = CountingEncoder(minilm)
    CorpusIndex.load_or_build(corpus, enc, index_dir, progress=False)
    assert enc.calls == 1 and len(CorpusIndex.load(index_dir)) == len(corpus)


def test_search_finds_own_text(tmp_path: Path, corpus, minilm) -> None:
    index = CorpusIndex.load_or_build(corpus, minilm, tmp_path / "idx", progress=False)
    docs = list(corpus)
    hits = index.search_texts(minilm, [d.text[:400] for d in docs], k=3)
    assert [h[0][0] for h in hits] == [d.doc_id for d in docs]
    assert all(len(h) == 3 and h[0][1] >= h[1][1] >= h[2][1] for h in hits)
    np.testing.assert_allclose(index.search(index.vector(docs[2].doc_id), 1)[0][0][1], 1.0, rtol=1e-5)
    assert len(index.search(index.vectors[:1], k=100)[0]) == len(corpus)  # k is capped at the size
    with pytest.raises(ConfigError, match="k must be"):
        index.search(index.vectors[:1], k=0)


def test_from_vectors_normalises_and_searches() -> None:
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(50, 16)).astype(np.float32) * 3
    index = CorpusIndex.from_vectors([f"d{i}" for i in range(50)], vecs)
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0, rtol=1e-5)
    top = index.search(vecs[[7, 21]], k=2)
    assert top[0][0][0] == "d7" and top[1][0][0] == "d21"
    with pytest.raises(KeyError, match="zzz"):
        index.vector("zzz")
    with pytest.raises(ValueError, match="unique"):
        CorpusIndex.from_vectors(["a", "a"], vecs[:2])


def test_save_and_load_roundtrip_from_vectors(tmp_path: Path) -> None:
    vecs = np.random.default_rng(1).normal(size=(20, 8)).astype(np.float32)
    index = CorpusIndex.from_vectors([f"d{i}" for i in range(20)], vecs)
    index.save(tmp_path / "i")
    index.save(tmp_path / "i")  # overwriting swaps the folder in place
    loaded = CorpusIndex.load(tmp_path / "i")
    assert loaded.ids == index.ids and loaded.fingerprint == index.fingerprint
    assert loaded.search(vecs[3], 1)[0][0][0] == "d3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i"]


def test_cli_index_and_select(tmp_path: Path, fixtures: Path, minilm, monkeypatch, capsys) -> None:
    from syntra_dspy import cli
    from syntra_dspy.cli import index_cmd

    monkeypatch.setattr("syntra_dspy.retrieval.encoder.load_encoder", lambda *a, **k: minilm)
    monkeypatch.chdir(tmp_path)
    corpus_path = fixtures / "corpus" / "csl_neuclir.jsonl"
    out = tmp_path / "sel.txt"
    argv = ["index", "--corpus", str(corpus_path), "--corpus-format", "neuclir", "--no-progress",
            "--select", "3", "--tau", "0.9", "--out", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "corpus: 4 documents" in printed and "selected: 3 documents" in printed
    assert len(out.read_text().splitlines()) == 3
    assert len(list((tmp_path / ".syntra" / "index").iterdir())) == 1
    assert cli.main(["index", "--no-progress"]) == 2  # nothing to index: a clear error, exit 2
    assert "nothing to index" in capsys.readouterr().err
    assert index_cmd.DEFAULT_INDEX_ROOT.parts == (".syntra", "index")


def test_cli_task_file(tmp_path: Path, fixtures: Path, shared_data: Path, minilm, monkeypatch,
                       capsys) -> None:
    from syntra_dspy import cli

    monkeypatch.setattr("syntra_dspy.retrieval.encoder.load_encoder", lambda *a, **k: minilm)
    corpus_path = fixtures / "corpus" / "scifact_head.jsonl"
    examples = "\n".join(f"  - {{query: q{i}, positive_id: '4983'}}" for i in range(3))
    task = tmp_path / "task.yaml"
    task.write_text(f"name: t\ncorpus: {{path: {corpus_path}, format: beir}}\nexamples:\n{examples}\n")
    assert cli.main(["index", str(task), "--index-dir", str(tmp_path / "ix"), "--no-progress"]) == 0
    assert "corpus: 8 documents" in capsys.readouterr().out
    assert (tmp_path / "ix" / "meta.json").is_file()


def test_encoder_id_tracks_weights(tmp_path: Path) -> None:
    from syntra_dspy.retrieval.encoder import _weights_identity

    (tmp_path / "config.json").write_text('{"hidden_size": 4}')
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x00" * 64)
    first = _weights_identity(tmp_path)
    assert _weights_identity(tmp_path) == first
    weights.write_bytes(b"\x01" + b"\x00" * 63)
    assert _weights_identity(tmp_path) != first
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    assert len({first, _weights_identity(tmp_path)}) == 2


class _StubModel:
    """Just enough of SentenceTransformer to see which prompt the wrapper asks for."""

    def __init__(self, prompts: dict[str, str], default: str | None = None) -> None:
        self.prompts = prompts
        self.default_prompt_name = default
        self.seen: list[dict] = []

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts, **kwargs):
        self.seen.append({k: v for k, v in kwargs.items() if k in ("prompt", "prompt_name")})
        return np.tile(np.array([[3.0, 4.0, 0.0]], dtype=np.float32), (len(texts), 1))


def test_encoder_uses_model_prompts() -> None:
    from syntra_dspy.retrieval.encoder import Encoder

    gemma_like = _StubModel({"query": "task: search result | query: ", "document": "title: none | text: "})
    enc = Encoder(gemma_like, name="stub")
    np.testing.assert_allclose(enc.encode_queries(["q"]), [[0.6, 0.8, 0.0]], rtol=1e-6)
    enc.encode_documents(["d"])
    assert gemma_like.seen == [{"prompt_name": "query"}, {"prompt_name": "document"}]

    plain = _StubModel({}, default=None)
    Encoder(plain, name="plain").encode_documents(["d"])
    assert plain.seen == [{}]
    query_default = _StubModel({"query": "Q: "}, default="query")
    Encoder(query_default, name="qd").encode_documents(["d"])
    assert query_default.seen == [{"prompt": ""}]  # documents must not inherit the query prompt
    with pytest.raises(TypeError, match="list of texts"):
        enc.encode_queries("one string")
