"""One unit of production work: a selected document → features → blueprints → queries → candidates → labels.

Candidates come from the dense index, or from BM25 in the documents' language; for a cross-language task the
latter first translates each query once (``QueryTranslator``), and the translation is kept with the query.

The program steps (loaded frozen from the artifact) validate every answer in code and retry with a repair
note; an answer that stays invalid raises ``LMOutputError`` and is recorded here with its stage, never
dropped and never fatal to the run. Annotation runs in chunks of ``chunk_size`` candidates with local ids
``0..n-1`` that are mapped back to corpus ids; chunks of one document run concurrently. Every LM call
holds one of the run's ``slots``, so at most ``concurrency`` calls are in flight across all documents.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import dspy

from syntra_dspy.errors import (
    BlueprintsIncomplete,
    CallCancelled,
    LMOutputError,
    QueriesIncomplete,
    is_retryable,
    stops_run,
)
from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.lm.usage import UsageMeter, submit_in_context
from syntra_dspy.production.config import PromptFormat, UnitSettings
from syntra_dspy.production.units import (
    Candidate,
    DocumentResult,
    Failure,
    FailureKind,
    KeptWork,
    QueryResult,
    query_id,
)
from syntra_dspy.judging.judge import Candidate as JudgeCandidate
from syntra_dspy.judging.judge import Judgment, RelevanceJudge
from syntra_dspy.programs.compact_format import CompactJSONAdapter
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.programs.translation import QueryTranslator
from syntra_dspy.redact import redact
from syntra_dspy.retrieval.sources import LexicalCandidates, LexicalSourceRank
from syntra_dspy.signatures.types import Blueprint
from syntra_dspy.programs.validation import Features, WriteTally, fallback_blueprints, generic_dimensions

if TYPE_CHECKING:
    from syntra_dspy.production.setup import ProductionInputs

logger = logging.getLogger(__name__)

#: Repair calls the planner gets in production. A planner that breaks a rule tends to break it again: on the
#: SciFact run with the embedded 1.5B model, 27 of 61 documents used all three tries and 1 of those 55 retries
#: gave a valid answer. Its valid blueprints are kept and the missing ones drawn in code instead, at no LM cost.
PLAN_RETRIES = 0


class Searcher(Protocol):
    """Batch top-k search over the full corpus index: per query, [(doc_id, score)] best first."""

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]: ...


class LockedSearcher:
    """Serialises searches: the encoder and FAISS are shared by every worker thread, and encoding a few
    queries is milliseconds next to an LM call."""

    def __init__(self, searcher: Searcher) -> None:
        self._searcher = searcher
        self._lock = threading.Lock()

    def search(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        with self._lock:
            return self._searcher.search(queries, k)


Job = TypeVar("Job")


def grouped_by_candidate(jobs: Sequence[Job], candidate: Callable[[Job], str]) -> list[Job]:
    """``jobs`` grouped by their ``candidate`` document, the group met first first and each group's jobs in their
    order: how a judge that reads the document first is asked, so each call after a group's first reuses the
    evaluated document (``benchmarks/prefix_replay.py`` replays production in this order)."""
    first: dict[str, int] = {}
    for job in jobs:
        first.setdefault(candidate(job), len(first))
    return sorted(jobs, key=lambda job: first[candidate(job)])


def classify(exc: BaseException) -> FailureKind:
    """``output``: invalid LM answers; ``call``: transient backend trouble; ``error``: anything else."""
    if isinstance(exc, LMOutputError):
        return "output"
    from dspy.utils.exceptions import is_retryable_lm_error  # transport, timeout, rate limit, server errors

    return "call" if is_retryable(exc) or is_retryable_lm_error(exc) else "error"


def answer_detail(exc: LMOutputError, **detail: Any) -> dict[str, Any] | None:
    """A failure's detail, with the LM's last raw answer when there was one (to see why it was rejected)."""
    if exc.last_answer is not None:
        detail["last_answer"] = exc.last_answer
    return detail or None


def describe_error(exc: BaseException) -> str:
    """One line for the failures table and logs, with credentials in addresses masked."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return redact(f"{type(exc).__name__}: {text}")[:2000]


