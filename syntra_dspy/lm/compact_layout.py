"""The compact prompt layout's markers (:mod:`syntra_dspy.programs.compact_format` writes it), and how a compact
prompt reads back: the answer's field names from the system message's sketch, the inputs from the user message. For
stand-in LMs that answer by field name (:mod:`syntra_dspy.lm.scripted`, :mod:`syntra_dspy.testing`)."""

from __future__ import annotations

import re

#: The line that opens the answer's sketch in the system message.
ANSWER_LEAD = "One JSON object: "
_SKETCH = re.compile(r"^" + re.escape(ANSWER_LEAD) + r"(\{.*\})$", re.MULTILINE)
# An input starts a paragraph with its label (a capitalised field name) and a colon.
_INPUT = re.compile(r"(?:\A|\n\n)([A-Z][a-z0-9]*(?: [a-z0-9]+)*): ")


def input_label(name: str) -> str:
    """How an input field is named in a compact user message: ``retry_note`` -> ``Retry note``."""
    return name.replace("_", " ").capitalize()


def sketched_fields(system: str) -> tuple[str, ...]:
    """The output field names of a compact system message's sketch (its top-level keys); () if it has none. For
    stand-in LMs that answer by field name."""
    match = _SKETCH.search(system)
    if not match:
        return ()
    names, depth, quoted, escaped, start = [], 0, False, False, None
    text = match.group(1)
    for i, char in enumerate(text):
        if quoted:
            if escaped or char == "\\":
                escaped = not escaped
                continue
            if char == '"':
                quoted = False
                if depth == 1 and start is not None and text[i + 1:i + 2] == ":":
                    names.append(text[start:i])
                start = None
        elif char == '"':
            quoted, start = True, i + 1
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return tuple(names)


def compact_inputs(user: str) -> dict[str, str]:
    """A compact user message's inputs by field name (``Retry note: ...`` -> ``retry_note``). For stand-in LMs; a
    value that itself holds a blank line followed by ``Word: `` would be split there."""
    marks = list(_INPUT.finditer(user))
    return {m.group(1).lower().replace(" ", "_"): user[m.end():marks[i + 1].start() if i + 1 < len(marks) else None]
            .strip() for i, m in enumerate(marks)}
