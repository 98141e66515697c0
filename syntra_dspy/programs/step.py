"""A predictor that can be frozen: once a program is loaded from an artifact its prompts cannot change."""

from __future__ import annotations

from typing import Any

import dspy

from syntra_dspy.errors import FrozenProgramError

_GUARDED = frozenset({"signature", "demos", "lm", "config"})


class Step(dspy.Predict):
    """``dspy.Predict`` whose signature, demos, LM and config are read-only after ``freeze()``.

    Optimizers change instructions only through ``signature.with_instructions``; a frozen step refuses even
    that, so a production run is guaranteed to send the prompts recorded in the artifact.
    """

    def freeze(self) -> None:
        object.__setattr__(self, "_frozen", True)

    @property
    def frozen(self) -> bool:
        return self.__dict__.get("_frozen", False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _GUARDED and self.__dict__.get("_frozen", False):
            raise FrozenProgramError(
                f"cannot change '{name}' of a step loaded from an artifact",
                hint="compile a new version instead of editing a loaded program",
            )
        super().__setattr__(name, value)

    def __deepcopy__(self, memo: dict) -> "Step":
        # Copies start unfrozen: optimizers work on copies, never on a loaded artifact's steps.
        import copy

        clone = type(self).__new__(type(self))
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            if key == "_frozen":
                continue
            clone.__dict__[key] = copy.deepcopy(value, memo)
        return clone
