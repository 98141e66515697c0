"""A scripted LM that ships in the package: answers depend on the prompt, so offline tests see real behaviour.

``DummyLM`` replays a fixed list; a synthesis program needs more than that (the answer to "write a
query" must change when the instruction changes, a verifier must see what the generator wrote). Here a
*responder* function looks at each call (system prompt, last user message, which output fields the
adapter asked for) and returns a string, a dict or a pydantic model; the engine renders dicts and
models in the format the adapter expects (JSON for JSONAdapter, ``[[ ## field ## ]]`` blocks for
ChatAdapter). The same responder can sit behind HTTP (:mod:`syntra_dspy.lm.openai_server`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from syntra_dspy.lm.compact_layout import sketched_fields


@dataclass(frozen=True)
class TokenDistribution:
    """A scripted one-token answer given as first-token probabilities, ``{token: p}``: the answer is the most
    probable token, and a call that asks for ``logprobs`` gets them (as llama.cpp or vLLM would report them)."""

    probs: dict[str, float]

    @property
    def token(self) -> str:
        return max(self.probs, key=lambda t: self.probs[t])

    def openai_logprobs(self, top: int | None) -> dict[str, Any]:
        """``choices[i].logprobs`` of an OpenAI chat completion: the chosen token and its ``top`` alternatives."""
        import math

        ranked = sorted(self.probs.items(), key=lambda kv: -kv[1])[: max(1, top or 1)]
        entry = lambda t, p: {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}  # noqa: E731
        return {"content": [{**entry(self.token, self.probs[self.token]),
                             "top_logprobs": [entry(t, p) for t, p in ranked if p > 0]}]}


Answer = str | dict | BaseModel | TokenDistribution
Responder = Callable[["ScriptedCall"], Answer]
Matcher = str | re.Pattern[str] | Callable[["ScriptedCall"], bool]

_OUTPUT_SECTION = re.compile(r"Your output fields are:\n(.*?)(?:\n\n|\Z)", re.DOTALL)
_NUMBERED_FIELD = re.compile(r"^\d+\. `([^`]+)`", re.MULTILINE)
_CHAT_MARKER = re.compile(r"`\[\[ ## (\w+) ## \]\]`")
_JSON_ORDER = re.compile(r"Respond with a JSON object in the following order of fields: (.*)")
_BACKTICKED = re.compile(r"`(\w+)`")


@dataclass
class ScriptedCall:
    """What a responder sees: one LM call, already split into the parts a rule usually looks at."""

    index: int
    system: str
    user: str
    messages: tuple[dict[str, str], ...]
    output_fields: tuple[str, ...]
    signature_name: str | None = None
    response_format: dict[str, Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    reply: str | None = None

    @property
    def text(self) -> str:
        """System prompt and last user message together: what rules match against."""
        return f"{self.system}\n\n{self.user}"

    @property
    def chat_format(self) -> bool:
        """True when the prompt asks for ChatAdapter's ``[[ ## field ## ]]`` blocks rather than JSON."""
        if self.response_format is not None or "Outputs will be a JSON object" in self.system:
            return False
        return "[[ ## completed ## ]]" in self.text


def parse_output_fields(
    system: str, user: str, response_format: dict[str, Any] | None = None
) -> tuple[str, ...]:
    """Names of the output fields a DSPy adapter asked for: from the schema, else from the prompt text."""
    if response_format and isinstance(response_format.get("schema"), dict):
        props = response_format["schema"].get("properties")
        if isinstance(props, dict) and props:
            return tuple(props)
    sketched = sketched_fields(system)  # the compact format (syntra_dspy.lm.compact_layout)
    if sketched:
        return sketched
    section = _OUTPUT_SECTION.search(system)
    if section:
        names = _NUMBERED_FIELD.findall(section.group(1))
        if names:
            return tuple(names)
    order = _JSON_ORDER.search(user)
    if order:
        return tuple(_BACKTICKED.findall(order.group(1)))
    return tuple(name for name in dict.fromkeys(_CHAT_MARKER.findall(user)) if name != "completed")


