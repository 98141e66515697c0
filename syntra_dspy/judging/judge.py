"""The relevance judge of a synthesis program: one helper that labels a query's candidates, graded or written.

* ``graded``: one call per candidate (:meth:`SynthesisProgram.grade_candidate`), the label tokens' probabilities
  turned into E, then the program's fitted :class:`JudgeCalibration` (or, for an artifact compiled before graded
  judging, the uncalibrated nearest-label rule) maps E, and the retriever's cosine when the calibration fuses
  them, to positive / hard negative / easy negative. A backend that returns no probabilities (or refuses to be
  asked for them) is judged by its written digit instead; :attr:`RelevanceJudge.fallback` says why. With a
  :class:`~syntra_dspy.judging.cascade.JudgeCascade`, a candidate whose class no grade could change is not asked
  (:meth:`RelevanceJudge.skips`): its judgment carries the :class:`~syntra_dspy.judging.cascade.Skip` instead.
  The calibration says which the prompt shows first (``grade_order``): a judge calibrated on ``document-first`` grades
  shows the document before the query, so the queries one candidate is graded for share the evaluated prompt prefix
  (:attr:`RelevanceJudge.groups_by_document` tells a caller to ask them in a row).
* ``written``: the annotate step labels candidates in chunks with a JSON answer (the judge before graded judging).

Compile trials, calibration, comparison, agreement and production all label through this class.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from syntra_dspy.errors import LMOutputError
from syntra_dspy.judging.calibration import (CLASS_LABEL, UNCALIBRATED, JudgeCalibration, ListContext,
                                            classify_score, list_contexts)
from syntra_dspy.judging.grading import Grade, LogprobFallback
from syntra_dspy.judging.settings import (DEFAULT_GRADE_ORDER, GRADE_ORDERS, JUDGE_MODES,  # noqa: F401
                                         GradeOrder, JudgeMode, parse_judge_modes)
from syntra_dspy.signatures.types import label_class

if TYPE_CHECKING:
    from syntra_dspy.judging.cascade import JudgeCascade, Skip

logger = logging.getLogger(__name__)


def judge_mode(program: Any) -> JudgeMode:
    """The judge ``program`` was compiled with: ``graded`` when it holds a fitted calibration, else ``written``.

    What production and ``syntra agreement`` use by default, and what the compile records in the manifest
    (``settings.judge``), so the record and the program cannot disagree."""
    return "graded" if program.state.judge is not None else "written"


@dataclass(frozen=True)
class Candidate:
    """What the judge needs of a candidate: its text and, for a fused, relative, hybrid or weighted calibration,
    the retriever's cosine; for a hybrid one (or a weighted one fitted with BM25 scores) also ``lexical``, its BM25
    score for the query; ``listed``: whether it is one of the query's retrieved list (a list-relative calibration
    compares each candidate with the listed others; a random control or an added positive is not listed)."""

    text: str
    cosine: float | None = None
    listed: bool = True
    lexical: float | None = None


@dataclass(frozen=True)
class Judgment:
    """One candidate's label (0-3 as stored), with the graded evidence behind it when there is some."""

    label: int
    grade: Grade | None = None
    score: float | None = None  # the calibrated score (E or fused) the label was cut from
    skipped: Skip | None = None  # not graded: the cascade's reason (then no grade and no score)

    @property
    def klass(self) -> str:
        return label_class(self.label)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "class": self.klass, "score": self.score,
                **({"grade": self.grade.to_dict()} if self.grade is not None else {}),
                **({"skipped": self.skipped.reason} if self.skipped is not None else {})}


