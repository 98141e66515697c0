"""How a structured step's JSON schema reaches a served model, per backend, with one visible fallback.

DSPy's JSONAdapter builds an OpenAI ``response_format`` (``json_schema``) only for models its catalog knows;
a ``hosted_vllm/<any name>`` route gets none, so the server's guided decoding stays off and valid JSON rests
on retries. Here every served role sends the schema in the form its server understands:

========================  ============================================================================
form                      what the request carries
========================  ============================================================================
``json_schema``           ``response_format: {type: json_schema, json_schema: {name, schema, strict}}``
                          (OpenAI and hosted APIs, SGLang, every vLLM since 2024, recent llama.cpp servers)
``structured_outputs``    ``structured_outputs: {json: schema}`` (vLLM >= 0.10.2 only)
``guided_json``           ``guided_json: schema`` (vLLM before 0.12, which removed it)
``json_object``           ``response_format: {type: json_object, schema}`` (llama.cpp server)
``none``                  no schema: the prompt asks for JSON and the answer is parsed and checked
========================  ============================================================================

Why ``json_schema`` is the default on ``hosted_vllm/`` too: vLLM's request models accept fields they do not
know and only log them (``OpenAIBaseModel``, ``extra="allow"``: "The following fields were present in the
request but ignored"), so a vLLM-specific field the running version lacks is not refused, it is silently
unconstrained: ``structured_outputs`` on vLLM < 0.10.2, ``guided_json`` on vLLM >= 0.12. OpenAI's
``response_format`` is the one form every vLLM since 2024 (vllm-project/vllm#7654) maps onto its guided
decoding (``guided_json`` then, ``structured_outputs.json`` now), and it is what vLLM's own structured-outputs
guide uses for JSON. It also goes through DSPy's native client, not LiteLLM, which costs less CPU per call.

A server that answers HTTP 400 naming the field it was sent has no such feature: the role falls back once, for
the rest of the run, to ``none``, with a WARNING and a record of why (:meth:`StructuredOutput.describe`).
A server that ignores the field cannot be detected this way: name the form in ``schema_form`` instead.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any, get_args

from syntra_dspy.redact import redact
from syntra_dspy.task import SchemaForm

logger = logging.getLogger(__name__)

SCHEMA_FORMS: tuple[str, ...] = get_args(SchemaForm)

#: The request fields each form adds; a 400 that names one of them means the server refuses the form.
_FIELDS: dict[str, tuple[str, ...]] = {
    "json_schema": ("response_format", "json_schema"),
    "structured_outputs": ("structured_outputs",),
    "guided_json": ("guided_json", "guided_decoding"),
    "json_object": ("response_format", "json_object", "schema"),
    "none": (),
}


#: Forms DSPy's native engine cannot carry: their requests go through DSPy's LiteLLM engine instead.
LITELLM_FORMS = frozenset({"structured_outputs", "guided_json", "json_object"})


def default_form(model: str) -> SchemaForm:
    """The form a model route gets unless its role names one: OpenAI's ``response_format`` on every route, since
    hosted APIs, SGLang, recent llama.cpp servers and every vLLM since 2024 honour it, while vLLM's own fields
    are silently ignored by the versions that lack them (see the module docstring). The route stays the
    argument so a server that ever needs another form gets it here."""
    return "json_schema"


def schema_of(response_format: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name, JSON schema)`` from what DSPy's adapter asked for (a dict or a pydantic model class)."""
    if isinstance(response_format, type) and hasattr(response_format, "model_json_schema"):
        try:
            from dspy.clients.legacy_requests import _strict_json_schema  # DSPy's own strict shaping
        except ImportError:  # pragma: no cover - older DSPy
            return response_format.__name__, response_format.model_json_schema()
        return response_format.__name__, _strict_json_schema(response_format.model_json_schema())
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema") or {}
        if isinstance(inner.get("schema"), dict):
            return str(inner.get("name") or "output"), inner["schema"]
    return None


def shape(body: dict[str, Any], form: str) -> dict[str, Any]:
    """``body`` (request fields, OpenAI shape) with its schema moved into ``form``; other fields untouched.

    A plain JSON-mode request (``json_object`` without a schema) passes as it is, except under ``none``."""
    if form not in SCHEMA_FORMS:
        raise ValueError(f"unknown schema form {form!r}; use one of {', '.join(SCHEMA_FORMS)}")
    if "response_format" not in body:
        return body
    out = dict(body)
    if form == "none":
        out.pop("response_format")
        return out
    found = schema_of(out["response_format"])
    if found is None:
        return out
    name, schema = found
    if form == "json_schema":
        out["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": name, "schema": schema, "strict": True}}
        return out
    out.pop("response_format")
    if form == "json_object":
        out["response_format"] = {"type": "json_object", "schema": schema}
    elif form == "structured_outputs":
        out["extra_body"] = {**(out.get("extra_body") or {}), "structured_outputs": {"json": schema}}
    else:
        out["extra_body"] = {**(out.get("extra_body") or {}), "guided_json": schema}
    return out


def refuses(exc: BaseException, form: str) -> bool:
    """True when ``exc`` is an HTTP 400 whose message names a field ``form`` added to the request."""
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if status != 400:
        return False
    text = str(exc).lower()
    return any(name in text for name in _FIELDS.get(form, ()))


class StructuredOutput:
    """The schema form one LM role sends, and whether its server refused it (shared by all copies of the LM)."""

    def __init__(self, form: SchemaForm, *, chosen_by: str = "default") -> None:
        if form not in SCHEMA_FORMS:
            raise ValueError(f"unknown schema form {form!r}; use one of {', '.join(SCHEMA_FORMS)}")
        self.form: SchemaForm = form
        self.chosen_by = chosen_by
        self._lock = threading.Lock()
        self._fallback: dict[str, str] | None = None
        self.version = 0  # grows when the state changes, so a writer knows when to record it again

    @property
    def active(self) -> str:
        """The form requests get now: ``none`` once the server refused the chosen one."""
        return "none" if self._fallback is not None else self.form

    @property
    def sends_schema(self) -> bool:
        return self.active != "none"

    def prepare(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Call options in the active form."""
        return shape(kwargs, self.active)

    def fall_back_on(self, exc: BaseException, *, model: str) -> bool:
        """Switch to ``none`` when ``exc`` says the server refuses the form; True if the call should be repeated.

        Only the first refusal warns and is recorded; calls that were already in flight simply repeat."""
        if self.form == "none" or not refuses(exc, self.form):
            return False
        with self._lock:
            if self._fallback is None:
                reason = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)[:500]
                self._fallback = {"from": self.form, "reason": reason,
                                  "at": datetime.now(UTC).isoformat(timespec="seconds")}
                self.version += 1
                logger.warning("LM %s: the server refused the %s schema form (%s); every further call sends no "
                               "schema and relies on the prompt and parsing", model, self.form, reason)
        return True

    def describe(self) -> dict[str, Any]:
        """What the store records: the chosen form, how it was chosen, the form in use and any fallback."""
        return {"form": self.form, "chosen_by": self.chosen_by, "active": self.active, "fallback": self._fallback}

    def __deepcopy__(self, memo: dict) -> StructuredOutput:
        return self  # copies of an LM share one state: a refusal seen by one holds for all

    def __getstate__(self) -> dict[str, Any]:
        return {"form": self.form, "chosen_by": self.chosen_by}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["form"], chosen_by=state["chosen_by"])
