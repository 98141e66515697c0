"""Render task material as prompt text. Pure functions: the same inputs always give the same text."""

from __future__ import annotations

from collections.abc import Sequence

from syntra_dspy.languages import language_name
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.signatures.types import AttributeDimension, Blueprint, Identifier
from syntra_dspy.task import TaskDefinition


def clip(text: str, max_chars: int | None) -> str:
    """Shorten long documents at a word boundary so prompts stay within the model's context."""
    text = " ".join(text.split())
    if max_chars is None or len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut + " …"


def task_context(definition: TaskDefinition) -> str:
    return (
        f"- Queries: {definition.query_type} (written in {language_name(definition.query_language)})\n"
        f"- Documents: {definition.doc_type} (written in {language_name(definition.document_language)})\n"
        f"- Relevance: {definition.relevance_definition}"
    )


def brief_relevance(definition: TaskDefinition) -> str:
    """The relevance definition alone, and the languages only where queries and documents differ in theirs: the
    brief grading prompt's task line."""
    languages = (f"\nQueries are written in {language_name(definition.query_language)}, documents in "
                 f"{language_name(definition.document_language)}." if definition.cross_language else "")
    return f"Relevance: {definition.relevance_definition}{languages}"


def example_queries(examples: Sequence[FewShotPair]) -> str:
    return "\n".join(f"{i}. {ex.query}" for i, ex in enumerate(examples, 1))


def example_pairs(examples: Sequence[FewShotPair], max_doc_chars: int | None = 600) -> str:
    return "\n".join(
        f"{i}. Query: {ex.query}\n   Relevant document: {clip(ex.positive_text, max_doc_chars)}"
        for i, ex in enumerate(examples, 1)
    )


def task_definition_text(definition: TaskDefinition) -> str:
    return (
        f"query_type: {definition.query_type}\n"
        f"doc_type: {definition.doc_type}\n"
        f"relevance_definition: {definition.relevance_definition}\n"
        f"query_language: {definition.query_language}\n"
        f"document_language: {definition.document_language}"
    )


def identifiers_text(identifiers: Sequence[Identifier]) -> str:
    return "\n".join(f"{i}. {ident.text}" for i, ident in enumerate(identifiers, 1))


def attributes_text(attributes: Sequence[AttributeDimension]) -> str:
    return "\n".join(f"- {dim.dimension}: {' | '.join(dim.options)}" for dim in attributes)


def blueprint_text(bp: Blueprint) -> str:
    choices = "; ".join(f"{c.dimension} = {c.option}" for c in bp.choices)
    return f"identifier: {bp.identifier}; {choices}"


def blueprints_text(blueprints: Sequence[Blueprint], numbers: Sequence[int] | None = None) -> str:
    """Numbered blueprints (0-based; ``numbers`` keeps each one's own number when only some are shown)."""
    numbers = range(len(blueprints)) if numbers is None else numbers
    return "\n".join(f"{i}. {blueprint_text(bp)}" for i, bp in zip(numbers, blueprints))


def candidates_text(texts: Sequence[str], max_chars: int | None) -> str:
    return "\n\n".join(f"[doc_id {i}] {clip(t, max_chars)}" for i, t in enumerate(texts))
