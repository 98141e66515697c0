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
    RateSyntheticQuery,
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
    "rate_query": "verifier",
    "refine_query": "refiner",
    "draft_annotation": "refiner",
    "explain_mismatches": "refiner",
    "refine_annotation": "refiner",
}


class InstructionAuthor(dspy.Module):
    """Holds one predictor per authoring signature, so each can be inspected or replaced (e.g. by a human).

    Token budgets fit the longest useful answer of each (an instruction is a few hundred words): a small
    model that loops is cut off instead of filling a minute of generation.
    """

    def __init__(self) -> None:
        super().__init__()
        self.infer_task = dspy.Predict(InferTaskDefinition, max_tokens=400)
        self.judge_task = dspy.Predict(JudgeTaskDefinition, max_tokens=500)
        self.refine_task = dspy.Predict(RefineTaskDefinition, max_tokens=400)
        self.judge_idattr = dspy.Predict(JudgeIdentifiersAndAttributes, max_tokens=500)
        self.refine_guidance = dspy.Predict(RefineExtractionGuidance, max_tokens=600)
        self.draft_role = dspy.Predict(DraftQueryInstruction, max_tokens=700)
        self.draft_style = dspy.Predict(DraftQueryStyleGuide, max_tokens=700)
        self.judge_queries = dspy.Predict(JudgeQueries, max_tokens=500)
        self.rate_query = dspy.Predict(RateSyntheticQuery)  # one-token answers (see ``ask_digit``)
        self.refine_query = dspy.Predict(RefineQueryInstruction, max_tokens=900)
        self.draft_annotation = dspy.Predict(DraftAnnotationInstruction, max_tokens=700)
        self.explain_mismatches = dspy.Predict(ExplainAnnotationMismatches, max_tokens=600)
        self.refine_annotation = dspy.Predict(RefineAnnotationInstruction, max_tokens=800)