def render_answer(answer: Answer, call: ScriptedCall) -> str:
    """Turn a responder's answer into the completion text the adapter will parse.

    A string is sent as is, except that a bare string for a single-output signature is wrapped as
    that field (so ``lambda call: "yes"`` just works). Dicts and models become JSON, or
    ``[[ ## field ## ]]`` blocks when the prompt uses ChatAdapter's format.
    """
    if isinstance(answer, TokenDistribution):
        return answer.token
    if isinstance(answer, str):
        looks_formatted = "[[ ##" in answer or answer.lstrip().startswith(("{", "```"))
        if len(call.output_fields) != 1 or looks_formatted:
            return answer
        answer = {call.output_fields[0]: answer}
    if isinstance(answer, BaseModel):
        answer = answer.model_dump(mode="json")
    if not isinstance(answer, dict):
        raise TypeError(
            f"a scripted responder must return str, dict or a pydantic model, not {type(answer).__name__}"
        )
    data = to_jsonable_python(answer)
    if not call.chat_format:
        return json.dumps(data, ensure_ascii=False)
    blocks = [
        f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
        for k, v in data.items()
    ]
    return "\n\n".join([*blocks, "[[ ## completed ## ]]"])


def approx_tokens(text: str) -> int:
    """A rough token count (4 characters a token, at least 1) so usage metering has numbers to add."""
    return max(1, len(text) // 4)


def build_call(
    index: int,
    messages: Sequence[dict[str, str]],
    response_format: dict[str, Any] | None,
    options: dict[str, Any] | None = None,
    signature_name: str | None = None,
) -> ScriptedCall:
    """Split chat messages into a :class:`ScriptedCall` (shared with the HTTP server)."""
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system")
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    return ScriptedCall(
        index=index,
        system=system,
        user=user,
        messages=tuple(messages),
        output_fields=parse_output_fields(system, user, response_format),
        signature_name=signature_name,
        response_format=response_format,
        options=dict(options or {}),
    )


def _caller_signature_name() -> str | None:
    """The class name of the calling predictor's signature (DSPy keeps the module stack in settings)."""
    for module in reversed(dspy.settings.get("caller_modules") or []):
        signature = getattr(module, "signature", None)
        if isinstance(signature, type):
            return signature.__name__
    return None


class ScriptedEngine:
    """A DSPy 3.4 engine that asks a responder for each answer and records every call (thread-safe)."""

    supports_function_calling = False
    supports_reasoning = False

    def __init__(self, responder: Responder, *, response_schema: bool = True,
                 shares_one_context: bool = False) -> None:
        if not callable(responder):
            raise TypeError("responder must be a callable taking a ScriptedCall")
        self.responder = responder
        self.supports_response_schema = response_schema
        self.narrows_schemas = response_schema  # like the embedded engine: takes per-call narrowed schemas
        self.shares_one_context = shares_one_context  # True: scheduled like the embedded engine
        self.supported_params = frozenset({"response_format", "temperature", "max_tokens", "stop", "seed",
                                           "frequency_penalty", "logprobs", "top_logprobs"})
        self._lock = threading.Lock()
        self._calls: list[ScriptedCall] = []

    @property
    def calls(self) -> list[ScriptedCall]:
        with self._lock:
            return list(self._calls)

    def reset(self) -> None:
        with self._lock:
            self._calls.clear()

    def complete(self, request):  # -> dspy.lm15.Response
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import Message, Response, TextPart, Usage

        validate_request(request)
        system = (
            request.system
            if isinstance(request.system, str)
            else "".join(getattr(p, "text", "") or "" for p in (request.system or ()))
        )
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": m.role, "content": m.text or ""} for m in request.messages
        ]
        cfg = request.config
        options = {
            k: v
            for k, v in (
                ("temperature", cfg.temperature),
                ("max_tokens", cfg.max_tokens),
                ("seed", cfg.seed),
                ("stop", list(cfg.stop) or None),
                ("frequency_penalty", cfg.frequency_penalty),
                ("logprobs", cfg.logprobs),
            )
            if v is not None
        }
        with self._lock:
            call = build_call(
                len(self._calls), messages, cfg.response_format, options, _caller_signature_name()
            )
            self._calls.append(call)
        answer = self.responder(call)
        text = render_answer(answer, call)
        call.reply = text
        logprobs = None
        if cfg.logprobs is not None and isinstance(answer, TokenDistribution):
            from dspy.lm15 import TokenLogprob, TopLogprob

            (first,) = answer.openai_logprobs(cfg.logprobs)["content"]
            logprobs = (TokenLogprob(first["token"], first["logprob"], top=tuple(
                TopLogprob(t["token"], t["logprob"]) for t in first["top_logprobs"])),)
        prompt_tokens = approx_tokens("".join(m["content"] for m in messages))
        completion_tokens = approx_tokens(text)
        return Response(
            id=f"scripted-{call.index}",
            model=request.model,
            message=Message.assistant((TextPart(text),)),
            finish_reason="stop",
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
            logprobs=logprobs,
        )

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


