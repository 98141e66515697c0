"""What the query loop measures in code on its trial queries, next to the verifier's score.

Difficulty: a query whose own source document is the first hit of BM25 (or of the dense index) mostly repeats the
document's words, and teaches a retriever string matching. Form fidelity: the share of the query texts the writer
produced, retries included, that had the examples' form and length. Both are cheap and cannot be talked round,
unlike a small verifier that gives 3 to almost anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from statistics import mean
from typing import Any, Protocol

from syntra_dspy.optimizers.trials import CandidateSource, QueryTrial
from syntra_dspy.query_form import QueryForm, copied_share


#: How the feedback names the problem of queries that find their own document first (scripted refiners read it).
COPYING = "reuse the document's own terms"


class SourceRanker(Protocol):
    """Where a query's source document ranks (0-based; None when not found), e.g. ``LexicalSourceRank``."""

    def rank(self, query: str, doc_id: str) -> int | None: ...


@dataclass(frozen=True)
class QueryMeasures:
    """Shares over the trial queries; None where a measure could not be taken (no ranker, no query)."""

    queries: int
    bm25_top1: float | None  # the source document is BM25's first hit
    dense_top1: float | None  # the source document is the dense index's first hit
    copied: float | None  # mean share of a query's words that occur in its source document
    form_fidelity: float | None  # query texts written (retries included) with the examples' form and length
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[str] = field(default_factory=list)  # the writer's rejected answers, first few

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_queries(trials: Sequence[QueryTrial], *, candidates: CandidateSource | None = None,
                    lexical: SourceRanker | None = None) -> QueryMeasures:
    """Rank every trial query's source document under ``lexical`` (BM25) and ``candidates`` (dense, top 1)."""
    rows = []
    for trial in trials:
        for query in trial.queries:
            row: dict[str, Any] = {"doc_id": trial.doc.doc_id, "query": query,
                                   "copied": round(copied_share(query, trial.doc.content), 3)}
            if lexical is not None:
                row["bm25_rank"] = lexical.rank(query, trial.doc.doc_id)
            if candidates is not None:
                top = candidates.candidates(query, 1)
                row["dense_top1"] = bool(top) and top[0][0] == trial.doc.doc_id
            rows.append(row)
    written = sum(t.tally.queries for t in trials)
    off_form = sum(t.tally.off_form for t in trials)

    def share(values: list[bool]) -> float | None:
        return round(mean(values), 3) if values else None

    return QueryMeasures(
        queries=len(rows),
        bm25_top1=share([r["bm25_rank"] == 0 for r in rows]) if lexical is not None else None,
        dense_top1=share([r["dense_top1"] for r in rows]) if candidates is not None else None,
        copied=share([r["copied"] for r in rows]),
        form_fidelity=round(1 - off_form / written, 3) if written else None,
        rows=rows,
        rejections=list(dict.fromkeys(n for t in trials for n in t.tally.notes))[:5],
    )


def measure_problems(m: QueryMeasures, form: QueryForm | None, *, bm25_target: float, form_target: float
                     ) -> list[str]:
    """Feedback for the instruction refiner, one entry per measure that misses its target (empty: all met)."""
    problems = []
    if m.form_fidelity is not None and m.form_fidelity < form_target and form is not None:
        problems.append(
            f"Only {m.form_fidelity:.0%} of the queries the writer produced had the form of the example queries "
            f"(target: {form_target:.0%}); the examples are {form.describe()}. The writer's answers were rejected "
            f"with: {' | '.join(m.rejections[:3])}. State the required form and length plainly in the instruction.")
    if m.bm25_top1 is not None and m.bm25_top1 > bm25_target:
        problems.append(
            f"For {m.bm25_top1:.0%} of the queries the source document is the first hit of a keyword search "
            f"(target: at most {bm25_target:.0%}); on average {m.copied:.0%} of a query's words occur in its "
            f"document. The queries {COPYING}, so a retriever learns only to match strings. "
            "Make the instruction ask for what a searcher who has not read the document would write: at most the "
            "one key name, and the finding, its conditions and its outcome in other words than the document's, "
            "while keeping the form of the examples.")
    return problems
