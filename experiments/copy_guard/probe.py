"""Probe: does decoding the write step under the copy guard keep blueprints whose first answer copied? (issue 42)

For each document of a run store whose write step's first answer for some blueprint was a copy (its
``write_checks``), the blueprints are planned again from the stored features (temperature 0: the run's own plan)
and written the way production writes them with ``--hide-copied`` (repair retries, one rewrite a query), once
without and once with ``copy_guard=True``, alternating which goes first. Prints one JSON line per document and
condition. Run from the repository root while nothing else uses the CPU:

    PYTHONPATH=. python experiments/copy_guard/probe.py STORE.db CORPUS.jsonl > out.jsonl
"""
from __future__ import annotations

import json
import sqlite3
import sys
import time

import dspy

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.copying import longest_copy
from syntra_dspy.errors import LMOutputError, QueriesIncomplete
from syntra_dspy.lm.roles import build_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs.validation import Features, WriteTally
from syntra_dspy.retrieval.corpus import read_corpus

ARTIFACT = "artifacts/scifact/22e653baa2bb"
#: The words the guard lets a query copy (sys.argv[3], default 10: the check's own limit).
GUARD = int(sys.argv[3]) if len(sys.argv) > 3 else 10


def main() -> None:
    store, corpus_path = sys.argv[1], sys.argv[2]
    art = load_artifact(ARTIFACT)
    program = art.program
    lm = build_lm(resolve_generator_spec(art.meta, "embedded"), role="generator", cache=False)
    corpus = read_corpus(corpus_path)
    conn = sqlite3.connect(store)
    docs = [(d, f) for d, f in conn.execute(
        "SELECT d.doc_id, d.features FROM documents d WHERE d.features IS NOT NULL AND EXISTS "
        "(SELECT 1 FROM write_checks w WHERE w.doc_id = d.doc_id AND w.step = 'write' AND w.outcome = 'copy' "
        " AND w.id = (SELECT min(id) FROM write_checks WHERE doc_id = w.doc_id AND position = w.position)) "
        "ORDER BY d.position")]
    for i, (doc_id, features) in enumerate(docs):
        text = corpus[doc_id].content
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            blueprints = program.plan_blueprints(text, Features.from_dict(json.loads(features)), 2)
        for guard in ((None, GUARD) if i % 2 == 0 else (GUARD, None)):
            tally, before, started = WriteTally(), len(lm.history), time.perf_counter()
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
                try:
                    kept = program.write_queries(text, blueprints, tally=tally, hide_copied=True, copy_guard=guard)
                except QueriesIncomplete as exc:
                    kept = list(exc.kept.values())
                except LMOutputError:
                    kept = []
            print(json.dumps({"doc": doc_id, "copy_guard": guard, "kept": len(kept), "of": len(blueprints),
                              "calls": len(lm.history) - before, "seconds": round(time.perf_counter() - started, 1),
                              "checks": tally.checks, "queries": kept,
                              "copied_words": [longest_copy(q, text)[1] for q in kept]}), flush=True)


if __name__ == "__main__":
    main()
