"""Stage 3 with the graded judge: the metric is agreement beyond chance on a calibration set (binary kappa and
positive recall; the set is built by :mod:`~syntra_dspy.judging.calibration_set`), and the kept attempt's fitted
calibration joins the program. An attempt grades every candidate with the attempt's instruction, fits a
:class:`JudgeCalibration`, and passes when binary Cohen's kappa and positive recall on the set reach their targets;
mismatches (positives called negative, random documents called positive) become the refiner's feedback.

The first attempt grades with the task definition and the fixed scale alone (plus any instruction the task
gives): no drafted instruction, which on SciFact made the 1.5B model's grades flatter. Refinements add
task-specific guidance written from the mismatches.

Every strategy compiles this judge the same way: the kept instruction's grades of the calibration set fit the
calibration. A strategy that runs no trials (``none``) grades the set once with the drafted instruction, untried
(:meth:`GradedAnnotationStage.adopt_untried`); ``dspy.GEPA`` rewrites the grading step's whole instruction against
the same metric, the whole calibration set being one GEPA example (the kappa of a fitted calibration is a property
of the set, not a mean over its candidates), and the calibration is then fitted on the grades of GEPA's best text
(:meth:`GradedAnnotationStage.adopt_steps`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import dspy

from syntra_dspy.judging import calibration_set as js
from syntra_dspy.judging.calibration import JudgeCalibration, fit_calibration, sample_contexts
from syntra_dspy.judging.candidates import JudgedCandidate, with_lexical
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.stages.annotation import LabelSource, given_labels
from syntra_dspy.optimizers.stages.base import GEPAReadyStage, GEPATrials, TrialMaterial, TrialModule
from syntra_dspy.optimizers.text import clean_text
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.synthesis import SynthesisProgram

logger = logging.getLogger(__name__)


class GradedAnnotationStage(GEPAReadyStage[str, list["Grade | None"]]):
    """Trial outputs: one grade per calibration candidate (``self.candidates``, in that order; None: unusable)."""

    name = "annotation_instruction"
    steps = ("grade",)
    scale = 1.0

    def __init__(self, tools: StageTools, material: TrialMaterial, *, metric: StageMetric | None = None,
                 labels: LabelSource | None = None) -> None:
        super().__init__(tools, material, metric=metric)
        self.labels = labels or given_labels(None)
        self.candidates: list[JudgedCandidate] = []

    @property
    def threshold(self) -> float:
        return self.settings.judge_kappa_target

    def draft(self) -> str:
        return self.program.state.annotation_instruction

    def prepare(self, initial: str) -> None:
        """The calibration set: the few-shot queries' candidates, a judged dataset's, and the candidates of the queries
        people judged (given labels, or the human strategy's), each built as a few-shot query's is."""
        s, m = self.settings, self.material
        found = js.calibration_set(m.examples, m.candidates, k=s.annotation_candidates,
                                   controls=max(1, s.control_negatives), seed=s.seed, labels=s.calibration_labels,
                                   label_queries=s.calibration_queries)
        people = js.judged_query_candidates(self.labels(initial, m.corpus) or (), m.candidates,
                                            k=s.annotation_candidates, controls=max(1, s.control_negatives),
                                            seed=s.seed)
        judged = {(c.query, c.doc_id) for c in people}  # people's judgment of a pair replaces a presumed one
        found = [c for c in found if (c.query, c.doc_id) not in judged] + people
        definition = self.program.state.task_definition
        lexical = self.tools.lexical_ranker(self.program, m.candidates) if definition.query_language == \
            definition.document_language else None
        if lexical is not None:  # the hybrid judge's witness: BM25 scores are cheap next to a grade
            found = with_lexical(found, lexical)
        self.candidates = found
        logger.info("annotation_instruction: graded judge, %d calibration candidates (%d queries)", len(found),
                    len({c.query for c in found}))

    def trial(self, attempt: str) -> list[Grade | None]:
        return self.tools.generating(js.grade_set, self.program.with_components(annotation_instruction=attempt),
                                     self.candidates, self.material.corpus)

    def evaluate(self, attempt: str, outputs: list[Grade | None]) -> Evaluation:
        s = self.settings
        return evaluate_graded(self.candidates, outputs, self.material.corpus, feature=s.judge_feature,
                                  kappa_target=s.judge_kappa_target, recall_target=s.judge_recall_target)

    def refine(self, attempt: str, outputs: Any, evaluation: Evaluation) -> str:
        # The mismatches are explained here, not in evaluate: only an attempt that is refined needs the
        # explanation, and on a small CPU model it costs minutes.
        feedback = evaluation.feedback
        if evaluation.details.get("mismatches"):
            feedback = clean_text(self.tools.call("explain_mismatches", task_context=self.task, instruction=attempt,
                                                  mismatches=feedback).feedback) or feedback
        return self.tools.revise("refine_annotation", "instruction", attempt, task_context=self.task,
                                 current_instruction=attempt, feedback=feedback)

    def adopt(self, program: SynthesisProgram, attempt: str, outputs: list[Grade | None] | None
              ) -> SynthesisProgram:
        """The instruction and the calibration fitted on its grades (none without a gradable known positive)."""
        return self.calibrated(program.with_components(annotation_instruction=attempt), outputs or [])

    def calibrated(self, program: SynthesisProgram, grades: Sequence[Grade | None]) -> SynthesisProgram:
        """``program`` with the calibration fitted on ``grades`` of the calibration set (None when no known positive
        was graded: the program then judges with written labels, and the compile says so)."""
        samples = js.samples_of(self.candidates, grades)
        judge = fit_calibration(samples, feature=self.settings.judge_feature) \
            if any(x.gold == "positive" for x in samples) else None
        return program.with_components(judge=judge)

    def adopt_untried(self, program: SynthesisProgram, initial: str) -> SynthesisProgram:
        """Untried but calibrated, as every strategy's graded judge is: the drafted instruction grades the
        calibration set once and the calibration is fitted on those grades; nothing is evaluated or refined."""
        self.prepare(initial)
        with self.tools.metered(self.name):
            grades = self.trial(initial)
        return self.adopt(program, initial, grades)

    # -- for dspy.GEPA: the whole calibration set is one example ---------------------------------------------------
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials:
        """One example: the grading step grades every calibration candidate, and the trial's judgement is the
        stage's own metric (kappa and recall of the calibration fitted on those grades). The candidates go in as
        texts, so the module GEPA copies for each candidate carries no corpus."""
        self.prepare(program.state.annotation_instruction)
        items = js.asked(self.candidates, self.material.corpus)
        module = TrialModule(program.with_components(judge=None), self.steps, {0: items}, field="index",
                             run=_grade_all)
        return GEPATrials(module, [dspy.Example(index=0).with_inputs("index")])

    def example_metric(self, attempt: str, outputs: list[Any]) -> Evaluation:
        """The loop's metric (the stage's own, or the user's) on the one trial's grades. GEPA ranks candidates by
        one number, so an attempt that misses the recall target scores just below the kappa target, as the query
        stage caps a measured miss below its pass mark; kappa at or below chance scores 0."""
        (grades,) = outputs
        ev = self.metric(attempt, list(grades))
        score = max(0.0, ev.score or 0.0)
        if not ev.passed:
            score = min(score, max(0.0, self.threshold - 0.01))
        return Evaluation(round(score, 4), ev.passed, ev.feedback or "The calibration set is judged as people did.",
                          ev.details)

    def example_judgement(self, attempt: str, outputs: list[Any]) -> Evaluation:
        (grades,) = outputs
        return self.evaluate(attempt, list(grades))

    def example_key(self, trial: tuple[Grade | None, ...]) -> str:
        return repr(trial)

    def adopt_steps(self, program: SynthesisProgram, texts: dict[str, str]) -> SynthesisProgram:
        """GEPA's grading text as a component, then the calibration fitted on that text's grades of the calibration
        set (the same grades GEPA scored it on: the LM's cache answers them again)."""
        program = super().adopt_steps(program, texts)
        if not self.candidates:  # GEPA did not run on this stage: the drafted instruction, calibrated
            self.prepare(program.state.annotation_instruction)
        with self.tools.metered(self.name):
            grades = self.tools.generating(js.grade_asked, program.with_components(judge=None),
                                           js.asked(self.candidates, self.material.corpus))
        return self.calibrated(program, grades)


def _grade_all(program: SynthesisProgram, items: Sequence[tuple[str, Candidate]]) -> tuple[Grade | None, ...]:
    return tuple(js.grade_asked(program, items))


def mismatches(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None], calibration: JudgeCalibration,
               corpus: Any, *, limit: int = 8, max_doc_chars: int = 500) -> str:
    """Known positives the calibrated judge called negative, and random documents it called positive."""
    lines = []
    graded = [(c, g) for c, g in zip(candidates, grades) if g is not None and g.expected is not None]
    contexts = sample_contexts(js.samples_of([c for c, _ in graded], [g for _, g in graded]))
    for (c, g), context in zip(graded, contexts):
        assert g is not None and g.expected is not None
        klass = calibration.classify(g.expected, c.cosine, context, c.lexical)
        wrong_pos = c.gold == "positive" and klass != "positive"
        wrong_ctrl = c.source == "control" and klass == "positive"
        if not (wrong_pos or wrong_ctrl):
            continue
        text = c.text if c.text is not None else corpus[c.doc_id].content
        kind = "Known-relevant document" if wrong_pos else "Unrelated control document (drawn at random)"
        expected = "expected 2 or 3" if wrong_pos else "expected 0 or 1"
        lines.append(f"{len(lines) + 1}. Query: {c.query}\n   {kind}: {ctx.clip(text, max_doc_chars)}\n"
                     f"   Label given: {g.written if g.written is not None else '?'} (mean label "
                     f"{g.expected:.2f}; {expected})")
        if len(lines) >= limit:
            break
    return "\n\n".join(lines)


def evaluate_graded(candidates: Sequence[JudgedCandidate], grades: Sequence[Grade | None], corpus: Any, *,
                    feature: str, kappa_target: float, recall_target: float,
                    explain: Callable[[str], str] | None = None) -> Evaluation:
    """Fit the calibration on this attempt's grades; score = binary kappa on the calibration set."""
    samples = js.samples_of(candidates, grades)
    if not any(s.gold == "positive" for s in samples):
        return Evaluation(0.0, False, "No known positive could be graded: the annotator's answers were unusable.",
                          {"graded": len(samples), "candidates": len(candidates)})
    calibration = fit_calibration(samples, feature=feature)  # type: ignore[arg-type]
    summary = calibration.summary
    assert summary is not None
    kappa, recall = summary.binary_kappa, summary.positive_recall
    passed = kappa is not None and recall is not None and kappa >= kappa_target and recall >= recall_target
    details = {"calibration": calibration.description(), "graded": len(samples),
               "candidates": len(candidates)}
    score = 0.0 if kappa is None else round(kappa, 4)
    if passed:
        return Evaluation(score, True, "", details)
    text = mismatches(candidates, grades, calibration, corpus)
    details["mismatches"] = bool(text)
    feedback = (explain(text) if explain and text else text) or (
        f"Agreement on the calibration set is kappa {kappa} with positive recall {recall}; make the relevance "
        "criterion sharper so relevant documents get clearly higher labels than merely related ones.")
    return Evaluation(score, False, feedback, details)
