"""How a strategy drives one stage without GEPA: draft only, or refine until the stage's metric passes."""

from __future__ import annotations

from typing import Any

from syntra_dspy.optimizers.loop import LoopLimits, LoopSteps, RefinementLoop, Reviewer, unevaluated
from syntra_dspy.optimizers.report import LoopReport
from syntra_dspy.optimizers.stages import Stage
from syntra_dspy.programs.synthesis import SynthesisProgram


def drafted(stage: Stage, program: SynthesisProgram) -> Any:
    """Bind ``stage`` to ``program`` and draft its initial attempt (the drafting calls count to the stage)."""
    stage.bind(program)
    with stage.tools.metered(stage.name):
        return stage.draft()


def draft_only(stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
    """The initial attempt, adopted untried (see :meth:`Stage.adopt_untried`)."""
    initial = drafted(stage, program)
    return stage.adopt_untried(program, initial), unevaluated(stage.name, stage.describe(initial))


def refine_until_pass(stage: Stage, program: SynthesisProgram, *, review: Reviewer | None = None
                      ) -> tuple[SynthesisProgram, LoopReport]:
    """Trial, metric and refinement until an attempt passes or the attempts run out (``keep``: which one then);
    ``review`` sees every evaluated attempt (see :class:`RefinementLoop`)."""
    initial = drafted(stage, program)
    stage.prepare(initial)
    s = stage.settings
    progress = stage.tools.progress
    loop = RefinementLoop(stage.name, LoopSteps(stage.trial, stage.metric, stage.refine, stage.describe),
                          limits=LoopLimits(s.max_attempts, s.keep, stage.threshold), meter=stage.tools.meter,
                          review=review, on_attempt=progress.attempt_done if progress is not None else None)
    attempt, outputs, report = loop.run(initial)
    return stage.adopt(program, attempt, outputs), report
