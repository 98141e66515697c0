"""DSPy's GEPA as a test-mode strategy: the same stages, metrics and artifact as SYNTRA's own loops.

GEPA (``dspy.GEPA``) evolves predictor instructions by reflecting on traces with textual feedback. Here each
stage with synthesis steps becomes one GEPA run over those steps (extraction; planning and writing; annotation),
scored one trial at a time by the stage's metric (:meth:`GEPAReadyStage.example_metric`: the verifier's 0-3 score scaled
to 0-1 with its feedback for extraction and queries, the annotation check every strategy uses for annotation, or the
user's metric when one is plugged in). GEPA rewrites the steps' whole instructions, so its result is a component
of its own (``step_instructions``: the whole instruction of a step, in place of the one composed from the other
components); the other components keep the drafted texts GEPA started from. The task definition is drafted once.

With the graded judge, GEPA rewrites the grading step's instruction against the annotation loop's own metric (kappa
and positive recall of the calibration fitted on the grades); the whole calibration set is one GEPA example, and the
calibration is fitted on the grades of the best text (:class:`~syntra_dspy.optimizers.stages.GradedAnnotationStage`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import dspy
from pydantic import BaseModel, ConfigDict, Field

from syntra_dspy.optimizers.drive import drafted
from syntra_dspy.optimizers.loop import UsageProbe, unevaluated
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.report import Attempt, LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.stages import GEPAReadyStage, GEPATrials, Stage, TrialMaterial, build_stages
from syntra_dspy.optimizers.strategy import Strategy
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs.authoring import InstructionAuthor
from syntra_dspy.programs.synthesis import SynthesisProgram

logger = logging.getLogger(__name__)

GEPAStage = Literal["idattr", "query_instruction", "annotation_instruction"]


class GEPASettings(BaseModel):
    """GEPA's budget and search settings, per stage. The budget is counted in metric calls (program runs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_metric_calls: int = Field(30, ge=1, description="GEPA budget per stage: scored program runs")
    reflection_minibatch_size: int = Field(3, ge=1, description="examples GEPA reflects on per proposal")
    use_merge: bool = Field(False, description="also try merging candidates (needs a larger budget)")
    num_threads: int = Field(1, ge=1, description="parallel program runs (1 keeps runs reproducible)")
    stop_at_perfect: bool = Field(True, description="end a stage once a candidate scores 1.0 on every trial")
    stages: tuple[GEPAStage, ...] = ("idattr", "query_instruction", "annotation_instruction")


class FeedbackMetric:
    """GEPA's five-argument feedback metric over one stage's :meth:`~GEPAReadyStage.example_metric`, scaled to 0-1;
    judgements are memoised per trial, because GEPA asks again for feedback on runs it has already scored."""

    def __init__(self, stage: GEPAReadyStage) -> None:
        self.stage = stage
        self.cache: dict[str, tuple[float, str]] = {}

    def __call__(self, gold: Any, pred: Any, trace: Any = None, pred_name: str | None = None,
                 pred_trace: Any = None) -> dspy.Prediction:
        key = self.stage.example_key(pred.trial)
        if key not in self.cache:
            ev = self.stage.example_metric(pred.instruction, [pred.trial])
            self.cache[key] = ((ev.score or 0) / self.stage.scale, ev.feedback)
        score, feedback = self.cache[key]
        return dspy.Prediction(score=score, feedback=feedback)


class GEPAStrategy(Strategy):
    """Compiles with ``dspy.GEPA`` per stage, scored by the stages' own metrics (or the user's)."""

    strategy = "gepa"
    refines = False  # GEPA's own search a stage, no attempt loop

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None, gepa: GEPASettings | dict[str, Any] | None = None,
                 metrics: Mapping[str, StageMetric] | None = None) -> None:
        super().__init__(settings=settings, lms=lms, meter=meter, author=author, metrics=metrics)
        self.gepa = gepa if isinstance(gepa, GEPASettings) else GEPASettings(**(gepa or {}))

    def get_params(self) -> dict[str, Any]:
        return {**super().get_params(), "gepa": self.gepa.model_dump(mode="json")}

    def stages(self, tools: StageTools, material: TrialMaterial, *, infer_definition: bool) -> list[Stage]:
        return build_stages(tools, material, infer_definition=infer_definition, judge=self.settings.judge,
                            metrics=self.metrics)

    def drive(self, stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
        """Draft, then hand the stage's steps to GEPA (the task definition, no step of its own, is drafted once)."""
        initial = drafted(stage, program)
        program = stage.adopt(program, initial, None)
        if not stage.steps:
            return program, unevaluated(stage.name, stage.describe(initial))
        trials = stage.gepa_trials(program) if stage.name in self.gepa.stages else None
        if trials is None:
            return stage.adopt_steps(program, {}), unevaluated(stage.name, stage.steps_text(program))
        report, texts = self._optimize(stage, trials)
        return stage.adopt_steps(program, texts), report

    def _optimize(self, stage: GEPAReadyStage, trials: GEPATrials) -> tuple[LoopReport, dict[str, str]]:
        """Run GEPA on one stage; return its report and the best candidate's instruction per step."""
        g, name = self.gepa, stage.name
        threshold = stage.threshold / stage.scale
        # a minibatch larger than the trainset repeats examples: metric calls spent on runs already scored
        minibatch = min(g.reflection_minibatch_size, len(trials.trainset))
        optimizer = dspy.GEPA(metric=FeedbackMetric(stage), max_metric_calls=g.max_metric_calls,
                              reflection_lm=self.lms.refiner, reflection_minibatch_size=minibatch,
                              use_merge=g.use_merge, num_threads=g.num_threads, seed=self.settings.seed,
                              track_stats=True, warn_on_score_mismatch=False, gepa_kwargs=self._gepa_kwargs())
        probe = UsageProbe(self.meter, name)
        before = probe.read()
        with stage.tools.metered(name), dspy.context(lm=self.lms.generator, adapter=dspy.JSONAdapter()):
            best = optimizer.compile(trials.module, trainset=trials.trainset)
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


__all__ = ["FeedbackMetric", "GEPASettings", "GEPAStrategy"]
