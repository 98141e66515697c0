"""What every test-mode stage works with: its LM roles, the authoring predictors, the usage meter, the settings,
the compile's progress.

One ``StageTools`` per compile is shared by the stages, so an LM call is made the same way whichever stage or
strategy makes it, and what is costly to build (BM25 over the corpus, the graded query verifier) is built once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import dspy
from dspy.utils.exceptions import AdapterParseError

from syntra_dspy.errors import ConfigError, LMOutputError
from syntra_dspy.optimizers.progress import CompileProgress
from syntra_dspy.optimizers.query_rating import QueryRater
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.text import clean_text
from syntra_dspy.programs.authoring import ROLE_OF, InstructionAuthor
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.retrieval.sources import LexicalSourceRank

logger = logging.getLogger(__name__)
T = TypeVar("T")


class StageTools:
    """LM calls for drafting, judging and refining, and trial runs on the generator."""

    def __init__(self, *, settings: CompileSettings, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None) -> None:
        self.settings, self.lms, self.meter = settings, lms, meter
        self.author = author or InstructionAuthor()
        self._rater: QueryRater | None = None
        self.progress: CompileProgress | None = None  # the compile's, set by the strategy that runs the stages
        self._lexical: tuple[Any, LexicalSourceRank | None] | None = None

    def call(self, name: str, *, sample: int = 0, **inputs: Any) -> dspy.Prediction:
        """Run one authoring predictor on its role's LM; an unparsable answer is retried once, resampled.

        ``sample > 0`` asks for a sampled answer (temperature 0.7, a distinct rollout) instead of the greedy one.
        """
        lm = getattr(self.lms, ROLE_OF[name])
        predictor = getattr(self.author, name)
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            for rollout in (sample, sample + 1):
                config = {"temperature": 0.7, "rollout_id": rollout} if rollout else {}
                try:
                    return predictor(**inputs, config=config)
                except (AdapterParseError, ValueError) as exc:
                    error = exc
                    logger.warning("%s: unusable answer (%s)", name, str(exc)[:200])
        raise LMOutputError(f"no usable answer after 2 tries: {str(error)[:300]}", stage=name)

    def revise(self, name: str, field: str, current: str, **inputs: Any) -> str:
        """A refiner's rewrite of ``current``; an unchanged answer is resampled once, since at temperature 0
        the loop would otherwise evaluate the very same text again."""
        text = clean_text(getattr(self.call(name, **inputs), field))
        if " ".join(text.split()) == " ".join(current.split()):
            logger.info("%s returned the text unchanged; sampling another revision", name)
            text = clean_text(getattr(self.call(name, sample=2, **inputs), field))
        return text or current

    def generating(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a trial on the generator role (the LM production will use)."""
        with dspy.context(lm=self.lms.generator, adapter=dspy.JSONAdapter()):
            return fn(*args, **kwargs)

    def metered(self, name: str) -> AbstractContextManager[Any]:
        """Attribute the LM calls made inside the block to stage ``name``."""
        return self.meter.stage(name) if self.meter is not None else nullcontext()

    def query_rater(self) -> QueryRater:
        """The graded query verifier, one per compile (a backend's refusal of log probabilities is noted once)."""
        if self._rater is None:
            self._rater = QueryRater(self.author.rate_query, self.lms.verifier)
        return self._rater

    def lexical_ranker(self, program: SynthesisProgram, candidates: Any) -> LexicalSourceRank | None:
        """BM25 over the candidate source's corpus, built once per compile: the query loop's difficulty measure and
        the hybrid judge's lexical witness (None: no corpus, or no BM25 tokeniser for the document language)."""
        corpus = getattr(candidates, "corpus", None)
        if corpus is None:
            return None
        if self._lexical is not None and self._lexical[0] is corpus:
            return self._lexical[1]
        try:
            ranker = LexicalSourceRank(corpus, language=program.state.task_definition.document_language)
        except ConfigError as exc:
            logger.info("no BM25 over the corpus: %s", exc)
            ranker = None
        self._lexical = (corpus, ranker)
        return ranker
