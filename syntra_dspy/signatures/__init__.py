"""Typed DSPy signatures, one file per stage. A signature's docstring is its prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
    from syntra_dspy.signatures.annotation import (
        DraftAnnotationInstruction,
        ExplainAnnotationMismatches,
        GradeCandidateRelevance,
        GradeCandidateRelevanceBriefly,
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
    "GradeCandidateRelevanceBriefly",
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

__getattr__, __dir__ = lazy_exports(__name__, {
    "DraftAnnotationInstruction": "syntra_dspy.signatures.annotation",
    "ExplainAnnotationMismatches": "syntra_dspy.signatures.annotation",
    "GradeCandidateRelevance": "syntra_dspy.signatures.annotation",
    "GradeCandidateRelevanceBriefly": "syntra_dspy.signatures.annotation",
    "JudgeCandidateRelevance": "syntra_dspy.signatures.annotation",
    "RefineAnnotationInstruction": "syntra_dspy.signatures.annotation",
    "ExtractIdentifiersAndAttributes": "syntra_dspy.signatures.identifiers",
    "JudgeIdentifiersAndAttributes": "syntra_dspy.signatures.identifiers",
    "RefineExtractionGuidance": "syntra_dspy.signatures.identifiers",
    "PlanQueryBlueprints": "syntra_dspy.signatures.queries",
    "RewriteRejectedQuery": "syntra_dspy.signatures.queries",
    "WriteQueriesFromBlueprints": "syntra_dspy.signatures.queries",
    "DraftQueryInstruction": "syntra_dspy.signatures.query_instruction",
    "DraftQueryStyleGuide": "syntra_dspy.signatures.query_instruction",
    "JudgeQueries": "syntra_dspy.signatures.query_instruction",
    "RateSyntheticQuery": "syntra_dspy.signatures.query_instruction",
    "RefineQueryInstruction": "syntra_dspy.signatures.query_instruction",
    "InferTaskDefinition": "syntra_dspy.signatures.task_definition",
    "JudgeTaskDefinition": "syntra_dspy.signatures.task_definition",
    "RefineTaskDefinition": "syntra_dspy.signatures.task_definition",
    "TranslateSearchText": "syntra_dspy.signatures.translation",
    "AttributeChoice": "syntra_dspy.signatures.types",
    "AttributeDimension": "syntra_dspy.signatures.types",
    "Blueprint": "syntra_dspy.signatures.types",
    "CandidateLabel": "syntra_dspy.signatures.types",
    "Identifier": "syntra_dspy.signatures.types",
    "WrittenQuery": "syntra_dspy.signatures.types",
    "label_class": "syntra_dspy.signatures.types",
})
