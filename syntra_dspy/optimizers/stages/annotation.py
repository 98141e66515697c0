"""Stage 3 with the written-label judge: the annotation instruction, checked in code.

The metric every strategy uses (one implementation, see :func:`annotation_check`): each few-shot query's known
positive must be labelled positive and each random control document negative; with human-confirmed labels, every
confirmed label must be matched (:func:`calibration_check`). An LLM only turns mismatches into feedback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dspy

from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.annotation_check import annotation_check
from syntra_dspy.judging.labels import LabelledPair, with_texts
from syntra_dspy.optimizers.annotation_check import calibration_check, run_calibration
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.stages.base import GEPAReadyStage, GEPATrials, TrialMaterial, TrialModule
from syntra_dspy.optimizers.text import clean_text
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.programs.synthesis import SynthesisProgram

#: Human-confirmed labels for the annotation stage, asked for once it has its initial instruction
#: ``(instruction, corpus) -> pairs`` (None: check the few-shot positives instead).
LabelSource = Callable[[str, Any], "tuple[LabelledPair, ...] | None"]


def given_labels(pairs: Sequence[LabelledPair] | None) -> LabelSource:
    """Labels known before the compile; document texts come from the corpus when the labels lack them."""
    def source(instruction: str, corpus: Any) -> tuple[LabelledPair, ...] | None:
        return with_texts(pairs, corpus) if pairs else None

    return source


class AnnotationStage(GEPAReadyStage[str, list[Any]]):
    name = "annotation_instruction"
    steps = ("annotate",)
    scale = 1.0

    def __init__(self, tools: StageTools, material: TrialMaterial, *, metric: StageMetric | None = None,
                 labels: LabelSource | None = None) -> None:
        super().__init__(tools, material, metric=metric)
        self.labels = labels or given_labels(None)
        self.confirmed: tuple[LabelledPair, ...] | None = None

    @property
    def threshold(self) -> float:
        return 1.0

    def draft(self) -> str:
        if self.program.state.annotation_instruction:
            return self.program.state.annotation_instruction
        return clean_text(self.tools.call("draft_annotation", task_context=self.task).instruction)

    def prepare(self, initial: str) -> None:
        self.confirmed = self.labels(initial, self.material.corpus)

    def trial(self, attempt: str) -> list[Any]:
        s = self.settings
        annotator = self.program.with_components(annotation_instruction=attempt)
        if self.confirmed:
            return self.tools.generating(run_calibration, annotator, self.confirmed, chunk_size=s.chunk_size)
        return self.tools.generating(tr.run_labels, annotator, self.material.examples, self.material.candidates,
                                     k=s.annotation_candidates, chunk_size=s.chunk_size, seed=s.seed,
                                     controls=s.control_negatives)

    def explainer(self, instruction: str) -> Callable[[str], str]:
        """Mismatches → feedback for the refiner, in the verifier's words."""
        return lambda text: clean_text(self.tools.call("explain_mismatches", task_context=self.task,
                                                       instruction=instruction, mismatches=text).feedback)

    def evaluate(self, attempt: str, outputs: list[Any]) -> Evaluation:
        check = calibration_check if self.confirmed else annotation_check
        return check(outputs, self.explainer(attempt))

    def refine(self, attempt: str, outputs: Any, evaluation: Evaluation) -> str:
        return self.tools.revise("refine_annotation", "instruction", attempt, task_context=self.task,
                                 current_instruction=attempt, feedback=evaluation.feedback)

    def adopt(self, program: SynthesisProgram, attempt: str, outputs: Any) -> SynthesisProgram:
        return program.with_components(annotation_instruction=attempt)

    # -- for dspy.GEPA: one few-shot query's candidate list per example ------------------------------------------
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials:
        s = self.settings
        cases = tr.annotation_cases(self.material.examples, self.material.candidates, k=s.annotation_candidates,
                                    seed=s.seed, controls=s.control_negatives)
        data = {i: (case, s.chunk_size) for i, case in enumerate(cases)}
        module = TrialModule(program.deepcopy(), self.steps, data, field="index", run=_label_one)
        return GEPATrials(module, [dspy.Example(index=i).with_inputs("index") for i in range(len(cases))])

    def example_judgement(self, attempt: str, outputs: list[tr.LabelTrial]) -> Evaluation:
        ev = annotation_check(outputs, explain=self.explainer(attempt))
        return Evaluation(float(ev.score), ev.passed,
                          ev.feedback or "The known positive was labelled positive and the controls negative.")

    def example_key(self, trial: tr.LabelTrial) -> str:
        return f"{trial.example.query}\n{trial.scores}"


def _label_one(program: SynthesisProgram, item: tuple[tr.AnnotationCase, int]) -> tr.LabelTrial:
    case, chunk_size = item
    (trial,) = tr.label_cases(program, [case], chunk_size=chunk_size)
    return trial
