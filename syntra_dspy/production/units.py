"""What one unit of production work (one selected document) yields, before it is committed to the run store.

A unit either finishes (``done``), finishes with some annotation chunks unusable or some blueprints without a
valid query (``partial``: those candidates stay unlabelled, those positions stay empty, and the failure is
recorded), or fails at one stage (``failed``). Nothing here touches the store: the runner hands a finished
result to :meth:`RunStore.commit`, which writes it in one transaction, so a kill never leaves half a document
behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from syntra_dspy.signatures.types import label_class

Status = Literal["done", "partial", "failed"]
#: ``output``: the LM's answer stayed invalid after the repair retries; ``call``: the backend failed
#: (network, timeout, server error) after DSPy's retries; ``error``: anything else (a bug, bad data).
FailureKind = Literal["output", "call", "error"]
STAGES = ("extract", "plan", "write", "translate", "retrieve", "annotate")


@dataclass(frozen=True)
class Failure:
    """One recorded failure: where (stage, query), what kind, and the error text."""

    stage: str
    kind: FailureKind
    error: str
    query_id: str | None = None
    detail: dict[str, Any] | None = None


@dataclass
class Candidate:
    """A retrieved candidate: its rank in the top-K, retrieval score and 0-3 label (None: not labelled)."""

    rank: int
    doc_id: str
    score: float
    label: int | None = None
    grade: Any = None  # the graded judgment behind the label (syntra_dspy.judging.grading.Grade), if graded
    judge_score: float | None = None  # the calibrated score the label was cut from (graded judge)
    lexical: float | None = None  # BM25 score for the query (the hybrid judge's lexical witness), when computed
    skipped: Any = None  # why the judge's cascade labelled it without grading it (syntra_dspy.judging.cascade.Skip)


@dataclass
class QueryResult:
    """One written query with its blueprint and its judged candidates."""

    query_id: str
    position: int
    text: str
    blueprint: dict[str, Any]
    candidates: list[Candidate] = field(default_factory=list)
    source_rank: int | None = None  # rank of the source document among the candidates; None: not retrieved
    bm25_source_rank: int | None = None  # rank of the source document under BM25 (top 100); None: below that
    restated_from: str | None = None  # the question the writer wrote, when this query is its restatement
    translation: str | None = None  # the query in the documents' language, when candidates came from its BM25 search

    @property
    def complete(self) -> bool:
        """Every candidate got a label."""
        return all(c.label is not None for c in self.candidates)

    def is_record(self) -> bool:
        """Exportable under the default options: complete, >= 1 positive and >= 1 hard negative."""
        classes = {label_class(c.label) for c in self.candidates if c.label is not None}
        return self.complete and "positive" in classes and "hard_negative" in classes


@dataclass(frozen=True)
class KeptQuery:
    """A query an earlier attempt at a document left in the store: its text, its blueprint, and whether it is
    complete (it has candidates and every one got a label)."""

    position: int
    text: str
    blueprint: dict[str, Any]
    complete: bool
    restated_from: str | None = None


@dataclass(frozen=True)
class KeptWork:
    """What an earlier attempt at a document left in the store, for a retry to continue from instead of starting
    over: the extracted features (None when extraction itself failed) and the queries written. A retry keeps the
    complete queries as they are, labels the incomplete ones again, and plans and writes only the missing ones."""

    features: dict[str, Any] | None = None
    queries: tuple[KeptQuery, ...] = ()

    @property
    def complete_positions(self) -> tuple[int, ...]:
        return tuple(q.position for q in self.queries if q.complete)


#: One document to process: its id, how many earlier attempts its outputs had (0: none, or a transient failure;
#: a fresh sample is needed otherwise) and what those attempts left in the store.
WorkUnit = tuple[str, int, KeptWork | None]


@dataclass
class DocumentResult:
    """Everything one document produced, plus its failures and LM usage, ready to commit."""

    doc_id: str
    status: Status = "done"
    stage: str | None = None  # the stage that failed, for failed documents
    features: dict[str, Any] | None = None
    n_blueprints: int = 0
    queries: list[QueryResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)  # doc_id -> content, for every candidate and the source
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    restated: dict[int, str] = field(default_factory=dict)  # query position -> the question its query restates
    # every written answer checked, in order: (query position, step, outcome) as in WriteTally.checks
    write_checks: list[tuple[int, str, str]] = field(default_factory=list)
    # positions of the complete queries an earlier attempt left in the store, which this result keeps as they are
    kept: tuple[int, ...] = ()

    def fail(self, stage: str, kind: FailureKind, error: str, detail: dict[str, Any] | None = None) -> None:
        """Mark the document failed at ``stage``; what this attempt produced so far is not committed. A document
        whose earlier complete queries are kept stays partial (they are still there), with the failure recorded."""
        self.status, self.stage = ("partial", None) if self.kept else ("failed", stage)
        self.queries = []
        self.texts = {}
        self.failures.append(Failure(stage=stage, kind=kind, error=error, detail=detail))

    @property
    def error_kind(self) -> FailureKind | None:
        return self.failures[-1].kind if self.status == "failed" and self.failures else None

    @property
    def error(self) -> str | None:
        return self.failures[-1].error if self.status == "failed" and self.failures else None

    @property
    def records(self) -> int:
        return sum(q.is_record() for q in self.queries)

    @property
    def tokens(self) -> int:
        return sum(int(u.get("total_tokens", 0)) for u in self.usage.values())

    @property
    def calls(self) -> int:
        return sum(int(u.get("calls", 0)) for u in self.usage.values())


def query_id(doc_id: str, position: int) -> str:
    """Stable query id: the same document and position always give the same id, across resumes."""
    return f"{doc_id}#q{position}"


@dataclass(frozen=True)
class BackendState:
    """How each LM role's server was reached so far in a session, for the run store: its schema form
    (``StructuredOutput.describe()``) and, for a role spread over several servers, each endpoint's books
    (``RoutedEngine.snapshot()``)."""

    schema_forms: dict[str, dict[str, Any]] = field(default_factory=dict)
    endpoints: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
