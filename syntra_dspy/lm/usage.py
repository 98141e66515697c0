"""Count LM calls, tokens, cache hits, failures and time per named stage, for any ``dspy.LM``.

How it hooks into DSPy 3.4 (read from its source, not guessed):

* every ``dspy.LM.__call__`` fires the ``on_lm_start`` / ``on_lm_end`` callbacks (``utils/callback.py``),
  with a unique ``call_id`` that DSPy also puts in the ``ACTIVE_CALL_ID`` contextvar while the call
  runs; the end handler gets the exception when the call failed;
* after a call that did not come from DSPy's cache, ``clients/execution.finalize`` hands the call's
  usage (``prompt_tokens``, ``completion_tokens``) to ``settings.usage_tracker.add_usage``; a failed call's
  partial usage goes there too. Cache hits never reach it.

So :meth:`UsageMeter.stage` installs a callback (calls, seconds, failures) and a usage tracker (tokens,
matched to the call by ``ACTIVE_CALL_ID``) through ``dspy.context``; a call that ended without failing
and without reporting usage was a cache hit. This works the same for the embedded engine, the
scripted engine and LiteLLM/lm15 routes to OpenAI-compatible servers. A tracker that was already
installed (``dspy.track_usage()``) keeps receiving usage; inside a stage, DSPy does not attach
per-prediction usage (``pred.get_lm_usage()``) because a tracker is already present.

Threads: the stage name, callback and tracker live in DSPy's context overrides, which are a
``contextvars.ContextVar``. ``dspy.Parallel`` (and ``Evaluate``, ``Module.batch``) copies those overrides
into its workers, so calls there are attributed to the stage that was active when it was started. Our
own pools must run work in a copy of the caller's context: ``submit_in_context(executor, fn, ...)``
(``executor.submit(contextvars.copy_context().run, fn, ...)``); a context cannot be entered by two
threads at once, so take one copy per task. A bare ``threading.Thread`` sees no stage and no meter.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.callback_context import ACTIVE_CALL_ID
from dspy.utils.usage_tracker import UsageTracker

STAGE_KEY = "syntra_usage_stage"
UNSTAGED = "unstaged"


@dataclass
class StageUsage:
    """Totals for one stage. ``seconds`` adds up per-call wall time, so it can exceed elapsed time."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: int = 0
    failures: int = 0
    seconds: float = 0.0
    cached_prompt_tokens: int = 0  # prompt tokens served from a cached prefix (server or embedded engine), when said

    def add(self, other: StageUsage) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 6)
        data["total_tokens"] = self.prompt_tokens + self.completion_tokens
        return data


@dataclass
class _OpenCall:
    stage: str
    started: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    reported: bool = False


def current_stage() -> str | None:
    """The stage set by the innermost ``UsageMeter.stage`` of any meter in this context (for logs)."""
    return dspy.settings.get(STAGE_KEY)


def _count(usage: dict[str, Any], key: str) -> int:
    value = usage.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _cached_prompt(usage: dict[str, Any]) -> int:
    """``usage.prompt_tokens_details.cached_tokens``: what an OpenAI-compatible server (vLLM with prefix caching,
    SGLang, hosted APIs) reports it served from its prefix cache, or the embedded engine reused from its context or a
    saved prompt state; 0 when nothing says."""
    details = usage.get("prompt_tokens_details")
    return _count(details, "cached_tokens") if isinstance(details, dict) else 0


