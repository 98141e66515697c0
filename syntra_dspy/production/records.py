"""From judged candidates to training records: the export's settings (:class:`ExportConfig`, the records' part of
them :class:`ExportOptions`) and the one-line retrieval instruction.

Only judged candidates become positives or negatives: 3 and 2 → positive, 1 → hard negative, 0 → easy
negative (``label_class``). The source document is judged like any candidate when retrieval found it;
when it did not, it is *not* silently made a positive (``include_unretrieved_source`` adds it, flagged).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, model_validator

from syntra_dspy.errors import ConfigError
from syntra_dspy.languages import language_name
from syntra_dspy.production.dataset_card import ST_NEGATIVES_RULE, ST_POSITIVE_RULE
from syntra_dspy.settings_model import SettingsModel
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


_OPTION_FIELDS = {f.name for f in fields(ExportOptions)}


class ExportConfig(SettingsModel):
    """Every setting of an export, defined and validated here: the output's (format, dev split, a judge that
    relabels) and the records' (:attr:`options`, an :class:`ExportOptions`, which checks them). ``syntra export``
    builds it from its flags, whose defaults and help come from these fields; Python callers build it, or pass its
    fields to ``export_records`` as keywords."""

    what: ClassVar[str] = "export"
    command: ClassVar[str] = "syntra export"

    format: str = Field("jsonl", description=(
        "jsonl (default: one record per line, FlagEmbedding's layout plus ids and grades); hf (the same records as a "
        "datasets.save_to_disk folder); st (a Parquet dataset folder that sentence-transformers trains on with no "
        "glue: columns anchor, positive, negative_1..negative_n with n = --num-negatives, and label = the judge's "
        f"scores of those texts when every record has them; positive: {ST_POSITIVE_RULE}; {ST_NEGATIVES_RULE}). "
        "Every format writes a README.md dataset card (inside the folder; <out>.README.md beside a file)"))
    dev_split: float | None = Field(None, strict=True, description=(
        "put the records of this fraction of the source documents (e.g. 0.1) in a dev split: jsonl: <stem>.dev.jsonl "
        "beside --out; st: data/dev-*.parquet. Documents are drawn with --seed; a document's queries are never in "
        "both splits"))
    seed: int = Field(42, strict=True, description="seed of the --dev-split draw")
    negatives: str = Field(NEGATIVES[0], description=(
        "hard negatives only (default), or topped up with easy ones to --num-negatives"))
    num_negatives: int = Field(7, strict=True, description="negatives per record")
    positives: str = Field(POSITIVES[0], description=(
        "all judged positives (default), or only the source document when it was judged positive"))
    include_unretrieved_source: bool = Field(False, description=(
        "add the source document to pos when retrieval missed it (unjudged; off by default)"))
    include_partial: bool = Field(False, description=(
        "export queries whose annotation is incomplete, from their labelled candidates only"))
    instruction: str | None = Field(None, description="override the retrieval instruction put in every record")
    judge: str | Path | None = Field(None, description=(
        "label the records with this artifact's judge, applied to the grades the run stored (an artifact "
        "recalibrated from the run's: same grading prompt; nothing is graded again); --stats still describes the "
        "stored labels"))

    @model_validator(mode="after")
    def _check(self) -> ExportConfig:
        if self.format not in FORMATS:
            raise ConfigError(f"unknown export format {self.format!r}", field="format",
                              hint=f"use one of: {', '.join(FORMATS)}")
        ExportOptions(**self.model_dump(include=_OPTION_FIELDS))  # the records' settings, checked there
        if self.dev_split is not None:
            if self.format == "hf":
                raise ConfigError("a save_to_disk folder holds one split", field="dev-split",
                                  hint="use --format st (train and dev Parquet files) or jsonl (a second file)")
            if not 0 < self.dev_split < 1:
                raise ConfigError(f"must be a fraction between 0 and 1, got {self.dev_split!r}", field="dev-split",
                                  hint="e.g. 0.1: a tenth of the source documents")
        return self

    @property
    def options(self) -> ExportOptions:
        """How the judged candidates become ``pos``/``neg`` (what the export's sidecar records)."""
        return ExportOptions(**self.model_dump(include=_OPTION_FIELDS))


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
