"""One task's retrieval context: corpus, encoder, index, candidate retrieval and diverse selection, built once.

Compile, production and comparison all need the same corpus index and the same diverse selection; building them
in each would re-read the corpus, reload the encoder and recompute selections. A ``CorpusContext`` is built once
(``CorpusContext.build``: the index is loaded from its folder when its fingerprint matches, else built) and handed
to ``compile_task(context=...)``, ``produce(context=...)`` and every compile of ``compare_strategies``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from syntra_dspy.retrieval.corpus import Corpus
from syntra_dspy.retrieval.encoder import Encoder
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.retrieval.selection import select_diverse
from syntra_dspy.retrieval.sources import IndexCandidates, default_index_dir
from syntra_dspy.task import EncoderSpec


@dataclass
class CorpusContext:
    """``setting`` is what loads the encoder again (recorded in a compile's manifest)."""

    corpus: Corpus
    encoder: Encoder
    index: CorpusIndex
    setting: EncoderSpec
    _selections: dict[tuple[int | None, float, int], list[str]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, corpus: Corpus, encoder: Encoder, *, setting: EncoderSpec | None = None,
              index_dir: str | Path | None = None) -> CorpusContext:
        """The context over ``corpus`` and ``encoder``; the index is cached in ``index_dir`` (default: under
        ``.syntra/index``, named by the corpus and encoder fingerprint)."""
        index = CorpusIndex.load_or_build(corpus, encoder, index_dir or default_index_dir(corpus, encoder))
        return cls(corpus, encoder, index, setting or setting_of(encoder))

    @cached_property
    def candidates(self) -> IndexCandidates:
        """Top-k candidate retrieval from the full index (the annotation check's and production's source)."""
        return IndexCandidates(self.corpus, self.encoder, self.index)

    def select(self, *, target: int | None, tau: float, seed: int) -> list[str]:
        """Diversity-aware selection (Algorithm 1), computed once per (target, tau, seed)."""
        key = (target, tau, seed)
        if key not in self._selections:
            self._selections[key] = select_diverse(self.index, target=target, tau=tau, seed=seed)
        return list(self._selections[key])

    def similarity(self, query: str, doc_id: str) -> float:
        """Cosine of ``query`` and a corpus document, as the index scores them."""
        return float(self.encoder.encode_queries([query])[0] @ self.index.vector(doc_id))


def setting_of(encoder: Any, task_setting: EncoderSpec | None = None) -> EncoderSpec:
    """The setting that loads a given encoder object again; the task file's languages are kept when it names the
    same model (any object with ``name`` will do, ``spec()`` is used when it has one)."""
    own = encoder.spec() if callable(getattr(encoder, "spec", None)) else EncoderSpec(model=encoder.name)
    if task_setting is not None and own.model in (task_setting.model, str(Path(task_setting.model).resolve())):
        return own.model_copy(update={"languages": task_setting.languages,
                                      "multilingual": task_setting.multilingual})
    return own
