"""Test mode: the stages (``stages/``: task definition, extraction guidance, query instruction, annotation), each
with its drafting, trial, metric and refinement, and one thin Teleprompter per strategy driving them; reports."""

from __future__ import annotations

from syntra_dspy.optimizers.annotation_check import annotation_check
from syntra_dspy.judging.labels import LabelledPair, read_label_file
from syntra_dspy.optimizers.gepa import GEPASettings, GEPAStrategy
from syntra_dspy.optimizers.human import FeedbackMismatchError, HumanCalibration, read_feedback
from syntra_dspy.optimizers.loop import RefinementLoop, Review, ReviewRequest
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.no_refinement import NoRefinement
from syntra_dspy.optimizers.report import Attempt, CompileReport, Evaluation, LoopReport
from syntra_dspy.optimizers.self_improve import SelfImprove
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.strategy import Strategy

STRATEGIES = {"self-improve": SelfImprove, "none": NoRefinement, "human": HumanCalibration, "gepa": GEPAStrategy}

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
    "LabelledPair",
    "LoopReport",
    "NoRefinement",
    "RefinementLoop",
    "Review",
    "ReviewRequest",
    "SelfImprove",
    "StageMetric",
    "Strategy",
    "annotation_check",
    "read_feedback",
    "read_label_file",
]
