"""Stage 2: the query instruction shared by the planner and the writer.

An attempt passes when the verifier passes it and, measured in code on its trial queries, the writer kept the
examples' form and at most ``bm25_top1_target`` of the queries find their own source document first under BM25
(only measured when the candidate source has a corpus)."""

from __future__ import annotations

from typing import Any

import dspy

from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.query_measures import measure_problems, measure_queries
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.stages.base import GEPAReadyStage, GEPATrials, TrialModule
from syntra_dspy.optimizers.text import clean_text, verifier_score
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.synthesis import SynthesisProgram


class QueryStage(GEPAReadyStage[str, list[tr.QueryTrial]]):
    """Writes queries for the extraction stage's kept trials (``material.features``)."""

    name = "query_instruction"
    steps = ("plan", "write")

    @property
    def golden(self) -> str:
        return ctx.example_queries(self.program.state.examples)

    def draft(self) -> str:
        if self.program.state.query_instruction:
            return self.program.state.query_instruction
        role = clean_text(self.tools.call("draft_role", task_context=self.task,
                                          example_queries=self.golden).role_and_process)
        style = clean_text(self.tools.call("draft_style", task_context=self.task,
                                           example_queries=self.golden).style_guide)
        return f"{role}\n\n{style}".strip()

    def prepare(self, initial: str) -> None:
        self.lexical = self.tools.lexical_ranker(self.program, self.material.candidates)
        self.form = self.program.query_form()

    def trial(self, attempt: str) -> list[tr.QueryTrial]:
        return self.tools.generating(tr.run_queries, self.program.with_components(query_instruction=attempt),
                                     self.material.features, self.settings.queries_per_doc)

    def evaluate(self, attempt: str, outputs: list[tr.QueryTrial]) -> Evaluation:
        s = self.settings
        measures = measure_queries(outputs, candidates=self.material.candidates, lexical=self.lexical)
        problems = measure_problems(measures, self.form, bm25_target=s.bm25_top1_target, form_target=s.form_target)
        details = {"queries": [q for t in outputs for q in t.queries],
                   "failed_docs": sum(bool(t.error) for t in outputs), "measures": measures.to_dict(),
                   "form": self.form.to_dict() if self.form else None}
        if measures.queries == 0:
            return Evaluation(0, False, " ".join(["No valid queries were produced.", *problems,
                                                  "Make the instruction simpler and state the required output "
                                                  "plainly."]), details)
        pred = self.tools.call("judge_queries", task_context=self.task, golden_queries=self.golden,
                               query_instruction=attempt,
                               pairs=tr.query_pairs(outputs, limit=s.judge_pairs, seed=s.seed))
        written = verifier_score(pred.score)
        verdict: float = written
        rated = ""
        if s.query_verifier == "graded":
            ratings = self.tools.query_rater().rate(self.golden, outputs)
            details = {**details, "verifier_written": written, "ratings": ratings.to_dict()}
            if ratings.mean is not None:
                verdict = round(ratings.mean, 4)
                rated = ratings.feedback(s.pass_threshold)
        # A measured miss fails the attempt whatever the verifier says, and caps its score below the pass mark,
        # so keep="best" prefers an attempt that met every target (a graded score is scaled into the range
        # below the mark, so failed attempts still differ).
        cap = max(0, s.pass_threshold - 1)
        if not problems:
            score = verdict
        elif s.query_verifier == "graded":
            score = round(verdict * cap / 3, 4)
        else:
            score = min(verdict, cap)
        feedback = " ".join(part for part in [*problems, rated, clean_text(pred.feedback)] if part).strip()
        return Evaluation(score, verdict >= s.pass_threshold and not problems, feedback,
                          {**details, "verifier_score": verdict})

    def refine(self, attempt: str, outputs: list[tr.QueryTrial], evaluation: Evaluation) -> str:
        s = self.settings
        return self.tools.revise("refine_query", "instruction", attempt, task_context=self.task,
                                 golden_queries=self.golden, current_instruction=attempt,
                                 feedback=evaluation.feedback,
                                 pairs=tr.query_pairs(outputs, limit=s.refine_pairs, seed=s.seed + 1))

    def adopt(self, program: SynthesisProgram, attempt: str, outputs: Any) -> SynthesisProgram:
        return program.with_components(query_instruction=attempt)

    # -- for dspy.GEPA: the verifier on each document's queries (the difficulty and form measures need the whole
    # sample, so they stay with the loop's metric) ---------------------------------------------------------------
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials | None:
        usable = [f for f in self.material.features if f.features is not None]
        if not usable:
            return None
        data: dict[str, Any] = {f.doc.doc_id: (f, self.settings.queries_per_doc) for f in usable}
        module = TrialModule(program.deepcopy(), self.steps, data, field="doc_id", run=_write_one)
        return GEPATrials(module, [dspy.Example(doc_id=f.doc.doc_id).with_inputs("doc_id") for f in usable])

    def example_judgement(self, attempt: str, outputs: list[tr.QueryTrial]) -> Evaluation:
        s = self.settings
        (trial,) = outputs
        if not trial.queries:
            return Evaluation(0.0, False, f"No valid queries were produced ({trial.error}); state the required "
                              "output plainly.")
        pred = self.tools.call("judge_queries", task_context=self.task, golden_queries=self.golden,
                               query_instruction=attempt,
                               pairs=tr.query_pairs(outputs, limit=s.judge_pairs, seed=s.seed))
        score = verifier_score(pred.score)
        return Evaluation(score, score >= s.pass_threshold, clean_text(pred.feedback))

    def example_key(self, trial: tr.QueryTrial) -> str:
        return f"{trial.doc.doc_id}\n" + "\n".join(trial.queries)


def _write_one(program: SynthesisProgram, item: tuple[tr.FeatureTrial, int]) -> tr.QueryTrial:
    feature, per_doc = item
    (trial,) = tr.run_queries(program, [feature], per_doc)
    return trial
