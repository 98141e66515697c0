"""Test mode: the stages (``stages/``: task definition, extraction guidance, query instruction, annotation), each
with its drafting, trial, metric and refinement, and one thin Teleprompter per strategy driving them; reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.optimizers.annotation_check import annotation_check
    from syntra_dspy.judging.labels import LabelledPair, read_label_file
    from syntra_dspy.optimizers.gepa import GEPASettings, GEPAStrategy
    from syntra_dspy.optimizers.human import FeedbackMismatchError, HumanCalibration, read_feedback
    from syntra_dspy.optimizers.human_inputs import HumanLabels, ReviewSession
    from syntra_dspy.optimizers.loop import LoopLimits, LoopSteps, RefinementLoop, Review, ReviewRequest
    from syntra_dspy.optimizers.metric import StageMetric
    from syntra_dspy.optimizers.no_refinement import NoRefinement
    from syntra_dspy.optimizers.report import Attempt, CompileReport, Evaluation, LoopReport
    from syntra_dspy.optimizers.self_improve import SelfImprove
    from syntra_dspy.optimizers.settings import CompileSettings
    from syntra_dspy.optimizers.strategy import Strategy

__all__ = [
    "STRATEGIES",
    "Attempt",
    "CompileReport",
    "CompileSettings",
    "Evaluation",
    "FeedbackMismatchError",
    "GEPASettings",
    "GEPAStrategy",
    "HumanCalibration",
    "HumanLabels",
    "LabelledPair",
    "LoopLimits",
    "LoopReport",
    "LoopSteps",
    "NoRefinement",
    "RefinementLoop",
    "Review",
    "ReviewRequest",
    "ReviewSession",
    "SelfImprove",
    "StageMetric",
    "Strategy",
    "annotation_check",
    "read_feedback",
    "read_label_file",
]


def _strategies() -> dict[str, type]:
    """The strategy classes by name (``STRATEGIES``), loaded with them."""
    from syntra_dspy.optimizers.gepa import GEPAStrategy
    from syntra_dspy.optimizers.human import HumanCalibration
    from syntra_dspy.optimizers.no_refinement import NoRefinement
    from syntra_dspy.optimizers.self_improve import SelfImprove

    return {"self-improve": SelfImprove, "none": NoRefinement, "human": HumanCalibration, "gepa": GEPAStrategy}


_getattr, __dir__ = lazy_exports(__name__, {
    "annotation_check": "syntra_dspy.optimizers.annotation_check",
    "LabelledPair": "syntra_dspy.judging.labels",
    "read_label_file": "syntra_dspy.judging.labels",
    "GEPASettings": "syntra_dspy.optimizers.gepa",
    "GEPAStrategy": "syntra_dspy.optimizers.gepa",
    "FeedbackMismatchError": "syntra_dspy.optimizers.human",
    "HumanCalibration": "syntra_dspy.optimizers.human",
    "read_feedback": "syntra_dspy.optimizers.human",
    "HumanLabels": "syntra_dspy.optimizers.human_inputs",
    "ReviewSession": "syntra_dspy.optimizers.human_inputs",
    "LoopLimits": "syntra_dspy.optimizers.loop",
    "LoopSteps": "syntra_dspy.optimizers.loop",
    "RefinementLoop": "syntra_dspy.optimizers.loop",
    "Review": "syntra_dspy.optimizers.loop",
    "ReviewRequest": "syntra_dspy.optimizers.loop",
    "StageMetric": "syntra_dspy.optimizers.metric",
    "NoRefinement": "syntra_dspy.optimizers.no_refinement",
    "Attempt": "syntra_dspy.optimizers.report",
    "CompileReport": "syntra_dspy.optimizers.report",
    "Evaluation": "syntra_dspy.optimizers.report",
    "LoopReport": "syntra_dspy.optimizers.report",
    "SelfImprove": "syntra_dspy.optimizers.self_improve",
    "CompileSettings": "syntra_dspy.optimizers.settings",
    "Strategy": "syntra_dspy.optimizers.strategy",
})


def __getattr__(name: str):  # noqa: ANN202 - STRATEGIES as well as the lazily loaded names
    if name == "STRATEGIES":
        globals()["STRATEGIES"] = _strategies()
        return globals()["STRATEGIES"]
    return _getattr(name)
