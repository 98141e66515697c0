"""Human-confirmed relevance labels: a calibration set for the annotation loop, and how trials are checked
against it.

The paper's human-calibration runs confirm labels for a few query/document pairs and then judge the
annotation instruction by exact comparison with them (mismatches become feedback for the refiner). A label
file holds ``query, doc_id, label`` rows, where ``label`` is a 0-3 score (3 and 2 positive, 1 hard negative,
0 easy negative, as in production) or a class name; TSV, CSV (optional header) and JSONL are read.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from syntra_dspy.jsonl import json_objects
from syntra_dspy.errors import InputError
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.programs import context as ctx
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


@dataclass
class CalibrationTrial:
    """The annotator's 0-3 scores for the confirmed pairs of one query (None where annotation failed)."""

    query: str
    pairs: list[LabelledPair]
    scores: list[int | None]


def run_calibration(program, pairs: Sequence[LabelledPair], *, chunk_size: int) -> list[CalibrationTrial]:
    """Label every confirmed pair with the program's annotator, query by query, in chunks."""
    by_query: dict[str, list[LabelledPair]] = {}
    for pair in pairs:
        by_query.setdefault(pair.query, []).append(pair)
    return [CalibrationTrial(query, group, program.label_all(query, [p.text or "" for p in group],
                                                            chunk_size=chunk_size))
            for query, group in by_query.items()]


def calibration_mismatches(trials: Sequence[CalibrationTrial], max_doc_chars: int = 600) -> str:
    lines, n = [], 0
    for trial in trials:
        for pair, score in zip(trial.pairs, trial.scores):
            given = None if score is None else label_class(score)
            if given == pair.label:
                continue
            n += 1
            shown = "no label (the annotator's answer was unusable)" if score is None else f"{score} ({given})"
            lines.append(f"{n}. Query: {trial.query}\n   Document: {ctx.clip(pair.text or '', max_doc_chars)}\n"
                         f"   Confirmed label: {pair.label}; label given: {shown}")
    return "\n\n".join(lines)


def calibration_check(trials: Sequence[CalibrationTrial], explain: Callable[[str], str] | None = None) -> Evaluation:
    """Score = share of confirmed pairs whose three-class label the annotator matched; passes when all match.

    As in the paper's calibration, pass/fail is decided by exact label comparison; ``explain`` only turns
    the mismatches into feedback for the refiner.
    """
    labels = [{"query": t.query, "doc_id": p.doc_id, "expected": p.label, "score": s}
              for t in trials for p, s in zip(t.pairs, t.scores)]
    total = len(labels)
    hits = sum(1 for row in labels if row["score"] is not None and label_class(row["score"]) == row["expected"])
    score = hits / total if total else 0.0
    if hits == total:
        return Evaluation(score, True, "", {"calibration": labels})
    text = calibration_mismatches(trials)
    feedback = explain(text) if explain else text
    return Evaluation(score, False, feedback or text, {"calibration": labels, "mismatches": total - hits})
