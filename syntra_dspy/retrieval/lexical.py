"""BM25 over a corpus (bm25s), in the documents' language: the lexical retriever and its tokenisers.

Lucene scoring with Anserini's defaults (k1=0.9, b=0.4); text is tokenised for the *document* language (queries use
the same tokeniser, so their terms can match): jieba word segmentation (search mode) for Chinese, and for English
lowercase word tokens, English stopwords removed, Snowball (Porter2) stemming. Production's candidate sources and
the judge's lexical witness (:mod:`~syntra_dspy.retrieval.sources`) and evaluation's BM25 run
(:mod:`~syntra_dspy.evaluation.retrieve`) all rank with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.retrieval.corpus import Corpus

BM25_NAME = "bm25"
_EN_TOKEN = re.compile(r"(?u)\b\w\w+\b")
#: A run: query id -> document id -> score (the shape of :data:`syntra_dspy.evaluation.trec.Run`).
_Run = dict[str, dict[str, float]]


# --- tokenisation ---------------------------------------------------------------------------------


def _english_tokenizer() -> Callable[[str], list[str]]:
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        raise DependencyError("PyStemmer is not installed", hint="pip install 'PyStemmer>=2.2'") from None
    from bm25s.stopwords import STOPWORDS_EN

    stemmer = Stemmer.Stemmer("english")
    stop = frozenset(STOPWORDS_EN)
    cache: dict[str, str] = {}

    def tokenize(text: str) -> list[str]:
        out = []
        for word in _EN_TOKEN.findall(text.lower()):
            if word in stop:
                continue
            stem = cache.get(word)
            if stem is None:
                stem = cache[word] = stemmer.stemWord(word)
            out.append(stem)
        return out

    return tokenize


def _chinese_tokenizer() -> Callable[[str], list[str]]:
    try:
        import jieba
    except ImportError:
        raise DependencyError("jieba is not installed", hint="pip install 'jieba>=0.42.1'") from None

    def tokenize(text: str) -> list[str]:
        return [t.lower() for t in jieba.cut_for_search(text) if any(ch.isalnum() for ch in t)]

    return tokenize


def make_tokenizer(language: str) -> Callable[[str], list[str]]:
    """The BM25 tokeniser for a language code: ``zh`` (jieba) or ``en`` (stemmed words)."""
    lang = language.lower().split("-")[0]
    if lang in {"zh", "zho", "chi", "cmn"}:
        return _chinese_tokenizer()
    if lang in {"en", "eng"}:
        return _english_tokenizer()
    raise ConfigError(f"no BM25 tokeniser for language {language!r}", field="language",
                      hint="use en or zh")


def tokenize(texts: Iterable[str], language: str) -> list[list[str]]:
    """Tokenise ``texts`` the way :class:`BM25Retriever` does for ``language``."""
    fn = make_tokenizer(language)
    return [fn(t) for t in texts]


def _progress(items: Sequence[Any], show: bool, desc: str) -> Iterable[Any]:
    if not show:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="doc")


# --- BM25 -----------------------------------------------------------------------------------------


class BM25Retriever:
    """BM25 over ``corpus`` (title + text); documents with no query term are not returned."""

    name = BM25_NAME

    def __init__(self, corpus: Corpus, *, language: str = "en", k1: float = 0.9, b: float = 0.4,
                 show_progress: bool = False) -> None:
        try:
            import bm25s
        except ImportError:
            raise DependencyError("bm25s is not installed", hint="pip install 'bm25s>=0.2.10'") from None
        self.language = language
        self._tokenize = make_tokenizer(language)
        self._ids = corpus.ids
        self._positions: dict[str, int] | None = None
        docs = list(corpus)
        tokens = [self._tokenize(d.content) for d in _progress(docs, show_progress, "tokenising")]
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(tokens, show_progress=show_progress)

    def __repr__(self) -> str:
        return f"BM25Retriever({len(self._ids)} docs, language={self.language!r})"

    def search(self, queries: Mapping[str, str], k: int = 1000) -> _Run:
        run: _Run = {}
        for qid, text in queries.items():
            scores = self.score_all(text)
            run[qid] = {} if scores is None else _top_k(scores, self._ids, k, positive_only=True)
        return run

    def score_all(self, text: str) -> np.ndarray | None:
        """The query's BM25 score of every document, in corpus order (None: no query term is in the corpus)."""
        ids = self._bm25.get_tokens_ids([t for t in self._tokenize(text) if t])
        return self._bm25.get_scores_from_ids(ids) if ids else None

    def scores(self, text: str, doc_ids: Sequence[str]) -> list[float | None]:
        """The query's BM25 score of each of ``doc_ids`` (None for an id that is not in the corpus)."""
        if self._positions is None:
            self._positions = {doc_id: i for i, doc_id in enumerate(self._ids)}
        found = self.score_all(text)
        out: list[float | None] = []
        for doc_id in doc_ids:
            i = self._positions.get(doc_id)
            out.append(None if i is None else 0.0 if found is None else float(found[i]))
        return out


def _top_k(scores: np.ndarray, ids: Sequence[str], k: int, *, positive_only: bool) -> dict[str, float]:
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.argsort(-scores[top], kind="stable")]
    return {ids[i]: float(scores[i]) for i in top if not positive_only or scores[i] > 0}
