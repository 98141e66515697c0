"""Exact dense retrieval with the bundled MiniLM on a handful of real SciFact documents."""

from __future__ import annotations

import json

import numpy as np
import pytest

from syntra_dspy.retrieval.corpus import Document, corpus_from_documents
from syntra_dspy.evaluation import DenseRetriever, EvalDataset, evaluate_model, read_qrels


@pytest.fixture(scope="module")
def scifact_small(shared_data) -> EvalDataset:
    root = shared_data / "scifact"
    qrels = read_qrels(root / "qrels" / "train.tsv")
    queries = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q["text"]
            if len(queries) == 6:
                break
    qrels = {q: qrels[q] for q in queries}
    wanted = {d for docs in qrels.values() for d in docs}
    docs: list[Document] = []
    with (root / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in wanted or len(docs) < 20:
                docs.append(Document(d["_id"], d.get("title", ""), d["text"]))
            if len(docs) >= 20 and wanted <= {x.doc_id for x in docs}:
                break
    return EvalDataset("scifact-small", queries=queries, qrels=qrels, corpus=corpus_from_documents(docs))


@pytest.fixture(scope="module")
def dense(minilm, scifact_small) -> DenseRetriever:
    return DenseRetriever(minilm, scifact_small.require_corpus(), batch_size=8)


def test_dense_search_is_exact(minilm, scifact_small, dense):
    corpus = scifact_small.require_corpus()
    assert dense.index.ntotal == len(corpus) and dense.name == "all-MiniLM-L6-v2"
    run = dense.search(scifact_small.queries, k=5)
    docs = dense.index.reconstruct_n(0, dense.index.ntotal)
    assert np.linalg.norm(docs, axis=1) == pytest.approx(1.0, abs=1e-5)
    queries = minilm.encode_queries(list(scifact_small.queries.values()))
    brute = queries @ docs.T
    for row, qid in enumerate(scifact_small.queries):
        top = np.argsort(-brute[row])[:5]
        assert list(run[qid]) == [corpus.ids[i] for i in top]
        assert list(run[qid].values()) == pytest.approx(brute[row, top].tolist(), abs=1e-5)


def test_minilm_finds_scifact_evidence(scifact_small, dense):
    result = evaluate_model(dense, scifact_small, k=20, exclude=[next(iter(scifact_small.queries))])
    assert result.model == "all-MiniLM-L6-v2" and result.n_queries == 5
    assert result.aggregate["nDCG@10"] > 0.5
    assert result.aggregate["Judged@20"] > 0
    assert all(len(d) == 20 for d in result.run.values())
    assert set(result.aggregate) == {"nDCG@10", "nDCG@20", "R@100", "Judged@20"}


class BagOfWordsEncoder:
    """A deterministic stand-in for an Encoder: hashed bag of words, L2-normalised."""

    name = "bow"

    def _encode(self, texts, **_):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, sum(map(ord, word)) % 64] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    encode_queries = encode_documents = _encode


def test_any_encoder_object_goes_through_exact_search():
    corpus = corpus_from_documents([("a", "apples and pears"), ("b", "trains and buses"), ("c", "apple pie")])
    ds = EvalDataset("toy", queries={"q": "trains buses"}, qrels={"q": {"b": 1}}, corpus=corpus)
    result = evaluate_model(BagOfWordsEncoder(), ds, "nDCG@10 RR", k=2)
    assert result.model == "bow" and next(iter(result.run["q"])) == "b" and len(result.run["q"]) == 2
    assert result.aggregate == {"nDCG@10": 1.0, "RR": 1.0}


def test_dense_retriever_reuses_the_fingerprinted_index_cache(tmp_path, minilm):
    from syntra_dspy.retrieval.corpus import corpus_from_documents
    from syntra_dspy.evaluation.retrieve import DenseRetriever

    corpus = corpus_from_documents([("a", "FGF21 protects against atherosclerosis."),
                                    ("b", "Notch signalling in tumours."),
                                    ("c", "ATF4 marks endoplasmic reticulum stress.")])
    first = DenseRetriever(minilm, corpus, index_root=tmp_path)
    assert len(list(tmp_path.iterdir())) == 1  # one cached index for this corpus + encoder

    class NoEncoding:
        """Same identity as MiniLM, but must not be asked to encode documents again."""

        id, name = minilm.id, minilm.name

        def encode_documents(self, *a, **k):
            raise AssertionError("the cached index should have been reused")

        def encode_queries(self, texts, **k):
            return minilm.encode_queries(texts, **k)

    again = DenseRetriever(NoEncoding(), corpus, index_root=tmp_path)
    assert again.search({"q": "endoplasmic reticulum stress"}, k=1) \
        == first.search({"q": "endoplasmic reticulum stress"}, k=1)
