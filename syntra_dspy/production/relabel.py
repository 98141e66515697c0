"""Label a run's graded candidates with another calibration of the same judge, without grading them again.

Grading is the expensive part of judging; the calibration on top is cheap. An artifact recalibrated from the run's
own (``syntra artifacts recalibrate``: same grading prompt, a new fitted score) would have asked the model the very
same questions, so the p(0..3), E and BM25 scores the run stored are its grades too: ``syntra export --judge
ARTIFACT`` labels the candidates with that artifact's calibration, the way production would have. The run store is
only read; the export's meta file says which judge labelled the records and how many labels changed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.production.store import RunStore


@dataclass
class Relabeller:
    """Applies one artifact's graded judge to the grades a run stored, query by query."""

    judge: Any  # RelevanceJudge in graded mode
    version: str
    task: str
    changed: Counter = field(default_factory=Counter)  # (stored class, new class) -> candidates
    ungraded: int = 0  # labelled candidates without stored grades: their stored label is kept

    def relabel(self, store: RunStore, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` (as ``RunStore.iter_queries`` yields it) with its candidates' labels from this judge, and
        ``scores``: rank -> this judge's calibrated score (kept-label candidates keep the score the run stored)."""
        from syntra_dspy.judging.grading import Grade
        from syntra_dspy.judging.judge import Candidate, Judgment
        from syntra_dspy.signatures.types import label_class

        stored = {rank: (doc_id, label) for rank, doc_id, label in row["candidates"]}
        found = store.rows(
            "SELECT c.rank, c.score, g.p0, g.p1, g.p2, g.p3, g.written, g.mass, g.lexical FROM candidates c "
            "LEFT JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank WHERE c.query_id = ? ORDER BY c.rank",
            (row["query_id"],))
        ranks, candidates, grades = [], [], []
        for rank, cosine, p0, p1, p2, p3, written, mass, lexical in found:
            probs = None if p0 is None else (p0, p1, p2, p3)
            grade = Grade(probs, written, mass) if probs is not None or written is not None else None
            ranks.append(rank)
            candidates.append(Candidate("", cosine, lexical=lexical))
            usable = (grade is not None and grade.expected is not None and stored[rank][1] is not None
                      and (lexical is not None or not self.judge.needs_lexical))
            grades.append(grade if usable else None)
        settled: list[Judgment | None] = self.judge.label_grades(candidates, grades)
        labels, scores = {}, {}
        for rank, judgment in zip(ranks, settled):
            old = stored[rank][1]
            if judgment is None:
                self.ungraded += old is not None
                labels[rank] = old
                continue
            labels[rank], scores[rank] = judgment.label, judgment.score
            self.changed[(label_class(old), label_class(judgment.label))] += 1
        return {**row, "scores": scores, "candidates": [(rank, doc_id, labels.get(rank, label))
                                                        for rank, doc_id, label in row["candidates"]]}

    def report(self) -> dict[str, Any]:
        """What the export's meta file records of the relabelling."""
        same = sum(n for (a, b), n in self.changed.items() if a == b)
        return {"artifact": f"{self.task}/{self.version}", "relabelled": sum(self.changed.values()),
                "changed": sum(self.changed.values()) - same, "kept_stored_label": self.ungraded,
                "transitions": {f"{a}->{b}": n for (a, b), n in sorted(self.changed.items()) if a != b}}


def load_relabeller(store: RunStore, artifact: str | Path) -> Relabeller:
    """The graded judge of ``artifact``, after checking that it grades with the run's grading prompt."""
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.judging.judge import RelevanceJudge, judge_mode

    loaded = load_artifact(artifact)
    if judge_mode(loaded.program) != "graded":
        raise ConfigError("this artifact has no fitted graded judge to label a run's grades with", path=artifact,
                          hint="give an artifact compiled or recalibrated with --judge-mode graded")
    store.check_graded_like(loaded.program, path=Path(artifact), field="grade prompt", use="--relabel-with",
                            hint="give an artifact recalibrated from the run's own (syntra artifacts recalibrate); "
                                 "a different judge needs a new production run")
    judge = RelevanceJudge(loaded.program, mode="graded")
    if judge.needs_lexical and not store.scalar("SELECT count(*) FROM grades WHERE lexical IS NOT NULL"):
        raise ConfigError("this artifact's judge weighs each candidate's BM25 score, which the run did not store",
                          path=artifact, hint="use a calibration without BM25 terms (--judge-feature relative)")
    return Relabeller(judge, loaded.version, loaded.task)
