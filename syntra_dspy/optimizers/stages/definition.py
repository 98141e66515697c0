"""Stage 0: the task definition, inferred from the few-shot examples and judged against them."""

from __future__ import annotations

from typing import Any

import dspy

from syntra_dspy.optimizers.definition_check import example_specific_terms
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.stages.base import Stage
from syntra_dspy.optimizers.text import clean_text, verifier_score
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.task import TaskDefinition


class TaskDefinitionStage(Stage[TaskDefinition, None]):
    """Runs only when the task file gives no definition. Its trial is the definition itself: the verifier reads
    it next to the examples."""

    name = "task_definition"

    @property
    def pairs(self) -> str:
        return ctx.example_pairs(self.material.examples)

    def draft(self) -> TaskDefinition:
        return definition_from(self.tools.call("infer_task", examples=self.pairs))

    def trial(self, attempt: TaskDefinition) -> None:
        return None

    def evaluate(self, attempt: TaskDefinition, outputs: Any) -> Evaluation:
        pred = self.tools.call("judge_task", examples=self.pairs, task_definition=ctx.task_definition_text(attempt))
        score = verifier_score(pred.score)
        feedback = clean_text(pred.feedback)
        specific = example_specific_terms(attempt, self.material.examples)
        if specific:
            # A definition copied from one example is caught in code: small verifiers miss it.
            score = min(score, 1)
            feedback = (f"The definition names terms that belong to a single example ({', '.join(specific)}); "
                        "state the criterion so that it fits every example. " + feedback).strip()
        return Evaluation(score, score >= self.settings.pass_threshold, feedback, {"example_specific": specific})

    def refine(self, attempt: TaskDefinition, outputs: Any, evaluation: Evaluation) -> TaskDefinition:
        inputs = {"examples": self.pairs, "task_definition": ctx.task_definition_text(attempt),
                  "feedback": evaluation.feedback}
        for sample in (0, 2):  # an unchanged definition is resampled once, as for instructions
            try:
                revised = definition_from(self.tools.call("refine_task", sample=sample, **inputs))
            except ValueError:
                continue
            if revised != attempt:
                return revised
        return attempt

    def adopt(self, program: SynthesisProgram, attempt: TaskDefinition, outputs: Any) -> SynthesisProgram:
        return program.with_components(task_definition=attempt)

    def describe(self, attempt: TaskDefinition) -> str:
        return ctx.task_definition_text(attempt)


def definition_from(pred: dspy.Prediction) -> TaskDefinition:
    return TaskDefinition(
        query_type=clean_text(pred.query_type),
        doc_type=clean_text(pred.doc_type),
        relevance_definition=clean_text(pred.relevance_definition),
        query_language=(clean_text(pred.query_language) or "en").lower()[:5],
        document_language=(clean_text(pred.document_language) or "en").lower()[:5],
    )
