"""Relevance labels people gave: label files, judged datasets and qrels, read into three-class labels.

A label file holds ``query, doc_id, label`` rows, where ``label`` is a 0-3 score (3 and 2 positive, 1 hard
negative, 0 easy negative, as in production) or a class name; TSV, CSV (optional header) and JSONL are read.
Judged data may also be BEIR/TREC qrels (with their queries) or a ``beir:``/``neuclirtech:`` dataset spec: a gain
of 1 or more is positive, 0 (a pooled and rejected candidate) a hard negative. The human strategy calibrates on
these labels, the comparison scores held-out annotation on them, and the graded judge's calibration set takes
people's judgments from them.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.jsonl import json_objects
from syntra_dspy.outputs import shown_path
from syntra_dspy.signatures.types import label_class

LabelClass = Literal["positive", "hard_negative", "easy_negative"]
CLASSES: tuple[LabelClass, ...] = ("positive", "hard_negative", "easy_negative")
_NAMES = {
    "positive": "positive", "pos": "positive", "relevant": "positive",
    "hard_negative": "hard_negative", "hard negative": "hard_negative", "hard-negative": "hard_negative",
    "hard": "hard_negative",
    "easy_negative": "easy_negative", "easy negative": "easy_negative", "easy-negative": "easy_negative",
    "easy": "easy_negative",
}
_HEADER = ("query", "doc_id", "label")


@dataclass(frozen=True)
class LabelledPair:
    """One human-confirmed judgement. ``text`` is the document text, filled in from the corpus when needed."""

    query: str
    doc_id: str
    label: LabelClass
    text: str | None = None


def parse_label(value: object) -> LabelClass:
    """A 0-3 score or a class name → the three-class label; raises ValueError naming what is accepted."""
    text = str(value).strip().lower()
    if text.isdigit() and 0 <= int(text) <= 3:
        return label_class(int(text))
    if text in _NAMES:
        return _NAMES[text]  # type: ignore[return-value]
    raise ValueError(f"label {value!r} is neither a 0-3 score nor one of positive, hard_negative, easy_negative")


def _row(cols: Sequence[str], path: str, line: int) -> LabelledPair:
    if len(cols) != 3:
        raise InputError(f"found {len(cols)} columns, expected 3 (query, doc_id, label)", path=path, line=line)
    query, doc_id, label = (" ".join(str(c).split()) for c in cols)
    if not query or not doc_id:
        raise InputError("query and doc_id must not be empty", path=path, line=line)
    try:
        return LabelledPair(query, doc_id, parse_label(label))
    except ValueError as exc:
        raise InputError(str(exc), path=path, line=line, field="label") from None


def parse_labels_text(text: str, *, source: str = "<labels>", fmt: str = "tsv") -> tuple[LabelledPair, ...]:
    """Rows from label-file text (``tsv``, ``csv`` or ``jsonl``); a ``query, doc_id, label`` header is skipped."""
    pairs: list[LabelledPair] = []
    if fmt == "jsonl":
        for n, obj in json_objects(text.splitlines(), source=source):
            if not all(k in obj for k in _HEADER):
                raise InputError("expected an object with query, doc_id and label", path=source, line=n)
            pairs.append(_row([obj["query"], obj["doc_id"], obj["label"]], source, n))
    else:
        rows = csv.reader(io.StringIO(text)) if fmt == "csv" else (line.split("\t") for line in text.splitlines())
        for n, cols in enumerate(rows, 1):
            if not any(str(c).strip() for c in cols):
                continue
            if not pairs and tuple(c.strip().lower() for c in cols) == _HEADER:
                continue
            pairs.append(_row(cols, source, n))
    if not pairs:
        raise InputError("the label file has no rows", path=source,
                         hint="one 'query, doc_id, label' row per human-confirmed pair")
    return tuple(pairs)


def read_label_file(path: str | Path) -> tuple[LabelledPair, ...]:
    """Read a label file; the format follows the suffix (``.csv``, ``.jsonl``, anything else tab-separated)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputError("label file not found", path=path, hint="give a file of 'query, doc_id, label' rows")
    suffix = path.suffix.lower()
    fmt = "csv" if suffix == ".csv" else "jsonl" if suffix in (".jsonl", ".json") else "tsv"
    return parse_labels_text(path.read_text(encoding="utf-8-sig"), source=str(path), fmt=fmt)


def labels_text(pairs: Sequence[LabelledPair]) -> str:
    """Canonical TSV of a label set (what a feedback file records, so a replay needs no other file)."""
    lines = ["\t".join(_HEADER)] + [f"{p.query}\t{p.doc_id}\t{p.label}" for p in pairs]
    return "\n".join(lines) + "\n"


