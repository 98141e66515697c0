"""The adaptable state of a synthesis program, saved inside DSPy's own program.json."""

from __future__ import annotations

import copy
from typing import Any

from dspy.predict.parameter import Parameter
from pydantic import BaseModel, ConfigDict

from syntra_dspy.programs.judge_calibration import JudgeCalibration
from syntra_dspy.task import TaskDefinition


class FewShotPair(BaseModel):
    """A task example with its positive resolved to text."""

    model_config = ConfigDict(frozen=True)

    query: str
    positive_id: str | None = None
    positive_text: str


class ComponentState(BaseModel):
    """What test mode adapts: the task definition, the extraction guidance, the two instructions, and how graded
    relevance judgments map to training roles (``judge``: None means the written-label judge)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_definition: TaskDefinition | None = None
    examples: tuple[FewShotPair, ...] = ()
    idattr_guidance: str = ""
    query_instruction: str = ""
    annotation_instruction: str = ""
    judge: JudgeCalibration | None = None


class ProgramComponents(Parameter):
    """A DSPy ``Parameter`` so ``Module.save()``/``load()`` carry the components next to the predictors."""

    def __init__(self, state: ComponentState | None = None) -> None:
        self.state = state or ComponentState()

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        return self.state.model_dump(mode="json")

    def load_state(self, state: dict[str, Any]) -> "ProgramComponents":
        self.state = ComponentState.model_validate(state)
        return self

    def reset(self) -> None:
        """Components are the program's definition, not learned demos: nothing to reset."""

    def __deepcopy__(self, memo: dict) -> "ProgramComponents":
        return ProgramComponents(copy.deepcopy(self.state, memo))