class ScriptedLM(dspy.LM):
    """A ``dspy.LM`` whose answers come from ``responder(call)``; never cached, so tests see every call.

    ``response_schema=True`` makes it declare structured-output support like the embedded engine (JSONAdapter
    then sends the output schema); ``False`` makes it behave like a plain OpenAI-compatible route.
    ``shares_one_context=True`` makes production schedule it like the embedded engine (one document per call slot).
    """

    def __init__(
        self,
        responder: Responder,
        *,
        name: str = "scripted",
        response_schema: bool = True,
        shares_one_context: bool = False,
        num_retries: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            name,
            engine=ScriptedEngine(responder, response_schema=response_schema, shares_one_context=shares_one_context),
            cache=False,
            num_retries=num_retries,
            **kwargs,
        )

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call so far (shared by copies of this LM), in arrival order."""
        return self.engine.calls


class NoScriptedAnswerError(LookupError):
    """No rule matched a call and the responder has no default."""


_MISSING: Any = object()


class RuleResponder:
    """First matching rule wins: ``[(regex | compiled pattern | predicate(call), answer | fn(call)), ...]``.

    Regexes are searched (DOTALL) in the system prompt plus the last user message. Without a
    ``default`` an unmatched call raises :class:`NoScriptedAnswerError` showing the start of the prompt.
    """

    def __init__(self, rules: Sequence[tuple[Matcher, Any]], *, default: Any = _MISSING) -> None:
        self.rules: list[tuple[Callable[[ScriptedCall], bool], Any]] = []
        for matcher, answer in rules:
            if isinstance(matcher, str):
                matcher = re.compile(matcher, re.DOTALL)
            if isinstance(matcher, re.Pattern):
                self.rules.append((lambda call, p=matcher: p.search(call.text) is not None, answer))
            elif callable(matcher):
                self.rules.append((matcher, answer))
            else:
                raise TypeError(
                    f"a rule matcher is a regex string, a compiled pattern or a predicate, "
                    f"not {type(matcher).__name__}"
                )
        self.default = default

    @staticmethod
    def _resolve(answer: Any, call: ScriptedCall) -> Answer:
        if callable(answer) and not isinstance(answer, (str, dict, BaseModel, type)):
            return answer(call)
        return answer

    def __call__(self, call: ScriptedCall) -> Answer:
        for matches, answer in self.rules:
            if matches(call):
                return self._resolve(answer, call)
        if self.default is _MISSING:
            head = call.user[:200].replace("\n", " ")
            raise NoScriptedAnswerError(
                f"no scripted rule matched call #{call.index} "
                f"(outputs {list(call.output_fields)}; user message starts: {head!r})"
            )
        return self._resolve(self.default, call)
