"""DSPy's GEPA as a test-mode strategy: the same stages, metrics and artifact as SYNTRA's own loops.

GEPA (``dspy.GEPA``) evolves predictor instructions by reflecting on traces with textual feedback. Here
each SYNTRA stage becomes one GEPA run over the synthesis steps that stage adapts (extraction; planning and
writing; annotation), and the metrics are SYNTRA's: the LLM verifier's 0-3 score (scaled to 0-1) with its
feedback for extraction and queries, and the annotation check every strategy uses (known positives positive,
random controls negative; its mismatch explanation as feedback) for annotation. GEPA rewrites the steps' whole
instructions, so its result is a component of its own (``step_instructions``: the whole instruction of a step,
in place of the one composed from the other components); the other components keep the drafted texts GEPA
started from. The task definition is drafted once, as in the no-refinement strategy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field

from syntra_dspy.errors import LMOutputError
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.loop import UsageProbe
from syntra_dspy.optimizers.no_refinement import NoRefinement
from syntra_dspy.optimizers.annotation_check import annotation_check
from syntra_dspy.optimizers.report import Attempt, LoopReport
from syntra_dspy.optimizers.self_improve import SelfImprove, _score, clean_text
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.synthesis import SynthesisProgram

logger = logging.getLogger(__name__)

Stage = Literal["idattr", "query_instruction", "annotation_instruction"]
#: The synthesis steps whose instructions each stage lets GEPA rewrite.
STAGE_STEPS: dict[str, tuple[str, ...]] = {
    "idattr": ("extract",), "query_instruction": ("plan", "write"), "annotation_instruction": ("annotate",),
}


class GEPASettings(BaseModel):
    """GEPA's budget and search settings, per stage. The budget is counted in metric calls (program runs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_metric_calls: int = Field(30, ge=1, description="GEPA budget per stage: scored program runs")
    reflection_minibatch_size: int = Field(3, ge=1, description="examples GEPA reflects on per proposal")
    use_merge: bool = Field(False, description="also try merging candidates (needs a larger budget)")
    num_threads: int = Field(1, ge=1, description="parallel program runs (1 keeps runs reproducible)")
    stop_at_perfect: bool = Field(True, description="end a stage once a candidate scores 1.0 on every trial")
    stages: tuple[Stage, ...] = ("idattr", "query_instruction", "annotation_instruction")


class _Hidden:
    """Holds the whole program and the stage's data out of ``named_predictors()``, so GEPA sees only the
    steps this stage adapts (deep copies still share those steps with the program)."""

    def __init__(self, program: SynthesisProgram, data: Any) -> None:
        self.program, self.data = program, data


class _StageModule(dspy.Module):
    """Exposes the steps of one stage as predictors and runs them through the program's validated calls."""

    def __init__(self, program: SynthesisProgram, steps: Sequence[str], data: Any) -> None:
        super().__init__()
        for name in steps:
            setattr(self, name, getattr(program, name))
        self.hidden = _Hidden(program, data)

    def describe(self) -> str:
        return "\n\n".join(f"## {name}\n{pred.signature.instructions}" for name, pred in self.named_predictors())


class ExtractionStage(_StageModule):
    def forward(self, doc_id: str) -> dspy.Prediction:
        doc = self.hidden.data[doc_id]
        try:
            return dspy.Prediction(trial=tr.FeatureTrial(doc, self.hidden.program.extract_features(doc.content)))
        except LMOutputError as exc:
            return dspy.Prediction(trial=tr.FeatureTrial(doc, None, str(exc)))


class QueryStage(_StageModule):
    def forward(self, doc_id: str) -> dspy.Prediction:
        feature = self.hidden.data[doc_id]
        instruction = self.write.signature.instructions
        return dspy.Prediction(trial=tr.run_queries(self.hidden.program, [feature], self.hidden.data["_per_doc"])[0],
                               instruction=instruction)


class AnnotationStage(_StageModule):
    def forward(self, index: int) -> dspy.Prediction:
        (trial,) = tr.label_cases(self.hidden.program, [self.hidden.data[index]], chunk_size=self.hidden.data["_chunk"])
        return dspy.Prediction(trial=trial, instruction=self.annotate.signature.instructions)