def with_texts(pairs: Sequence[LabelledPair], documents: Mapping[str, object] | None,
               source: str = "the label file") -> tuple[LabelledPair, ...]:
    """Fill in document texts from the corpus (``documents[doc_id].content``); an unknown id is an error."""
    out = []
    for pair in pairs:
        if pair.text is not None:
            out.append(pair)
            continue
        doc = documents.get(pair.doc_id) if documents is not None else None
        if doc is None:
            raise InputError(f"doc_id {pair.doc_id!r} is not in the corpus", path=source,
                             hint="label documents of the task's corpus, by their corpus ids")
        out.append(replace(pair, text=getattr(doc, "content", doc)))
    return tuple(out)


# -- judged data: qrels, dataset specs and label files ------------------------------------------------------
def _gain_class(gain: int) -> str | None:
    return "positive" if gain >= 1 else "hard_negative" if gain == 0 else None


def is_label_file(path: Path) -> bool:
    """True for a ``query, doc_id, label`` file (by suffix or header), False for BEIR/TREC qrels."""
    first = path.read_text(encoding="utf-8-sig").split("\n", 1)[0].lower()
    return path.suffix.lower() in (".csv", ".jsonl", ".json") or first.replace(",", "\t").split("\t")[:3] == [
        "query", "doc_id", "label"]


def load_judgements(spec: str | Path, *,
                    queries: str | Path | None = None) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """``(queries {qid: text}, labels {qid: {doc_id: class}})`` from a qrels file, dataset spec or label file."""
    text = str(spec)
    if text.startswith(("beir:", "neuclirtech:")):
        from syntra_dspy.evaluation.datasets import load_dataset

        ds = load_dataset(text, load_corpus=False)
        return dict(ds.queries), _classes(ds.qrels, text)
    path = Path(spec)
    if not path.is_file():
        raise InputError("held-out judgements not found", path=path,
                         hint="give BEIR/TREC qrels, a beir:PATH:split spec, or a 'query, doc_id, label' file")
    if is_label_file(path):
        qtexts: dict[str, str] = {}
        labels: dict[str, dict[str, str]] = {}
        for pair in read_label_file(path):
            qid = qtexts.setdefault(pair.query, f"q{len(qtexts) + 1}")
            labels.setdefault(qid, {})[pair.doc_id] = pair.label
        return {qid: q for q, qid in qtexts.items()}, labels
    from syntra_dspy.evaluation.datasets import read_beir_queries, read_topics_tsv
    from syntra_dspy.evaluation.trec import read_qrels

    qrels = read_qrels(path)
    qpath = Path(queries) if queries else path.parent.parent / "queries.jsonl"
    if not qpath.is_file():
        raise ConfigError("the held-out qrels need their queries", path=qpath,
                          hint="give --heldout-queries (BEIR queries.jsonl or id<TAB>text topics)")
    qtexts = read_beir_queries(qpath) if qpath.suffix == ".jsonl" else read_topics_tsv(qpath)
    return qtexts, _classes(qrels, str(path))


def _classes(qrels: dict[str, dict[str, int]], source: str) -> dict[str, dict[str, str]]:
    out = {qid: {d: c for d, g in docs.items() if (c := _gain_class(int(g))) is not None}
           for qid, docs in qrels.items()}
    out = {qid: docs for qid, docs in out.items() if docs}
    if not out:
        raise InputError("no usable judgements (gains must be 0 or more)", path=source)
    return out


# -- the human strategy's calibration set ----------------------------------------------------------------------
def label_source_kind(spec: str | Path) -> str:
    """How a report names the origin of labels read from ``spec``."""
    text = str(spec)
    if text.startswith(("beir:", "neuclirtech:")):
        return "judged dataset (human relevance judgments)"
    path = Path(spec)
    if path.is_file() and is_label_file(path):
        return "label file (query, doc_id, label rows)"
    return "qrels file (human relevance judgments)"


def read_human_labels(spec: str | Path, *, queries: str | Path | None = None, max_queries: int | None = None,
                      seed: int = 0) -> tuple[LabelledPair, ...]:
    """The judged pairs of up to ``max_queries`` queries (a seeded sample; all when None), three-class labels.

    Qrels need their query texts: a BEIR layout's ``queries.jsonl`` is found beside ``qrels/``, else give
    ``queries`` (BEIR queries.jsonl or ``id<TAB>text`` topics)."""
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
