"""The graded query verifier: every trial query rated 0-3 in one one-token call, scored by E over the rating tokens.

A small verifier asked to write one score for a batch of queries gives 3 to almost anything, so the query loop
cannot tell a weak instruction from a strong one. Read the way the relevance judge reads labels (the
probabilities of the four digit tokens, E = sum k * p(k)), per query, the mean rating moves with the queries'
quality in steps far finer than 0-3, and ``keep="best"`` has something to choose by. The example queries come
first in each call, so a server's prefix cache serves every call of a loop attempt; the document is not shown
(with it, the embedded 1.5B model rated closeness to the document instead: see
``experiments/query_verifier``), copying is measured in code.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

import dspy

from syntra_dspy.optimizers.query_measures import COPYING
from syntra_dspy.optimizers.trials import QueryTrial
from syntra_dspy.judging.grading import Grade, LogprobFallback, ask_digit
from syntra_dspy.query_form import copied_share

logger = logging.getLogger(__name__)
#: Lowest-rated queries named in the feedback.
FEEDBACK_QUERIES = 3
#: Mean share of document words above which the feedback says the lowest-rated queries copy their documents.
COPIED_SHARE_NOTE = 0.5


@dataclass(frozen=True)
class QueryRating:
    doc_id: str
    query: str
    grade: Grade
    copied: float  # share of the query's words that occur in its document

    @property
    def rating(self) -> float:
        value = self.grade.expected
        assert value is not None  # unrated queries are not kept
        return value

    def to_dict(self) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "query": self.query, "rating": round(self.rating, 4),
                "copied": round(self.copied, 3), "grade": self.grade.to_dict()}


@dataclass(frozen=True)
class QueryRatings:
    """One loop attempt's ratings; ``unrated``: queries whose answers stayed unusable; ``fallback``: why the
    ratings are written digits rather than expectations (None: graded)."""

    ratings: tuple[QueryRating, ...]
    unrated: int = 0
    fallback: str | None = None

    @property
    def mean(self) -> float | None:
        return mean(r.rating for r in self.ratings) if self.ratings else None

    def lowest(self, n: int = FEEDBACK_QUERIES) -> list[QueryRating]:
        return sorted(self.ratings, key=lambda r: r.rating)[:n]

    def feedback(self, threshold: float) -> str:
        """What the refiner is told when the mean rating is below ``threshold`` (empty otherwise)."""
        if self.mean is None or self.mean >= threshold:
            return ""
        low = self.lowest()
        quoted = "; ".join(f"\"{r.query}\" ({r.rating:.1f})" for r in low)
        text = (f"Rated one by one against the example queries, the queries average {self.mean:.2f} of 3 (pass: "
                f"{threshold:g}). Rated lowest: {quoted}.")
        copied = mean(r.copied for r in low)
        if copied > COPIED_SHARE_NOTE:
            text += (f" These lowest-rated queries {COPYING}: {copied:.0%} of their words occur in their documents;"
                     " ask for the searcher's own words.")
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "written" if self.fallback else "graded", "mean": None if self.mean is None
                else round(self.mean, 4), "rated": len(self.ratings), "unrated": self.unrated,
                "fallback": self.fallback, "ratings": [r.to_dict() for r in self.ratings]}


class QueryRater:
    """Rates trial queries with ``predictor`` (a ``RateSyntheticQuery`` predictor) on ``lm``.

    A backend that refuses log probabilities, or returns none, is asked for the written digit from then on
    (recorded in ``fallback``); an answer with neither a digit nor probabilities is asked once more, sampled, and
    then left unrated.
    """

    def __init__(self, predictor: Any, lm: Any) -> None:
        self.predictor, self.lm = predictor, lm
        self._logprobs = LogprobFallback("graded query verifier: %s; rating by the written digit instead", logger)

    @property
    def fallback(self) -> str | None:
        """Why queries are rated by the written digit (None: by the digit tokens' probabilities)."""
        return self._logprobs.reason

    def rate(self, example_queries: str, trials: Sequence[QueryTrial]) -> QueryRatings:
        ratings, unrated = [], 0
        for trial in trials:
            for query in trial.queries:
                grade = self.rate_one(example_queries=example_queries, query=query)
                if grade is None:
                    unrated += 1
                    continue
                ratings.append(QueryRating(trial.doc.doc_id, query, grade, copied_share(query, trial.doc.content)))
        return QueryRatings(tuple(ratings), unrated, self.fallback)

    def rate_one(self, **inputs: str) -> Grade | None:
        for rollout in (0, 1):
            config = {"temperature": 0.7, "rollout_id": rollout} if rollout else {}
            grade = self._ask(config, inputs)
            if grade.expected is not None:
                return grade
        logger.warning("query rating: no digit and no probabilities for %r", inputs.get("query", "")[:60])
        return None

    def _ask(self, config: dict[str, Any], inputs: dict[str, str]) -> Grade:
        with dspy.context(lm=self.lm):
            return self._logprobs.ask(
                lambda logprobs: ask_digit(self.predictor, logprobs=logprobs, config=config, **inputs))
