"""Served LMs whose calls cannot hang a run: a total time limit per request, retries with capped and logged
waits, no retry of errors that will not go away, and a way to abandon every call at once.

Why our own loop and not DSPy's ``num_retries``: DSPy 3.4 sleeps for whatever ``Retry-After`` a server sends
(an hour, if it says so), logs nothing while it waits, and its native client's timeouts are per operation (the
next byte), so a server that trickles bytes never times out. Here DSPy makes one attempt per request; each
attempt runs in a helper thread that the caller stops waiting for at ``total`` seconds (the client's own
connect and read timeouts are set too, so the helper ends soon after on a silent server); waits between
attempts are capped at ``max_wait`` and every wait of ``log_wait_over`` seconds or more is logged at WARNING.
Authentication, billing, configuration and protocol failures (a 401, a 403, a 200 whose body is not JSON)
are raised at once, and every later call of the LM is cancelled without a request: it would fail the same
way. ``cancel()`` wakes every waiting caller with :class:`CallCancelled` (a second Ctrl-C in ``produce``).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import dspy

from syntra_dspy.errors import CallCancelled, LMCallError, is_fatal_backend_error, is_retryable
from syntra_dspy.lm.schema_forms import StructuredOutput
from syntra_dspy.redact import redact

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_TOTAL_TIMEOUT = 120.0
DEFAULT_RETRIES = 3
DEFAULT_MAX_WAIT = 60.0
LOG_WAIT_OVER = 2.0
_POLL = 0.1  # how often a waiting caller checks for cancel()


_CLIENT_GRACE = 2.0
#: Settings that decide which client DSPy uses and what it can send (dspy.clients.backend_selection.CLIENT_KEYS).
_CLIENT_KEYS = frozenset({"api_key", "api_base", "base_url", "headers", "extra_headers", "timeout", "api_version",
                          "organization", "project", "extra_query", "custom_llm_provider"})


@dataclass(frozen=True)
class CallPolicy:
    """How long one request may take (connect, total), how often it is retried and how long a wait may be."""

    connect: float = DEFAULT_CONNECT_TIMEOUT
    total: float = DEFAULT_TOTAL_TIMEOUT
    retries: int = DEFAULT_RETRIES
    max_wait: float = DEFAULT_MAX_WAIT
    log_wait_over: float = LOG_WAIT_OVER

    def client_timeout(self) -> Any:
        """The per-operation timeout handed to DSPy's client (an ``httpx.Timeout`` when httpx is there)."""
        try:
            import httpx
        except ImportError:  # pragma: no cover - httpx comes with DSPy's LiteLLM route
            return self.total
        # The client's own read timeout sits a little past the total, so the total limit (with its clear
        # message) always fires first; the helper thread still ends soon after on a silent server.
        return httpx.Timeout(self.total + _CLIENT_GRACE, connect=min(self.connect, self.total))

    def describe(self) -> dict[str, float | int]:
        return {"connect_s": self.connect, "total_s": self.total, "retries": self.retries, "max_wait_s": self.max_wait}


class CallTimedOut(LMCallError):
    """No complete answer within the total time limit (a hung or trickling server)."""


class CallGuard:
    """The retry loop and the stop switch one LM and all its copies share."""

    def __init__(self, policy: CallPolicy, cancel: threading.Event | None = None,
                 reason: list[str] | None = None) -> None:
        self.policy = policy
        self._cancel = cancel or threading.Event()
        self._reason = reason if reason is not None else ["the run is stopping"]

    def with_policy(self, policy: CallPolicy) -> CallGuard:
        """Another policy, the same stop switch."""
        return CallGuard(policy, self._cancel, self._reason)

    def cancel(self, reason: str = "the run is stopping") -> None:
        """Make every call waiting on this guard (and every later one) raise CallCancelled at once."""
        if not self._cancel.is_set():
            self._reason[0] = reason
        self._cancel.set()

    def _cancelled(self) -> CallCancelled:
        return CallCancelled(self._reason[0])

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def __deepcopy__(self, memo: dict) -> CallGuard:
        return self  # copies of an LM share one stop switch

    def __getstate__(self) -> dict[str, Any]:
        return {"policy": self.policy}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["policy"])

    def call(self, attempt: Callable[[], T], *, model: str) -> T:
        """Run ``attempt`` up to ``1 + retries`` times, each bounded by the total timeout."""
        p = self.policy
        for n in range(p.retries + 1):
            if self.cancelled:
                raise self._cancelled()
            try:
                return self._bounded(attempt, model)
            except CallCancelled:
                raise
            except Exception as exc:
                if is_fatal_backend_error(exc):
                    # A wrong key or a broken endpoint: every later call of this LM would fail the same way.
                    self.cancel(f"an earlier call failed with {type(exc).__name__}")
                    raise
                if not is_retryable(exc) or n == p.retries:
                    raise
                self._wait(exc, n, model)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, exc: BaseException, n: int, model: str) -> None:
        p = self.policy
        asked = _retry_after(exc)
        wait = min(asked if asked is not None else min(2.0 ** n, p.max_wait), p.max_wait)
        why = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)[:300]
        note = f" (the server asked for {asked:g} s, capped at {p.max_wait:g} s)" if asked and asked > wait else ""
        log = logger.warning if wait >= p.log_wait_over else logger.debug
        log("LM %s failed (%s); waiting %.1f s before retry %d of %d%s", model, why, wait, n + 1, p.retries, note)
        if self._cancel.wait(wait):
            raise self._cancelled()

    def _bounded(self, attempt: Callable[[], T], model: str) -> T:
        """Run one attempt in a helper thread (with the caller's DSPy context) and stop waiting at ``total``."""
        p = self.policy
        done = threading.Event()
        box: dict[str, Any] = {}
        context = contextvars.copy_context()

        def run() -> None:
            try:
                box["value"] = context.run(attempt)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="syntra-lm-call", daemon=True).start()
        started = time.monotonic()
        slow_logged = False
        while not done.wait(_POLL):
            waited = time.monotonic() - started
            if self.cancelled:
                raise self._cancelled()
            if not slow_logged and waited >= max(p.total / 2, p.log_wait_over * 5):
                logger.warning("LM %s: no answer yet after %.0f s (total timeout %.0f s)", model, waited, p.total)
                slow_logged = True
            if waited >= p.total:
                logger.warning("LM %s: no complete answer within the total timeout of %.0f s; giving up on this "
                               "request", model, p.total)
                raise CallTimedOut(f"no complete answer from {model} within {p.total:g} s (total timeout)",
                                   retryable=True)
        if "error" in box:
            raise box["error"]
        return box["value"]


