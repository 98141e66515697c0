"""Query translation: one search text into one target language, checked in code and retried.

Two users: production's lexical candidates for cross-language tasks (an English query becomes Chinese before BM25
over jieba-segmented abstracts) and the cross-language dev-set builder (a Chinese title becomes an English query).
Not part of a compiled artifact: its instruction is fixed here, and whoever uses it records the instruction's
text and hash beside what it produced.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import dspy

from syntra_dspy.languages import check_language, language_name
from syntra_dspy.programs.retry import call_with_repair
from syntra_dspy.programs.step import Step
from syntra_dspy.signatures.translation import TranslateSearchText
from syntra_dspy.programs.validation import OutputRejected

_LABEL = re.compile(r"^\s*(translation|译文|翻译)\s*[:：]\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’「」『』`"


def clean_translation(text: str) -> str:
    """The translation without what small models wrap it in: a label, quotes, code fences, extra spaces."""
    text = text.strip().strip("`").strip()
    text = _LABEL.sub("", text)
    return " ".join(text.strip(_QUOTES).split())


def check_translation(source: str, translation: str, language: str) -> str:
    """The cleaned translation, or ``OutputRejected`` phrased as the fix: empty, several lines, another language,
    unchanged, or far longer than the source (an explanation rather than a translation)."""
    if "\n" in translation.strip():
        raise OutputRejected("give the translation alone on one line, with no notes or alternatives")
    text = clean_translation(translation)
    if not text:
        raise OutputRejected("the translation is empty")
    problem = check_language(text, language)
    if problem:
        raise OutputRejected(f"the translation {problem}; write it in {language_name(language)}")
    if text == " ".join(source.split()) and len(text.split()) > 3:  # same-script languages pass the script check
        raise OutputRejected(f"the text was returned untranslated; translate it into {language_name(language)}")
    if len(text) > 3 * len(source) + 40:
        raise OutputRejected("the translation is much longer than the text: translate only, add nothing")
    return text


class QueryTranslator(dspy.Module):
    """Translates search texts into ``target_language`` with the LM in context; one call per text unless rejected.

    Returns the cleaned translation; an answer that stays invalid after ``max_retries`` repair retries raises
    ``LMOutputError`` with stage ``translate``."""

    def __init__(self, target_language: str, *, max_retries: int = 2, max_tokens: int = 200) -> None:
        super().__init__()
        self.target_language = target_language
        self.max_retries = max_retries
        self.translate = Step(TranslateSearchText, max_tokens=max_tokens)
        self.translate.freeze()

    def forward(self, text: str) -> str:
        target = f"{language_name(self.target_language)} ({self.target_language})"

        def call(note: str, config: dict[str, Any]) -> str:
            pred = self.translate(text=text, target_language=target, retry_note=note, config=config)
            return check_translation(text, str(pred.translation or ""), self.target_language)

        return call_with_repair("translate", call, max_retries=self.max_retries)

    @property
    def instructions(self) -> str:
        return self.translate.signature.instructions

    def describe(self) -> dict[str, Any]:
        """What a run store or provenance file records: the signature, its exact instruction and the language."""
        return {"signature": TranslateSearchText.__name__, "target_language": self.target_language,
                "instructions": self.instructions,
                "instructions_sha256": hashlib.sha256(self.instructions.encode("utf-8")).hexdigest()}