class UsageMeter:
    """Thread-safe per-stage LM accounting: ``with meter.stage("query_instruction"): program(...)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[str, StageUsage] = {}
        self._open: dict[str, _OpenCall] = {}
        self._callback = _MeterCallback(self)
        self._key = f"{STAGE_KEY}_{id(self):x}"  # each meter has its own stage, so meters can nest

    def current_stage(self) -> str | None:
        """This meter's stage in the current context."""
        return dspy.settings.get(self._key)

    @contextmanager
    def stage(self, name: str) -> Iterator[UsageMeter]:
        """Attribute every LM call made inside the block (and in workers it starts) to ``name``."""
        if not name:
            raise ValueError("a usage stage needs a non-empty name")
        overrides: dict[str, Any] = {STAGE_KEY: name, self._key: name}
        callbacks = list(dspy.settings.get("callbacks") or [])
        if self._callback not in callbacks:
            overrides["callbacks"] = [*callbacks, self._callback]
        tracker = dspy.settings.get("usage_tracker")
        if not (isinstance(tracker, _MeterTracker) and tracker.meter is self):
            overrides["usage_tracker"] = _MeterTracker(self, parent=tracker)
        with dspy.context(**overrides):
            yield self

    # ── recording (called by the hooks) ──

    def _begin(self, call_id: str) -> None:
        with self._lock:
            self._open[call_id] = _OpenCall(self.current_stage() or UNSTAGED, time.perf_counter())

    def _usage(self, call_id: str | None, usage: dict[str, Any]) -> None:
        prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        cached = _cached_prompt(usage)
        with self._lock:
            open_call = self._open.get(call_id) if call_id else None
            if open_call is not None:
                open_call.prompt_tokens += prompt
                open_call.completion_tokens += completion
                open_call.cached_prompt_tokens += cached
                open_call.reported = True
                return
            stats = self._stages.setdefault(self.current_stage() or UNSTAGED, StageUsage())
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            stats.cached_prompt_tokens += cached

    def _end(self, call_id: str, exception: BaseException | None) -> None:
        now = time.perf_counter()
        with self._lock:
            open_call = self._open.pop(call_id, None)
            if open_call is None:
                return
            stats = self._stages.setdefault(open_call.stage, StageUsage())
            stats.calls += 1
            stats.seconds += now - open_call.started
            stats.prompt_tokens += open_call.prompt_tokens
            stats.completion_tokens += open_call.completion_tokens
            stats.cached_prompt_tokens += open_call.cached_prompt_tokens
            if exception is not None:
                stats.failures += 1
            elif not open_call.reported:
                stats.cached += 1

    # ── reading ──

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{stage: {calls, prompt_tokens, completion_tokens, total_tokens, cached, failures, seconds}}``."""
        with self._lock:
            return {name: stats.to_dict() for name, stats in sorted(self._stages.items())}

    def total(self) -> dict[str, Any]:
        """All stages added together."""
        total = StageUsage()
        with self._lock:
            for stats in self._stages.values():
                total.add(stats)
        return total.to_dict()

    def reset(self) -> None:
        with self._lock:
            self._stages.clear()

    def __repr__(self) -> str:
        t = self.total()
        return f"UsageMeter(calls={t['calls']}, tokens={t['total_tokens']}, stages={len(self._stages)})"


class _MeterCallback(BaseCallback):
    def __init__(self, meter: UsageMeter) -> None:
        self.meter = meter

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.meter._begin(call_id)

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        self.meter._end(call_id, exception)


class _MeterTracker(UsageTracker):
    """A DSPy usage tracker that also feeds the meter, forwarding to a tracker it replaced."""

    def __init__(self, meter: UsageMeter, parent: UsageTracker | None = None) -> None:
        super().__init__()
        self.meter = meter
        self.parent = parent

    def add_usage(self, lm: str, usage_entry: dict[str, Any]) -> None:
        self.meter._usage(ACTIVE_CALL_ID.get(), usage_entry or {})
        if self.parent is not None:
            self.parent.add_usage(lm, usage_entry)
        # Nothing is kept here: a production run makes hundreds of thousands of calls.

    def __deepcopy__(self, memo: dict) -> _MeterTracker:
        # dspy.Parallel deep-copies the tracker into each worker; the copy must still feed this meter.
        return self


def submit_in_context(executor: Executor, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
    """``executor.submit`` that runs ``fn`` in a copy of the caller's context (stage, DSPy settings)."""
    return executor.submit(contextvars.copy_context().run, fn, *args, **kwargs)
