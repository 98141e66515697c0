"""Graded relevance: one candidate per call, a one-digit answer, and the probabilities of the label tokens.

A small model asked to *write* a 0-3 label says 2 or 3 far too often, or collapses to all 0s. The probabilities
it gives the four label tokens at the answer position carry much more: their expectation E = sum k * p(k) ranks
relevant candidates above the rest even when the written label does not. This module formats the grading call
(the fixed instruction as the system message, then the query and the document: query first shares the prompt
prefix among a query's candidates, document first among the queries a document is graded for) and reads a
:class:`Grade` from the answer and its first-token log probabilities, from the embedded engine or from any
OpenAI-compatible server that returns ``top_logprobs``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from syntra_dspy.errors import LMOutputError

LABELS = (0, 1, 2, 3)
#: Alternatives asked for at the answer position: OpenAI-compatible servers give at most 20.
TOP_LOGPROBS = 20
#: Below this share of first-token probability on the label tokens, the distribution says nothing about labels.
MIN_LABEL_MASS = 0.05
_DIGIT = re.compile(r"\s*([0-3])")


@dataclass(frozen=True)
class Grade:
    """One graded judgment: p(0..3) over the label tokens (renormalised), the label written, and their share."""

    probs: tuple[float, float, float, float] | None
    written: int | None
    mass: float | None = None

    @property
    def expected(self) -> float | None:
        """E = sum k * p(k); the written label when the backend gave no probabilities."""
        if self.probs is not None:
            return sum(k * p for k, p in zip(LABELS, self.probs))
        return None if self.written is None else float(self.written)

    @property
    def graded(self) -> bool:
        return self.probs is not None

    def to_dict(self) -> dict[str, Any]:
        return {"probs": list(self.probs) if self.probs is not None else None, "written": self.written,
                "mass": self.mass, "expected": self.expected}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grade:
        """The grade ``to_dict`` wrote (``expected`` is derived again)."""
        probs = data.get("probs")
        return cls(tuple(probs) if probs is not None else None, data.get("written"), data.get("mass"))


def _field(entry: Any, name: str) -> Any:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def grade_from_logprobs(logprobs: Any, written: int | None) -> Grade:
    """Read p(0..3) from the first answer token's alternatives (OpenAI ``logprobs.content[0].top_logprobs``).

    A label token may appear with surrounding space (`` 2``); the most probable spelling of each label counts. A
    label missing from the alternatives gets probability 0 (it is below every listed one, a few parts in a
    thousand at most when 20 are listed). Too little mass on the labels (the model started another answer)
    gives no distribution, only the written label.
    """
    content = _field(logprobs, "content") if logprobs is not None else None
    if not content:
        return Grade(None, written)
    first = content[0]
    entries = list(_field(first, "top_logprobs") or []) + [first]
    best: dict[int, float] = {}
    for entry in entries:
        token, logprob = _field(entry, "token"), _field(entry, "logprob")
        if token is None or logprob is None:
            continue
        text = str(token).strip()
        if len(text) == 1 and text in "0123":
            best[int(text)] = max(best.get(int(text), float("-inf")), float(logprob))
    raw = [math.exp(best[k]) if k in best else 0.0 for k in LABELS]
    mass = sum(raw)
    if mass < MIN_LABEL_MASS:
        return Grade(None, written, mass)
    probs = tuple(p / mass for p in raw)
    return Grade(probs, written, min(mass, 1.0))  # type: ignore[arg-type]


class DigitLabelAdapter(dspy.Adapter):
    """Formats a grading call as instruction (system), then ``Query: …`` and ``Document: …`` (user), and reads the
    answer's leading digit.

    The inputs are rendered in the signature's field order, or in ``order`` (input field names, first first), so
    the fixed part of the prompt comes first and consecutive calls that share their leading input (one query's
    candidates; one document's queries, with ``order=("document", "query")``) reuse the cached prefix. The answer is
    expected in one token; an answer that does not start with a digit parses to ``None`` rather than failing, so
    the label-token probabilities (which the caller reads from the same output) are not lost.
    """

    def __init__(self, order: Sequence[str] | None = None) -> None:
        super().__init__(use_native_function_calling=False)
        self.order = tuple(order) if order is not None else None

    def format(self, signature: type[dspy.Signature], demos: list[dict[str, Any]], inputs: dict[str, Any]
               ) -> list[dict[str, Any]]:
        names = list(signature.input_fields)
        if self.order is not None:
            if sorted(self.order) != sorted(names):
                raise ValueError(f"order {list(self.order)} does not name the signature's inputs {names}")
            names = list(self.order)
        parts = [f"{name.replace('_', ' ').capitalize()}: {inputs[name]}" for name in names]
        (name, field), = signature.output_fields.items()
        desc = (field.json_schema_extra or {}).get("desc")
        ask = f"{name.replace('_', ' ').capitalize()}" + (f" ({desc})" if desc else "") + ":"
        return [{"role": "system", "content": signature.instructions},
                {"role": "user", "content": "\n\n".join([*parts, ask])}]

    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        (name,) = signature.output_fields
        match = _DIGIT.match(completion or "")
        return {name: int(match.group(1)) if match else None}


def ask_digit(predictor: Any, *, logprobs: bool = True, config: Mapping[str, Any] | None = None,
              order: Sequence[str] | None = None, **inputs: Any) -> Grade:
    """One call of a one-digit signature (a relevance label, a query rating) through :class:`DigitLabelAdapter`,
    answered in one token; ``logprobs`` asks for the digit tokens' probabilities as well; ``order``: the inputs'
    order in the prompt (default: the signature's).

    Runs under the caller's ``dspy.context`` LM. The result may carry neither a digit nor probabilities: the
    caller decides whether to retry.
    """
    ask = {"max_tokens": 1, **({"logprobs": True, "top_logprobs": TOP_LOGPROBS} if logprobs else {})}
    (name,) = predictor.signature.output_fields
    with dspy.context(adapter=DigitLabelAdapter(order)), quiet_one_token_answers():
        pred = predictor(**inputs, config={**(config or {}), **ask})
    return grade_from_logprobs(getattr(pred, "logprobs", None), getattr(pred, name))


def refuses_logprobs(exc: BaseException) -> bool:
    """Whether an LM error says the backend does not give log probabilities (rather than failing otherwise)."""
    text = f"{type(exc).__name__}: {exc}".lower()
    return "logprob" in text and any(word in text for word in ("unsupported", "not support", "does not take",
                                                                "invalid", "unknown", "400"))


class LogprobFallback:
    """Whether a backend gives the digit tokens' probabilities, learnt from its answers: each call asks for them
    until the backend refuses or returns none, then only for the written digit. ``reason`` says why (None: still
    graded); it is noted once, with ``message`` (``%s`` takes the reason) on ``log``. Thread-safe."""

    def __init__(self, message: str, log: logging.Logger) -> None:
        self.message, self.log = message, log
        self.reason: str | None = None
        self._lock = threading.Lock()

    def ask(self, call: Callable[[bool], Grade]) -> Grade:
        """``call(logprobs)``'s grade, with ``logprobs=True`` while the backend is not known to refuse them."""
        if self.reason is None:
            try:
                grade = call(True)
            except LMOutputError:
                raise
            except Exception as exc:  # noqa: BLE001 - only a refusal to give log probabilities is handled here
                if not refuses_logprobs(exc):
                    raise
                self.note(f"the backend refused log probabilities ({str(exc)[:200]})")
            else:
                if grade.probs is None and grade.mass is None:
                    self.note("the backend returned no log probabilities")
                return grade
        return call(False)

    def note(self, reason: str, *, quiet: bool = False) -> None:
        """Record ``reason`` unless one is recorded already; ``quiet``: without logging it (a reason taken over
        from elsewhere, e.g. a Ray worker's, already logged there)."""
        with self._lock:
            if self.reason is None:
                self.reason = reason
                if not quiet:
                    self.log.warning(self.message, reason)


class _TruncationFilter(logging.Filter):
    """Drops DSPy's "response was truncated" warning for one-token grading answers (they end at max_tokens=1 by
    design); other threads' warnings pass."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(self.local, "depth", 0) and "truncated" in record.getMessage())


_FILTER = _TruncationFilter()
_ACTIVE = 0
_ACTIVE_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_one_token_answers() -> Iterator[None]:
    """Within this block (this thread only), DSPy's truncation warning is not logged; the filter is attached to
    DSPy's logger only while some thread is inside such a block."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        if _ACTIVE == 0:
            logging.getLogger("dspy.clients.lm").addFilter(_FILTER)
        _ACTIVE += 1
    _FILTER.local.depth = getattr(_FILTER.local, "depth", 0) + 1
    try:
        yield
    finally:
        _FILTER.local.depth -= 1
        with _ACTIVE_LOCK:
            _ACTIVE -= 1
            if _ACTIVE == 0:
                logging.getLogger("dspy.clients.lm").removeFilter(_FILTER)
