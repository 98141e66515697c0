"""The no-refinement strategy: initial instructions only (the paper's "without self-improvement" condition)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers.drive import draft_only
from syntra_dspy.optimizers.metric import StageMetric
from syntra_dspy.optimizers.report import LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.stages import Stage, TrialMaterial, build_stages
from syntra_dspy.optimizers.strategy import Strategy
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs.authoring import InstructionAuthor
from syntra_dspy.programs.synthesis import SynthesisProgram


class NoRefinement(Strategy):
    """Drafts the task definition (when inferred) and the initial instructions once, and evaluates nothing. The
    graded judge's drafted instruction grades the calibration set once, untried, so its calibration is fitted as
    every strategy's is (see :meth:`~syntra_dspy.optimizers.stages.GradedAnnotationStage.adopt_untried`)."""

    strategy = "none"
    refines = False  # one draft a stage, no attempt loop

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None, metrics: Mapping[str, StageMetric] | None = None) -> None:
        super().__init__(settings=settings, lms=lms, meter=meter, author=author, metrics=metrics)
        if self.metrics:
            raise ConfigError(f"the none strategy evaluates nothing, so a metric for {', '.join(self.metrics)} "
                              "would never be called", field="metrics",
                              hint="use it with --strategy self-improve, human or gepa")

    def stages(self, tools: StageTools, material: TrialMaterial, *, infer_definition: bool) -> list[Stage]:
        return build_stages(tools, material, infer_definition=infer_definition, judge=self.settings.judge)

    def drive(self, stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
        return draft_only(stage, program)
