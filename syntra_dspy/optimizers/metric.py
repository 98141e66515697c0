"""The metric contract of a test-mode stage, and the check a user's metric passes on the way in.

A stage's metric judges one attempt (the text the stage adapts: guidance, an instruction, a task definition) by
that attempt's trial outputs, and returns an :class:`Evaluation` on the stage's scale (0-3 for the verifier
stages, 0-1 for the annotation stage, kappa for the graded annotation stage): the loop stops when ``passed`` is
true, keeps the best ``score`` when ``keep="best"``, and hands ``feedback`` to the refiner.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from syntra_dspy.errors import ConfigError
from syntra_dspy.optimizers.report import Evaluation

#: The stages, in the order a compile runs them, and the shorter names a user may give them.
STAGE_NAMES = ("task_definition", "idattr", "query_instruction", "annotation_instruction")
STAGE_ALIASES = {"definition": "task_definition", "extraction": "idattr", "query": "query_instruction",
                 "annotation": "annotation_instruction"}


@runtime_checkable
class StageMetric(Protocol):
    """``metric(attempt, outputs) -> Evaluation``: the attempt a stage tried and what its trial produced."""

    def __call__(self, attempt: Any, outputs: Any) -> Evaluation: ...


def check_metrics(metrics: Mapping[str, Any] | None) -> dict[str, StageMetric]:
    """User metrics keyed by stage name (aliases allowed), each checked to take ``(attempt, outputs)``."""
    checked: dict[str, StageMetric] = {}
    for key, metric in (metrics or {}).items():
        name = STAGE_ALIASES.get(key, key)
        if name not in STAGE_NAMES:
            raise ConfigError(f"no stage is called {key!r}", field="metrics",
                              hint=f"name one of {', '.join(STAGE_NAMES)} (or {', '.join(STAGE_ALIASES)})")
        if name in checked:
            raise ConfigError(f"two metrics are given for stage {name!r}", field=f"metrics.{key}")
        checked[name] = check_metric(name, metric)
    return checked


def check_metric(stage: str, metric: Any) -> StageMetric:
    """``metric`` itself when it can be called as ``metric(attempt, outputs)``; else a ConfigError saying why."""
    if not callable(metric):
        raise ConfigError(f"the metric for stage {stage!r} is a {type(metric).__name__}, not a callable",
                          field=f"metrics.{stage}", hint="give a function metric(attempt, outputs) -> Evaluation")
    try:
        inspect.signature(metric).bind(None, None)
    except TypeError as exc:
        raise ConfigError(f"the metric for stage {stage!r} cannot be called as metric(attempt, outputs): {exc}",
                          field=f"metrics.{stage}",
                          hint="give a function metric(attempt, outputs) -> Evaluation") from None
    except ValueError:  # no signature to read (some builtins): checked when called
        pass
    return metric


def evaluated(stage: str, metric: StageMetric, attempt: Any, outputs: Any) -> Evaluation:
    """Call ``metric``; anything but an Evaluation back is the metric's error, named as such."""
    result = metric(attempt, outputs)
    if not isinstance(result, Evaluation):
        raise ConfigError(f"the metric for stage {stage!r} returned a {type(result).__name__}, not an Evaluation",
                          field=f"metrics.{stage}",
                          hint="return syntra_dspy.optimizers.Evaluation(score, passed, feedback)")
    return result
