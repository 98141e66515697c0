"""Candidate retrieval from the full-corpus index, shared by compile (annotation check) and production."""

from __future__ import annotations

from pathlib import Path

from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.retrieval.encoder import Encoder
from syntra_dspy.retrieval.index import CorpusIndex, index_fingerprint


def default_index_dir(corpus: Corpus, encoder: Encoder, root: str | Path = ".syntra/index") -> Path:
    """Where an index for this corpus and encoder is cached unless the user says otherwise."""
    return Path(root) / index_fingerprint(corpus, encoder)[:16]


class IndexCandidates:
    """Top-k documents for a query: [(doc_id, text)], best first, from exact inner-product search."""

    def __init__(self, corpus: Corpus, encoder: Encoder, index: CorpusIndex) -> None:
        self.corpus, self.encoder, self.index = corpus, encoder, index

    def candidates(self, query: str, k: int) -> list[tuple[str, str]]:
        return [(doc_id, self.corpus[doc_id].content) for doc_id, _ in self.search([query], k)[0]]

    def sample(self, n: int, *, exclude: set[str | None] = frozenset(), seed: int = 0) -> list[tuple[str, str]]:
        """``n`` documents drawn at random (seeded) from the corpus, none of them in ``exclude``."""
        import random

        rng = random.Random(seed)
        ids = self.corpus.ids
        picked: list[str] = []
        while len(picked) < min(n, len(ids) - len(exclude)):
            doc_id = ids[rng.randrange(len(ids))]
            if doc_id not in exclude and doc_id not in picked:
                picked.append(doc_id)
        return [(doc_id, self.corpus[doc_id].content) for doc_id in picked]

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        return self.index.search(self.encoder.encode_queries(queries), k)


class LexicalCandidates:
    """Top-k documents under BM25 in the documents' language: ``search(queries, k)`` like the dense index, with BM25
    scores, from the same retriever (and lock) as the source ranks. For cross-language tasks the queries must
    already be in that language (see :class:`~syntra_dspy.programs.translation.QueryTranslator`)."""

    def __init__(self, lexical: LexicalSourceRank) -> None:
        self._lexical = lexical

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        run = self._lexical.search({str(n): q for n, q in enumerate(queries)}, k)
        return [sorted(run.get(str(n), {}).items(), key=lambda kv: (-kv[1], kv[0])) for n in range(len(queries))]


class LexicalSourceRank:
    """BM25 over the whole corpus: where a query's source document ranks (0-based; None below ``depth``), and the
    query's BM25 score of given candidates.

    A query whose own document is BM25's first hit mostly repeats the document's words: it teaches a retriever
    little. Production records this rank for every query; the export's data-quality report counts it. The scores
    are the hybrid judge's lexical witness."""

    def __init__(self, corpus: Corpus, *, language: str = "en", depth: int = 100) -> None:
        import threading

        from syntra_dspy.retrieval.lexical import BM25Retriever

        self.depth = depth
        self._bm25 = BM25Retriever(corpus, language=language)
        self._lock = threading.Lock()

    def search(self, queries: dict[str, str], k: int) -> dict[str, dict[str, float]]:
        """BM25's run for ``queries`` (id -> text), serialised with the ranks."""
        with self._lock:
            return self._bm25.search(queries, k=k)

    def rank(self, query: str, doc_id: str) -> int | None:
        found = self.search({"q": query}, self.depth).get("q", {})
        if doc_id not in found:
            return None
        ordered = sorted(found, key=lambda d: (-found[d], d))
        return ordered.index(doc_id)

    def scores(self, query: str, doc_ids: list[str]) -> list[float | None]:
        """BM25 score of each candidate for ``query`` (None for a document that is not in the corpus)."""
        with self._lock:
            return self._bm25.scores(query, doc_ids)
