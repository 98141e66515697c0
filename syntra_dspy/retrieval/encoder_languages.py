"""Which languages an encoder reads, and the compile-time refusal of one that cannot read a task's languages.

A cross-language task retrieves documents in one language for queries in another; an English-only encoder puts
them in unrelated parts of its space (measured on the NeuCLIRTech fixture: the template's five positives ranked
4, 19, 1, 2 and 20 of 31 with all-MiniLM-L6-v2, 1 for each with EmbeddingGemma). What the task file says wins
(``encoder.languages`` or ``encoder.multilingual``); otherwise a short list of well-known models decides; a
model on neither is unknown, and a cross-language task refuses it rather than guess. A monolingual task refuses
only an encoder known to read other languages (English-only MiniLM for Chinese abstracts).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from syntra_dspy.errors import ConfigError
from syntra_dspy.languages import cjk_share, language_code
from syntra_dspy.task import EncoderSpec, TaskDefinition

#: The default multilingual encoder: installable offline from PyPI (:mod:`syntra_dspy.models`).
MULTILINGUAL_DEFAULT = "embeddinggemma-300m"
# Lower-case names without the organisation; None: multilingual.
_KNOWN: dict[str, tuple[str, ...] | None] = {
    **{name: ("en",) for name in (
        "all-minilm-l6-v2", "all-minilm-l12-v2", "all-mpnet-base-v2", "all-distilroberta-v1",
        "multi-qa-minilm-l6-cos-v1", "multi-qa-mpnet-base-dot-v1", "msmarco-distilbert-base-v4",
        "bge-small-en-v1.5", "bge-base-en-v1.5", "bge-large-en-v1.5", "e5-small-v2", "e5-base-v2", "e5-large-v2",
        "gte-small", "gte-base", "gte-large", "nomic-embed-text-v1.5", "snowflake-arctic-embed-m-v1.5")},
    **{name: None for name in (
        "embeddinggemma-300m", "multilingual-e5-small", "multilingual-e5-base", "multilingual-e5-large",
        "multilingual-e5-large-instruct", "paraphrase-multilingual-minilm-l12-v2",
        "paraphrase-multilingual-mpnet-base-v2", "distiluse-base-multilingual-cased-v2", "labse", "bge-m3",
        "gte-multilingual-base", "qwen3-embedding-0.6b", "qwen3-embedding-4b", "qwen3-embedding-8b",
        "jina-embeddings-v3", "snowflake-arctic-embed-l-v2.0")},
}


@dataclass(frozen=True)
class EncoderLanguages:
    """What is known about an encoder's languages and where that came from."""

    codes: frozenset[str] | None  # None: multilingual (or unknown, see ``known``)
    known: bool
    source: str  # "task file", "known models", or "unknown"

    def covers(self, code: str) -> bool | None:
        """Whether the encoder reads ``code`` (None: nobody knows)."""
        if not self.known:
            return None
        return self.codes is None or language_code(code) in self.codes

    def describe(self) -> str:
        if not self.known:
            return "unknown"
        return "multilingual" if self.codes is None else ", ".join(sorted(self.codes))


def _lookup_name(model: str) -> str:
    """The name to look up: the folder's recorded model name, the folder name, or the name without its owner."""
    path = Path(model).expanduser()
    if path.is_dir():
        try:
            record = json.loads((path / ".syntra-model.json").read_text(encoding="utf-8"))
            return str(record["name"]).lower()
        except (OSError, ValueError, KeyError, TypeError):
            return path.name.lower()
    return model.strip().lower().rsplit("/", 1)[-1]


def encoder_languages(spec: EncoderSpec) -> EncoderLanguages:
    """The task file's word (``languages``/``multilingual``), else the known-model list, else unknown."""
    if spec.multilingual:
        return EncoderLanguages(None, True, "task file")
    if spec.languages:
        return EncoderLanguages(frozenset(language_code(c) for c in spec.languages), True, "task file")
    name = _lookup_name(spec.model)
    if name in _KNOWN:
        codes = _KNOWN[name]
        return EncoderLanguages(None if codes is None else frozenset(codes), True, "known models")
    return EncoderLanguages(None, False, "unknown")


def check_encoder_languages(definition: TaskDefinition, spec: EncoderSpec, *, source: str = "<task>") -> None:
    """Refuse an encoder that cannot read the task's languages, before anything is loaded.

    A cross-language task refuses one that reads only other languages and one whose languages are unknown; a
    monolingual task refuses one known to read only other languages (the English-only default for Chinese
    requests over Chinese abstracts) and trusts an unknown one, which is most often a model of the corpus'
    own language."""
    wanted = tuple(dict.fromkeys((definition.query_language, definition.document_language)))
    langs = encoder_languages(spec)
    if not definition.cross_language and not langs.known:
        return
    install = f"python -m syntra_dspy.models install {MULTILINGUAL_DEFAULT}"
    reads = "both languages" if len(wanted) > 1 else wanted[0]
    fix = (f"set `encoder: {MULTILINGUAL_DEFAULT}` in the task file (install it once with `{install}`), or, if "
           f"your model reads {reads}, say so: `encoder: {{model: {spec.model}, languages: [{', '.join(wanted)}]}}`")
    task = (f"the task is cross-language ({wanted[0]} queries over {wanted[1]} documents)" if definition.cross_language
            else f"the task's queries and documents are in {wanted[0]}")
    if not langs.known:
        raise ConfigError(f"{task}, and which languages encoder {spec.model!r} reads is unknown", path=source,
                          field="encoder", hint=fix)
    missing = [code for code in wanted if not langs.covers(code)]
    if missing:
        raise ConfigError(f"{task}, but encoder {spec.model!r} reads only {langs.describe()} ({langs.source}), "
                          f"not {', '.join(missing)}", path=source, field="encoder", hint=fix)


def guess_task_languages(queries: Sequence[str], documents: Sequence[str]) -> tuple[str, str] | None:
    """``(query language, document language)`` read off the examples' scripts (``en`` for Latin, ``zh`` for
    Chinese), or None when either side is mixed: enough to refuse an encoder before a definition is inferred."""
    def script(texts: Sequence[str]) -> str | None:
        shares = [cjk_share(t) for t in texts if t.strip()]
        if not shares:
            return None
        if all(s >= 0.5 for s in shares):
            return "zh"
        return "en" if all(s <= 0.1 for s in shares) else None

    q, d = script(queries), script(documents)
    return (q, d) if q is not None and d is not None else None
