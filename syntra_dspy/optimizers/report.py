"""What test mode did: every attempt of every loop, kept apart from the compiled program."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

StopReason = Literal["passed", "attempt_limit", "not_evaluated"]


@dataclass(frozen=True)
class Evaluation:
    """A loop's judgement of one attempt: score on the loop's scale, pass flag and feedback for refinement."""

    score: float | None
    passed: bool
    feedback: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    number: int
    instruction: str
    score: float | None
    passed: bool
    feedback: str
    details: dict[str, Any]
    usage: dict[str, Any]


@dataclass(frozen=True)
class LoopReport:
    name: str
    attempts: tuple[Attempt, ...]
    kept: int
    passed: bool
    stop_reason: StopReason
    threshold: float | None
    usage: dict[str, Any]

    @property
    def final_instruction(self) -> str:
        return self.attempts[self.kept - 1].instruction

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CompileReport:
    strategy: str
    settings: dict[str, Any]
    loops: tuple[LoopReport, ...]
    usage: dict[str, Any]
    seconds: float

    def loop(self, name: str) -> LoopReport:
        for loop in self.loops:
            if loop.name == name:
                return loop
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "settings": self.settings,
            "seconds": round(self.seconds, 3),
            "usage": self.usage,
            "loops": [loop.to_dict() for loop in self.loops],
        }