class _Metric:
    """GEPA's five-argument feedback metric around a judge of one trial; judgements are memoised per trial,
    because GEPA asks again for feedback on runs it has already scored."""

    def __init__(self, judge: Callable[[Any, Any], tuple[float, str]], key: Callable[[Any], str]) -> None:
        self.judge, self.key, self.cache = judge, key, {}

    def __call__(self, gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> dspy.Prediction:
        k = self.key(pred)
        if k not in self.cache:
            self.cache[k] = self.judge(gold, pred)
        score, feedback = self.cache[k]
        return dspy.Prediction(score=score, feedback=feedback)


class GEPAStrategy(SelfImprove):
    """Compiles with ``dspy.GEPA`` per stage, scored by SYNTRA's verifier and the shared annotation check."""

    strategy = "gepa"
    adapt_task_definition = NoRefinement.adapt_task_definition  # drafted once, not refined

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: Any = None, gepa: GEPASettings | dict[str, Any] | None = None) -> None:
        super().__init__(settings=settings, lms=lms, meter=meter, author=author)
        self.gepa = gepa if isinstance(gepa, GEPASettings) else GEPASettings(**(gepa or {}))

    def get_params(self) -> dict[str, Any]:
        return {**super().get_params(), "gepa": self.gepa.model_dump(mode="json")}

    @staticmethod
    def adopt(program: SynthesisProgram, texts: dict[str, str]) -> SynthesisProgram:
        """A copy that sends GEPA's whole-step instructions: they become components, so ``program.json``, the
        rendered prompts and ``syntra artifacts diff`` all read them, and later ``with_components`` keeps them."""
        return program.with_components(step_instructions={**program.state.step_instructions, **texts})

    # -- one GEPA run per stage ------------------------------------------------------------------------------
    def _optimize(self, name: str, stage: _StageModule, examples: list[dspy.Example], metric: _Metric,
                  threshold: float) -> tuple[LoopReport, dict[str, str]]:
        """Run GEPA on one stage; return its report and the best candidate's instruction per step."""
        g = self.gepa
        optimizer = dspy.GEPA(metric=metric, max_metric_calls=g.max_metric_calls, reflection_lm=self.lms.refiner,
                              reflection_minibatch_size=g.reflection_minibatch_size, use_merge=g.use_merge,
                              num_threads=g.num_threads, seed=self.settings.seed, track_stats=True,
                              warn_on_score_mismatch=False, gepa_kwargs=self._gepa_kwargs())
        probe = UsageProbe(self.meter, name)
        before = probe.read()
        with self._stage(name), dspy.context(lm=self.lms.generator, adapter=dspy.JSONAdapter()):
            best = optimizer.compile(stage, trainset=examples)
        texts = {step: pred.signature.instructions for step, pred in best.named_predictors()}
        results = best.detailed_results
        attempts = []
        for i, cand in enumerate(results.candidates):
            score = float(results.val_aggregate_scores[i])
            note = (f"GEPA candidate {i} (parents {results.parents[i]}), found after "
                    f"{results.discovery_eval_counts[i]} metric calls; mean score {score:.3f} on the trial set")
            attempts.append(Attempt(i + 1, cand.describe(), score, score >= threshold, note,
                                    {"parents": list(results.parents[i])}, {}))
        kept = results.best_idx + 1
        passed = attempts[kept - 1].passed
        return LoopReport(name, tuple(attempts), kept, passed, "passed" if passed else "attempt_limit", threshold,
                          UsageProbe.diff(probe.read(), before)), texts

    def _gepa_kwargs(self) -> dict[str, Any]:
        if not self.gepa.stop_at_perfect:
            return {}
        from gepa.utils.stop_condition import ScoreThresholdStopper

        return {"stop_callbacks": [ScoreThresholdStopper(1.0)]}

    def _unoptimized(self, name: str, program: SynthesisProgram) -> LoopReport:
        from syntra_dspy.optimizers.loop import unevaluated

        text = "\n\n".join(f"## {s}\n{getattr(program, s).signature.instructions}" for s in STAGE_STEPS[name])
        return unevaluated(name, text)

    def _judge(self, signature: str, **inputs: Any) -> tuple[float, str]:
        pred = self._call(signature, **inputs)
        return _score(pred.score) / 3, clean_text(pred.feedback)

    # -- the stages ------------------------------------------------------------------------------------------
    def adapt_extraction(self, program: SynthesisProgram, documents: Sequence[tr.TrialDocument]
                         ) -> tuple[SynthesisProgram, list[tr.FeatureTrial], LoopReport]:
        task = ctx.task_context(program.state.task_definition)
        if "idattr" in self.gepa.stages:
            def judge(_: Any, pred: Any) -> tuple[float, str]:
                if pred.trial.features is None:
                    return 0.0, (f"No valid extraction ({pred.trial.error}); give identifiers copied from the "
                                 "document and attribute dimensions with 2-4 options each.")
                return self._judge("judge_idattr", task_context=task,
                                   samples=tr.features_samples([pred.trial], with_documents=True))

            key = lambda pred: tr.features_samples([pred.trial], with_documents=True)
            stage = ExtractionStage(program.deepcopy(), ("extract",), {d.doc_id: d for d in documents})
            examples = [dspy.Example(doc_id=d.doc_id).with_inputs("doc_id") for d in documents]
            report, texts = self._optimize("idattr", stage, examples, _Metric(judge, key),
                                           self.settings.pass_threshold / 3)
            program = self.adopt(program, texts)
        else:
            report = self._unoptimized("idattr", program)
        features = self._generating(tr.run_extraction, program, documents)
        return program, features, report

    def adapt_query_instruction(self, program: SynthesisProgram, features: list[tr.FeatureTrial],
                                candidates: tr.CandidateSource | None = None) -> tuple[SynthesisProgram, LoopReport]:
        """GEPA's query stage: its metric is the verifier on each document's queries (``candidates`` is unused; the
        difficulty and form measures belong to the self-improve loop)."""
        s = self.settings
        with self._stage("query_instruction"):
            initial = program.state.query_instruction or self.draft_query_instruction(program)
        program = program.with_components(query_instruction=initial)
        usable = [f for f in features if f.features is not None]
        if "query_instruction" not in self.gepa.stages or not usable:
            return program, self._unoptimized("query_instruction", program)
        task = ctx.task_context(program.state.task_definition)
        golden = ctx.example_queries(program.state.examples)

        def judge(_: Any, pred: Any) -> tuple[float, str]:
            if not pred.trial.queries:
                return 0.0, f"No valid queries were produced ({pred.trial.error}); state the required output plainly."
            pairs = tr.query_pairs([pred.trial], limit=s.judge_pairs, seed=s.seed)
            return self._judge("judge_queries", task_context=task, golden_queries=golden,
                               query_instruction=pred.instruction, pairs=pairs)

        key = lambda pred: f"{pred.trial.doc.doc_id}\n" + "\n".join(pred.trial.queries)
        data: dict[str, Any] = {f.doc.doc_id: f for f in usable}
        data["_per_doc"] = s.queries_per_doc
        stage = QueryStage(program.deepcopy(), ("plan", "write"), data)
        examples = [dspy.Example(doc_id=f.doc.doc_id).with_inputs("doc_id") for f in usable]
        report, texts = self._optimize("query_instruction", stage, examples, _Metric(judge, key), s.pass_threshold / 3)
        return self.adopt(program, texts), report

    def adapt_annotation_instruction(self, program: SynthesisProgram, candidates: tr.CandidateSource
                                     ) -> tuple[SynthesisProgram, LoopReport]:
        s = self.settings
        with self._stage("annotation_instruction"):
            initial = program.state.annotation_instruction or self.draft_annotation_instruction(program)
        program = program.with_components(annotation_instruction=initial)
        if "annotation_instruction" not in self.gepa.stages:
            return program, self._unoptimized("annotation_instruction", program)
        task = ctx.task_context(program.state.task_definition)
        cases = tr.annotation_cases(program.state.examples, candidates, k=s.annotation_candidates, seed=s.seed,
                                    controls=s.control_negatives)

        def judge(_: Any, pred: Any) -> tuple[float, str]:
            ev = annotation_check([pred.trial], explain=lambda text: clean_text(self._call(
                "explain_mismatches", task_context=task, instruction=pred.instruction, mismatches=text).feedback))
            return float(ev.score), ev.feedback or "The known positive was labelled positive and the controls negative."

        key = lambda pred: f"{pred.trial.example.query}\n{pred.trial.scores}"
        data: dict[Any, Any] = dict(enumerate(cases))
        data["_chunk"] = s.chunk_size
        stage = AnnotationStage(program.deepcopy(), ("annotate",), data)
        examples = [dspy.Example(index=i).with_inputs("index") for i in range(len(cases))]
        report, texts = self._optimize("annotation_instruction", stage, examples, _Metric(judge, key), 1.0)
        return self.adopt(program, texts), report


__all__ = ["STAGE_STEPS", "GEPASettings", "GEPAStrategy"]