def _retry_after(exc: BaseException) -> float | None:
    value = getattr(exc, "retry_after", None)
    try:
        seconds = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and seconds == seconds and 0 <= seconds < float("inf") else None


class GuardedLM(dspy.LM):
    """``dspy.LM`` for a served model whose every call goes through a :class:`CallGuard` (DSPy retries off).

    With ``structured``, every structured step sends its JSON schema in that role's form (see
    :mod:`syntra_dspy.lm.schema_forms`), and a server that refuses the form gets the same call once more without
    it, as every later call. An ``engine`` that talks to several endpoints owns its connection (no client
    timeout here) and shapes the schema itself, after choosing the endpoint.
    """

    def __init__(self, model: str, *, policy: CallPolicy | None = None,
                 structured: StructuredOutput | None = None, **kwargs: Any) -> None:
        policy = policy or CallPolicy()
        kwargs.pop("num_retries", None)
        self._engine_shapes = not isinstance(kwargs.get("engine", "auto"), str)
        if not self._engine_shapes:
            kwargs["timeout"] = policy.client_timeout()
        super().__init__(model, num_retries=0, **kwargs)
        self.guard = CallGuard(policy)
        self.structured = structured

    @property
    def supports_response_schema(self) -> bool:
        if self.structured is not None:
            return self.structured.sends_schema
        return super().supports_response_schema

    @property
    def supported_params(self) -> set[str]:
        params = set(self._catalog_params())
        if self.structured is not None and self.structured.sends_schema:
            params.add("response_format")
        return params

    def _catalog_params(self) -> frozenset[str]:
        """DSPy's parameter list for this model, read once per model and address. DSPy reads it from its model
        catalog on every structured call, and for a model the catalog does not know (most served ones) that is
        a scan of the whole catalog: about half a millisecond of CPU per call, under the GIL, at tens of calls
        per second. Syntra never overrides client settings per call, so the LM's own settings are the key."""
        key = (self.model, self.model_type,
               self._engine_spec if isinstance(self._engine_spec, str) else id(self.engine),
               tuple(sorted((k, k == "api_key" or repr(v)) for k, v in self.kwargs.items() if k in _CLIENT_KEYS)))
        cached = self.__dict__.get("_params_cache")
        if cached is None or cached[0] != key:
            cached = (key, frozenset(super().supported_params))
            self.__dict__["_params_cache"] = cached
        return cached[1]

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        return self.guard.call(lambda: self._attempt(prompt, messages, kwargs), model=self.model)

    def _attempt(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
        """One attempt; a refused schema form is dropped and the same call made at once without it."""
        structured = self.structured
        if structured is None:
            return dspy.LM.__call__(self, prompt, messages=messages, **kwargs)
        try:
            return dspy.LM.__call__(self, prompt, messages=messages, **self._shaped(kwargs))
        except Exception as exc:
            if "response_format" not in kwargs or not structured.fall_back_on(exc, model=self.model):
                raise
        return dspy.LM.__call__(self, prompt, messages=messages, **self._shaped(kwargs))

    def _shaped(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        structured = self.structured
        if structured is None or (self._engine_shapes and structured.sends_schema):
            return kwargs  # the engine shapes it for the endpoint it picks
        return structured.prepare(kwargs)

    def copy(self, **kwargs: Any) -> GuardedLM:
        """``copy(num_retries=n)`` sets this guard's retries (DSPy's own stay off); the stop switch is shared."""
        retries = kwargs.pop("num_retries", None)
        copied = super().copy(**kwargs)
        if retries is not None:
            copied.guard = self.guard.with_policy(replace(self.guard.policy, retries=retries))
        return copied


def cancel_calls(lm: Any) -> None:
    """Abandon every call of ``lm`` (and its copies) that is waiting or retrying; a no-op for other LMs."""
    guard = getattr(lm, "guard", None)
    if isinstance(guard, CallGuard):
        guard.cancel()
