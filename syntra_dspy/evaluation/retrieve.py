"""First-stage retrieval for evaluation: exact dense search (FAISS) and BM25 (bm25s).

Both retrievers take a corpus once and answer ``search(queries, k) -> Run`` with
``{query_id: {doc_id: score}}``. Dense search is exact: L2-normalised vectors in a
``faiss.IndexFlatIP`` (cosine similarity, no approximation). BM25 is the retrieval package's
(:class:`~syntra_dspy.retrieval.lexical.BM25Retriever`: Lucene scoring, Anserini's defaults, tokenised for the
document language).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.evaluation.trec import Run
from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.retrieval.lexical import BM25_NAME, BM25Retriever

logger = logging.getLogger(__name__)

_SEARCH_BATCH = 1024


@runtime_checkable
class Retriever(Protocol):
    """Anything that ranks a fixed corpus for a batch of queries."""

    name: str

    def search(self, queries: Mapping[str, str], k: int = 1000) -> Run: ...


# --- dense ----------------------------------------------------------------------------------------


class DenseRetriever:
    """Exact inner-product search over L2-normalised document vectors (``faiss.IndexFlatIP``)."""

    def __init__(self, encoder: Any, corpus: Corpus, *, batch_size: int = 32,
                 show_progress: bool = False, index_root: str | Path | None = None,
                 index_dir: str | Path | None = None) -> None:
        try:
            import faiss
        except ImportError:
            raise DependencyError("faiss is not installed", hint="pip install faiss-cpu") from None
        self.encoder = encoder
        self.name = str(getattr(encoder, "name", "dense"))
        self.batch_size = batch_size
        self._ids = corpus.ids
        if (index_root is not None or index_dir is not None) and hasattr(encoder, "id"):
            # The same fingerprinted cache compile and produce use: a corpus is encoded once per encoder.
            from syntra_dspy.retrieval.index import CorpusIndex
            from syntra_dspy.retrieval.sources import default_index_dir

            folder = index_dir if index_dir is not None else default_index_dir(corpus, encoder, index_root)
            cached = CorpusIndex.load_or_build(corpus, encoder, folder,
                                               batch_size=batch_size, progress=show_progress)
            order = [cached.position(doc_id) for doc_id in self._ids]
            vectors = np.asarray(cached.vectors)[order]
        else:
            vectors = encoder.encode_documents([d.content for d in corpus], batch_size=batch_size,
                                               show_progress=show_progress)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(self._ids):
            raise ConfigError(f"the encoder returned {vectors.shape} vectors for {len(self._ids)} documents",
                              field="encoder")
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)

    def __repr__(self) -> str:
        return f"DenseRetriever({self.name!r}, {self.index.ntotal} docs, exact)"

    def search(self, queries: Mapping[str, str], k: int = 1000) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        k = min(k, self.index.ntotal)
        vectors = np.ascontiguousarray(
            self.encoder.encode_queries([queries[q] for q in qids], batch_size=self.batch_size),
            dtype=np.float32)
        run: Run = {}
        for start in range(0, len(qids), _SEARCH_BATCH):
            scores, idx = self.index.search(vectors[start:start + _SEARCH_BATCH], k)
            for row, qid in enumerate(qids[start:start + _SEARCH_BATCH]):
                run[qid] = {self._ids[i]: float(s) for s, i in zip(scores[row], idx[row], strict=True)
                            if i >= 0}
        return run


# --- factory --------------------------------------------------------------------------------------


def load_retriever(model: str | Any, corpus: Corpus, *, language: str = "en", batch_size: int = 32,
                   show_progress: bool = False, index_root: str | Path | None = None,
                   index_dir: str | Path | None = None) -> Retriever:
    """``"bm25"``, a model folder or name (via :func:`syntra_dspy.retrieval.encoder.load_encoder`), an encoder
    object (with ``encode_queries``/``encode_documents``), or a ready :class:`Retriever`."""
    if isinstance(model, str):
        if model.strip().lower() == BM25_NAME:
            return BM25Retriever(corpus, language=language, show_progress=show_progress)
        from syntra_dspy.retrieval.encoder import load_encoder

        encoder = load_encoder(model)
        return DenseRetriever(encoder, corpus, batch_size=batch_size, show_progress=show_progress,
                              index_root=index_root, index_dir=index_dir)
    if hasattr(model, "encode_documents") and hasattr(model, "encode_queries"):
        return DenseRetriever(model, corpus, batch_size=batch_size, show_progress=show_progress,
                              index_root=index_root, index_dir=index_dir)
    if isinstance(model, Retriever):
        return model
    raise ConfigError(f"cannot evaluate a {type(model).__name__}", field="model",
                      hint="give 'bm25', a model folder or name, an Encoder, or an object with search()")
