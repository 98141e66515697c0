"""SYNTRA's test mode: each stage is adapted by its own generate → evaluate → refine loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from syntra_dspy.judging.labels import LabelledPair
from syntra_dspy.optimizers.drive import refine_until_pass
from syntra_dspy.optimizers.loop import Reviewer
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.report import LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.stages import Stage, TrialMaterial, build_stages, given_labels
from syntra_dspy.optimizers.strategy import Strategy
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs.authoring import InstructionAuthor
from syntra_dspy.programs.synthesis import SynthesisProgram


class SelfImprove(Strategy):
    """Adapts the task definition (when inferred), the extraction guidance, the query instruction and the
    annotation instruction of a ``SynthesisProgram``, each by its own loop, and records every attempt.

    LLM verifiers score identifier/attribute and query trials 0-3 (pass at ``pass_threshold``); the annotation
    loop passes when every few-shot positive is labelled positive and every control negative negative among its
    retrieved candidates, or, when a ``calibration`` set of human-confirmed labels is given, when every confirmed
    label is matched (with the graded judge: on kappa and recall over its calibration set). ``review`` is handed to
    every loop (see ``RefinementLoop``); ``metrics`` replaces a stage's metric by the user's.
    """

    strategy = "self-improve"

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None, review: Reviewer | None = None,
                 calibration: Sequence[LabelledPair] | None = None,
                 metrics: Mapping[str, StageMetric] | None = None) -> None:
        super().__init__(settings=settings, lms=lms, meter=meter, author=author, metrics=metrics)
        self.review = review
        self.calibration = tuple(calibration) if calibration else None

    def stages(self, tools: StageTools, material: TrialMaterial, *, infer_definition: bool) -> list[Stage]:
        return build_stages(tools, material, infer_definition=infer_definition, judge=self.settings.judge,
                            metrics=self.metrics, labels=given_labels(self.calibration))

    def drive(self, stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
        return refine_until_pass(stage, program, review=self.review)
