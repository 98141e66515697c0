"""Judged candidate sets: the documents production would show the judge for a query, with reference classes.

Shared by the judge's calibration in test mode and by ``syntra agreement``: for a query, the dense top-K from the
corpus index, any judged positive retrieval missed (``added_positive``), and random corpus documents (``random``).
A judged positive (gain >= 1) is positive, another retrieved candidate a hard negative (IR evaluation counts it not
relevant; retrieval put it in the top-K), a random document an easy negative. The lexical witness
(:func:`lexical_witness`, :func:`with_lexical`) adds each candidate's BM25 score for its query, which a hybrid or
weighted calibration weighs.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.evaluation.exclude import normalize_query


@dataclass(frozen=True)
class JudgedCandidate:
    """One query/document pair with its reference class and where it comes from."""

    query_id: str
    query: str
    doc_id: str
    rank: int | None  # position in the dense top-K; None for an added positive or a random document
    cosine: float
    gold: str
    source: str  # retrieved | added_positive | random (calibration sets also: example_positive, control, human)
    text: str | None = None  # the document text when it is not a corpus document (a few-shot positive given as text)
    lexical: float | None = None  # BM25 score for the query (:func:`with_lexical`); None: not computed or not a
                                  # corpus doc


def lexical_witness(corpus: Any, query_language: str, document_language: str) -> Any:
    """BM25 over ``corpus`` for scoring candidates, when queries and documents share a language BM25 can tokenise
    (None otherwise)."""
    from syntra_dspy.retrieval.sources import LexicalSourceRank

    if query_language.split("-")[0].lower() != document_language.split("-")[0].lower():
        return None
    try:
        return LexicalSourceRank(corpus, language=document_language)
    except ConfigError:
        return None


def with_lexical(candidates: Sequence[JudgedCandidate], lexical: Any) -> list[JudgedCandidate]:
    """The candidates with their BM25 scores for their queries, one corpus scoring per query (``lexical``: a
    :class:`~syntra_dspy.retrieval.LexicalSourceRank`). A document that is not in the corpus (a few-shot positive
    given only as text) gets None."""
    by_query: dict[str, list[int]] = {}
    for i, c in enumerate(candidates):
        by_query.setdefault(c.query, []).append(i)
    out = list(candidates)
    for query, members in by_query.items():
        scores = lexical.scores(query, [candidates[i].doc_id for i in members])
        for i, score in zip(members, scores):
            out[i] = replace(candidates[i], lexical=score)
    return out


def build_candidates(queries: dict[str, str], qrels: dict[str, dict[str, int]], *, corpus: Any, encoder: Any,
                     index: Any, n_queries: int, top_k: int, random_negatives: int, seed: int,
                     exclude: Iterable[str] = ()) -> list[JudgedCandidate]:
    """The candidates of ``n_queries`` sampled queries (seeded) that have a judged positive in the corpus."""
    banned = {normalize_query(q) for q in exclude}
    usable = sorted(qid for qid, docs in qrels.items() if qid in queries
                    and normalize_query(queries[qid]) not in banned
                    and any(g >= 1 and d in corpus for d, g in docs.items()))
    if not usable:
        raise ConfigError("no judged query is left to measure agreement on (few-shot and calibration queries are "
                          "excluded; every other query needs a positive judgment of a corpus document)")
    rng = random.Random(seed)
    chosen = rng.sample(usable, min(n_queries, len(usable)))
    qvecs = encoder.encode_queries([queries[q] for q in chosen])
    hits = index.search(qvecs, top_k)
    ids = list(corpus.ids)
    out: list[JudgedCandidate] = []
    for qid, qvec, found in zip(chosen, qvecs, hits):
        judged = qrels[qid]
        text = queries[qid]
        for rank, (doc_id, cosine) in enumerate(found):
            gold = "positive" if judged.get(doc_id, 0) >= 1 else "hard_negative"
            out.append(JudgedCandidate(qid, text, doc_id, rank, float(cosine), gold, "retrieved"))
        seen = {d for d, _ in found}
        for doc_id, gain in sorted(judged.items()):
            if gain >= 1 and doc_id in corpus and doc_id not in seen:
                out.append(JudgedCandidate(qid, text, doc_id, None, float(index.vector(doc_id) @ qvec), "positive",
                                           "added_positive"))
        spare = [d for d in rng.sample(ids, min(len(ids), 50 + random_negatives)) if d not in seen and d not in judged]
        for doc_id in spare[:random_negatives]:
            out.append(JudgedCandidate(qid, text, doc_id, None, float(index.vector(doc_id) @ qvec), "easy_negative",
                                       "random"))
    return out
