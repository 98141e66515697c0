"""Probe: does decoding the write step under the copy guard keep blueprints whose first answer copied? (issue 42)

For each document of a run store whose write step's first answer for some blueprint was a copy (its
``write_checks``), the blueprints are planned again from the stored features (temperature 0: the run's own plan)
and written the way production writes them with ``--hide-copied`` (repair retries, one rewrite a query), once
without and once with ``copy_guard=True``, alternating which goes first. Prints one JSON line per document and
condition. Run from the repository root while nothing else uses the CPU:

    PYTHONPATH=. python experiments/copy_guard/probe.py STORE.db CORPUS.jsonl [GUARD] > out.jsonl
"""
from __future__ import annotations

import sys

from experiments.write_probe import paired_write
from syntra_dspy.copying import longest_copy

#: The words the guard lets a query copy (sys.argv[3], default 10: the check's own limit).
GUARD = int(sys.argv[3]) if len(sys.argv) > 3 else 10
DOCUMENTS = ("SELECT d.doc_id, d.features FROM documents d WHERE d.features IS NOT NULL AND EXISTS "
             "(SELECT 1 FROM write_checks w WHERE w.doc_id = d.doc_id AND w.step = 'write' AND w.outcome = 'copy' "
             " AND w.id = (SELECT min(id) FROM write_checks WHERE doc_id = w.doc_id AND position = w.position)) "
             "ORDER BY d.position")

if __name__ == "__main__":
    paired_write(sys.argv[1], sys.argv[2], DOCUMENTS, "copy_guard", (None, GUARD),
                 lambda guard: {"hide_copied": True, "copy_guard": guard},
                 extra=lambda kept, text: {"copied_words": [longest_copy(q, text)[1] for q in kept]})