class DocumentPipeline:
    """Runs documents through the frozen program; thread-safe, one instance per run."""

    def __init__(self, program: SynthesisProgram, corpus: Corpus, searcher: Searcher, settings: UnitSettings, *,
                 slots: AbstractContextManager, chunk_pool: Executor, retry_temperature: float = 0.7,
                 judge: RelevanceJudge | None = None, lexical: Any = None,
                 translator: QueryTranslator | None = None) -> None:
        self.program = program
        self.judge = judge or RelevanceJudge(program, chunk_size=settings.chunk_size)
        # BM25 over the corpus: the source document's rank (data-quality report) and, for a hybrid judge, each
        # candidate's score; optional, except that a hybrid judge needs it
        self.lexical = lexical
        if self.judge.needs_lexical and lexical is None:
            raise ValueError(f"the artifact's {self.judge.calibration.feature} judge needs BM25 scores: give the "
                             "pipeline a lexical ranker")
        self.translator = translator  # queries into the documents' language before the search; optional
        self.retry_temperature = retry_temperature
        self.corpus = corpus
        self.searcher = searcher
        self.settings = settings
        self.slots = slots
        self.chunk_pool = chunk_pool
        self._stopped = threading.Event()

    def stop(self) -> None:
        """The run is stopping (a second Ctrl-C, a full disk, a fatal backend error): nothing more is committed,
        so a document still in flight stays pending, whatever error its abandoned calls end in."""
        self._stopped.set()

    def run(self, doc_id: str, resample: int = 0, kept: KeptWork | None = None) -> DocumentResult:
        """Process one document; never raises for LM or backend trouble (it is in the result instead).

        ``resample > 0`` (an explicit retry of invalid outputs) samples at ``retry_temperature`` with
        ``rollout_id=resample``, so neither a deterministic model nor a cache hands back the same answers.
        ``kept`` (what an earlier attempt left in the store) is continued from: its features are not extracted
        again, its complete queries stay as they are, its incomplete ones are labelled again, and only the missing
        blueprints are planned and written (avoiding the kept queries' blueprints and wording).
        """
        if resample:
            lm = dspy.settings.lm.copy(rollout_id=resample, temperature=self.retry_temperature)
            with dspy.context(lm=lm):
                return self._run(doc_id, kept)
        return self._run(doc_id, kept)

    def _run(self, doc_id: str, kept: KeptWork | None = None) -> DocumentResult:
        started = time.perf_counter()
        result = DocumentResult(doc_id=doc_id, kept=kept.complete_positions if kept is not None else ())
        earlier = {q.position: q for q in kept.queries} if kept is not None else {}
        meter = UsageMeter()
        stage = "extract"
        try:
            text = self.corpus[doc_id].content
            result.texts[doc_id] = text
            if kept is not None and kept.features is not None:
                features = Features.from_dict(kept.features)
            else:
                with meter.stage("extract"), self.slots:
                    features = self.program.extract_features(text, max_identifiers=self.settings.max_identifiers)
            result.features = features.to_dict()
            stage = "plan"
            used = {p: Blueprint.model_validate(q.blueprint) for p, q in earlier.items()}
            missing = [p for p in range(self.settings.queries_per_doc) if p not in earlier]
            blueprints = self.plan(doc_id, text, features, len(missing), list(used.values()), result, meter)
            result.n_blueprints = len(earlier) + len(blueprints)
            if not result.n_blueprints:
                raise LMOutputError("no blueprint could be planned from the features", stage="plan")
            stage = "write"
            try:
                with meter.stage("write"), self.slots:
                    written = self.write(text, blueprints, result, avoid=[q.text for q in earlier.values()],
                                         positions=missing[:len(blueprints)])
            except LMOutputError as exc:
                if not earlier:
                    raise
                # a retry whose new blueprints all stay without a query still keeps (and relabels) the earlier ones
                result.failures.append(Failure(stage="write", kind="output", error=str(exc),
                                               detail=answer_detail(exc, missing_blueprints=missing)))
                written = {}
            # the kept queries an earlier attempt could not label completely are retrieved and labelled again
            redo = {p: q for p, q in earlier.items() if not q.complete}
            queries = {**{p: q.text for p, q in redo.items()}, **written}
            result.restated.update({p: q.restated_from for p, q in redo.items() if q.restated_from})
            planned = {**{p: used[p] for p in redo}, **dict(zip(missing, blueprints))}
            stage = "translate"
            translations = self.translate(doc_id, queries, result, meter)
            stage = "retrieve"
            searched = list(queries) if self.translator is None else list(translations)
            hits = dict(zip(searched, self.searcher.search([translations.get(p, queries[p]) for p in searched],
                                                           self.settings.top_k)))
            for pos, query in sorted(queries.items()):
                blueprint = planned[pos]
                found = hits.get(pos, [])  # an untranslated query is kept, without candidates (its failure is recorded)
                q = QueryResult(query_id=query_id(doc_id, pos), position=pos, text=query,
                                blueprint=blueprint.model_dump(mode="json"), restated_from=result.restated.get(pos),
                                translation=translations.get(pos),
                                candidates=[Candidate(rank, cid, float(score))
                                            for rank, (cid, score) in enumerate(found)])
                q.source_rank = next((c.rank for c in q.candidates if c.doc_id == doc_id), None)
                if self.lexical is not None:  # stored for every run: a later recalibration may want them
                    searched_text = translations.get(pos, query)  # BM25 reads the documents' language
                    q.bm25_source_rank = self.lexical.rank(searched_text, doc_id)
                    for cand, bm25 in zip(q.candidates,
                                          self.lexical.scores(searched_text, [c.doc_id for c in q.candidates])):
                        cand.lexical = bm25
                result.queries.append(q)
                for cand in q.candidates:
                    result.texts.setdefault(cand.doc_id, self.corpus[cand.doc_id].content)
            stage = "annotate"
            with meter.stage("annotate"):
                self._annotate(result)
            if len(result.kept) + len(result.queries) < result.n_blueprints \
                    or any(not q.complete for q in result.queries) \
                    or (self.translator is not None and len(translations) < len(queries)):
                result.status = "partial"
        except Exception as exc:  # noqa: BLE001 - recorded with its stage; the run goes on
            if stops_run(exc):
                raise  # a wrong key, a broken endpoint, an abandoned call: the runner stops; nothing is recorded
            if self._stopped.is_set():  # e.g. its chunks found the pools shut down: not a failure of the document
                logger.info("document %s left pending: the run stopped while it was at %s (%s); a rerun does it",
                            doc_id, stage, describe_error(exc))
                raise CallCancelled("the run stopped") from exc
            if isinstance(exc, LMOutputError):
                result.fail(exc.stage or stage, classify(exc), str(exc), answer_detail(exc))
            else:
                result.fail(stage, classify(exc), describe_error(exc))
            log = logger.warning if result.error_kind != "output" else logger.info
            log("document %s failed at %s (%s): %s", doc_id, result.stage, result.error_kind, result.error)
        result.usage = meter.snapshot()
        result.seconds = time.perf_counter() - started
        return result

    def translate(self, doc_id: str, queries: dict[int, str], result: DocumentResult,
                  meter: UsageMeter) -> dict[int, str]:
        """Each query in the documents' language, by position (nothing without a translator). A query whose
        translation stays invalid is recorded as a failure of the translate stage and left out."""
        if self.translator is None:
            return {}
        done: dict[int, str] = {}
        with meter.stage("translate"):
            for pos, query in queries.items():
                try:
                    with self.slots:
                        done[pos] = self.translator(query)
                except LMOutputError as exc:
                    result.failures.append(Failure(stage="translate", kind="output", error=str(exc),
                                                   query_id=query_id(doc_id, pos), detail=answer_detail(exc)))
        return done

    def plan(self, doc_id: str, text: str, features: Features, count: int, used: Sequence[Blueprint],
             result: DocumentResult, meter: UsageMeter) -> list[Blueprint]:
        """``count`` blueprints, none repeating ``used`` (those of queries kept from an earlier attempt). Degrade,
        don't drop: the planner's valid blueprints are kept and the rest drawn in code, and that is recorded. A
        document left with the generic default dimensions, and every document under ``--planner code``, gets its
        blueprints drawn in code without a planner call."""
        if count <= 0:
            return []
        seed = zlib.crc32(doc_id.encode("utf-8"))
        if self.settings.planner == "code" or generic_dimensions(features):
            # --planner code: the user's choice (scifact-embedded-9: the call was 14% of LM time). Generic dimensions:
            # nothing of the document's own to plan around (every extracted dimension was in the documents' script
            # and dropped): the planner would only pair identifiers with generic options, and on the CSL run it
            # failed that for 3 of the first 6 documents (naming identifiers as dimensions), ~21 s a call.
            return fallback_blueprints(features, count, already=used, seed=seed)
        with meter.stage("plan"), self.slots:
            try:
                return self.program.plan_blueprints(text, features, count, already=used, retries=PLAN_RETRIES)
            except BlueprintsIncomplete as exc:
                blueprints = fallback_blueprints(features, count, kept=exc.kept, already=used, seed=seed)
                result.failures.append(Failure(stage="plan", kind="output", error=str(exc),
                                               detail=answer_detail(exc, fallback="blueprints drawn in code",
                                                                    blueprints=len(blueprints),
                                                                    planned=len(exc.kept))))
                return blueprints

    def write(self, text: str, blueprints: Sequence[Blueprint], result: DocumentResult, *,
              avoid: Sequence[str] = (), positions: Sequence[int] | None = None) -> dict[int, str]:
        """Queries by position (``positions[i]`` is blueprint i's; default 0..n-1). Blueprints left without a valid
        query are recorded as a failure of the write stage and the rest are kept in their positions (the document
        is then partial); none valid fails it. ``avoid``: queries already kept for the document, which a new one
        must not nearly duplicate. Queries the writer wrote as questions and that were restated in the examples'
        form are noted in ``result.restated`` (position -> the question)."""
        if not blueprints:
            return {}
        at = list(positions) if positions is not None else list(range(len(blueprints)))
        tally = WriteTally()
        try:
            written = dict(enumerate(self.program.write_queries(text, blueprints, avoid=avoid, tally=tally,
                                                                hide_copied=self.settings.hide_copied,
                                                                copy_guard=self.settings.copy_guard,
                                                                question_guard=self.settings.question_guard)))
        except QueriesIncomplete as exc:
            missing = [at[n] for n in range(len(blueprints)) if n not in exc.kept]
            result.failures.append(Failure(stage="write", kind="output", error=str(exc),
                                           detail=answer_detail(exc, missing_blueprints=missing)))
            written = dict(sorted(exc.kept.items()))
        finally:
            result.restated.update({at[n]: question for n, question in tally.restated.items()})
            result.write_checks.extend((at[n], step, outcome) for n, step, outcome in tally.checks)
        return {at[n]: query for n, query in written.items()}

    def _annotate(self, result: DocumentResult) -> None:
        """Label every candidate of every query, in the judge's chunks with local ids; chunks run concurrently, and
        a chunk that fails is recorded as a failure (``RelevanceJudge.judge_all`` is the sequential form). A
        candidate the judge's cascade skips is not asked (the query's own document always is). A judge that shows
        the document first is asked about one candidate for all its queries in a row (the calls share the prompt's
        evaluated document); the labels are the same in any order."""
        todo: list[tuple[QueryResult, int, int]] = []
        judged: dict[str, list[Judgment | None]] = {}
        asked: dict[str, list[JudgeCandidate]] = {}
        for q in result.queries:
            asked[q.query_id] = [JudgeCandidate(result.texts[c.doc_id], c.score, lexical=c.lexical)
                                 for c in q.candidates]
            source = [i for i, c in enumerate(q.candidates) if c.doc_id == result.doc_id]
            skipped = self.judge.skips(asked[q.query_id], keep=source)
            judged[q.query_id] = [skipped.get(i) for i in range(len(q.candidates))]
            todo.extend((q, start, stop) for start, stop in self.judge.chunks(len(q.candidates))
                        if not all(i in skipped for i in range(start, stop)))
        if self.judge.groups_by_document:  # one candidate a call: group by it
            todo = grouped_by_candidate(todo, lambda job: job[0].candidates[job[1]].doc_id)
        jobs: list[tuple[QueryResult, int, int, Future]] = [
            (q, start, stop, submit_in_context(self.chunk_pool, self._label, q.text, asked[q.query_id][start:stop]))
            for q, start, stop in todo]
        fatal: BaseException | None = None
        for q, start, stop, future in jobs:  # wait for every chunk, so none outlives this document's meter
            chunk = q.candidates[start:stop]
            try:
                labels = future.result()
            except LMOutputError as exc:
                result.failures.append(Failure(
                    stage="annotate", kind="output", error=str(exc), query_id=q.query_id,
                    detail=answer_detail(exc, ranks=[start, start + len(chunk) - 1],
                                         doc_ids=[c.doc_id for c in chunk])))
                continue
            except Exception as exc:  # noqa: BLE001 - backend trouble fails the document (retried on resume)
                fatal = fatal or exc
                continue
            judged[q.query_id][start:start + len(labels)] = labels  # local id i is the i-th candidate of the chunk
        if fatal is not None:
            raise fatal
        for q in result.queries:  # a relative judge labels each candidate against the rest of its list
            for cand, judgment in zip(q.candidates, self.judge.settle(asked[q.query_id], judged[q.query_id])):
                if judgment is not None:
                    cand.label, cand.grade, cand.judge_score = judgment.label, judgment.grade, judgment.score
                    cand.skipped = judgment.skipped

    def _label(self, query: str, chunk: Sequence[JudgeCandidate]) -> list[Judgment]:
        with self.slots:
            return self.judge.judge(query, chunk)


