"""The judge cascade: candidates the graded judge need not ask, because no grade could change their label.

A graded judgment's calibrated score is a sum of terms, some of which need the model's grade (E, and for a list score
E's standing among the other candidates) and some of which do not (the cosine, the BM25 score and their standing in
the list). Before a candidate is graded, its score is therefore known up to the grade's part. When the grade's part,
over every value it can take, leaves the score on one side of each cut point, the class is known without the call:
the candidate is skipped, and the run store records that it was and why.

* ``lossless``: the grade's part over every E in [0, 3]. Provable only for a score that is a fixed function of the
  candidate's own E and cosine (``expected``, ``fused``): it rises with E, so E = 0 and E = 3 bound it, and no other
  candidate's label or score depends on it. A list score (``relative``, ``hybrid``, ``weighted``) compares E with
  the E of the other candidates of the list: before they are graded its standing is unbounded (their spread may be
  anything down to the floor of :func:`~syntra_dspy.judging.calibration.standing`), and once a candidate is skipped
  its E is missing from every other candidate's standing, so their scores (the records' teacher scores) are not the
  full judge's any more. A lossless cascade skips nothing under a list score.
* ``margin`` (lossy; off unless asked for): the grade's part is taken to lie within the central ``coverage`` share of
  the values it took on graded lists (the calibration set's samples, or an earlier session's grades in the run
  store; no reference labels are needed), for any score; a skipped candidate counts with the calibration set's mean
  E in the other candidates' standing. What it costs in agreement with people, replayed on the SciFact grades, is in
  ``benchmarks/results/cost_replay/``.

A small judge spreads E narrowly (the SciFact run's 1.5B model: standard deviation 0.22, so E from 0 to 3 moves the
fused score by 13 of its units while the cosine moves it by 2 or 3): the lossless rule then skips nothing, and only
the margin rule saves calls.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from syntra_dspy.judging.calibration import (
    CLASS_LABEL,
    CalibrationSample,
    JudgeCalibration,
    Klass,
    ListContext,
    list_contexts,
)
from syntra_dspy.judging.grading import LABELS
from syntra_dspy.judging.settings import CASCADE_MODES, CascadeMode  # noqa: F401

#: Scores that are a fixed function of the candidate's own grade and cosine: the only ones a lossless rule can skip.
PER_CANDIDATE_FEATURES: frozenset[str] = frozenset({"expected", "fused"})
#: The terms of a score that need the model's grade.
GRADE_TERMS: frozenset[str] = frozenset({"expected", "expected_standing"})
#: Graded lists a margin needs at least. A compiled calibration set without people's labels has one list per
#: few-shot query (3-8): on the scripted mini task a margin learned from its 3 lists skipped 85% of the grading calls
#: and changed 13% of the labels (benchmarks/results/paired_produce/), so such a set is not enough.
MIN_MARGIN_LISTS = 10
_E_RANGE = (float(LABELS[0]), float(LABELS[-1]))


class Parts(BaseModel):
    """A candidate's calibrated scores split into the part that needs its grade and the part that does not; the
    score is compared with the positive cut, ``related`` with the hard cut (the same number except for
    ``weighted``)."""

    model_config = ConfigDict(frozen=True)

    score_free: float
    score_grade: float
    related_free: float
    related_grade: float


def split_score(calibration: JudgeCalibration, expected: float, cosine: float | None,
                context: ListContext | None = None, lexical: float | None = None) -> Parts:
    """The calibrated scores of one candidate, split into the grade's part and the rest."""
    if calibration.feature == "expected":
        return Parts(score_free=0.0, score_grade=expected, related_free=0.0, related_grade=expected)
    terms = calibration.standardised(expected, cosine, context, lexical)
    weight = (lambda t: calibration.weights[t]) if calibration.feature == "weighted" else (lambda t: 1.0)
    free = [t for t in terms if t not in GRADE_TERMS]
    grade = [t for t in terms if t in GRADE_TERMS]
    return Parts(score_free=sum(weight(t) * terms[t] for t in free),
                 score_grade=sum(weight(t) * terms[t] for t in grade),
                 related_free=sum(terms[t] for t in free), related_grade=sum(terms[t] for t in grade))


def fixed_class(score: tuple[float, float], related: tuple[float, float], positive: float, hard: float
                ) -> Klass | None:
    """The class every score in ``score`` (low, high) and related score in ``related`` gives, or None when they
    could give two (:func:`~syntra_dspy.judging.calibration.classify_score` on every point of the box)."""
    if score[0] >= positive:
        return "positive"
    if score[1] < positive:
        if related[0] >= hard:
            return "hard_negative"
        if related[1] < hard:
            return "easy_negative"
    return None


class GradedCandidate(BaseModel):
    """One graded candidate of a query's list, as a margin is learned from."""

    model_config = ConfigDict(frozen=True)

    expected: float
    cosine: float
    lexical: float | None = None
    listed: bool = True
    source: bool = False  # the query's own document: always graded, so never counted as a skip


class Skip(BaseModel):
    """Why a candidate was not graded: its class, the range its score could take, and the rule that said so."""

    model_config = ConfigDict(frozen=True)

    klass: Klass
    rule: CascadeMode
    low: float
    high: float

    @property
    def label(self) -> int:
        return CLASS_LABEL[self.klass]

    @property
    def reason(self) -> str:
        what = "every E in [0, 3]" if self.rule == "lossless" else "the margin's range of grades"
        return f"{self.klass} for {what}: score {self.low:.3f} to {self.high:.3f}"


