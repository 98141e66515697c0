"""JSON Lines input: one object per line, with errors that name the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from syntra_dspy.errors import InputError


def json_objects(lines: Iterable[str], *, source: str | Path, hint: str | None = None, start: int = 1
                 ) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line; bad JSON or a non-object is an InputError.

    ``start`` is the number of the first line given (for callers that read and number lines themselves).
    """
    for lineno, line in enumerate(lines, start=start):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})", path=source, line=lineno,
                             hint=hint or "each line must be one JSON object") from None
        if not isinstance(obj, dict):
            raise InputError(f"expected a JSON object, got {type(obj).__name__}", path=source, line=lineno,
                             hint=hint or "each line must be one JSON object")
        yield lineno, obj
