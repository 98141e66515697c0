"""Human-confirmed labels from judgments people made (BEIR/TREC qrels, a judged dataset, or a ``query, doc_id,
label`` file), as the human strategy's calibration set, with a note of where they came from."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from syntra_dspy.errors import InputError
from syntra_dspy.optimizers.calibration import LabelledPair
from syntra_dspy.outputs import shown_path


def label_source_kind(spec: str | Path) -> str:
    """How a report names the origin of labels read from ``spec``."""
    text = str(spec)
    if text.startswith(("beir:", "neuclirtech:")):
        return "judged dataset (human relevance judgments)"
    from syntra_dspy.comparison.heldout import is_label_file

    path = Path(spec)
    if path.is_file() and is_label_file(path):
        return "label file (query, doc_id, label rows)"
    return "qrels file (human relevance judgments)"


def read_human_labels(spec: str | Path, *, queries: str | Path | None = None, max_queries: int | None = None,
                      seed: int = 0) -> tuple[LabelledPair, ...]:
    """The judged pairs of up to ``max_queries`` queries (a seeded sample; all when None), three-class labels.

    Qrels need their query texts: a BEIR layout's ``queries.jsonl`` is found beside ``qrels/``, else give
    ``queries`` (BEIR queries.jsonl or ``id<TAB>text`` topics)."""
    from syntra_dspy.comparison.heldout import load_judgements

    texts, labels = load_judgements(spec, queries=queries)
    qids = sorted(q for q in labels if q in texts)
    if not qids:
        raise InputError("no judged query has a query text", path=str(spec),
                         hint="give the queries file that belongs to these qrels")
    if max_queries is not None and len(qids) > max_queries:
        qids = sorted(random.Random(seed).sample(qids, max_queries))
    return tuple(LabelledPair(texts[q], doc_id, label) for q in qids for doc_id, label in sorted(labels[q].items()))


def label_source(spec: str | Path, pairs: tuple[LabelledPair, ...]) -> dict[str, Any]:
    """The manifest's note on a label set read from ``spec``: what it is, where, how many pairs and which queries
    (so a comparison can keep them out of its held-out material)."""
    return {"source": label_source_kind(spec), "path": shown_path(spec), "pairs": len(pairs),
            "queries": sorted({p.query for p in pairs})}
