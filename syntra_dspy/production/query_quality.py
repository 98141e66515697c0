"""How a run's queries compare with the task's examples: their form, and near-duplicates within a document.

Measured afresh from the stored query texts with the artifact's examples, so a store written before queries were
checked for form and near-duplicates can be compared with one written after.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from syntra_dspy.artifacts import CHECKSUMS
from syntra_dspy.production.store import RunStore
from syntra_dspy.programs.validation import NEAR_DUPLICATE
from syntra_dspy.query_form import QueryForm, token_jaccard


def run_artifact(meta: dict[str, Any]) -> Path | None:
    """The folder of the run's artifact: where the run found it, or else ``artifacts/<task>/<version>`` under the
    current folder (a store backed up and resumed on another machine, or from another checkout, records a path that
    is gone there); only a folder whose checksum file hashes to the recorded checksum counts. None when neither does.
    """
    recorded = meta.get("artifact", {})
    path, checksum = recorded.get("path"), recorded.get("checksum")
    if not path:
        return None
    for folder in (Path(path), Path("artifacts") / Path(path).parent.name / Path(path).name):
        try:
            found = hashlib.sha256((folder / CHECKSUMS).read_bytes()).hexdigest()
        except OSError:
            continue
        if checksum is None or found == checksum:
            return folder
    return None


def _artifact_json(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """One JSON file of the run's artifact, or {} when it cannot be found (:func:`run_artifact`)."""
    folder = run_artifact(meta)
    try:
        return json.loads((folder / name).read_text(encoding="utf-8")) if folder else {}
    except (OSError, ValueError):
        return {}


def query_quality(run: RunStore) -> dict[str, Any]:
    """Share of queries with the examples' form (None when the artifact's examples cannot be read), share of
    queries that nearly duplicate an earlier query of their document (token-set Jaccard above the artifact's
    ``near_duplicate`` setting, or the default for artifacts compiled before it), and share rewritten from a
    rejected query (a question, a copied passage; None for a store from before rewriting)."""
    meta = run.meta()
    examples = _artifact_json(meta, "program.json").get("components", {}).get("examples", [])
    form = QueryForm.from_examples([e["query"] for e in examples])
    threshold = _artifact_json(meta, "manifest.json").get("settings", {}).get("near_duplicate", NEAR_DUPLICATE)
    by_doc: dict[str, list[str]] = {}
    for doc_id, text in run.rows("SELECT doc_id, text FROM queries ORDER BY doc_id, position"):
        by_doc.setdefault(doc_id, []).append(text)
    texts = [t for group in by_doc.values() for t in group]
    repeats = sum(any(token_jaccard(text, earlier) > threshold for earlier in group[:i])
                  for group in by_doc.values() for i, text in enumerate(group))

    def share(n: int) -> float | None:
        return round(n / len(texts), 4) if texts else None

    restated = run.scalar("SELECT count(*) FROM queries WHERE restated_from IS NOT NULL") \
        if run.has_column("queries", "restated_from") else None
    return {"queries": len(texts), "form": form.to_dict() if form else None,
            "in_form": share(sum(form.problem(t) is None for t in texts)) if form else None,
            "near_duplicate_threshold": threshold, "near_duplicates": share(repeats),
            "restated": share(restated) if restated is not None else None}
