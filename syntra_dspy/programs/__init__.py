"""dspy.Modules that compose the signatures: the synthesis program and the test-mode authoring helpers."""

from __future__ import annotations

from syntra_dspy.programs.authoring import ROLE_OF, InstructionAuthor
from syntra_dspy.programs.components import ComponentState, FewShotPair, ProgramComponents
from syntra_dspy.programs.synthesis import STEP_NAMES, SynthesisProgram, compose_instructions

__all__ = [
    "ROLE_OF",
    "STEP_NAMES",
    "ComponentState",
    "FewShotPair",
    "InstructionAuthor",
    "ProgramComponents",
    "SynthesisProgram",
    "compose_instructions",
]
