"""One error family for the whole package, with the location of the bad input when there is one."""

from __future__ import annotations

from pathlib import Path


class SyntraError(Exception):
    """Base class. ``path``/``line``/``field`` say where the bad input is; ``hint`` says what to do."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path:
            where = self.path
            if self.line is not None:
                where += f":{self.line}"
        if self.field:
            where = f"{where} field '{self.field}'" if where else f"field '{self.field}'"
        text = f"{where}: {self.message}" if where else self.message
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(SyntraError):
    """A user-supplied file or setting is malformed."""


class ConfigError(SyntraError):
    """A task spec, LM setting or option is invalid."""


class OutputError(SyntraError):
    """An output could not be written (a full disk, a quota); what the command read is left as it was."""


class ArtifactError(SyntraError):
    """An artifact is missing, tampered with, or from an unsupported schema."""


class FrozenProgramError(SyntraError):
    """Something tried to change a program loaded from an artifact."""


class DependencyError(SyntraError):
    """An optional dependency is missing; the hint holds the install command."""


class LMOutputError(SyntraError):
    """An LM answer failed validation after all retries (recorded, never fatal in production)."""

    def __init__(self, message: str, *, stage: str | None = None, last_answer: str | None = None, **kw) -> None:
        self.stage = stage
        self.last_answer = last_answer  # the LM's raw text on the final try (clipped), to see why it failed
        super().__init__(message, **kw)


class QueriesIncomplete(LMOutputError):
    """Some blueprints of a document got no valid query after all retries. ``kept`` holds the valid queries by
    blueprint number: the caller keeps them, in their positions, and records the missing ones as failed."""

    def __init__(self, message: str, *, kept: dict[int, str], **kw) -> None:
        self.kept = kept
        super().__init__(message, **kw)


class BlueprintsIncomplete(LMOutputError):
    """The planner gave fewer valid blueprints than asked after all its tries. ``kept`` holds the valid ones, in
    order: the caller keeps them and draws the missing ones in code."""

    def __init__(self, message: str, *, kept: list, **kw) -> None:
        self.kept = kept
        super().__init__(message, **kw)


class LMCallError(SyntraError):
    """The LM backend failed (network, server, timeout)."""

    def __init__(self, message: str, *, retryable: bool = True, **kw) -> None:
        self.retryable = retryable
        super().__init__(message, **kw)


class CallCancelled(LMCallError):
    """An LM call was abandoned before it was made or finished: the run is stopping (a second Ctrl-C, or an
    error that every further call would repeat). Nothing is recorded for it; a rerun makes it again."""

    def __init__(self, reason: str = "the run is stopping") -> None:
        super().__init__(f"the LM call was abandoned: {reason}", retryable=False)


def stops_run(err: BaseException) -> bool:
    """True for errors after which a production run must stop without recording the document: a fatal
    backend error, or a call abandoned because of one (or of a second Ctrl-C)."""
    return isinstance(err, CallCancelled) or is_fatal_backend_error(err)


class RunAbandoned(KeyboardInterrupt):
    """A second Ctrl-C: the calls in flight were abandoned; everything already committed is kept."""


def is_fatal_backend_error(err: BaseException) -> bool:
    """True when every further call to the backend would fail the same way, so a run must stop at once:
    authentication (401/403), billing, an unknown model or a configuration error, and protocol errors (a
    successful HTTP status whose body is not a model answer, e.g. an HTML page from a proxy)."""
    try:
        from dspy.utils import exceptions as dspy_errors
    except ImportError:  # pragma: no cover - DSPy is a dependency
        return False
    fatal = tuple(getattr(dspy_errors, name) for name in (
        "LMAuthError", "LMBillingError", "LMNotConfiguredError", "LMConfigurationError", "LMUnsupportedModelError")
        if hasattr(dspy_errors, name))
    if isinstance(err, fatal):
        return True
    status = getattr(err, "status", None)
    if status in (401, 403):
        return True
    provider_error = getattr(dspy_errors, "LMProviderError", None)
    return provider_error is not None and type(err) is provider_error and isinstance(status, int) \
        and 200 <= status < 300


def is_retryable(err: BaseException) -> bool:
    """True when repeating the same call may succeed (transient backend failures, bad LM output)."""
    if is_fatal_backend_error(err):
        return False
    if isinstance(err, LMCallError):
        return err.retryable
    if isinstance(err, LMOutputError):
        return True
    try:
        from dspy.utils.exceptions import is_retryable_lm_error
    except ImportError:  # pragma: no cover - older DSPy
        is_retryable_lm_error = None
    if is_retryable_lm_error is not None and is_retryable_lm_error(err):
        return True
    name = type(err).__name__.lower()
    return any(k in name for k in ("timeout", "ratelimit", "connection", "serviceunavailable", "apierror"))
