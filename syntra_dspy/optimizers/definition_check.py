"""A code check on inferred task definitions: a relevance criterion copied from one example instead of stated for
all of them. Small verifiers miss this; a word count does not."""

from __future__ import annotations

import re
from collections.abc import Sequence

from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.task import TaskDefinition

_TERM = re.compile(r"[A-Za-z][A-Za-z0-9-]{3,}")
#: How any relevance definition is worded, whatever the domain: English function words and the retrieval framing.
#: Domain words (a SciFact "claim", a legal "statute") are not listed: they come from the task itself.
_FRAMING = {"about", "given", "that", "this", "these", "those", "with", "from", "their", "there", "whether", "which",
            "when", "where", "what", "into", "than", "then", "such", "also", "only", "some", "each", "other", "must",
            "should", "would", "could", "does", "have", "been", "being", "more", "most", "query", "queries",
            "document", "documents", "relevant", "relevance", "type", "text", "texts"}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _TERM.findall(text)}


def task_words(definition: TaskDefinition, examples: Sequence[FewShotPair]) -> set[str]:
    """Words that belong to the task rather than to one example: those of the definition's query and document
    types, and those found in at least two examples (query or positive document)."""
    seen: dict[str, int] = {}
    for ex in examples:
        for w in _words(f"{ex.query} {ex.positive_text}"):
            seen[w] = seen.get(w, 0) + 1
    shared = {w for w, n in seen.items() if n >= 2}
    return _FRAMING | shared | _words(f"{definition.query_type} {definition.doc_type}")


def example_specific_terms(definition: TaskDefinition, examples: Sequence[FewShotPair], *, min_terms: int = 3
                           ) -> list[str]:
    """Words of the relevance definition found in exactly one example's query or document and not among the
    task's own words (:func:`task_words`).

    Returns them when there are at least ``min_terms`` (a definition drawn from one example), else [].
    """
    if len(examples) < 2:
        return []
    vocab = [_words(f"{ex.query} {ex.positive_text}") for ex in examples]
    common = task_words(definition, examples)
    words = dict.fromkeys(w.lower() for w in _TERM.findall(definition.relevance_definition))
    specific = [w for w in words if w not in common and sum(w in v for v in vocab) == 1]
    return specific if len(specific) >= min_terms else []
