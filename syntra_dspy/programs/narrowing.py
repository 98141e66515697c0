"""Output schemas narrowed to one call's valid answers, so a backend that enforces the schema cannot answer
outside them.

The plan step must copy its identifier, dimensions and options from lists given in the prompt. The signature's
schema says only "a string", so the embedded 1.5B model wrote a document term where a dimension belongs (or a list
number where the identifier belongs) in 6 of the first 11 documents of a SciFact run, each a wasted ~40 s call
followed by code-drawn blueprints. Here the schema's strings become enums of this document's lists, and each
blueprint carries one choice per dimension. The embedded engine compiles that schema into a grammar and decodes
only answers the plan step accepts.

Only the schema sent with the request changes, never the prompt text: the artifact's prompts, their hashes and
the prompt-state cache are the same, and every answer is still checked in code (a combination may still repeat).

Narrowed schemas go only to engines that declare ``narrows_schemas`` (the embedded llama.cpp engine, and the
scripted engine that stands in for it in tests). A served route keeps the signature's schema: a hosted API may
refuse what the narrowing needs (OpenAI's strict mode refuses ``anyOf`` objects that share their first key), and a
refused schema turns a served role's schemas off for the rest of the run (:mod:`syntra_dspy.lm.schema_forms`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, get_args

import dspy
import pydantic

from syntra_dspy.programs.compact_format import CompactJSONAdapter
from syntra_dspy.programs.validation import Features
from syntra_dspy.signatures.types import Identifier


def _enum(values: list[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(dict.fromkeys(values))}


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def blueprint_list_schema(features: Features, count: int) -> dict[str, Any]:
    """JSON schema of exactly ``count`` blueprints built from this document's identifiers and attribute options.

    ``choices`` holds one item per dimension (``minItems`` = ``maxItems``), each a dimension name with one of that
    dimension's options (``anyOf`` per dimension, so a dimension can still be chosen twice: code catches it).
    """
    properties: dict[str, Any] = {"identifier": _enum([i.text for i in features.identifiers])}
    choices = [_closed({"dimension": _enum([d.dimension]), "option": _enum(list(d.options))})
               for d in features.attributes]
    if choices:
        items = choices[0] if len(choices) == 1 else {"anyOf": choices}
        properties["choices"] = {"type": "array", "items": items,
                                 "minItems": len(choices), "maxItems": len(choices)}
    else:
        properties["choices"] = {"type": "array", "items": _closed({}), "maxItems": 0}
    return {"type": "array", "items": _closed(properties), "minItems": count, "maxItems": count}


def identifier_list_schema(limit: int) -> dict[str, Any]:
    """JSON schema of one to ``limit`` identifiers (the extract step's first list).

    Why: the embedded extractor lists ~9 identifiers a document (up to 25 in the SciFact store), ~310 generated
    tokens a call, while a document yields a few queries; the planner needs only as many identifiers as queries."""
    kinds = list(get_args(Identifier.model_fields["kind"].annotation))
    return {"type": "array", "items": _closed({"kind": _enum(kinds), "text": {"type": "string"}}),
            "minItems": 1, "maxItems": limit}


def _narrowed_model(model: type[pydantic.BaseModel], fields: Mapping[str, dict[str, Any]],
                    marks: Mapping[str, dict[str, Any]] | None = None) -> type[pydantic.BaseModel]:
    """A copy of DSPy's generated output model whose JSON schema has ``fields`` replaced and ``marks`` added to the
    fields they name (DSPy builds the request's schema from ``model_json_schema``, as it does for its own model)."""
    schema = dict(model.model_json_schema())
    properties = dict(schema.get("properties") or {})
    missing = sorted((set(fields) | set(marks or {})) - set(properties))
    if missing:
        raise ValueError(f"the signature has no output field(s) {missing} to narrow")
    properties.update(fields)
    for name, mark in (marks or {}).items():
        properties[name] = {**properties[name], **mark}
    schema["properties"] = properties
    narrowed = type(model.__name__, (model,), {"__module__": model.__module__})
    narrowed.model_json_schema = lambda *args, **kwargs: schema  # type: ignore[method-assign]
    return narrowed


class NarrowedJSONAdapter(dspy.JSONAdapter):
    """DSPy's JSONAdapter with some output fields' schemas replaced or marked in the request (the prompt is
    untouched); the compact format's subclass below keeps its own prompt."""

    def __init__(self, fields: Mapping[str, dict[str, Any]], marks: Mapping[str, dict[str, Any]] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fields, self.marks = dict(fields), dict(marks or {})

    def _prepare_response_format(self, lm: Any, lm_kwargs: dict[str, Any], signature: Any) -> None:
        super()._prepare_response_format(lm, lm_kwargs, signature)
        fmt = lm_kwargs.get("response_format")
        if not getattr(getattr(lm, "engine", None), "narrows_schemas", False):
            return
        if isinstance(fmt, type) and issubclass(fmt, pydantic.BaseModel):
            lm_kwargs["response_format"] = _narrowed_model(fmt, self.fields, self.marks)


class NarrowedCompactJSONAdapter(NarrowedJSONAdapter, CompactJSONAdapter):
    """:class:`NarrowedJSONAdapter` requests with the compact format's prompt."""


#: The adapters whose requests can be narrowed, and the narrowing adapter of each: the prompt stays the one in use.
_NARROWING = {dspy.JSONAdapter: NarrowedJSONAdapter, CompactJSONAdapter: NarrowedCompactJSONAdapter}


@contextmanager
def narrowed_outputs(fields: Mapping[str, dict[str, Any]],
                     marks: Mapping[str, dict[str, Any]] | None = None) -> Iterator[None]:
    """Within the block, calls made through DSPy's JSONAdapter to an engine that ``narrows_schemas`` send ``fields``'
    schemas in place of the signature's, and the signature's own schema with ``marks`` added for the fields they
    name (e.g. :func:`~syntra_dspy.copying.copy_guard_mark`); so do calls through the compact format
    (:class:`~syntra_dspy.programs.compact_format.CompactJSONAdapter`), with its prompt. Any other adapter in use is
    left as it is: it sends no schema, or one its user chose."""
    adapter = dspy.settings.adapter
    kind = _NARROWING.get(type(adapter))
    if not (fields or marks) or kind is None:
        yield
        return
    narrowing = kind(fields, marks, callbacks=adapter.callbacks,
                     use_native_function_calling=adapter.use_native_function_calling,
                     parallel_tool_calls=getattr(adapter, "parallel_tool_calls", None))
    with dspy.context(adapter=narrowing):
        yield
