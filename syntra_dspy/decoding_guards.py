"""Guards the embedded engine consults while it decodes a JSON answer: each follows the answer's strings and refuses
the next piece of text when it would break one rule the write step's checks reject answers for.

A rejected query costs a rewrite or a whole new write call; a guard lets greedy decoding take the next best token
instead (:class:`~syntra_dspy.lm.llamacpp.grammar_sampling.GrammarCheckedGreedy`). Each guard measures its rule the
way the check does, so what a guard let through is what the check keeps. Guards travel as marks in an output field's
JSON schema (``x-syntra-...`` keys), which the engine takes out before the schema becomes a grammar.

Each guard lives beside the rule it keeps:

- :class:`~syntra_dspy.copying.CopyGuard` (``syntra produce --copy-guard N``): no run of more than N words of the
  document.
- :class:`~syntra_dspy.query_form.QuestionGuard` (``syntra produce --question-guard``, on the write step's
  rewrites): no question where the task's queries never are one (:func:`~syntra_dspy.query_form.shape`: a final
  question mark, or an English interrogative first word).
"""

from __future__ import annotations

import codecs
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any


class StringGuard(ABC):
    """Follows a JSON answer as it is decoded, and refuses a piece of text when a string it changes would break the
    guard's rule (:meth:`breaks`, given the string's text before and after the piece).

    Every string of the answer is watched, keys included (the field names of an answer are short words). Text comes as
    the decoder's bytes, so a character split over two tokens is read once it is whole."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._inside, self._escaped, self._value = False, False, ""

    @abstractmethod
    def breaks(self, before: str, after: str) -> bool:
        """Whether a string that read ``before`` breaks the rule now that it reads ``after``."""

    def _read(self, text: str) -> tuple[tuple[bool, bool, str], list[tuple[str, str]]]:
        """The state after ``text``, and (before, after) of every string value it touched."""
        inside, escaped, value = self._inside, self._escaped, self._value
        touched: list[tuple[str, str]] = []
        start = value if inside else None
        for char in text:
            if not inside:
                if char == '"':
                    inside, value, start = True, "", ""
                continue
            if escaped:
                value += " " if char in "nrtbfu" else char
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                touched.append((start or "", value))
                inside, start = False, None
            else:
                value += char
        if inside:
            touched.append((start or "", value))
        return (inside, escaped, value), touched

    def _decode(self, data: bytes) -> str:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        decoder.setstate(self._decoder.getstate())
        return decoder.decode(data)

    def refuses(self, data: bytes) -> bool:
        """Whether appending ``data`` would make a string of the answer break the rule."""
        _, touched = self._read(self._decode(data))
        return any(self.breaks(before, after) for before, after in touched if after != before)

    def accept(self, data: bytes) -> None:
        (self._inside, self._escaped, self._value), _ = self._read(self._decoder.decode(data))


class AllGuards:
    """Several guards as one: a piece is refused when any refuses it; every guard follows the whole answer."""

    def __init__(self, guards: Sequence[Any]) -> None:
        self.guards = tuple(guards)

    def reset(self) -> None:
        for guard in self.guards:
            guard.reset()

    def refuses(self, data: bytes) -> bool:
        return any(guard.refuses(data) for guard in self.guards)

    def accept(self, data: bytes) -> None:
        for guard in self.guards:
            guard.accept(data)


#: What a request's decoding carries: one guard, or several as one.
Guard = StringGuard | AllGuards


def pop_mark(schema: dict[str, Any], key: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the schema without the mark ``key`` in any of its top-level fields, the mark's settings or None)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema, None
    found, fields = None, {}
    for name, field in properties.items():
        if isinstance(field, dict) and key in field:
            found = field[key]
            field = {k: v for k, v in field.items() if k != key}
        fields[name] = field
    return ({**schema, "properties": fields}, found) if found is not None else (schema, None)
