"""The generate → evaluate → refine loop every test-mode stage runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from syntra_dspy.errors import LMOutputError
from syntra_dspy.optimizers.report import Attempt, Evaluation, LoopReport

logger = logging.getLogger(__name__)
A = TypeVar("A")  # the adapted artifact: an instruction, guidance text or a task definition
O = TypeVar("O")  # trial outputs


@dataclass(frozen=True)
class ReviewRequest(Generic[A, O]):
    """What a reviewer (e.g. a person calibrating instructions) sees after an attempt was evaluated."""

    loop: str
    attempt: int
    max_attempts: int
    artifact: A
    text: str  # ``describe(artifact)``
    outputs: O
    evaluation: Evaluation

    @property
    def last(self) -> bool:
        """No refinement follows this attempt: an edit made now is kept untried."""
        return self.attempt >= self.max_attempts


@dataclass(frozen=True)
class Review(Generic[A]):
    """A reviewer's decision: the evaluation the loop acts on (it may override the verifier's score, pass
    flag or feedback) and, optionally, an edited artifact that replaces the refiner's next revision.
    """

    evaluation: Evaluation
    replacement: A | None = None


Reviewer = Callable[[ReviewRequest], "Review | None"]


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
                out[key] = round(value - before.get(key, 0), 3) if isinstance(value, float) \
                    else value - before.get(key, 0)
        return out


@dataclass(frozen=True)
class LoopSteps(Generic[A, O]):
    """What a loop runs, one stage's: the trial of an attempt, its evaluation, the next attempt written from that
    evaluation, and the attempt's text for the record."""

    generate: Callable[[A], O]
    evaluate: Callable[[A, O], Evaluation]
    refine: Callable[[A, O, Evaluation], A]
    describe: Callable[[A], str] = str


@dataclass(frozen=True)
class LoopLimits:
    """When a loop stops and what it keeps: at most ``max_attempts`` attempts; ``keep`` the last evaluated one or
    the best scoring when none passes; ``threshold``, the passing score, is recorded in the report."""

    max_attempts: int = 3
    keep: Literal["last", "best"] = "last"
    threshold: float | None = None


class RefinementLoop(Generic[A, O]):
    """Runs attempts until one passes or ``limits.max_attempts`` is reached; records every attempt.

    ``keep="last"`` returns the last evaluated artifact (the paper's behaviour); ``keep="best"`` the highest
    scoring one (ties go to the later attempt, which has seen more feedback).

    ``review`` (optional) is called after each evaluation, so a person (or a replay of one) can override the
    judgement or edit the artifact: an edit is tried as the next attempt instead of a refinement; an edit
    after the last attempt is kept as the result, recorded as an untried attempt. ``None`` keeps the
    verifier's evaluation. ``meter`` attributes the loop's LM calls to ``name``; ``on_attempt`` sees every
    attempt as it is recorded.
    """

    def __init__(self, name: str, steps: LoopSteps[A, O], *, limits: LoopLimits | None = None, meter: Any = None,
                 on_attempt: Callable[[Attempt], None] | None = None, review: Reviewer | None = None) -> None:
        limits = limits or LoopLimits()
        self.name = name
        self.generate, self.evaluate, self.refine, self.describe = (steps.generate, steps.evaluate, steps.refine,
                                                                     steps.describe)
        self.max_attempts, self.keep, self.threshold = limits.max_attempts, limits.keep, limits.threshold
        self.meter = meter
        self.on_attempt = on_attempt
        self.review = review

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
                try:
                    evaluation = self.evaluate(current, outputs)
                except LMOutputError as exc:
                    # An unusable verdict fails the attempt; it never ends the compile.
                    evaluation = Evaluation(None, False, f"(the evaluator gave no usable answer: {exc.message})",
                                            {"evaluator_error": exc.message})
            evaluation, replacement = self._reviewed(number, current, outputs, evaluation)
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
                if replacement is not None:
                    attempts.append(Attempt(number + 1, self.describe(replacement), None, False,
                                            "edited by the reviewer after the last attempt; not tried",
                                            {"edited_by_reviewer": True}, {}))
                    results.append((replacement, outputs))
                break
            if replacement is not None:
                current = replacement
                continue
            with self._stage():
                try:
                    current = self.refine(current, outputs, evaluation)
                except LMOutputError as exc:
                    logger.warning("%s: refinement gave no usable answer (%s); retrying the same artifact",
                                   self.name, exc.message)
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

    def _reviewed(self, number: int, artifact: A, outputs: O, evaluation: Evaluation) -> tuple[Evaluation, A | None]:
        if self.review is None:
            return evaluation, None
        request = ReviewRequest(self.name, number, self.max_attempts, artifact, self.describe(artifact), outputs,
                                evaluation)
        decision = self.review(request)
        if decision is None:
            return evaluation, None
        if decision.replacement is not None and decision.evaluation.passed:
            raise ValueError("a review cannot pass an attempt and also replace its artifact")
        return decision.evaluation, decision.replacement

    def _kept(self, attempts: list[Attempt], stop: str) -> int:
        if attempts[-1].details.get("edited_by_reviewer"):
            return attempts[-1].number
        if stop == "passed" or self.keep == "last":
            return attempts[-1].number
        best = max(attempts, key=lambda a: (a.score if a.score is not None else float("-inf"), a.number))
        return best.number


def unevaluated(name: str, artifact_text: str, usage: dict[str, Any] | None = None) -> LoopReport:
    """Report for a stage whose initial artifact is used as is (no-refinement strategy)."""
    attempt = Attempt(1, artifact_text, None, False, "", {}, usage or {})
    return LoopReport(name, (attempt,), 1, False, "not_evaluated", None, usage or {})
