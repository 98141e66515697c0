"""``syntra produce --dry-run``: the LM work a production run would do, before any model is loaded or called.

The artifact is verified and the corpus read (for its size); the run store, when it exists, is only read: its plan
says which documents are left and its usage how many calls, tokens and seconds a document took on this machine.
No encoder, index or LM is loaded, so the documents a new plan adds are an upper bound (the diverse selection may
keep fewer than ``--docs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syntra_dspy.estimate import Estimate, produce_estimate
from syntra_dspy.judging.judge import judge_mode
from syntra_dspy.lm.roles import embedded_name
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.production.setup import (
    load_verified,
    resolve_corpus,
    resolve_generator_spec,
    unit_identity,
    unit_settings,
)
from syntra_dspy.production.store import RunStore, check_compatible


def plan_production(artifact_path: str | Path, store: str | Path, config: ProduceConfig, *,
                    corpus: str | Path | None = None, generator: Any = None) -> Estimate:
    """What :func:`~syntra_dspy.production.produce` would ask of the generator (see the module docstring). Refuses
    what ``produce`` would refuse before its first call: an artifact that does not verify, a setting the judge does
    not use, a store started with other settings, fewer documents than the store plans."""
    artifact = load_verified(artifact_path, config.artifact_key_env)
    meta = artifact.meta
    documents = len(resolve_corpus(meta.task_spec.corpus, corpus, config.corpus_format))
    settings = unit_settings(config, artifact, documents)
    spec = resolve_generator_spec(meta, generator, config.api_key_env, timeout=config.timeout, retries=config.retries)
    embedded = embedded_name(spec.model) is not None
    concurrency = config.with_concurrency(embedded=embedded).concurrency or 1
    usage, processed = None, 0
    if Path(store).exists():
        with RunStore.open(store, readonly=True) as run:
            stored = run.meta()
            check_compatible(stored.get("identity") or {}, unit_identity(artifact, settings), path=Path(store))
            planned = run.document_counts()
            target, select = config.plan_target(stored.get("selection"), store=store)
            more = max(min(target or documents, documents) - planned["planned"], 0) if select else 0
            todo = len(run.todo(retry_failed=config.retry_failed))
            processed = planned["done"] + planned["partial"] + planned["failed"]
            usage = run.usage()
        runs = todo + more
        what = (f"resuming {store}: {todo} of its {planned['planned']} planned documents left"
                + (f", up to {more} more by --docs" if more else ""))
    else:
        target, _ = config.plan_target(None)
        runs = min(target or documents, documents)
        what = (f"a new run store: up to {runs} documents of the corpus's {documents}"
                + (" (the default for a new store; --docs N or --docs all for more)" if config.docs is None else ""))
    graded = judge_mode(artifact.program) == "graded"
    estimate = produce_estimate(runs, queries_per_doc=settings.queries_per_doc, top_k=settings.top_k,
                                chunk_size=settings.chunk_size, graded=graded, embedded=embedded,
                                concurrency=concurrency, what=f"produce, {what}", usage=usage, processed=processed)
    judge = "graded judge (one candidate a call)" if graded else (
        f"written judge ({settings.chunk_size} candidate{'s' if settings.chunk_size > 1 else ''} a call)")
    estimate.notes.append(f"each document: {settings.queries_per_doc} queries, {settings.top_k} candidates each, "
                          f"{judge}; generator {spec.model}, {concurrency} call{'s' if concurrency > 1 else ''} in "
                          "flight")
    if not processed and (settings.max_identifiers or settings.hide_copied):
        estimate.notes.append("the documented figures were measured before --max-identifiers 6 and --hide-copied were "
                              "the defaults: with them, held-out SciFact documents took 0.61x the extraction time and "
                              "0.80x the write calls (benchmarks/results/paired_produce/scifact-embedded-4), so "
                              "extraction and writing are upper bounds")
    if graded and config.judge_cascade != "off":
        estimate.notes.append(f"--judge-cascade {config.judge_cascade} leaves some candidates ungraded: the judging "
                              "calls are an upper bound")
    return estimate
