"""A test-mode stage: one adapted text of the program, with its drafting, trial run, metric and refinement.

Strategies drive stages; they never reach into one. The contract, in the order a driver uses it:

- ``bind(program)``: the program as it stands when the stage starts (earlier stages' results included);
- ``draft()``: the initial attempt (the program's own text, or one an LM drafts);
- ``prepare(initial)``: what trials need beyond the program (e.g. a calibration set); only drivers that run
  trials ask for it;
- ``trial(attempt)``, ``metric(attempt, outputs)``, ``refine(attempt, outputs, evaluation)``: one turn of a loop;
- ``adopt(program, attempt, outputs)``: the program with the kept attempt written into its components, the one
  place instructions come from (``program.json``, the rendered prompts and ``artifacts diff`` all read them);
- ``adopt_untried(program, initial)``: for a driver that runs no trials, the program with the initial attempt (a
  stage that cannot do without a trial, e.g. the graded judge's calibration, runs that one here);
- for ``dspy.GEPA`` (a ``GEPAReadyStage``): ``steps`` (the synthesis steps whose whole instructions GEPA may rewrite),
  ``gepa_trials(program)`` (a module over those steps and its trainset), ``example_metric`` and ``example_key``
  (one trial's judgement, memoised by key) and ``adopt_steps(program, texts)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import dspy

from syntra_dspy.optimizers import trials as tr
from syntra_dspy.optimizers.metric import StageMetric, evaluated
from syntra_dspy.optimizers.report import Evaluation
from syntra_dspy.optimizers.tools import StageTools
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.components import FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram

A = TypeVar("A")  # the attempt: guidance text, an instruction, a task definition
O = TypeVar("O")  # a trial's outputs


@dataclass
class TrialMaterial:
    """What a compile's trials run on: the few-shot examples, the sampled documents and the candidate source.

    ``features`` are the extraction trials of the program as adopted so far (the kept attempt's): the query stage
    writes queries for them. The extraction stage sets them."""

    examples: tuple[FewShotPair, ...]
    documents: Sequence[tr.TrialDocument]
    candidates: tr.CandidateSource
    features: list[tr.FeatureTrial] = field(default_factory=list)

    @property
    def corpus(self) -> Any:
        return getattr(self.candidates, "corpus", None)


@dataclass(frozen=True)
class GEPATrials:
    """One stage as GEPA sees it: a module whose predictors are the stage's steps, and one example per trial."""

    module: dspy.Module
    trainset: list[dspy.Example]


class Stage(ABC, Generic[A, O]):
    """Base of the four stages; ``metric`` is the stage's own unless the user plugged one in."""

    name: ClassVar[str]
    steps: ClassVar[tuple[str, ...]] = ()
    scale: ClassVar[float] = 3.0  # the best score on the stage's scale (GEPA scores 0-1)

    def __init__(self, tools: StageTools, material: TrialMaterial, *, metric: StageMetric | None = None) -> None:
        self.tools, self.material, self.settings = tools, material, tools.settings
        self.custom_metric = metric
        self.program: SynthesisProgram | None = None

    # -- the loop contract -----------------------------------------------------------------------------------
    @property
    def threshold(self) -> float:
        """The score that passes the stage (recorded in its report)."""
        return self.settings.pass_threshold

    def bind(self, program: SynthesisProgram) -> None:
        self.program = program

    @property
    def task(self) -> str:
        """The task context every verifier and refiner prompt of the stage starts from."""
        return ctx.task_context(self.program.state.task_definition)

    @abstractmethod
    def draft(self) -> A:
        """The initial attempt: the program's own text, or one an LM drafts."""

    def prepare(self, initial: A) -> None:
        """Nothing to prepare by default."""

    @abstractmethod
    def trial(self, attempt: A) -> O:
        """The attempt run on the stage's trial material."""

    @abstractmethod
    def evaluate(self, attempt: A, outputs: O) -> Evaluation:
        """The stage's own metric."""

    def metric(self, attempt: A, outputs: O) -> Evaluation:
        if self.custom_metric is None:
            return self.evaluate(attempt, outputs)
        return evaluated(self.name, self.custom_metric, attempt, outputs)

    @abstractmethod
    def refine(self, attempt: A, outputs: O, evaluation: Evaluation) -> A:
        """The next attempt, written from this one's evaluation."""

    @abstractmethod
    def adopt(self, program: SynthesisProgram, attempt: A, outputs: O | None) -> SynthesisProgram:
        """The program with ``attempt`` written into its components."""

    def adopt_untried(self, program: SynthesisProgram, initial: A) -> SynthesisProgram:
        """The program with ``initial`` adopted without any trial (by default nothing needs one)."""
        return self.adopt(program, initial, None)

    def describe(self, attempt: A) -> str:
        return str(attempt)

    # -- for dspy.GEPA ---------------------------------------------------------------------------------------
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials | None:
        """None: nothing for GEPA to run on (see ``GEPAReadyStage``)."""
        return None

    def adopt_steps(self, program: SynthesisProgram, texts: dict[str, str]) -> SynthesisProgram:
        """A copy that sends GEPA's whole-step instructions: they become components, so ``program.json``, the
        rendered prompts and ``syntra artifacts diff`` all read them, and later ``with_components`` keeps them."""
        return program.with_components(step_instructions={**program.state.step_instructions, **texts})

    def steps_text(self, program: SynthesisProgram) -> str:
        return "\n\n".join(f"## {s}\n{getattr(program, s).signature.instructions}" for s in self.steps)


class GEPAReadyStage(Stage[A, O]):
    """A stage ``dspy.GEPA`` can tune: its trials as a module and trainset, and a judgement of one trial."""

    @abstractmethod
    def gepa_trials(self, program: SynthesisProgram) -> GEPATrials | None:
        """The stage's steps as a module over its trials (None when there is nothing to run on)."""

    @abstractmethod
    def example_judgement(self, attempt: str, outputs: list[Any]) -> Evaluation:
        """The stage's own judgement of one GEPA trial."""

    def example_metric(self, attempt: str, outputs: list[Any]) -> Evaluation:
        """One GEPA trial judged (``outputs`` holds that one trial): the user's metric when one is plugged in."""
        if self.custom_metric is None:
            return self.example_judgement(attempt, outputs)
        return evaluated(self.name, self.custom_metric, attempt, outputs)

    @abstractmethod
    def example_key(self, trial: Any) -> str:
        """What identifies a GEPA trial's outputs: GEPA asks again for feedback on runs it already scored."""


class _Hidden:
    """Holds the whole program and the trial data out of ``named_predictors()``, so GEPA sees only the
    steps a stage adapts (deep copies still share those steps with the program)."""

    def __init__(self, program: SynthesisProgram, data: dict[Any, Any]) -> None:
        self.program, self.data = program, data


class TrialModule(dspy.Module):
    """A stage's steps exposed as predictors; ``forward(**{field: key})`` runs one trial through the program's
    validated calls and returns it with the last step's instruction. ``run`` is a plain function: the module is
    deep-copied for every GEPA candidate, and a bound method would copy its whole object along."""

    def __init__(self, program: SynthesisProgram, steps: Sequence[str], data: dict[Any, Any], *, field: str,
                 run: Callable[[SynthesisProgram, Any], Any]) -> None:
        super().__init__()
        for name in steps:
            setattr(self, name, getattr(program, name))
        self.hidden = _Hidden(program, data)
        self._field, self._run, self._last = field, run, steps[-1]

    def forward(self, **inputs: Any) -> dspy.Prediction:
        trial = self._run(self.hidden.program, self.hidden.data[inputs[self._field]])
        return dspy.Prediction(trial=trial, instruction=getattr(self, self._last).signature.instructions)

    def describe(self) -> str:
        return "\n\n".join(f"## {name}\n{pred.signature.instructions}" for name, pred in self.named_predictors())
