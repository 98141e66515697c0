"""``produce``: load a compiled artifact unchanged and turn a corpus into judged queries in a run store.

Documents run on a thread pool; every LM call takes one of ``concurrency`` slots, so up to that many calls
are in flight (a vLLM or llama.cpp server batches them; the embedded engine serialises them, which is
slower but correct). The fixed, long instruction of each step is the system message, the first part of
every prompt, so server-side prefix caching reuses it. Results are committed by this thread only, one
transaction per document, in completion order; the export orders them, so concurrency never changes the
output. Ctrl-C stops taking new documents and commits those in flight; a second Ctrl-C abandons them (their
calls are cancelled) and stops at once; a kill loses only those. Authentication and protocol errors stop the
run at the first one, with nothing recorded for the documents in flight, so a rerun does them. With ``ray``,
the documents run on Ray workers instead (:mod:`~syntra_dspy.production.ray_executor`) under the same contract:
this process alone writes the store.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.retrieval.context import CorpusContext
from syntra_dspy.retrieval.encoder import Encoder
from syntra_dspy.errors import ConfigError, RunAbandoned, is_fatal_backend_error, stops_run
from syntra_dspy.code_version import code_version
from syntra_dspy.lm.endpoints import RoutedEngine
from syntra_dspy.lm.guarded import GuardedLM, cancel_calls
from syntra_dspy.lm.roles import prepare_lm, with_engine_build
from syntra_dspy.lm.usage import submit_in_context
from syntra_dspy.production.ledger import RunLedger
from syntra_dspy.production.pipeline import build_pipeline, production_context
from syntra_dspy.production.ray_cluster import ray_connection
from syntra_dspy.production.ray_executor import execute_on_ray
from syntra_dspy.production.ray_worker import worker_plan
from syntra_dspy.production.records import retrieval_instruction
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.production.setup import (
    ProductionInputs,
    candidates_record,
    load_inputs,
    resolve_generator,
    resolve_generator_spec,
    run_identity,
)
from syntra_dspy.production.store import RunStore, check_compatible
from syntra_dspy.production.units import BackendState, DocumentResult, WorkUnit
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.production.cascade import production_cascade
from syntra_dspy.task import EncoderSpec, LMSpec

logger = logging.getLogger(__name__)


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
    backend: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # schema forms, endpoint books

    @property
    def calls(self) -> int:
        return sum(u["calls"] for u in self.usage.values())

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in ("store", "artifact_version", "session_id", "status", "processed",
                                               "seconds", "documents", "queries", "records", "failures_by_stage",
                                               "usage", "backend")}
        data["calls"] = self.calls
        return data


def backend_state(lm: dspy.LM) -> BackendState | None:
    """How the served generator was reached so far (None for the embedded or scripted LM): for the run store."""
    if not isinstance(lm, GuardedLM):
        return None
    forms = {"generator": lm.structured.describe()} if lm.structured is not None else {}
    engine = lm.engine
    books = {"generator": engine.snapshot()} if isinstance(engine, RoutedEngine) else {}
    return BackendState(schema_forms=forms, endpoints=books)


def _open_run(store_path: Path, inputs: ProductionInputs, generator_info: dict[str, Any]) -> RunStore:
    store = RunStore.open(store_path)
    try:
        meta = store.meta()
        wanted = run_identity(inputs)
        if "identity" in meta:
            if meta["identity"].get("top_k", 0) > wanted["top_k"] == len(inputs.corpus):
                wanted["top_k"] = meta["identity"]["top_k"]  # started before top_k was capped: same retrieval
            check_compatible(meta["identity"], wanted, path=store_path)
            if meta["artifact"]["version"] != inputs.artifact.version:
                raise ConfigError("this run store belongs to another artifact version", path=store_path)
            first = meta.get("generator", {}).get("model")
            if first and first != generator_info.get("model"):
                raise ConfigError(f"this run was started with generator {first!r}, not {generator_info.get('model')!r}",
                                  path=store_path, field="generator",
                                  hint="pass the same --generator (a new address is fine), or use a new --store")
            _absolute_corpus(store, meta, inputs)
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
                      "corpus": {"path": recorded_corpus_path(inputs.corpus.source),
                                 "fingerprint": inputs.corpus.fingerprint, "documents": len(inputs.corpus)},
                      "encoder": inputs.encoder.id, "index_fingerprint": inputs.index.fingerprint,
                      "candidates": candidates_record(inputs)},
            generator=generator_info,
        )
        return store
    except BaseException:
        store.close()
        raise


def recorded_corpus_path(source: str | None) -> str | None:
    """The corpus as the store records it: absolute and resolved, so a command run later from another folder
    (``export --out``, ``backup``) still knows which file the run read and never writes over it."""
    if not source or source.startswith("<"):  # "<memory>": built in memory, no file
        return source
    return str(Path(source).resolve())


def _absolute_corpus(store: RunStore, meta: dict[str, Any], inputs: ProductionInputs) -> None:
    """A store made before corpus paths were recorded absolute names its corpus relative to a folder it did not
    record: resuming it over the same documents records the absolute path, which later commands guard."""
    settings = meta.get("settings") or {}
    corpus = settings.get("corpus") or {}
    path = corpus.get("path")
    if isinstance(path, str) and path and not path.startswith("<") and not Path(path).is_absolute() \
            and corpus.get("fingerprint") == inputs.corpus.fingerprint:
        absolute = recorded_corpus_path(inputs.corpus.source)
        store.set_meta(settings={**settings, "corpus": {**corpus, "path": absolute}})


def _plan(store: RunStore, inputs: ProductionInputs, config: ProduceConfig) -> int | None:
    """Diversity-aware selection (as in compile), run once and stored; ``docs`` may grow on a later run. Returns
    the target planned for (None: every document the selection keeps)."""
    meta = store.meta()
    docs, select = config.plan_target(meta.get("selection"), store=store.path)
    if not select:
        return docs
    if config.docs is None:
        logger.info("a new run store plans %d documents (the default; --docs N for more, --docs all for every "
                    "document the diverse selection keeps of the corpus's %d)", docs, len(inputs.corpus))
    settings = meta["settings"]
    selected = inputs.context.select(target=docs, tau=settings["selection_tau"], seed=settings["seed"])
    planned = store.planned()
    if selected[: len(planned)] != planned:
        raise ConfigError("the diverse selection no longer starts with the stored plan", path=store.path,
                          hint="the corpus or index changed; use a new --store")
    added = store.plan(selected)
    store.set_meta(selection={"target": docs, "count": len(selected)})
    logger.info("planned %d documents (%d new) by diverse selection", len(selected), added)
    return docs


def produce(artifact_path: str | Path, store: str | Path, config: ProduceConfig | None = None, *,
            corpus: str | Path | Corpus | None = None, generator: str | list[str] | LMSpec | dspy.LM | None = None,
            encoder: str | EncoderSpec | Encoder | None = None, context: CorpusContext | None = None,
            **settings: Any) -> ProduceSummary:
    """Run (or resume) production from a compiled artifact into the SQLite run store ``store``.

    ``config`` (a :class:`ProduceConfig`) holds every setting; a caller may instead pass its fields as keywords
    (``produce(art, store, top_k=10)``), not both. The inputs: ``corpus`` (a file or a ``Corpus``; default the one
    the artifact was compiled on), ``generator`` (``MODEL[@API_BASE]`` flags, an ``LMSpec`` or an LM; default the
    artifact's), ``encoder`` (default the artifact's), or ``context``, a corpus context built already (e.g. by a
    comparison), in place of ``corpus``, ``encoder`` and ``config.index_dir``.

    Refuses an artifact that does not verify and a store started with other settings. Documents already
    done are kept and never redone; documents that failed on the backend are retried; those whose LM
    output stayed invalid (and partial ones) only with ``retry_failed``, sampled afresh at ``retry_temperature``
    (the artifact's temperature, usually 0, would give the same answers again). ``docs`` (default: 10 for a new run
    store, the stored plan for a resumed one) may be ``"all"``: every document the diverse selection keeps.
    ``concurrency`` defaults to what the engine serves: 1 call at a time for the embedded engine, 4 for a server.
    Raises ``ProductionAborted`` when ``max_consecutive_errors`` documents in a row fail on the backend (default
    ``max(10, 2 * concurrency)``); what finished is kept. With
    ``artifact_key_env``, only an artifact signed with the team key in that variable is accepted. ``timeout``
    (total seconds per request) and ``retries`` bound every call to a served generator. With ``ray``, the
    documents run on Ray workers (``concurrency`` calls in flight across them) and this process alone writes
    the store; the records are the same. ``candidates`` (``dense`` or ``bm25-translated``) overrides the task
    file's candidate source; the store records which was used, and a resumed run must use the same.
    """
    config = ProduceConfig.of_call(config, settings)
    ray = config.ray
    if ray is not None and isinstance(generator, dspy.LM):
        raise ConfigError("with Ray, the generator must be named, not given as an LM object: each worker builds "
                          "its own", field="generator", hint="pass generator='MODEL[@API_BASE]' or an LMSpec")
    with ExitStack() as cluster:
        ray_module = cluster.enter_context(ray_connection(ray)) if ray is not None else None
        inputs = load_inputs(artifact_path, config, corpus=corpus, encoder=encoder, context=context)
        lm, generator_info = resolve_generator(inputs.artifact.meta, generator, config.api_key_env,
                                               timeout=config.timeout, retries=config.retries)
        config = config.with_concurrency(embedded=bool(generator_info.get("embedded")))
        _warn_unused(config)
        plan = None
        if ray_module is None:
            prepare_lm(lm)
            generator_info = with_engine_build(generator_info)
        else:  # each worker builds and loads its own LM from the same settings
            spec = resolve_generator_spec(inputs.artifact.meta, generator, config.api_key_env,
                                          timeout=config.timeout, retries=config.retries)
            plan = worker_plan(inputs, spec, config, corpus=corpus)
        cascade = production_cascade(inputs.artifact.program, config.judge_cascade,
                                     coverage=config.cascade_coverage, store=Path(store),
                                     grades=config.cascade_grades)
        judge = RelevanceJudge(inputs.artifact.program, chunk_size=inputs.settings.chunk_size, cascade=cascade)
        if plan is not None:  # the workers judge with the same cascade (a margin may come from this store)
            plan = plan.model_copy(update={"cascade": cascade})
        run = _open_run(Path(store), inputs, generator_info)
        grader_note = _calibration_grader_note(inputs.artifact, generator_info)
        run.set_meta(judge={**judge.describe(), **grader_note})
        try:
            target = _plan(run, inputs, config)
            todo = run.todo(retry_failed=config.retry_failed)
            session = run.begin_session(concurrency=config.concurrency, generator=generator_info, options={
                "docs": "all" if target is None else target, "retry_failed": config.retry_failed,
                "retry_temperature": config.retry_temperature,
                # what the generator may answer, per session: a resumed run may change them
                "max_identifiers": inputs.settings.max_identifiers, "hide_copied": inputs.settings.hide_copied,
                "copy_guard": inputs.settings.copy_guard, "question_guard": inputs.settings.question_guard,
                "planner": inputs.settings.planner, "prompt_format": inputs.settings.prompt_format,
                # which the judge's prompt showed first, per session (the artifact's calibration says which)
                "grade_order": judge.grade_order,
                "todo": len(todo), "resampled": sum(1 for _, r, _ in todo if r), "code": code_version(),
                **({"ray": ray.describe()} if ray is not None else {})})
            logger.info("session %d: %d documents to process (%s), concurrency %d%s", session, len(todo),
                        run.document_counts(), config.concurrency, " on Ray" if ray is not None else "")
            try:
                if ray_module is None:
                    status, processed, seconds = _execute(run, session, inputs, lm, todo, judge, config)
                else:
                    status, processed, seconds = execute_on_ray(ray_module, run, session, plan, todo, judge,
                                                                config)
            finally:
                if judge.fallback:  # the backend gave no label probabilities: say so where the records come from
                    run.set_meta(judge={**judge.describe(), **grader_note})
            return _summary(run, inputs, session, status, processed, seconds)
        finally:
            run.close()


def _calibration_grader_note(artifact: Any, generator_info: dict[str, Any]) -> dict[str, Any]:
    """When a graded judge's calibration was fitted on another model's grades than this run grades with, warn (its cut
    points were set for the other model's spread of grades) and return what the store records of it."""
    from syntra_dspy.judging.judge import judge_mode
    from syntra_dspy.production.setup import calibration_grader, grader, same_grader

    if judge_mode(artifact.program) != "graded":
        return {}
    fitted, grading = calibration_grader(artifact.meta), grader(generator_info)
    if same_grader(fitted, grading):
        return {}
    logger.warning("the judge's calibration was fitted on grades of %s, and this run grades with %s: its cut points "
                   "may not suit this model's grades. Refit it first: syntra artifacts recalibrate %s --out "
                   "artifacts --generator MODEL[@API_BASE] (then produce with the new version)", fitted[0],
                   grading[0], artifact.path)
    return {"calibration_grader": {"fitted_on": fitted[0], "grading_with": grading[0]}}


def _warn_unused(config: ProduceConfig) -> None:
    """Say which given settings do nothing in this run, rather than ignore them silently (the embedded engine
    already refuses the served generator's settings)."""
    if "retry_temperature" in config.model_fields_set and not config.retry_failed:
        logger.warning("--retry-temperature applies to documents redone with --retry-failed; without it nothing is "
                       "sampled at that temperature")


def documents_in_flight(lm: dspy.LM, concurrency: int) -> int:
    """How many documents run at once. For a served model, twice the call slots: while some documents wait
    between sequential steps (extract, plan, write), others keep every slot busy. For an engine whose calls share
    one context (the embedded llama.cpp engine), one per slot: a call continues the prompt the previous call left,
    and a second document's calls in between evict it. On 4 SciFact documents with the embedded 1.5B, the same calls
    took 0.85x the time for the steps that reuse a document's prompt (extract, plan, write, rewrites; p 0.008),
    grading alike, the run 0.91x (experiments/documents_in_flight)."""
    return concurrency if getattr(getattr(lm, "engine", None), "shares_one_context", False) else 2 * concurrency


def _execute(run: RunStore, session: int, inputs: ProductionInputs, lm: dspy.LM, todo: list[WorkUnit],
             judge: RelevanceJudge, config: ProduceConfig) -> tuple[str, int, float]:
    concurrency = config.concurrency
    ledger = RunLedger(run, session, total=len(todo), max_errors=config.max_errors, progress=config.progress,
                       backend=lambda: backend_state(lm))
    slots = threading.BoundedSemaphore(concurrency)
    # The slots, not the pools, bound the calls in flight.
    doc_pool = ThreadPoolExecutor(max_workers=documents_in_flight(lm, concurrency), thread_name_prefix="syntra-doc")
    chunk_pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="syntra-chunk")
    pipeline = build_pipeline(inputs, judge, slots=slots, chunk_pool=chunk_pool,
                              retry_temperature=config.retry_temperature)
    pending = iter(todo)
    inflight: set[Future] = set()
    status, stopping = "completed", False
    fatal: BaseException | None = None
    try:
        with ledger, production_context(lm, inputs.settings.prompt_format):
            def fill() -> None:
                while not stopping and len(inflight) < 3 * concurrency:
                    unit = next(pending, None)
                    if unit is None:
                        return
                    inflight.add(submit_in_context(doc_pool, pipeline.run, *unit))

            while True:
                try:  # filling is inside the try too: a Ctrl-C that lands while documents are submitted is handled
                    fill()
                    if not inflight:
                        break
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
                        ledger.commit(result)  # a Ctrl-C here rolls back; the future stays to retry
                        inflight.discard(future)
                    if fatal is not None:
                        stopping, status = True, "aborted"
                        pipeline.stop()
                        cancel_calls(lm)  # documents in flight stay pending; a rerun does them
                        inflight.clear()
                        break
                    if ledger.backend_down and not stopping:
                        stopping, status = True, "aborted"
                        for future in inflight:
                            future.cancel()
                        inflight = {f for f in inflight if not f.cancelled()}
                except KeyboardInterrupt:
                    if stopping and status == "interrupted":
                        pipeline.stop()
                        cancel_calls(lm)  # wake workers waiting on a call or a retry; nothing more is committed
                        raise RunAbandoned from None
                    stopping, status = True, "interrupted"
                    for future in inflight:
                        future.cancel()
                    inflight = {f for f in inflight if not f.cancelled()}
                    logger.warning("interrupted: committing %d documents in flight (Ctrl-C again to abandon them; a "
                                   "second SIGTERM does too)",
                                   len(inflight))
    finally:
        pipeline.stop()  # whatever ended the loop (a full disk too), what is still in flight stays pending
        doc_pool.shutdown(wait=False, cancel_futures=True)
        chunk_pool.shutdown(wait=False, cancel_futures=True)
    ledger.conclude(status, fatal, retry_failed=config.retry_failed)
    return status, ledger.processed, ledger.seconds


def _summary(run: RunStore, inputs: ProductionInputs, session: int, status: str, processed: int,
             seconds: float) -> ProduceSummary:
    queries, records = run.scalar("SELECT count(*) FROM queries"), run.count_records()
    return ProduceSummary(
        store=str(run.path), artifact_version=inputs.artifact.version, session_id=session, status=status,
        processed=processed, seconds=round(seconds, 3), documents=run.document_counts(), queries=queries,
        records=records, failures_by_stage=dict(Counter(f["stage"] for f in run.failures(current=True))),
        usage=run.usage(session), backend=run.backend(session))
