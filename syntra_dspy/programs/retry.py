"""The repair loop every validated step runs: call, check the answer in code, call again with a note saying why.

Retries also sample (temperature 0.7, a new rollout, a frequency penalty): at temperature 0 a small model that
looped or broke a rule tends to do it again even with the note. Only the sampling settings change, never the
instructions. What still fails raises ``LMOutputError`` naming the stage, with the model's last raw answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import dspy
from dspy.utils.callback import BaseCallback

from syntra_dspy.errors import LMOutputError
from syntra_dspy.programs.validation import OutputRejected

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: How much of a rejected answer a failure keeps (enough to see a loop, an empty list or a wrong schema).
LAST_ANSWER_CHARS = 2000


class _AnswerCapture(BaseCallback):
    """Keeps the raw text of the latest LM answer in this context, so a final rejection can show it."""

    def __init__(self) -> None:
        self.text: str | None = None

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        if exception is None and isinstance(outputs, list) and outputs:
            first = outputs[0]
            self.text = first.get("text") if isinstance(first, dict) else str(first)


_CAPTURE: ContextVar[_AnswerCapture | None] = ContextVar("syntra_answer_capture", default=None)
_FENCE = re.compile(r"^```[a-zA-Z]*\n?|\n?```$")


def strip_code_fence(text: str) -> str:
    """``text`` without the Markdown code fence (```` ```json ````) a model may wrap an answer in."""
    return _FENCE.sub("", text.strip()).strip()


def latest_answer() -> str | None:
    """The raw text of the latest LM answer of the running step (code fences removed), or None."""
    capture = _CAPTURE.get()
    if capture is None or capture.text is None:
        return None
    text = capture.text.strip()
    return strip_code_fence(text) if text.startswith("```") else text


def answer_cut_off() -> bool:
    """Whether the latest LM answer of the running step stopped before closing its JSON: an answer cut at the token
    limit, which the JSON adapter's repair closes into a shorter answer that looks valid (a query cut mid-sentence
    passes every check). Answers not in JSON are not judged."""
    text = latest_answer()
    return text is not None and text.startswith(("{", "[")) and not text.endswith(("}", "]"))


def call_with_repair(stage: str, call: Callable[[str, dict], T], *, max_retries: int) -> T:
    """``call(note, config)`` until it returns; ``OutputRejected`` or a parse error earns a repair note and a retry.
    Inside ``call``, :func:`answer_cut_off` tells whether the latest answer was cut at the token limit."""
    capture = _AnswerCapture()
    token = _CAPTURE.set(capture)
    try:
        return _repairing(stage, call, max_retries, capture)
    finally:
        _CAPTURE.reset(token)


def _rollout_base(max_retries: int) -> int:
    """Where this loop's retry rollouts start. Under an LM that is itself a resample (``rollout_id`` n, a document
    retried with ``--retry-failed``), retries take rollouts of their own, ``n * (max_retries + 1) + attempt``: with
    plain ``attempt`` a retry whose first answer fails for the same reason as last time sends the earlier attempt's
    prompt and rollout again, and the cache hands back the earlier attempt's rejected answer."""
    lm = dspy.settings.get("lm")
    outer = getattr(lm, "kwargs", {}).get("rollout_id") if lm is not None else None
    return int(outer) * (max_retries + 1) if isinstance(outer, int) else 0


def _repairing(stage: str, call: Callable[[str, dict], T], max_retries: int, capture: _AnswerCapture) -> T:
    note = ""
    last: Exception | None = None
    callbacks = [*(dspy.settings.get("callbacks") or []), capture]
    base = _rollout_base(max_retries)
    for attempt in range(max_retries + 1):
        config = {} if attempt == 0 else {"temperature": 0.7, "rollout_id": base + attempt, "frequency_penalty": 0.5}
        capture.text = None
        try:
            with dspy.context(callbacks=callbacks):
                return call(note, config)
        except OutputRejected as exc:
            last, note = exc, f"Your previous answer was rejected: {exc}. Fix this and answer again."
        except (ValueError, dspy.utils.exceptions.AdapterParseError) as exc:
            last, note = exc, ("Your previous answer was not valid JSON for the required fields (keep lists "
                               "short and never repeat an item). Answer again.")
        logger.debug("stage %s rejected an answer: %s", stage, last)
    answer = capture.text[:LAST_ANSWER_CHARS] if capture.text is not None else None
    raise LMOutputError(f"no valid answer after {max_retries + 1} tries: {str(last)[:500]}", stage=stage,
                        last_answer=answer)
