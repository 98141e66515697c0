"""The relevance judge: how a candidate is graded, how grades become training roles, and how far the judge agrees
with people.

``grading`` asks for one candidate's 0-3 label and reads the label tokens' probabilities; ``calibration`` fits the
score and cut points that map grades to positive / hard negative / easy negative (compiled into the program);
``judge`` is the one class every caller labels through (:class:`RelevanceJudge`, graded or written); ``agreement``
holds the agreement statistics (accuracy, Cohen's kappa, paired bootstrap); ``labels`` reads what people judged
(label files, qrels, judged datasets); ``candidates`` builds judged candidate sets and the lexical witness (BM25);
``calibration_set`` builds and grades test mode's calibration set; ``measure`` scores a judge on judged candidates.
The two commands that open artifacts sit above production, whose loader they use:
:mod:`syntra_dspy.comparison.judge_agreement` (``syntra agreement``) and :mod:`syntra_dspy.production.recalibrate`
(``syntra artifacts recalibrate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports
from syntra_dspy.judging.agreement import Agreement, agreement, cohen_kappa, label_agreement

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.judging.calibration import BestCut, CalibrationSample, JudgeCalibration, best_cut, fit_calibration
    from syntra_dspy.judging.grading import Grade
    from syntra_dspy.judging.judge import JUDGE_MODES, Candidate, JudgeMode, Judgment, RelevanceJudge, judge_mode
    from syntra_dspy.judging.labels import LabelledPair, load_judgements, read_label_file

__all__ = [
    "JUDGE_MODES",
    "Agreement",
    "BestCut",
    "CalibrationSample",
    "Candidate",
    "Grade",
    "JudgeCalibration",
    "JudgeMode",
    "Judgment",
    "LabelledPair",
    "RelevanceJudge",
    "agreement",
    "best_cut",
    "cohen_kappa",
    "fit_calibration",
    "judge_mode",
    "label_agreement",
    "load_judgements",
    "read_label_file",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "BestCut": "syntra_dspy.judging.calibration",
    "CalibrationSample": "syntra_dspy.judging.calibration",
    "JudgeCalibration": "syntra_dspy.judging.calibration",
    "best_cut": "syntra_dspy.judging.calibration",
    "fit_calibration": "syntra_dspy.judging.calibration",
    "Grade": "syntra_dspy.judging.grading",
    "JUDGE_MODES": "syntra_dspy.judging.judge",
    "Candidate": "syntra_dspy.judging.judge",
    "JudgeMode": "syntra_dspy.judging.judge",
    "Judgment": "syntra_dspy.judging.judge",
    "RelevanceJudge": "syntra_dspy.judging.judge",
    "judge_mode": "syntra_dspy.judging.judge",
    "LabelledPair": "syntra_dspy.judging.labels",
    "load_judgements": "syntra_dspy.judging.labels",
    "read_label_file": "syntra_dspy.judging.labels",
})
