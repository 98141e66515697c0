"""Translate a search text (a query, or a paper title used as one) into another language."""

from __future__ import annotations

import dspy


class TranslateSearchText(dspy.Signature):
    """You translate search queries for a search engine that matches words in one language only.

    Translate the text into the target language completely and faithfully: keep every concept, name, quantity
    and qualifier, and use the technical terms that papers in that field use in the target language. Keep Latin
    acronyms, chemical formulas and model names as they are. Do not answer the query, explain it, add terms it
    does not contain, or add notes: give the translation alone, as one line."""

    text: str = dspy.InputField(desc="the query or title to translate")
    target_language: str = dspy.InputField(desc="the language the translation must be written in")
    retry_note: str = dspy.InputField(desc="empty, or what was wrong with the previous answer")
    translation: str = dspy.OutputField(desc="the translation only, in the target language")
