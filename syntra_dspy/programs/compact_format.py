"""A shorter prompt for the JSON steps (extract, plan, write, rewrite): the step's instruction, a one-line sketch of
the answer's JSON shape with the field descriptions, and the inputs as ``Name: value``.

Why: DSPy's JSONAdapter spends about half of an extract call's prompt on structure text (the field list, the input
layout written out with placeholders, each output's JSON schema with titles and ``$defs``, and a closing line that
repeats the output fields): measured with the embedded model's tokenizer on SciFact, 503 of ~1,054 tokens an extract
call, 365 of ~1,161 a write call, 178 of ~507 a rewrite (``experiments/prompt_anatomy/``). The shape the answer must
have still goes with the request as its schema, which the embedded engine and a served model with structured outputs
enforce while decoding, and answers are parsed exactly as JSONAdapter parses them.

The artifact's instructions are the same in both formats; only the text around them differs, so an artifact's
recorded prompts (and their hashes) stay those of the JSON format and a run records which format each session used
(``syntra produce --prompt-format``). Opt-in: it changes what the writer reads, so its answers may differ. The
judge keeps its prompt: the grading call has its own format, and the written judge's annotate call is made through
DSPy's JSONAdapter under either format (:func:`judged_as_recorded`). :mod:`syntra_dspy.lm.compact_layout` holds the
layout's markers and reads a compact prompt back, for stand-in LMs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dspy
import pydantic
from dspy.adapters.utils import format_field_value, serialize_for_json

from syntra_dspy.lm.compact_layout import ANSWER_LEAD, input_label


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return defs[ref.rsplit("/", 1)[-1]] if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in defs else schema


def schema_sketch(schema: dict[str, Any], defs: dict[str, Any] | None = None,
                  notes: dict[str, str] | None = None) -> str:
    """A JSON schema as a one-line example of its shape: ``{"kind": "entity" | "relationship", "text": string}``,
    ``[ITEM, ...]`` for an array. ``notes`` (if given) collects each named property's description, by name."""
    defs = {**(defs or {}), **schema.get("$defs", {})}
    schema = _resolve(schema, defs)
    if "enum" in schema:
        return " | ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(schema_sketch(s, defs, notes) for s in schema[key])
    kind = schema.get("type")
    if kind == "object":
        fields = []
        for name, sub in (schema.get("properties") or {}).items():
            sub = _resolve(sub, defs)
            if notes is not None and sub.get("description"):
                notes.setdefault(name, sub["description"])
            fields.append(f"{json.dumps(name)}: {schema_sketch(sub, defs, notes)}")
        return "{" + ", ".join(fields) + "}"
    if kind == "array":
        items = schema.get("items")
        return "[" + (schema_sketch(items, defs, notes) + ", ..." if isinstance(items, dict) else "...") + "]"
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    return str(kind or "value")


def answer_sketch(signature: type[dspy.Signature]) -> str:
    """The answer's shape, one line, then one line per described field (``name: description``)."""
    notes: dict[str, str] = {}
    parts = []
    for name, field in signature.output_fields.items():
        desc = (field.json_schema_extra or {}).get("desc")
        if desc and desc != f"${{{name}}}":
            notes[name] = desc
        shape = schema_sketch(pydantic.TypeAdapter(field.annotation).json_schema(), notes=notes)
        parts.append(f"{json.dumps(name)}: {shape}")
    lines = [ANSWER_LEAD + "{" + ", ".join(parts) + "}"]
    lines += [f"{name}: {desc}" for name, desc in notes.items()]
    return "\n".join(lines)


class CompactJSONAdapter(dspy.JSONAdapter):
    """JSONAdapter's requests and parsing with a shorter prompt: the instruction and the answer's sketch (system),
    then each non-empty input as ``Name: value`` in the signature's order (user), so the fixed text still comes
    first and a step's calls on one document share their prefix. A demo's answer is compact JSON."""

    def format_system_message(self, signature: type[dspy.Signature]) -> str:
        return f"{signature.instructions.strip()}\n\n## Answer\n{answer_sketch(signature)}"

    def format_user_message_content(self, signature: type[dspy.Signature], inputs: dict[str, Any],
                                    prefix: str = "", suffix: str = "", main_request: bool = False) -> str:
        parts = [prefix] if prefix else []
        for name, field in signature.input_fields.items():
            value = inputs.get(name)
            if value is None or (isinstance(value, str) and not value.strip()):
                continue  # an empty input (no retry note) says nothing: left out
            parts.append(f"{input_label(name)}: {format_field_value(field_info=field, value=value)}")
        if suffix:
            parts.append(suffix)
        return "\n\n".join(parts).strip()

    def format_assistant_message_content(self, signature: type[dspy.Signature], outputs: dict[str, Any],
                                         missing_field_message: str | None = None) -> str:
        answer = {name: outputs.get(name, missing_field_message) for name in signature.output_fields}
        return json.dumps(serialize_for_json(answer), ensure_ascii=False)


@contextmanager
def judged_as_recorded() -> Iterator[None]:
    """Within the block, the compact format in use gives way to DSPy's JSONAdapter: the written judge's annotate
    call keeps the prompt its agreement with people was measured on (the format is for the writing steps)."""
    adapter = dspy.settings.adapter
    if not isinstance(adapter, CompactJSONAdapter):
        yield
        return
    with dspy.context(adapter=dspy.JSONAdapter(callbacks=adapter.callbacks,
                                               use_native_function_calling=adapter.use_native_function_calling)):
        yield
