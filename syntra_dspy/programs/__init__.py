"""dspy.Modules that compose the signatures: the synthesis program and the test-mode authoring helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from syntra_dspy._lazy import lazy_exports

if TYPE_CHECKING:  # for type checkers and readers; at run time each name loads on first use
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

__getattr__, __dir__ = lazy_exports(__name__, {
    "ROLE_OF": "syntra_dspy.programs.authoring",
    "InstructionAuthor": "syntra_dspy.programs.authoring",
    "ComponentState": "syntra_dspy.programs.components",
    "FewShotPair": "syntra_dspy.programs.components",
    "ProgramComponents": "syntra_dspy.programs.components",
    "STEP_NAMES": "syntra_dspy.programs.synthesis",
    "SynthesisProgram": "syntra_dspy.programs.synthesis",
    "compose_instructions": "syntra_dspy.programs.synthesis",
})
