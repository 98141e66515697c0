"""Teachers: one score per positive and negative of a record, from the judge's grades, for distillation losses.

An exported record carries more than 0/1 labels: per candidate the judge's calibrated ``score``, its parts (E, the
label probabilities) and the candidate's BM25 score. A record whose positive the student already ranks first still
teaches how far apart the teacher puts the candidates, and where the teacher orders them differently from the
student. Teachers (``TrainConfig.teacher``):

* ``calibrated``: the judge's calibrated score, what its label was cut from (``pos_scores``/``neg_scores``);
* ``expected``: the judge's E = sum k p(k) alone;
* ``expected+bm25``: E and the BM25 score, each standardised over the record's candidates, added: the two
  witnesses the student does not have (the calibrated hybrid score also holds the student's own cosine);
* ``label+bm25``: the judge's decision kept whole and BM25 within it: positives score ``LABEL_GAP`` above
  negatives, and inside each class the standardised BM25 score orders the candidates. The judge's labels beat its
  raw E against people's qrels (E alone is a weak ranker on held-out claims), while BM25 is the better ranker of
  what the judge could not tell apart.

Scores within a record are what matter: the margin-MSE loss reads their differences, the KL loss their softmax. So
every teacher's scores are standardised over the record's candidates (the calibrated score's gap between a positive
and the negatives is often tens of units, E's a few tenths), then multiplied by ``teacher_scale`` (a training
setting): the student cosine one standard deviation of the teacher is worth. At 0.1 a positive two deviations above
a negative asks for a cosine margin of 0.2, about what the base MiniLM gives its judged positives over their hard
negatives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from syntra_dspy.errors import ConfigError, InputError

TeacherName = Literal["calibrated", "expected", "expected+bm25", "label+bm25"]
TEACHERS: tuple[str, ...] = ("calibrated", "expected", "expected+bm25", "label+bm25")
#: What each teacher reads from a candidate's grade.
NEEDS: dict[str, tuple[str, ...]] = {"calibrated": ("score",), "expected": ("expected",),
                                     "expected+bm25": ("expected", "bm25"), "label+bm25": ("bm25",)}
#: How far ``label+bm25`` puts every positive above every negative, in standardised BM25 units.
LABEL_GAP = 3.0
_HINT = ("export the records with `syntra export` from a run whose judge is graded (records of a written judge, "
         "or of another tool, carry no grades, nor do the candidates a --judge-cascade skipped); or train with "
         "--teacher label+bm25 or --loss infonce")


@dataclass(frozen=True)
class Teacher:
    """Scores a record's positives and negatives: standardised over the record, times ``scale``."""

    name: TeacherName
    scale: float = 1.0

    def __post_init__(self) -> None:
        if self.name not in TEACHERS:
            raise ConfigError(f"unknown teacher {self.name!r}", field="teacher", hint=f"one of {', '.join(TEACHERS)}")

    def score(self, rec: Any, *, record: int | None = None, source: str | None = None
              ) -> tuple[list[float], list[float]]:
        """``rec``'s (a :class:`~syntra_dspy.training.data.TrainingRecord`) positive and negative scores, scaled;
        ``record``/``source`` name it in an error."""
        pos, neg = teacher_scores(self.name, rec.pos_grades, rec.neg_grades, len(rec.pos), len(rec.neg),
                                  what=f"record {record}: " if record is not None else "", source=source)
        scaled = [self.scale * v for v in _standardise(pos + neg)]
        return scaled[:len(pos)], scaled[len(pos):]


def _standardise(values: Sequence[float]) -> list[float]:
    """z-scores over one record's candidates; all equal (or one candidate) -> all 0."""
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    std = math.sqrt(var)
    return [0.0 if std < 1e-12 else (v - mean) / std for v in values]


def _parts(grades: Sequence[Mapping[str, Any] | None], n: int, key: str, side: str, where: dict[str, Any]
           ) -> list[float]:
    if len(grades) != n:
        raise InputError(f"{where['what']}carries no judge grades for its {side} texts", path=where["source"],
                         field=f"{side}_scores", hint=_HINT)
    out = []
    for i, grade in enumerate(grades):
        value = None if grade is None else grade.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where['what']}{side}[{i}] has no {key!r} in its grade", path=where["source"],
                             field=f"{side}_scores" if key == "score" else "labels", hint=_HINT)
        out.append(float(value))
    return out


def teacher_scores(name: str, pos_grades: Sequence[Mapping[str, Any] | None],
                   neg_grades: Sequence[Mapping[str, Any] | None], n_pos: int, n_neg: int, *,
                   what: str = "", source: str | None = None) -> tuple[list[float], list[float]]:
    """Teacher ``name``'s scores of a record's positives and negatives (unscaled)."""
    where = {"what": what, "source": source}
    if name == "calibrated":
        return (_parts(pos_grades, n_pos, "score", "pos", where), _parts(neg_grades, n_neg, "score", "neg", where))
    if name == "expected":
        return (_parts(pos_grades, n_pos, "expected", "pos", where),
                _parts(neg_grades, n_neg, "expected", "neg", where))
    bm25 = _standardise(_parts(pos_grades, n_pos, "bm25", "pos", where)
                        + _parts(neg_grades, n_neg, "bm25", "neg", where))
    if name == "expected+bm25":
        expected = _standardise(_parts(pos_grades, n_pos, "expected", "pos", where)
                                + _parts(neg_grades, n_neg, "expected", "neg", where))
        fused = [e + b for e, b in zip(expected, bm25, strict=True)]
        return fused[:n_pos], fused[n_pos:]
    if name == "label+bm25":
        return [LABEL_GAP + b for b in bm25[:n_pos]], bm25[n_pos:]
    raise ConfigError(f"unknown teacher {name!r}", field="teacher", hint=f"one of {', '.join(TEACHERS)}")
