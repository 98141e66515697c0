"""From judged candidates to training records: the export options and the one-line retrieval instruction.

Only judged candidates become positives or negatives: 3 and 2 → positive, 1 → hard negative, 0 → easy
negative (``label_class``). The source document is judged like any candidate when retrieval found it;
when it did not, it is *not* silently made a positive (``include_unretrieved_source`` adds it, flagged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.languages import language_name
from syntra_dspy.signatures.types import label_class

NEGATIVES = ("hard", "hard+easy")
POSITIVES = ("all", "source-first")
#: jsonl: one record per line; hf: a ``datasets.save_to_disk`` folder of the same records; st: a Parquet dataset
#: folder of (anchor, positive, negative_1..n, label) rows that sentence-transformers trains on as it is.
FORMATS = ("jsonl", "hf", "st")
FOLDER_FORMATS = ("hf", "st")
#: Why a stored query did not become a record, in the order they are checked.
DROP_REASONS = ("annotation_incomplete", "no_positive", "no_negative", "duplicate_query")


@dataclass(frozen=True)
class ExportOptions:
    """How judged candidates become ``pos``/``neg``; recorded in the export's sidecar."""

    negatives: str = "hard"
    num_negatives: int = 7
    positives: str = "all"
    include_unretrieved_source: bool = False
    include_partial: bool = False
    instruction: str | None = None

    def __post_init__(self) -> None:
        if self.negatives not in NEGATIVES:
            raise ConfigError(f"unknown negatives policy {self.negatives!r}", field="negatives",
                              hint=f"use one of: {', '.join(NEGATIVES)}")
        if self.positives not in POSITIVES:
            raise ConfigError(f"unknown positives policy {self.positives!r}", field="positives",
                              hint=f"use one of: {', '.join(POSITIVES)}")
        if isinstance(self.num_negatives, bool) or not isinstance(self.num_negatives, int) or self.num_negatives < 1:
            raise ConfigError(f"num_negatives must be an integer >= 1, got {self.num_negatives!r}",
                              field="num_negatives", hint="training uses 7 (a group of 8 with the positive)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _article(phrase: str) -> str:
    return "an" if phrase[:1].lower() in "aeiou" else "a"


def _first_clause(text: str) -> str:
    """The text up to its first sentence end, colon or semicolon, on one line, without a final period."""
    text = " ".join(text.split())
    return re.split(r"(?<=[^.\s]{2})[.;:](?:\s|$)", text, maxsplit=1)[0].rstrip(" .")


def _noun_phrase(text: str) -> str:
    """What a task definition's type description names, as a phrase to follow "a": its first clause, up to a
    comma or parenthesis, without a leading article ("An English search request from a researcher: a short
    topic phrase ..." -> "English search request from a researcher")."""
    phrase = re.split(r",\s|\s\(", _first_clause(text), maxsplit=1)[0]
    return re.sub(r"^(a|an|the)\s+", "", phrase, flags=re.IGNORECASE)


def retrieval_instruction(definition: Mapping[str, Any]) -> str:
    """``Given a <query_type>, retrieve a <doc_type> that <criterion>``, from the task definition.

    The criterion is what follows "is relevant if/when" in the relevance definition (the form the task
    definition signature asks for), to the end of its clause; without one, the instruction asks for a relevant
    document. Type descriptions written as sentences (a task file's ``task_definition``) give their first noun
    phrase, so the instruction stays one readable sentence.
    """
    query_type = _noun_phrase(str(definition.get("query_type", "query")))
    doc_type = _noun_phrase(str(definition.get("doc_type", "document")))
    q_lang, d_lang = definition.get("query_language", "en"), definition.get("document_language", "en")
    if q_lang != d_lang:
        doc_type += f" written in {language_name(d_lang)}"
    match = re.search(r"\bis relevant (?:if|when|because)\b\s*(.+)", str(definition.get("relevance_definition", "")),
                      re.IGNORECASE | re.DOTALL)
    criterion = _first_clause(match.group(1)) if match else ""
    criterion = re.sub(r"^(it|its (?:abstract|text|content)|the document|the passage|the abstract|this document)\s+",
                       "", criterion, flags=re.IGNORECASE)
    if not criterion:
        return f"Given {_article(query_type)} {query_type}, retrieve {_article('relevant')} relevant {doc_type}"
    return f"Given {_article(query_type)} {query_type}, retrieve {_article(doc_type)} {doc_type} that {criterion}"


def select_candidates(row: Mapping[str, Any], options: ExportOptions) -> tuple[dict[str, Any] | None, str | None]:
    """Pick positive and negative ids for one stored query; ``(None, reason)`` when it is not a record."""
    if not row["complete"] and not options.include_partial:
        return None, "annotation_incomplete"
    source = row["doc_id"]
    judged = [(rank, doc_id, label) for rank, doc_id, label in row["candidates"] if label is not None]
    classes: dict[str, list[str]] = {"positive": [], "hard_negative": [], "easy_negative": []}
    for _, doc_id, label in sorted(judged):
        classes[label_class(label)].append(doc_id)
    labels = {doc_id: label for _, doc_id, label in judged}
    source_label = labels.get(source)
    pos = list(classes["positive"])
    if options.positives == "source-first" and source_label is not None and source_label >= 2:
        pos = [source]
    source_retrieved = row["source_rank"] is not None
    if options.include_unretrieved_source and not source_retrieved:
        pos = [source, *pos]  # unjudged: source_label stays None, source_retrieved False
    if not pos:
        return None, "no_positive"
    neg = classes["hard_negative"][: options.num_negatives]
    if options.negatives == "hard+easy":
        neg += classes["easy_negative"][: options.num_negatives - len(neg)]
    if not neg:
        return None, "no_negative"
    return {
        "pos_ids": pos, "neg_ids": neg, "labels": labels, "source_retrieved": source_retrieved,
        "source_label": source_label, "source_in_pos": source in pos,
    }, None


def normalise_query(text: str) -> str:
    return " ".join(text.split()).casefold()
