"""Probe: does a write retry that is not shown the sentence a rejected query copied keep the blueprint? (issue 42)

For each document of a run store whose write step lost a blueprint, its blueprints are planned again from the stored
features (temperature 0: the run's own plan) and written the way production writes them (repair retries and one
rewrite a query), once as today and once with ``hide_copied=True``, alternating which goes first. Prints one JSON
line per document and condition. Run from the repository root while nothing else uses the CPU:

    PYTHONPATH=. python experiments/hide_copied/probe.py STORE.db CORPUS.jsonl > out.jsonl
"""
from __future__ import annotations

import sys

from experiments.write_probe import paired_write

DOCUMENTS = ("SELECT d.doc_id, d.features FROM documents d WHERE d.features IS NOT NULL AND EXISTS "
             "(SELECT 1 FROM failures f WHERE f.doc_id = d.doc_id AND f.stage = 'write') ORDER BY d.position")

if __name__ == "__main__":
    paired_write(sys.argv[1], sys.argv[2], DOCUMENTS, "hide_copied", (False, True),
                 lambda hide: {"hide_copied": hide})
