"""Test-mode helpers: the predictors that draft, judge and refine instructions (never part of an artifact)."""

from __future__ import annotations

import dspy

from syntra_dspy.signatures import (
    DraftAnnotationInstruction,
    DraftQueryInstruction,
    DraftQueryStyleGuide,
    ExplainAnnotationMismatches,
    InferTaskDefinition,
    JudgeIdentifiersAndAttributes,
    JudgeQueries,
    JudgeTaskDefinition,
    RefineAnnotationInstruction,
    RefineExtractionGuidance,
    RefineQueryInstruction,
    RefineTaskDefinition,
)

#: Which LM role answers each authoring predictor: verifiers judge, the refiner writes instructions.
ROLE_OF = {
    "infer_task": "refiner",
    "judge_task": "verifier",
    "refine_task": "refiner",
    "judge_idattr": "verifier",
    "refine_guidance": "refiner",
    "draft_role": "refiner",
    "draft_style": "refiner",
    "judge_queries": "verifier",
    "refine_query": "refiner",
    "draft_annotation": "refiner",
    "explain_mismatches": "refiner",
    "refine_annotation": "refiner",
}


class InstructionAuthor(dspy.Module):
    """Holds one predictor per authoring signature, so each can be inspected or replaced (e.g. by a human)."""

    def __init__(self) -> None:
        super().__init__()
        self.infer_task = dspy.Predict(InferTaskDefinition)
        self.judge_task = dspy.Predict(JudgeTaskDefinition)
        self.refine_task = dspy.Predict(RefineTaskDefinition)
        self.judge_idattr = dspy.Predict(JudgeIdentifiersAndAttributes)
        self.refine_guidance = dspy.Predict(RefineExtractionGuidance)
        self.draft_role = dspy.Predict(DraftQueryInstruction)
        self.draft_style = dspy.Predict(DraftQueryStyleGuide)
        self.judge_queries = dspy.Predict(JudgeQueries)
        self.refine_query = dspy.Predict(RefineQueryInstruction)
        self.draft_annotation = dspy.Predict(DraftAnnotationInstruction)
        self.explain_mismatches = dspy.Predict(ExplainAnnotationMismatches)
        self.refine_annotation = dspy.Predict(RefineAnnotationInstruction)