class RelevanceJudge:
    """Labels candidates with one program's judge; thread-safe (production calls it from several workers)."""

    def __init__(self, program: Any, *, mode: JudgeMode | None = None, chunk_size: int = 1,
                 cascade: JudgeCascade | None = None, grade_order: GradeOrder | None = None) -> None:
        calibration: JudgeCalibration | None = program.state.judge
        self.program = program
        self.mode: JudgeMode = mode or judge_mode(program)
        if self.mode not in JUDGE_MODES:
            raise ValueError(f"unknown judge mode {self.mode!r}; use one of {', '.join(JUDGE_MODES)}")
        self.calibration = calibration or UNCALIBRATED
        self.calibrated = calibration is not None
        if cascade is not None and (self.mode != "graded" or not self.calibrated):
            raise ValueError("a judge cascade needs a graded judge with a fitted calibration")
        self.cascade = cascade
        # ``grade_order``: the calibration's, which is the only one its cut points hold for; an uncalibrated judge
        # (calibration grades, or an artifact from before graded judging) grades in the order asked
        own = self.calibration.grade_order
        if grade_order is not None and grade_order not in GRADE_ORDERS:
            raise ValueError(f"unknown grade order {grade_order!r}; use one of {', '.join(GRADE_ORDERS)}")
        if grade_order is not None and self.calibrated and grade_order != own:
            raise ValueError(f"this judge's calibration was fitted on {own} grades, so it cannot cut {grade_order} "
                             f"grades (the same model gives E of another spread read the other way round)")
        self.grade_order: GradeOrder = grade_order or own
        self.chunk_size = 1 if self.mode == "graded" else chunk_size
        self._logprobs = LogprobFallback("graded judge: %s; judging by the written label digit instead", logger)

    @property
    def fallback(self) -> str | None:
        """Why candidates are judged by the written digit (None: by label probabilities, or written mode)."""
        return self._logprobs.reason

    @fallback.setter
    def fallback(self, reason: str) -> None:
        self._logprobs.note(reason, quiet=True)

    @property
    def needs_lexical(self) -> bool:
        """Whether each candidate must come with its BM25 score for the query (a hybrid calibration, or a weighted
        one fitted with BM25 scores)."""
        return self.mode == "graded" and self.calibration.needs_lexical

    @property
    def groups_by_document(self) -> bool:
        """Whether calls for the same candidate document should follow each other (a graded judge that shows the
        document first: the next call reuses the evaluated instruction and document)."""
        return self.mode == "graded" and self.grade_order == "document-first"

    def describe(self) -> dict[str, Any]:
        """For run stores and reports: the mode, whether it is calibrated, the calibration, any fallback."""
        info: dict[str, Any] = {"mode": self.mode}
        if self.mode == "graded":
            info["calibrated"] = self.calibrated
            info["calibration"] = self.calibration.description()
            if self.cascade is not None:
                info["cascade"] = self.cascade.describe()
            if self.grade_order != DEFAULT_GRADE_ORDER:
                info["grade_order"] = self.grade_order
        else:
            info["chunk_size"] = self.chunk_size
        if self.fallback:
            info["fallback"] = self.fallback
        return info

    # -- one call ------------------------------------------------------------------------------------------
    def judge(self, query: str, candidates: Sequence[Candidate]) -> list[Judgment]:
        """Labels for ``candidates`` (one chunk: a single call in written mode, one call each when graded).

        Raises ``LMOutputError`` when an answer stays unusable after the program's repair retries.
        """
        if self.mode == "written":
            labels = self.program.label_candidates(query, [c.text for c in candidates])
            return [Judgment(int(label)) for label in labels]
        return [self._graded(query, c) for c in candidates]

    def _graded(self, query: str, candidate: Candidate) -> Judgment:
        return self.calibrate(self._grade(query, candidate.text), candidate)

    def calibrate(self, grade: Grade, candidate: Candidate) -> Judgment:
        """The judgment this judge makes of a grade it did not ask for itself (e.g. logged by an artifact with the
        same grading prompt). A list-relative calibration's label is provisional here (no list yet: standing 0);
        ``settle`` finalises it."""
        if self.mode != "graded":
            raise ValueError("only a graded judge calibrates grades")
        if self.calibration.needs_lexical and candidate.lexical is None:
            raise ValueError(f"this artifact's {self.calibration.feature} judge needs each candidate's BM25 score "
                             "for the query")
        return self._calibrated(grade, candidate, ListContext((), ()) if self.calibration.needs_list else None)

    def label_grades(self, candidates: Sequence[Candidate], grades: Sequence[Grade | None],
                     keep: Collection[int] = ()) -> list[Judgment | None]:
        """One query's candidates labelled from grades made earlier (no LM call) as :meth:`judge_all` would have
        labelled them: the cascade's judgment where it would not have asked, each grade cut, then all settled
        against the list; a candidate without a grade stays ``None``. A replay of what another judge or cascade
        would have made of logged grades."""
        skipped = self.skips(candidates, keep)
        judged = [skipped.get(i) or (None if grade is None else self.calibrate(grade, candidate))
                  for i, (candidate, grade) in enumerate(zip(candidates, grades))]
        return self.settle(candidates, judged)

    def _calibrated(self, grade: Grade, candidate: Candidate, context: ListContext | None) -> Judgment:
        expected = grade.expected
        assert expected is not None  # grade_candidate never returns a grade without probabilities or a digit
        calibration = self.calibration
        score, related = calibration.scores(expected, candidate.cosine, context, candidate.lexical)
        klass = classify_score(score, calibration.positive_threshold, calibration.hard_threshold, related)
        return Judgment(CLASS_LABEL[klass], grade, score)

    def settle(self, candidates: Sequence[Candidate], judgments: Sequence[Judgment | None]) -> list[Judgment | None]:
        """The final judgments of one query's candidates once all are graded: a relative calibration classifies
        each against the other listed candidates (a candidate the cascade skipped counts there with the cascade's
        stand-in E, and keeps its class); any other judge's judgments are already final."""
        if self.mode != "graded" or not self.calibration.needs_list:
            return list(judgments)
        lexical = self.calibration.needs_lexical
        members = [i for i, j in enumerate(judgments) if j is not None
                   and (j.skipped is not None or (j.grade is not None and j.grade.expected is not None))
                   and candidates[i].cosine is not None and (not lexical or candidates[i].lexical is not None)]
        impute = self.cascade.impute if self.cascade is not None else 0.0
        expected = [impute if judgments[i].skipped is not None else judgments[i].grade.expected  # type: ignore
                    for i in members]
        contexts = list_contexts(expected, [candidates[i].cosine for i in members],  # type: ignore[misc]
                                 [candidates[i].listed for i in members],
                                 [candidates[i].lexical for i in members])
        out = list(judgments)
        for i, context in zip(members, contexts):
            if judgments[i].skipped is None:  # type: ignore[union-attr]
                out[i] = self._calibrated(
                    judgments[i].grade, candidates[i], context)  # type: ignore[union-attr,arg-type]
        return out

    def skips(self, candidates: Sequence[Candidate], keep: Collection[int] = ()) -> dict[int, Judgment]:
        """The judgments of the candidates of one query (by position) that the cascade leaves ungraded, because no
        grade could change their class; ``keep``: positions always graded (e.g. the query's source document). Empty
        without a cascade."""
        if self.cascade is None:
            return {}
        found = self.cascade.skips(self.calibration, [c.cosine for c in candidates],
                                   listed=[c.listed for c in candidates], lexical=[c.lexical for c in candidates],
                                   keep=keep)
        return {i: Judgment(CLASS_LABEL[skip.klass], skipped=skip) for i, skip in found.items()}

    def _grade(self, query: str, text: str) -> Grade:
        return self._logprobs.ask(lambda logprobs: self.program.grade_candidate(query, text, logprobs=logprobs,
                                                                                 order=self.grade_order))

    # -- a whole query -----------------------------------------------------------------------------------------
    def chunks(self, n: int) -> list[tuple[int, int]]:
        """``[start, stop)`` of each call's share of ``n`` candidates (one per call when graded)."""
        return [(start, min(n, start + self.chunk_size)) for start in range(0, n, self.chunk_size)]

    def judge_all(self, query: str, candidates: Sequence[Candidate], keep: Collection[int] = ()
                  ) -> list[Judgment | None]:
        """Every candidate of a query, chunk by chunk, except those the cascade skips (``keep``: positions graded
        regardless); a chunk whose answer stays unusable gives ``None``s."""
        skipped = self.skips(candidates, keep)
        out: list[Judgment | None] = [skipped.get(i) for i in range(len(candidates))]
        for start, stop in self.chunks(len(candidates)):
            if all(i in skipped for i in range(start, stop)):
                continue
            chunk = candidates[start:stop]
            try:
                out[start:start + len(chunk)] = self.judge(query, chunk)
            except LMOutputError as exc:
                logger.warning("annotation failed for %r (candidates %d-%d): %s", query[:60], start,
                               start + len(chunk) - 1, exc)
        return self.settle(candidates, out)
