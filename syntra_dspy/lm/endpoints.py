"""One LM role served by several endpoints: LiteLLM's Router balances and fails over, we keep the books.

The Router (``litellm.Router``, which DSPy already depends on) picks an endpoint for every request among those
not cooling down, and puts an endpoint that failed into cooldown for ``cooldown`` seconds, so a dead server
stops receiving requests until it has had time to come back. It makes one attempt per pick (its own retries
off): a transient failure (429, 5xx, a refused connection, a timeout) is tried at once on another endpoint,
up to once per endpoint; when every endpoint failed, the error reaches the role's :class:`CallGuard`, which
waits with backoff (capped, logged) and tries again. Each attempt is counted against the endpoint that made
it: answered calls, failures, tokens, cached prompt tokens and time (:meth:`RoutedEngine.snapshot`), which
production writes to its run store. Addresses are kept without credentials; the key goes only to the Router.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from syntra_dspy.errors import is_fatal_backend_error, is_retryable
from syntra_dspy.lm.schema_forms import StructuredOutput
from syntra_dspy.redact import redact

logger = logging.getLogger(__name__)

GROUP = "syntra-role"
DEFAULT_COOLDOWN = 10.0


@dataclass
class EndpointStats:
    """What one endpoint did in this process. ``calls`` counts answered requests, ``failures`` failed ones."""

    endpoint: str
    calls: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    seconds: float = 0.0
    last_error: str | None = None
    failing_since: float | None = None  # monotonic time of the first failure since its last answer

    def to_dict(self, cooldown: float) -> dict[str, Any]:
        data = asdict(self)
        failing = self.failing_since
        data.pop("failing_since")
        data["seconds"] = round(self.seconds, 6)
        data["healthy"] = failing is None
        data["cooling_down"] = failing is not None and time.monotonic() - failing < cooldown
        return data


def _count(usage: Any, key: str) -> int:
    value = getattr(usage, key, None) if not isinstance(usage, dict) else usage.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _cached(usage: Any) -> int:
    details = getattr(usage, "prompt_tokens_details", None) if not isinstance(usage, dict) \
        else usage.get("prompt_tokens_details")
    return _count(details, "cached_tokens") if details is not None else 0


def _transient(error: BaseException) -> bool:
    """A failure another endpoint (or a later try) may not have: 429, 5xx, a timeout, a lost connection."""
    from dspy import lm15

    if is_fatal_backend_error(error):
        return False
    return isinstance(error, (lm15.RateLimitError, lm15.ServerError, lm15.TimeoutError, lm15.TransportError)) \
        or is_retryable(error)


class RoutedEngine:
    """A DSPy engine (``complete(Request) -> Response``) over ``litellm.Router`` and several ``api_bases``."""

    supports_response_schema = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(("response_format", "temperature", "max_tokens", "max_completion_tokens", "stop",
                                  "seed", "top_p", "logprobs", "top_logprobs"))  # fmt: skip

    def __init__(self, model: str, api_bases: list[str], *, labels: list[str], api_key: str | None = None,
                 timeout: float = 120.0, structured: StructuredOutput | None = None,
                 cooldown: float = DEFAULT_COOLDOWN) -> None:
        from litellm import Router

        if len(api_bases) != len(labels) or not api_bases:
            raise ValueError("every endpoint needs one label, and a routed role needs at least one endpoint")
        self.model = model
        self.structured = structured
        self.cooldown = cooldown
        self._ids = [f"endpoint-{i}" for i in range(len(api_bases))]
        self._stats = {i: EndpointStats(label) for i, label in zip(self._ids, labels)}
        self._lock = threading.Lock()
        params: dict[str, Any] = {"model": model, "timeout": timeout}
        if api_key is not None:
            params["api_key"] = api_key
        self._router = Router(
            model_list=[{"model_name": GROUP, "litellm_params": {**params, "api_base": base}, "model_info": {"id": i}}
                        for i, base in zip(self._ids, api_bases)],
            num_retries=0, retry_after=0, allowed_fails=0, cooldown_time=cooldown, routing_strategy="simple-shuffle")

    @property
    def endpoints(self) -> list[str]:
        return [s.endpoint for s in self._stats.values()]

    def __repr__(self) -> str:
        return f"RoutedEngine({self.model!r}, endpoints={self.endpoints!r})"

    def __deepcopy__(self, memo: dict) -> RoutedEngine:
        return self  # one Router (connections, cooldowns, books) per role, shared by every copy of the LM

    def complete(self, request: Any) -> Any:
        from dspy.clients.engines.base import validate_request
        from dspy.clients.lm15_boundary import request_kwargs, response_value

        validate_request(request)
        body = request_kwargs(request, "chat")
        if self.structured is not None:
            body = self.structured.prepare(body)
        for attempt in range(len(self._ids)):
            started, sent = time.perf_counter(), time.monotonic()
            try:
                raw = self._router.completion(model=GROUP, **body)
            except Exception as exc:  # noqa: BLE001 - counted, then re-raised as DSPy's error type
                error = self._failed(exc, time.perf_counter() - started)
                if attempt + 1 < len(self._ids) and _transient(error):
                    continue  # the Router now cools that endpoint down: the next pick is another one
                raise error from exc
            self._answered(raw, time.perf_counter() - started, sent)
            return response_value(raw, "chat", request)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answered(self, raw: Any, seconds: float, sent: float) -> None:
        """Count an answer. Only a request sent after the endpoint's failure shows it answers again: with several
        calls in flight, an answer to one sent before the failure can arrive after it."""
        hidden = getattr(raw, "_hidden_params", None) or {}
        usage = getattr(raw, "usage", None)
        with self._lock:
            stats = self._stats.get(hidden.get("model_id"))
            if stats is None:
                return
            recovered = stats.failing_since is not None and sent >= stats.failing_since
            if recovered:
                logger.info("LM endpoint %s answers again", stats.endpoint)
            stats.calls += 1
            stats.seconds += seconds
            stats.prompt_tokens += _count(usage, "prompt_tokens")
            stats.completion_tokens += _count(usage, "completion_tokens")
            stats.cached_prompt_tokens += _cached(usage)
            if recovered:
                stats.failing_since = None

    def _failed(self, exc: Exception, seconds: float) -> Exception:
        from dspy.clients.engines.litellm_errors import to_lm15_error

        error = to_lm15_error(exc, model=self.model, provider=self.model.split("/", 1)[0])
        why = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)[:300]
        with self._lock:
            stats = self._stats.get(getattr(exc, "failed_deployment_id", None))
            if stats is None:  # no endpoint was tried: every one is resting; retry when the first may answer
                rests = [self.cooldown - (time.monotonic() - s.failing_since)
                         for s in self._stats.values() if s.failing_since is not None]
                if rests and getattr(error, "retry_after", None) is None:
                    error.retry_after = max(0.1, min(rests))
                return error
            stats.failures += 1
            stats.seconds += seconds
            stats.last_error = why
            if stats.failing_since is None and _transient(error):  # a refused request is no sign of ill health
                stats.failing_since = time.monotonic()
                logger.warning("LM endpoint %s failed (%s); it rests for %g s while the other endpoints answer",
                               stats.endpoint, why, self.cooldown)
        return error

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{endpoint: {calls, failures, prompt_tokens, completion_tokens, cached_prompt_tokens, seconds,
        last_error, healthy, cooling_down}}`` since this engine was built."""
        with self._lock:
            return {s.endpoint: s.to_dict(self.cooldown) for s in self._stats.values()}
