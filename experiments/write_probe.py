"""The loop the write-step probes share: plan each chosen document's blueprints again and write them under two
conditions, alternating which goes first, one JSON line per document and condition.

A probe names the documents (a query over its run store), the condition's name and values, and how a value becomes
``write_queries`` options; the blueprints come from the stored features at temperature 0 (the run's own plan).
"""
from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import dspy

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.errors import LMOutputError, QueriesIncomplete
from syntra_dspy.lm.roles import build_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs.validation import Features, WriteTally
from syntra_dspy.retrieval.corpus import read_corpus

ARTIFACT = "artifacts/scifact/22e653baa2bb"


def paired_write(store: str, corpus_path: str, documents_sql: str, name: str, values: tuple[Any, Any],
                 options: Callable[[Any], dict[str, Any]],
                 extra: Callable[[list[str], str], dict[str, Any]] | None = None) -> None:
    """Print, per document ``documents_sql`` selects (``doc_id, features``), one line for each of ``values`` in
    turn (the first document in the given order, the next reversed), written with ``options(value)``."""
    art = load_artifact(ARTIFACT)
    program = art.program
    lm = build_lm(resolve_generator_spec(art.meta, "embedded"), role="generator", cache=False)
    corpus = read_corpus(corpus_path)
    docs = list(sqlite3.connect(store).execute(documents_sql))
    for i, (doc_id, features) in enumerate(docs):
        text = corpus[doc_id].content
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            blueprints = program.plan_blueprints(text, Features.from_dict(json.loads(features)), 2)
        for value in (values if i % 2 == 0 else values[::-1]):
            tally, before, started = WriteTally(), len(lm.history), time.perf_counter()
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
                try:
                    kept = program.write_queries(text, blueprints, tally=tally, **options(value))
                except QueriesIncomplete as exc:
                    kept = list(exc.kept.values())
                except LMOutputError:
                    kept = []
            print(json.dumps({"doc": doc_id, name: value, "kept": len(kept), "of": len(blueprints),
                              "calls": len(lm.history) - before, "seconds": round(time.perf_counter() - started, 1),
                              "checks": tally.checks, "queries": kept, **(extra(kept, text) if extra else {})}),
                  flush=True)