def production_context(lm: dspy.LM, prompt_format: PromptFormat = "json") -> AbstractContextManager:
    """The DSPy settings every document runs under: the JSON steps' adapter (``prompt_format``: DSPy's JSONAdapter,
    or the compact one), no trace or LM history (a run makes hundreds of thousands of calls, and the store keeps
    what matters). The grading call sets its own adapter."""
    adapter = CompactJSONAdapter() if prompt_format == "compact" else dspy.JSONAdapter()
    return dspy.context(lm=lm, adapter=adapter, trace=None, disable_history=True)


def build_pipeline(inputs: ProductionInputs, judge: RelevanceJudge, *, slots: AbstractContextManager,
                   chunk_pool: Executor, retry_temperature: float) -> DocumentPipeline:
    """The pipeline of one process (the driver's thread pool, or one Ray worker), over its own copy of the
    index, encoder and BM25 ranker. With ``bm25-translated`` candidates the BM25 ranker also retrieves, and a
    cross-language task's queries are translated into the documents' language first."""
    definition = inputs.artifact.program.state.task_definition
    lexical = LexicalSourceRank(inputs.corpus, language=definition.document_language)
    translator = None
    if inputs.settings.candidates == "bm25-translated":
        searcher: Searcher = LexicalCandidates(lexical)  # serialised by the ranker's lock
        if definition.cross_language:
            translator = QueryTranslator(definition.document_language)
    else:
        searcher = LockedSearcher(inputs.context.candidates)
    return DocumentPipeline(inputs.artifact.program, inputs.corpus, searcher, inputs.settings, slots=slots,
                            chunk_pool=chunk_pool, retry_temperature=retry_temperature, judge=judge,
                            lexical=lexical, translator=translator)
