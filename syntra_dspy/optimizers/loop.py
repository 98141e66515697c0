"""The generate → evaluate → refine loop every test-mode stage runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

from syntra_dspy.optimizers.report import Attempt, Evaluation, LoopReport

logger = logging.getLogger(__name__)
A = TypeVar("A")  # the adapted artifact: an instruction, guidance text or a task definition
O = TypeVar("O")  # trial outputs


class UsageProbe:
    """Reads calls and tokens of one meter stage before/after a piece of work."""

    def __init__(self, meter: Any, stage: str) -> None:
        self.meter, self.stage = meter, stage

    def read(self) -> dict[str, Any]:
        if self.meter is None:
            return {}
        return dict(self.meter.snapshot().get(self.stage, {}))

    @staticmethod
    def diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
        out = {}
        for key, value in after.items():
            if isinstance(value, (int, float)):
                out[key] = round(value - before.get(key, 0), 3) if isinstance(value, float) else value - before.get(key, 0)
        return out


class RefinementLoop(Generic[A, O]):
    """Runs attempts until one passes or ``max_attempts`` is reached; records every attempt.

    ``keep="last"`` returns the last evaluated artifact (the paper's behaviour); ``keep="best"`` the highest
    scoring one (ties go to the later attempt, which has seen more feedback).
    """

    def __init__(
        self,
        name: str,
        *,
        generate: Callable[[A], O],
        evaluate: Callable[[A, O], Evaluation],
        refine: Callable[[A, O, Evaluation], A],
        describe: Callable[[A], str] = str,
        max_attempts: int = 3,
        keep: Literal["last", "best"] = "last",
        threshold: float | None = None,
        meter: Any = None,
        on_attempt: Callable[[Attempt], None] | None = None,
    ) -> None:
        self.name = name
        self.generate, self.evaluate, self.refine, self.describe = generate, evaluate, refine, describe
        self.max_attempts, self.keep, self.threshold = max_attempts, keep, threshold
        self.meter = meter
        self.on_attempt = on_attempt

    def _stage(self):
        if self.meter is None:
            from contextlib import nullcontext

            return nullcontext()
        return self.meter.stage(self.name)

    def run(self, initial: A) -> tuple[A, O, LoopReport]:
        probe = UsageProbe(self.meter, self.name)
        start_usage = probe.read()
        attempts: list[Attempt] = []
        results: list[tuple[A, O]] = []
        current = initial
        stop = "attempt_limit"
        for number in range(1, self.max_attempts + 1):
            before = probe.read()
            with self._stage():
                outputs = self.generate(current)
                evaluation = self.evaluate(current, outputs)
            attempt = Attempt(
                number=number,
                instruction=self.describe(current),
                score=evaluation.score,
                passed=evaluation.passed,
                feedback=evaluation.feedback,
                details=evaluation.details,
                usage=UsageProbe.diff(probe.read(), before),
            )
            attempts.append(attempt)
            results.append((current, outputs))
            logger.info("%s attempt %d/%d: score=%s passed=%s", self.name, number, self.max_attempts,
                        evaluation.score, evaluation.passed)
            if self.on_attempt:
                self.on_attempt(attempt)
            if evaluation.passed:
                stop = "passed"
                break
            if number == self.max_attempts:
                break
            with self._stage():
                current = self.refine(current, outputs, evaluation)
        kept = self._kept(attempts, stop)
        artifact, outputs = results[kept - 1]
        report = LoopReport(
            name=self.name,
            attempts=tuple(attempts),
            kept=kept,
            passed=attempts[kept - 1].passed,
            stop_reason=stop,  # type: ignore[arg-type]
            threshold=self.threshold,
            usage=UsageProbe.diff(probe.read(), start_usage),
        )
        return artifact, outputs, report

    def _kept(self, attempts: list[Attempt], stop: str) -> int:
        if stop == "passed" or self.keep == "last":
            return attempts[-1].number
        best = max(attempts, key=lambda a: (a.score if a.score is not None else float("-inf"), a.number))
        return best.number


def unevaluated(name: str, artifact_text: str, usage: dict[str, Any] | None = None) -> LoopReport:
    """Report for a stage whose initial artifact is used as is (no-refinement strategy)."""
    attempt = Attempt(1, artifact_text, None, False, "", {}, usage or {})
    return LoopReport(name, (attempt,), 1, False, "not_evaluated", None, usage or {})