class JudgeCascade(BaseModel):
    """Which candidates a graded judge skips: the range the grade's part of each score is taken to lie in.

    Build it with :meth:`lossless` or :meth:`margin`; it crosses to Ray workers as JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["lossless", "margin"]
    score_range: tuple[float, float]
    related_range: tuple[float, float]
    #: E a skipped candidate counts with in the other candidates' standing (list scores, margin only).
    impute: float = 0.0
    coverage: float | None = Field(None, gt=0, le=1)
    #: Where the margin was learned: ``calibration samples`` or ``run store``, and from how many graded lists.
    learned_from: str | None = None
    lists: int | None = None

    @classmethod
    def lossless(cls, calibration: JudgeCalibration) -> JudgeCascade | None:
        """The exact rule, or None when the score depends on the rest of the list (nothing is provably skippable)."""
        if calibration.feature not in PER_CANDIDATE_FEATURES:
            return None
        low, high = (split_score(calibration, e, 0.0).score_grade for e in _E_RANGE)
        return cls(mode="lossless", score_range=(low, high), related_range=(low, high))

    @classmethod
    def margin(cls, calibration: JudgeCalibration, lists: Sequence[Sequence[GradedCandidate]], *, coverage: float,
               learned_from: str) -> JudgeCascade:
        """The lossy rule: the central ``coverage`` share of the grade's part over ``lists`` (each one query's graded
        candidates; the parts of listed candidates count), never wider than E in [0, 3] allows for a per-candidate
        score."""
        parts = [p for group in lists for c, p in zip(group, list_parts(calibration, group)) if c.listed]
        if len(lists) < MIN_MARGIN_LISTS:
            raise ValueError(f"a margin needs the grades of at least {MIN_MARGIN_LISTS} queries' candidates; "
                             f"{learned_from} holds {len(lists)}")
        tail = (1.0 - coverage) / 2
        score = _quantiles([p.score_grade for p in parts], tail)
        related = _quantiles([p.related_grade for p in parts], tail)
        exact = cls.lossless(calibration)
        if exact is not None:
            score = (max(score[0], exact.score_range[0]), min(score[1], exact.score_range[1]))
            related = (max(related[0], exact.related_range[0]), min(related[1], exact.related_range[1]))
        return cls(mode="margin", score_range=score, related_range=related, impute=calibration.expected_mean,
                   coverage=coverage, learned_from=learned_from, lists=len(lists))

    def skips(self, calibration: JudgeCalibration, cosine: Sequence[float | None], *,
              listed: Sequence[bool] | None = None, lexical: Sequence[float | None] | None = None,
              keep: Collection[int] = ()) -> dict[int, Skip]:
        """The candidates of one query (by position) whose class no grade in range could change; ``keep``: positions
        always graded (the source document)."""
        n = len(cosine)
        if any(c is None for c in cosine) or (calibration.needs_lexical and (lexical is None or None in lexical)):
            return {}  # the judge will refuse these candidates itself
        contexts: list[ListContext | None] = [None] * n
        if calibration.needs_list:  # the list's cosine and BM25 terms are known before any grade
            contexts = list(list_contexts([0.0] * n, cosine, listed or [True] * n, lexical))  # type: ignore[arg-type]
        out: dict[int, Skip] = {}
        for i in range(n):
            if i in keep:
                continue
            parts = split_score(calibration, 0.0, cosine[i], contexts[i], lexical[i] if lexical else None)
            score = (parts.score_free + self.score_range[0], parts.score_free + self.score_range[1])
            related = (parts.related_free + self.related_range[0], parts.related_free + self.related_range[1])
            klass = fixed_class(score, related, calibration.positive_threshold, calibration.hard_threshold)
            if klass is not None:
                out[i] = Skip(klass=klass, rule=self.mode, low=score[0], high=score[1])
        return out

    def skipped_share(self, calibration: JudgeCalibration, lists: Sequence[Sequence[GradedCandidate]]) -> float:
        """The share of ``lists``' grading calls this cascade would have skipped (each query's own document is always
        graded): for a margin, on the lists it was learned from, what its coverage buys before its cost in labels is
        measured."""
        calls = skipped = 0
        for group in lists:
            keep = [i for i, c in enumerate(group) if c.source]
            skipped += len(self.skips(calibration, [c.cosine for c in group], listed=[c.listed for c in group],
                                      lexical=[c.lexical for c in group], keep=keep))
            calls += len(group)
        return skipped / calls if calls else 0.0

    def describe(self) -> dict[str, object]:
        return self.model_dump(mode="json", exclude_none=True)


def list_parts(calibration: JudgeCalibration, group: Sequence[GradedCandidate]) -> list[Parts]:
    """Every candidate's score parts within its fully graded list."""
    contexts: list[ListContext | None] = [None] * len(group)
    if calibration.needs_list:
        contexts = list(list_contexts([c.expected for c in group], [c.cosine for c in group],
                                      [c.listed for c in group], [c.lexical for c in group]))
    return [split_score(calibration, c.expected, c.cosine, ctx, c.lexical) for c, ctx in zip(group, contexts)]


def sample_lists(samples: Sequence[CalibrationSample]) -> list[list[GradedCandidate]]:
    """A calibration set's graded samples as one list per query (a random control is not listed)."""
    by_query: dict[str, list[GradedCandidate]] = {}
    for s in samples:
        by_query.setdefault(s.query, []).append(
            GradedCandidate(expected=s.expected, cosine=s.cosine, lexical=s.lexical, listed=s.listed))
    return list(by_query.values())


def _quantiles(values: Sequence[float], tail: float) -> tuple[float, float]:
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]
    return at(tail), at(1.0 - tail)
