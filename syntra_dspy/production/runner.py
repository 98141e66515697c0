"""``produce``: load a compiled artifact unchanged and turn a corpus into judged queries in a run store.

Documents run on a thread pool; every LM call takes one of ``concurrency`` slots, so up to that many calls
are in flight (a vLLM or llama.cpp server batches them; the embedded engine serialises them, which is
slower but correct). The fixed, long instruction of each step is the system message, the first part of
every prompt, so server-side prefix caching reuses it. Results are committed by this thread only, one
transaction per document, in completion order; the export orders them, so concurrency never changes the
output. Ctrl-C stops taking new documents and commits those in flight; a second Ctrl-C abandons them (their
calls are cancelled) and stops at once; a kill loses only those. Authentication and protocol errors stop the
run at the first one, with nothing recorded for the documents in flight, so a rerun does them.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from syntra_dspy.corpus import Corpus
from syntra_dspy.encoder import Encoder
from syntra_dspy.errors import ConfigError, RunAbandoned, SyntraError, is_fatal_backend_error, stops_run
from syntra_dspy.lm.guarded import cancel_calls
from syntra_dspy.lm.roles import prepare_lm
from syntra_dspy.lm.usage import submit_in_context
from syntra_dspy.production.pipeline import DocumentPipeline, LockedSearcher, describe_error
from syntra_dspy.production.records import retrieval_instruction
from syntra_dspy.production.setup import (
    DEFAULT_QUERIES_PER_DOC,
    DEFAULT_TOP_K,
    ProductionInputs,
    load_inputs,
    resolve_generator,
)
from syntra_dspy.production.store import RunStore, check_compatible
from syntra_dspy.production.store_file import storage_error
from syntra_dspy.production.units import DocumentResult
from syntra_dspy.programs.judge import RelevanceJudge
from syntra_dspy.retrieval import IndexCandidates, LexicalSourceRank
from syntra_dspy.selection import select_diverse
from syntra_dspy.task import LMSpec

logger = logging.getLogger(__name__)


class ProductionAborted(SyntraError):
    """The backend kept failing; finished documents are kept and the same command resumes."""


@dataclass
class ProduceSummary:
    """One ``produce`` session and where the whole run stands after it."""

    store: str
    artifact_version: str
    session_id: int
    status: str
    processed: int = 0
    seconds: float = 0.0
    documents: dict[str, int] = field(default_factory=dict)
    queries: int = 0
    records: int = 0  # queries the default export keeps (before removing duplicates across documents)
    failures_by_stage: dict[str, int] = field(default_factory=dict)
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        return sum(u["calls"] for u in self.usage.values())

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in ("store", "artifact_version", "session_id", "status", "processed",
                                               "seconds", "documents", "queries", "records", "failures_by_stage",
                                               "usage")}
        data["calls"] = self.calls
        return data


def _identity(inputs: ProductionInputs) -> dict[str, Any]:
    """What a resumed run must share with the first session, or its records would differ."""
    art, s = inputs.artifact, inputs.settings
    return {
        "artifact_checksum": art.checksum,
        "queries_per_doc": s.queries_per_doc, "top_k": s.top_k, "chunk_size": s.chunk_size,
        "corpus_fingerprint": inputs.corpus.fingerprint, "encoder": inputs.encoder.id,
        "index_fingerprint": inputs.index.fingerprint,
    }


def _open_run(store_path: Path, inputs: ProductionInputs, generator_info: dict[str, Any]) -> RunStore:
    store = RunStore.open(store_path)
    try:
        meta = store.meta()
        wanted = _identity(inputs)
        if "identity" in meta:
            check_compatible(meta["identity"], wanted, path=store_path)
            if meta["artifact"]["version"] != inputs.artifact.version:
                raise ConfigError("this run store belongs to another artifact version", path=store_path)
            first = meta.get("generator", {}).get("model")
            if first and first != generator_info.get("model"):
                raise ConfigError(f"this run was started with generator {first!r}, not {generator_info.get('model')!r}",
                                  path=store_path, field="generator",
                                  hint="pass the same --generator (a new address is fine), or use a new --store")
            return store
        art, meta = inputs.artifact, inputs.artifact.meta
        definition = meta.task_definition.model_dump(mode="json")
        store.set_meta(
            identity=wanted,
            artifact={"path": str(art.path.resolve()), "version": art.version, "checksum": art.checksum,
                      "task": art.task, "strategy": meta.strategy,
                      "prompts_sha256": {k: v.system_prompt_sha256 for k, v in meta.prompts.items()}},
            task_definition=definition,
            instruction=retrieval_instruction(definition),
            settings={"queries_per_doc": inputs.settings.queries_per_doc, "top_k": inputs.settings.top_k,
                      "chunk_size": inputs.settings.chunk_size,
                      "max_doc_chars": meta.settings.max_doc_chars,
                      "selection_tau": meta.settings.selection_tau,
                      "seed": meta.settings.seed,
                      "corpus": {"path": inputs.corpus.source, "fingerprint": inputs.corpus.fingerprint,
                                 "documents": len(inputs.corpus)},
                      "encoder": inputs.encoder.id, "index_fingerprint": inputs.index.fingerprint},
            generator=generator_info,
        )
        return store
    except BaseException:
        store.close()
        raise


def _plan(store: RunStore, inputs: ProductionInputs, docs: int | None) -> None:
    """Diversity-aware selection (as in compile), run once and stored; ``docs`` may grow on a later run."""
    if docs is not None and (isinstance(docs, bool) or not isinstance(docs, int) or docs < 1):
        raise ConfigError(f"docs must be a positive integer or None (all selected documents), got {docs!r}",
                          field="docs")
    meta = store.meta()
    sel = meta.get("selection")
    if sel is not None:
        exhausted = sel["target"] is None or sel["count"] < sel["target"]
        if docs is not None and docs < sel["count"]:
            raise ConfigError(f"this run store already plans {sel['count']} documents, more than --docs {docs}",
                              path=store.path, field="docs", hint=f"omit --docs or pass --docs {sel['count']} or more")
        if exhausted or (docs is not None and docs == sel["count"]):
            return
    settings = meta["settings"]
    selected = select_diverse(inputs.index, target=docs, tau=settings["selection_tau"], seed=settings["seed"])
    planned = store.planned()
    if selected[: len(planned)] != planned:
        raise ConfigError("the diverse selection no longer starts with the stored plan", path=store.path,
                          hint="the corpus or index changed; use a new --store")
    added = store.plan(selected)
    store.set_meta(selection={"target": docs, "count": len(selected)})
    logger.info("planned %d documents (%d new) by diverse selection", len(selected), added)


class _Progress:
    """A tqdm bar over documents with queries, records, failures, tokens/s (and tqdm's ETA)."""

    def __init__(self, total: int, enabled: bool) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, unit="doc", desc="produce", disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True)
        self.counts: Counter[str] = Counter()
        self.started = time.perf_counter()

    def update(self, result: DocumentResult) -> None:
        c = self.counts
        c["queries"] += len(result.queries)
        c["records"] += result.records
        c["failures"] += len(result.failures)
        c["tokens"] += result.tokens
        c["calls"] += result.calls
        rate = c["tokens"] / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix(q=c["queries"], rec=c["records"], fail=c["failures"], tok_s=f"{rate:.0f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def produce(artifact_path: str | Path, store: str | Path, *, corpus: str | Path | Corpus | None = None,
            corpus_format: str | None = None, docs: int | None = None,
            queries_per_doc: int = DEFAULT_QUERIES_PER_DOC, top_k: int = DEFAULT_TOP_K, chunk_size: int | None = None,
            concurrency: int = 4, generator: str | LMSpec | dspy.LM | None = None, api_key_env: str | None = None,
            encoder: str | Encoder | None = None, index_dir: str | Path | None = None, retry_failed: bool = False,
            retry_temperature: float = 0.7, progress: bool = True,
            max_consecutive_errors: int | None = None, artifact_key_env: str | None = None,
            timeout: float | None = None, retries: int | None = None) -> ProduceSummary:
    """Run (or resume) production from a compiled artifact into the SQLite run store ``store``.

    Refuses an artifact that does not verify and a store started with other settings. Documents already
    done are kept and never redone; documents that failed on the backend are retried; those whose LM
    output stayed invalid (and partial ones) only with ``retry_failed``, sampled afresh at ``retry_temperature``
    (the artifact's temperature, usually 0, would give the same answers again). ``docs=None`` takes every document
    the diverse selection keeps. Raises ``ProductionAborted`` when ``max_consecutive_errors`` documents in a
    row fail on the backend (default ``max(10, 2 * concurrency)``); what finished is kept. With
    ``artifact_key_env``, only an artifact signed with the team key in that variable is accepted. ``timeout``
    (total seconds per request) and ``retries`` bound every call to a served generator.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}", field="concurrency")
    if isinstance(retry_temperature, bool) or not isinstance(retry_temperature, (int, float)) \
            or not 0 <= retry_temperature <= 2:  # also refuses nan and inf
        raise ConfigError(f"retry_temperature must be a number from 0 to 2, got {retry_temperature!r}",
                          field="retry_temperature")
    inputs = load_inputs(artifact_path, corpus=corpus, corpus_format=corpus_format, encoder=encoder,
                         index_dir=index_dir, queries_per_doc=queries_per_doc, top_k=top_k, chunk_size=chunk_size,
                         artifact_key_env=artifact_key_env)
    lm, generator_info = resolve_generator(inputs.artifact.meta, generator, api_key_env,
                                           timeout=timeout, retries=retries)
    prepare_lm(lm)
    judge = RelevanceJudge(inputs.artifact.program, chunk_size=inputs.settings.chunk_size)
    store_path = Path(store)
    run = _open_run(store_path, inputs, generator_info)
    run.set_meta(judge=judge.describe())
    try:
        _plan(run, inputs, docs)
        todo = run.todo(retry_failed=retry_failed)
        session = run.begin_session(concurrency=concurrency, generator=generator_info, options={
            "docs": docs, "retry_failed": retry_failed, "retry_temperature": retry_temperature, "todo": len(todo),
            "resampled": sum(1 for _, r in todo if r)})
        logger.info("session %d: %d documents to process (%s), concurrency %d", session, len(todo),
                    run.document_counts(), concurrency)
        try:
            status, processed, seconds = _execute(run, session, inputs, lm, todo, judge, concurrency=concurrency,
                                                  progress=progress, retry_temperature=retry_temperature,
                                                  max_errors=max_consecutive_errors or max(10, 2 * concurrency),
                                                  retry_failed=retry_failed)
        finally:
            if judge.fallback:  # the backend gave no label probabilities: say so where the records come from
                run.set_meta(judge=judge.describe())
        return _summary(run, inputs, session, status, processed, seconds)
    finally:
        run.close()


def _execute(run: RunStore, session: int, inputs: ProductionInputs, lm: dspy.LM, todo: list[tuple[str, int]],
             judge: RelevanceJudge, *,
             concurrency: int, progress: bool, max_errors: int, retry_temperature: float,
             retry_failed: bool = False) -> tuple[str, int, float]:
    started = time.perf_counter()
    bar = _Progress(len(todo), progress)
    slots = threading.BoundedSemaphore(concurrency)
    searcher = LockedSearcher(IndexCandidates(inputs.corpus, inputs.encoder, inputs.index))
    # Twice as many documents as call slots: while some wait between sequential steps (extract → plan → write),
    # others keep every slot busy. The slots, not the pools, bound the calls in flight.
    doc_pool = ThreadPoolExecutor(max_workers=2 * concurrency, thread_name_prefix="syntra-doc")
    chunk_pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="syntra-chunk")
    language = inputs.artifact.program.state.task_definition.document_language
    pipeline = DocumentPipeline(inputs.artifact.program, inputs.corpus, searcher, inputs.settings, slots=slots,
                                chunk_pool=chunk_pool, retry_temperature=retry_temperature, judge=judge,
                                lexical=LexicalSourceRank(inputs.corpus, language=language))
    pending = iter(todo)
    inflight: set[Future] = set()
    processed, consecutive, status = 0, 0, "completed"
    stopping = False
    last_error: str | None = None
    fatal: BaseException | None = None
    try:
        # No DSPy trace or LM history: a run makes hundreds of thousands of calls, and the store keeps what matters.
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None, disable_history=True):
            def fill() -> None:
                while not stopping and len(inflight) < 3 * concurrency:
                    unit = next(pending, None)
                    if unit is None:
                        return
                    inflight.add(submit_in_context(doc_pool, pipeline.run, *unit))

            fill()
            while inflight:
                try:
                    done, _ = wait(inflight, timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in done:
                        try:
                            result: DocumentResult = future.result()
                        except Exception as exc:
                            if not stops_run(exc):
                                raise
                            if is_fatal_backend_error(exc):
                                fatal = fatal or exc  # every further call would fail alike: stop, record nothing
                            inflight.discard(future)  # an abandoned call: the document stays to do
                            continue
                        try:
                            run.commit(result, session)  # a Ctrl-C here rolls back; the future stays to retry
                        except sqlite3.OperationalError as exc:  # e.g. a full disk: rolled back, store intact
                            raise storage_error(exc, run.path) from None
                        inflight.discard(future)
                        processed += 1
                        bar.update(result)
                        if result.status == "failed" and result.error_kind != "output":
                            consecutive, last_error = consecutive + 1, result.error
                        elif result.status != "failed":
                            consecutive = 0
                    if fatal is not None:
                        stopping, status = True, "aborted"
                        cancel_calls(lm)  # documents in flight stay pending; a rerun does them
                        inflight.clear()
                        break
                    if consecutive >= min(max_errors, len(todo)) and not stopping:
                        stopping, status = True, "aborted"
                        for future in inflight:
                            future.cancel()
                        inflight = {f for f in inflight if not f.cancelled()}
                    fill()
                except KeyboardInterrupt:
                    if stopping and status == "interrupted":
                        cancel_calls(lm)  # wake workers waiting on a call or a retry; nothing more is committed
                        raise RunAbandoned from None
                    stopping, status = True, "interrupted"
                    for future in inflight:
                        future.cancel()
                    inflight = {f for f in inflight if not f.cancelled()}
                    logger.warning("interrupted: committing %d documents in flight (Ctrl-C again to abandon them)",
                                   len(inflight))
    except KeyboardInterrupt:
        _end_session_quietly(run, session, "interrupted")
        raise
    except BaseException:
        _end_session_quietly(run, session, "error")
        raise
    finally:
        bar.close()
        doc_pool.shutdown(wait=False, cancel_futures=True)
        chunk_pool.shutdown(wait=False, cancel_futures=True)
    run.end_session(session, status)
    if status == "interrupted":
        raise KeyboardInterrupt
    if fatal is not None:
        status_code = getattr(fatal, "status", None)
        cause = describe_error(fatal) + (f" (HTTP {status_code})" if status_code else "")
        raise ProductionAborted(f"the LM backend refused the run: {cause}; stopped at once, since every further "
                                "call would fail the same way", path=run.path,
                                hint="fix the key (--api-key-env), the server address or the model name; "
                                     + _resume_hint(run, retry_failed))
    if status == "aborted":
        raise ProductionAborted(
            f"{consecutive} documents in a row failed on the LM backend or its configuration (last: {last_error}); "
            "stopped",
            path=run.path, hint="check the server; " + _resume_hint(run, retry_failed))
    return status, processed, time.perf_counter() - started


def _resume_hint(run: RunStore, retry_failed: bool) -> str:
    """What rerunning the same command would really do (a hint that promises a resume must deliver one)."""
    todo = len(run.todo(retry_failed=retry_failed))
    if todo:
        return f"finished documents are kept; rerun the same command to resume ({todo} documents to do)"
    counts = run.document_counts()
    redo = counts["failed"] + counts["partial"]
    return (f"finished documents are kept; the same command would find nothing to do, since the {redo} failed "
            "documents failed for a reason a plain rerun does not retry: fix the cause, then rerun with "
            "--retry-failed")


def _end_session_quietly(run: RunStore, session: int, status: str) -> None:
    """Mark the session's end on the way out of an error; a store that cannot be written (a full disk) must not
    hide the error that stopped the run."""
    try:
        run.end_session(session, status)
    except sqlite3.Error as exc:
        logger.warning("could not mark session %d %s in the run store: %s", session, status, exc)


def _summary(run: RunStore, inputs: ProductionInputs, session: int, status: str, processed: int,
             seconds: float) -> ProduceSummary:
    queries, records = run.scalar("SELECT count(*) FROM queries"), run.count_records()
    return ProduceSummary(
        store=str(run.path), artifact_version=inputs.artifact.version, session_id=session, status=status,
        processed=processed, seconds=round(seconds, 3), documents=run.document_counts(), queries=queries,
        records=records, failures_by_stage=dict(Counter(f["stage"] for f in run.failures(current=True))),
        usage=run.usage(session))
