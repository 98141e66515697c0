"""The retrieval substrate compile, production and comparison share: the corpus, the encoder, the FAISS index,
diversity-aware selection and candidate retrieval.

``corpus`` reads BEIR, NeuCLIR CSL and TSV corpora; ``encoder`` loads a sentence-transformers model with its
query and document prompts (``encoder_languages`` says which languages it reads); ``index`` is the fingerprinted
inner-product index; ``selection`` is the paper's Algorithm 1; ``sources`` retrieves candidates (dense, or BM25 in
the documents' language); ``context`` builds all of it once per task. Judged candidate sets (the judge's) are built
in :mod:`syntra_dspy.judging.candidates`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.retrieval.corpus import Corpus, Document, read_corpus
    from syntra_dspy.retrieval.encoder import Encoder, load_encoder
    from syntra_dspy.retrieval.index import CorpusIndex
    from syntra_dspy.retrieval.selection import select_diverse
    from syntra_dspy.retrieval.sources import IndexCandidates, LexicalCandidates, LexicalSourceRank, default_index_dir

__all__ = ["Corpus", "CorpusIndex", "Document", "Encoder", "IndexCandidates", "LexicalCandidates",
           "LexicalSourceRank", "default_index_dir", "load_encoder", "read_corpus", "select_diverse"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Corpus": "syntra_dspy.retrieval.corpus",
    "Document": "syntra_dspy.retrieval.corpus",
    "read_corpus": "syntra_dspy.retrieval.corpus",
    "Encoder": "syntra_dspy.retrieval.encoder",
    "load_encoder": "syntra_dspy.retrieval.encoder",
    "CorpusIndex": "syntra_dspy.retrieval.index",
    "select_diverse": "syntra_dspy.retrieval.selection",
    "IndexCandidates": "syntra_dspy.retrieval.sources",
    "LexicalCandidates": "syntra_dspy.retrieval.sources",
    "LexicalSourceRank": "syntra_dspy.retrieval.sources",
    "default_index_dir": "syntra_dspy.retrieval.sources",
})
