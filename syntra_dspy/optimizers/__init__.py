"""Test mode: one Teleprompter per strategy, their loops, metrics and reports."""

from __future__ import annotations

from syntra_dspy.optimizers.loop import RefinementLoop
from syntra_dspy.optimizers.no_refinement import NoRefinement
from syntra_dspy.optimizers.report import Attempt, CompileReport, Evaluation, LoopReport
from syntra_dspy.optimizers.self_improve import SelfImprove, fewshot_positive_check
from syntra_dspy.optimizers.settings import CompileSettings

STRATEGIES = {"self-improve": SelfImprove, "none": NoRefinement}

__all__ = [
    "STRATEGIES",
    "Attempt",
    "CompileReport",
    "CompileSettings",
    "Evaluation",
    "LoopReport",
    "NoRefinement",
    "RefinementLoop",
    "SelfImprove",
    "fewshot_positive_check",
]
