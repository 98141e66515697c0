"""Typed DSPy signatures, one file per stage. A signature's docstring is its prompt."""

from __future__ import annotations

from syntra_dspy.signatures.annotation import (
    DraftAnnotationInstruction,
    ExplainAnnotationMismatches,
    GradeCandidateRelevance,
    JudgeCandidateRelevance,
    RefineAnnotationInstruction,
)
from syntra_dspy.signatures.identifiers import (
    ExtractIdentifiersAndAttributes,
    JudgeIdentifiersAndAttributes,
    RefineExtractionGuidance,
)
from syntra_dspy.signatures.queries import PlanQueryBlueprints, RewriteRejectedQuery, WriteQueriesFromBlueprints
from syntra_dspy.signatures.query_instruction import (
    DraftQueryInstruction,
    DraftQueryStyleGuide,
    JudgeQueries,
    RateSyntheticQuery,
    RefineQueryInstruction,
)
from syntra_dspy.signatures.task_definition import (
    InferTaskDefinition,
    JudgeTaskDefinition,
    RefineTaskDefinition,
)
from syntra_dspy.signatures.translation import TranslateSearchText
from syntra_dspy.signatures.types import (
    AttributeChoice,
    AttributeDimension,
    Blueprint,
    CandidateLabel,
    Identifier,
    WrittenQuery,
    label_class,
)

__all__ = [
    "AttributeChoice",
    "AttributeDimension",
    "Blueprint",
    "CandidateLabel",
    "DraftAnnotationInstruction",
    "DraftQueryInstruction",
    "DraftQueryStyleGuide",
    "ExplainAnnotationMismatches",
    "ExtractIdentifiersAndAttributes",
    "GradeCandidateRelevance",
    "Identifier",
    "InferTaskDefinition",
    "JudgeCandidateRelevance",
    "JudgeIdentifiersAndAttributes",
    "JudgeQueries",
    "JudgeTaskDefinition",
    "PlanQueryBlueprints",
    "RateSyntheticQuery",
    "RefineAnnotationInstruction",
    "RefineExtractionGuidance",
    "RefineQueryInstruction",
    "RefineTaskDefinition",
    "RewriteRejectedQuery",
    "TranslateSearchText",
    "WriteQueriesFromBlueprints",
    "WrittenQuery",
    "label_class",
]
