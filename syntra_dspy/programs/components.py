"""The adaptable state of a synthesis program, saved inside DSPy's own program.json."""

from __future__ import annotations

import copy
from typing import Any, Literal

from dspy.predict.parameter import Parameter
from pydantic import BaseModel, ConfigDict, Field, field_validator

from syntra_dspy.judging.calibration import JudgeCalibration
from syntra_dspy.task import TaskDefinition


#: The steps of a synthesis program, in pipeline order (also the predictor names in program.json). ``annotate``
#: writes labels for a list of candidates; ``grade`` judges one candidate and is read for its label probabilities.
STEP_NAMES = ("extract", "plan", "write", "annotate", "grade")


class FewShotPair(BaseModel):
    """A task example with its positive resolved to text."""

    model_config = ConfigDict(frozen=True)

    query: str
    positive_id: str | None = None
    positive_text: str


class ComponentState(BaseModel):
    """What test mode adapts, the one source of every step's instruction: the task definition, the extraction
    guidance, the two instructions, how graded relevance judgments map to training roles (``judge``: None means
    the written-label judge), whether the grading prompt carries the annotation instruction as guidance
    (``grade_guidance``; ``syntra artifacts recalibrate --without-guidance`` leaves it out), whether that prompt is
    the brief one (``grade_prompt``: ``brief``, the relevance definition and a one-line scale, no guidance;
    ``--brief-grading``), and whole-step instructions an optimizer wrote (``step_instructions``, e.g. GEPA's), which
    replace what the other components would compose for that step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_definition: TaskDefinition | None = None
    examples: tuple[FewShotPair, ...] = ()
    idattr_guidance: str = ""
    query_instruction: str = ""
    annotation_instruction: str = ""
    judge: JudgeCalibration | None = None
    grade_guidance: bool = True
    grade_prompt: Literal["full", "brief"] = "full"
    step_instructions: dict[str, str] = Field(default_factory=dict)

    @field_validator("step_instructions")
    @classmethod
    def _known_steps(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(STEP_NAMES))
        if unknown:
            raise ValueError(f"step_instructions names unknown steps {', '.join(unknown)}; steps are "
                             f"{', '.join(STEP_NAMES)}")
        return value


class ProgramComponents(Parameter):
    """A DSPy ``Parameter`` so ``Module.save()``/``load()`` carry the components next to the predictors."""

    def __init__(self, state: ComponentState | None = None) -> None:
        self.state = state or ComponentState()

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """The components as JSON; a default ``grade_guidance`` or ``grade_prompt`` or no whole-step instructions
        saves no key, so such programs save byte for byte as before."""
        data = self.state.model_dump(mode="json")
        if not data["step_instructions"]:
            del data["step_instructions"]
        if data["grade_guidance"]:
            del data["grade_guidance"]
        if data["grade_prompt"] == "full":
            del data["grade_prompt"]
        return data

    def load_state(self, state: dict[str, Any]) -> "ProgramComponents":
        self.state = ComponentState.model_validate(state)
        return self

    def reset(self) -> None:
        """Components are the program's definition, not learned demos: nothing to reset."""

    def __deepcopy__(self, memo: dict) -> "ProgramComponents":
        return ProgramComponents(copy.deepcopy(self.state, memo))
