"""The four test-mode stages: task definition, extraction guidance, query instruction, annotation instruction."""

from __future__ import annotations

from collections.abc import Mapping

from syntra_dspy.judging.judge import JudgeMode
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.stages.annotation import AnnotationStage, LabelSource, given_labels
from syntra_dspy.optimizers.stages.base import GEPAReadyStage, GEPATrials, Stage, TrialMaterial, TrialModule
from syntra_dspy.optimizers.stages.definition import TaskDefinitionStage
from syntra_dspy.optimizers.stages.extraction import ExtractionStage
from syntra_dspy.optimizers.stages.graded_annotation import GradedAnnotationStage
from syntra_dspy.optimizers.stages.queries import QueryStage
from syntra_dspy.optimizers.tools import StageTools


def build_stages(tools: StageTools, material: TrialMaterial, *, infer_definition: bool,
                 judge: JudgeMode, metrics: Mapping[str, StageMetric] | None = None,
                 labels: LabelSource | None = None) -> list[Stage]:
    """The stages of one compile, in order; the task definition only when the task file gives none."""
    metrics = metrics or {}
    annotation = GradedAnnotationStage if judge == "graded" else AnnotationStage
    stages: list[Stage] = [TaskDefinitionStage(tools, material, metric=metrics.get("task_definition"))] \
        if infer_definition else []
    return [*stages,
            ExtractionStage(tools, material, metric=metrics.get("idattr")),
            QueryStage(tools, material, metric=metrics.get("query_instruction")),
            annotation(tools, material, metric=metrics.get("annotation_instruction"), labels=labels)]


__all__ = ["AnnotationStage", "ExtractionStage", "GEPAReadyStage", "GEPATrials", "GradedAnnotationStage", "LabelSource",
           "QueryStage", "Stage", "TaskDefinitionStage", "TrialMaterial", "TrialModule", "build_stages", "given_labels"]
