"""What every test-mode strategy shares: the Teleprompter contract and the order stages run in.

A strategy is a thin driver: it says which stages it runs (:meth:`Strategy.stages`) and how it drives each one
(:meth:`Strategy.drive`); the stages own drafting, trials, metrics and refinement
(:mod:`syntra_dspy.optimizers.stages`).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from dspy.teleprompt import Teleprompter

from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.judge import JUDGE_MODES, JudgeMode, judge_mode
from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.metric import StageMetric, check_metrics
from syntra_dspy.optimizers.progress import CompileProgress
from syntra_dspy.optimizers.report import CompileReport, LoopReport
from syntra_dspy.optimizers.settings import CompileSettings
from syntra_dspy.optimizers.stages import Stage, TrialMaterial
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs.authoring import InstructionAuthor
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram

logger = logging.getLogger(__name__)


class Strategy(Teleprompter, ABC):
    """Base of the strategies. ``metrics`` replaces a stage's own metric by the user's, keyed by stage name (see
    :class:`~syntra_dspy.optimizers.metric.StageMetric`)."""

    strategy: ClassVar[str]
    #: The judges this strategy can compile; the first is the one it compiles when ``settings.judge`` is left at
    #: its default.
    judges: ClassVar[tuple[JudgeMode, ...]] = JUDGE_MODES
    #: Whether a stage runs the refinement loop (up to ``max_attempts`` attempts); else one draft or search a stage.
    refines: ClassVar[bool] = True
    #: Whether the compile's progress may show a bar and log while an attempt runs (not while a person reviews at
    #: the terminal); a line after every attempt is logged either way.
    live_progress: ClassVar[bool] = True

    def __init__(self, *, settings: CompileSettings | None = None, lms: Any, meter: Any = None,
                 author: InstructionAuthor | None = None, metrics: Mapping[str, StageMetric] | None = None) -> None:
        super().__init__()
        self.settings = self.settings_for(settings or CompileSettings())
        self.lms = lms
        self.meter = meter
        self.author = author or InstructionAuthor()
        self.metrics = check_metrics(metrics)
        self.report: CompileReport | None = None

    @classmethod
    def settings_for(cls, settings: CompileSettings) -> CompileSettings:
        """``settings`` with the judge this strategy compiles: a judge it cannot compile is refused when the user
        asked for it, and replaced by the strategy's own when it is only the default, so the settings (and the
        manifest that records them) name the judge the program gets."""
        if settings.judge in cls.judges:
            return settings
        if "judge" in settings.model_fields_set:
            raise ConfigError(f"the {cls.strategy} strategy compiles the {' or '.join(cls.judges)} judge, not "
                              f"{settings.judge!r}", field="judge",
                              hint=f"use --judge-mode {cls.judges[0]}, or another strategy")
        return settings.model_copy(update={"judge": cls.judges[0]})

    # -- the Teleprompter contract -----------------------------------------------------------------------
    def compile(self, student: SynthesisProgram, *, trainset: Sequence[FewShotPair], teacher: Any = None,
                valset: Any = None, documents: Sequence[tr.TrialDocument] = (),
                candidates: tr.CandidateSource | None = None) -> SynthesisProgram:
        """Compile ``student``; the report of every loop is left in ``self.report`` (``run`` returns both)."""
        if teacher is not None or valset is not None:
            raise ConfigError("SYNTRA's test mode takes no teacher and no valset: trials run on sampled corpus "
                              "documents and the few-shot examples (trainset)")
        program, self.report = self.run(student, trainset=trainset, documents=documents, candidates=candidates)
        return program

    def get_params(self) -> dict[str, Any]:
        custom = {name: f"{getattr(m, '__module__', '?')}.{getattr(m, '__qualname__', type(m).__qualname__)}"
                  for name, m in self.metrics.items()}
        return {"strategy": self.strategy, **self.settings.model_dump(), **({"metrics": custom} if custom else {})}

    def compile_record(self) -> dict[str, Any]:
        """What the last compile's record adds about itself beyond history and usage (e.g. who reviewed it); it
        is no part of the program id."""
        return {}

    def run(self, student: SynthesisProgram, *, trainset: Sequence[FewShotPair],
            documents: Sequence[tr.TrialDocument], candidates: tr.CandidateSource | None
            ) -> tuple[SynthesisProgram, CompileReport]:
        """Compile and return the program together with a separate report of every stage."""
        if not trainset:
            raise ConfigError("test mode needs the task's few-shot examples")
        if candidates is None:
            raise ConfigError("test mode needs a candidate source for the annotation check")
        started = time.perf_counter()
        examples = tuple(trainset)
        tools = StageTools(settings=self.settings, lms=self.lms, meter=self.meter, author=self.author)
        material = TrialMaterial(examples, documents, candidates)
        program = SynthesisProgram(student.state.model_copy(update={"examples": examples}),
                                   max_retries=student.max_retries, max_doc_chars=self.settings.max_doc_chars,
                                   near_duplicate=self.settings.near_duplicate)
        loops: list[LoopReport] = []
        stages = self.stages(tools, material, infer_definition=student.state.task_definition is None)
        attempts = self.settings.max_attempts if self.refines else 1
        tools.progress = CompileProgress([stage.name for stage in stages], attempts, meter=self.meter,
                                         live=self.live_progress)
        with tools.progress:
            for stage in stages:
                tools.progress.stage_started(stage.name)
                program, report = self.drive(stage, program)
                tools.progress.stage_done(min(len(report.attempts), attempts))
                loops.append(report)
        compiled = judge_mode(program)
        if compiled != self.settings.judge:  # the graded loop fitted no calibration: no known positive was graded
            logger.warning("no judge calibration could be fitted (no known positive was graded): the program "
                           "judges with %s labels, and the manifest says so", compiled)
            self.settings = self.settings.model_copy(update={"judge": compiled})
        total = self.meter.snapshot() if self.meter is not None else {}
        return program, CompileReport(self.strategy, self.get_params(), tuple(loops), total,
                                      time.perf_counter() - started)

    # -- what a strategy decides -----------------------------------------------------------------------------
    @abstractmethod
    def stages(self, tools: StageTools, material: TrialMaterial, *, infer_definition: bool) -> list[Stage]:
        """The stages this strategy runs, in order."""

    @abstractmethod
    def drive(self, stage: Stage, program: SynthesisProgram) -> tuple[SynthesisProgram, LoopReport]:
        """Run one stage on ``program``: the program with the stage's result, and the stage's report."""
