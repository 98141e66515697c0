"""Stage 1: the extraction guidance (identifiers and attributes), judged 0-3 by the verifier on trial documents."""

from __future__ import annotations


import dspy

from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.stages.base import GEPAReadyStage, GEPATrials, TrialModule
from syntra_dspy.optimizers.text import clean_text, verifier_score
from syntra_dspy.programs.synthesis import SynthesisProgram


class ExtractionStage(GEPAReadyStage[str, list[tr.FeatureTrial]]):
    """Its kept trials are the query stage's input (``material.features``)."""

    name = "idattr"
    steps = ("extract",)

    def draft(self) -> str:
        return self.program.state.idattr_guidance

    def trial(self, attempt: str) -> list[tr.FeatureTrial]:
        return self.tools.generating(tr.run_extraction, self.program.with_components(idattr_guidance=attempt),
                                     self.material.documents)

    def evaluate(self, attempt: str, outputs: list[tr.FeatureTrial]) -> Evaluation:
        failed = sum(t.features is None for t in outputs)
        if failed == len(outputs):
            return Evaluation(0, False, "No document produced a valid extraction: give identifiers copied from "
                              "the document and attribute dimensions with 2-4 options each.", {"failed": failed})
        pred = self.tools.call("judge_idattr", task_context=self.task,
                               samples=tr.features_samples(outputs, with_documents=True))
        score = verifier_score(pred.score)
        return Evaluation(score, score >= self.settings.pass_threshold, clean_text(pred.feedback), {"failed": failed})

    def refine(self, attempt: str, outputs: list[tr.FeatureTrial], evaluation: Evaluation) -> str:
        return self.tools.revise("refine_guidance", "guidance", attempt, task_context=self.task,
                                 current_guidance=attempt, feedback=evaluation.feedback,
                                 samples=tr.features_samples(outputs, with_documents=False))

    def adopt(self, program: SynthesisProgram, attempt: str, outputs: list[tr.FeatureTrial] | None
              ) -> SynthesisProgram:
        self.material.features = list(outputs or [])
        return program.with_components(idattr_guidance=attempt)

    # -- for dspy.GEPA ---------------------------------------------------------------------------------------
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials:
        docs = self.material.documents
        module = TrialModule(program.deepcopy(), self.steps, {d.doc_id: d for d in docs}, field="doc_id",
                             run=_extract_one)
        return GEPATrials(module, [dspy.Example(doc_id=d.doc_id).with_inputs("doc_id") for d in docs])

    def example_judgement(self, attempt: str, outputs: list[tr.FeatureTrial]) -> Evaluation:
        (trial,) = outputs
        if trial.features is None:
            return Evaluation(0.0, False, f"No valid extraction ({trial.error}); give identifiers copied from the "
                              "document and attribute dimensions with 2-4 options each.")
        pred = self.tools.call("judge_idattr", task_context=self.task,
                               samples=tr.features_samples(outputs, with_documents=True))
        score = verifier_score(pred.score)
        return Evaluation(score, score >= self.settings.pass_threshold, clean_text(pred.feedback))

    def example_key(self, trial: tr.FeatureTrial) -> str:
        return tr.features_samples([trial], with_documents=True)

    def adopt_steps(self, program: SynthesisProgram, texts: dict[str, str]) -> SynthesisProgram:
        """GEPA's extractor, and its trials on the sample (what the query stage writes from)."""
        program = super().adopt_steps(program, texts)
        self.material.features = self.tools.generating(tr.run_extraction, program, self.material.documents)
        return program


def _extract_one(program: SynthesisProgram, doc: tr.TrialDocument) -> tr.FeatureTrial:
    (trial,) = tr.run_extraction(program, [doc])
    return trial
