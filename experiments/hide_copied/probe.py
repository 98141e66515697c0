"""Probe: does a write retry that is not shown the sentence a rejected query copied keep the blueprint? (issue 42)

For each document of a run store whose write step lost a blueprint, its blueprints are planned again from the stored
features (temperature 0: the run's own plan) and written the way production writes them (repair retries and one
rewrite a query), once as today and once with ``hide_copied=True``, alternating which goes first. Prints one JSON
line per document and condition. Run from the repository root while nothing else uses the CPU:

    PYTHONPATH=. python experiments/hide_copied/probe.py STORE.db CORPUS.jsonl > out.jsonl
"""
from __future__ import annotations

import json
import sqlite3
import sys
import time

import dspy

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.errors import LMOutputError, QueriesIncomplete
from syntra_dspy.lm.roles import build_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs.validation import Features, WriteTally
from syntra_dspy.retrieval.corpus import read_corpus

ARTIFACT = "artifacts/scifact/22e653baa2bb"


def main() -> None:
    store, corpus_path = sys.argv[1], sys.argv[2]
    art = load_artifact(ARTIFACT)
    program = art.program
    lm = build_lm(resolve_generator_spec(art.meta, "embedded"), role="generator", cache=False)
    corpus = read_corpus(corpus_path)
    conn = sqlite3.connect(store)
    docs = [(d, f) for d, f in conn.execute(
        "SELECT d.doc_id, d.features FROM documents d WHERE d.features IS NOT NULL AND EXISTS "
        "(SELECT 1 FROM failures f WHERE f.doc_id = d.doc_id AND f.stage = 'write') ORDER BY d.position")]
    for i, (doc_id, features) in enumerate(docs):
        text = corpus[doc_id].content
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            blueprints = program.plan_blueprints(text, Features.from_dict(json.loads(features)), 2)
        for hide in ((False, True) if i % 2 == 0 else (True, False)):
            tally, before, started = WriteTally(), len(lm.history), time.perf_counter()
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
                try:
                    kept = program.write_queries(text, blueprints, tally=tally, hide_copied=hide)
                except QueriesIncomplete as exc:
                    kept = list(exc.kept.values())
                except LMOutputError:
                    kept = []
            print(json.dumps({"doc": doc_id, "hide_copied": hide, "kept": len(kept), "of": len(blueprints),
                              "calls": len(lm.history) - before, "seconds": round(time.perf_counter() - started, 1),
                              "checks": tally.checks, "queries": kept}), flush=True)


if __name__ == "__main__":
    main()
