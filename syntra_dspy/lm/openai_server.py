"""A small OpenAI-compatible chat-completions server, for tests and benchmarks of the served-model path.

It answers with the same responder protocol as :class:`~syntra_dspy.lm.scripted.ScriptedLM`, so one
scripted "brain" can be reached in-process or over HTTP exactly as a vLLM or llama.cpp server would be
(``hosted_vllm/<model>``, ``openai/<model>`` with ``api_base=srv.base_url``). A fixed per-call
``latency`` makes concurrency observable: ``in_flight_peak`` tells how many requests overlapped.
``faults`` makes it misbehave on chosen requests (hang, trickle, rate-limit, refuse, answer with HTML), to
test how a client copes with a bad server. It reads a JSON schema in any form a real server takes (OpenAI's
``response_format``, llama.cpp's ``json_object`` + schema, vLLM's ``structured_outputs`` and ``guided_json``);
``refuse`` names request fields it answers with HTTP 400, as a server without that feature does; with
``prefix_cache`` it reports ``usage.prompt_tokens_details.cached_tokens`` for a system prompt it has seen, as
vLLM does with prefix caching on.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from syntra_dspy.lm.scripted import (
    Responder,
    ScriptedCall,
    TokenDistribution,
    approx_tokens,
    build_call,
    render_answer,
)


def _text(content: Any) -> str:
    """OpenAI message content is a string or a list of parts; only text parts are kept."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """Normalise OpenAI's ``json_schema``, llama.cpp's ``json_object`` + schema and vLLM's guided-decoding
    fields to lm15's shape."""
    guided = (body.get("structured_outputs") or {}).get("json") if isinstance(body.get("structured_outputs"), dict) \
        else body.get("guided_json")
    if isinstance(guided, dict):
        return {"type": "json_schema", "schema": guided}
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return {"type": "json_schema", "schema": inner.get("schema") or fmt.get("schema") or {}}
    if isinstance(fmt.get("schema"), dict):
        return {"type": "json_schema", "schema": fmt["schema"]}
    return {"type": fmt.get("type", "json_object")}


@dataclass(frozen=True)
class Fault:
    """What the server does instead of answering one chat request.

    ``delay`` seconds pass before anything is sent (a hung server); then ``status`` with ``headers`` and
    ``body`` (default: an OpenAI-style error object, or for a 2xx status the normal answer), sent one byte every
    ``trickle`` seconds when ``trickle`` > 0 (a server that never quite finishes).
    """

    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    trickle: float = 0.0


#: ``faults(n)`` for the n-th chat request (0-based): a Fault, or None to answer normally.
FaultPlan = Callable[[int], "Fault | None"]


class OpenAICompatibleServer:
    """``with OpenAICompatibleServer(responder, latency=0.0) as srv: dspy.LM(..., api_base=srv.base_url)``.

    Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 (port 0 picks a free
    port). With ``api_key`` set, requests must carry ``Authorization: Bearer <api_key>`` (others are counted in
    ``rejected``). Records each
    request body (``bodies``) and :class:`ScriptedCall` (``calls``); counts ``requests`` and the peak
    number of requests in flight. Streaming is not supported (DSPy does not stream unless asked).
    """

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        model: str = "scripted",
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        faults: FaultPlan | None = None,
        refuse: tuple[str, ...] = (),
        prefix_cache: bool = False,
    ) -> None:
        if latency < 0:
            raise ValueError("latency must be >= 0 seconds")
        self.responder = responder
        self.latency = latency
        self.faults = faults
        self.refuse = tuple(refuse)
        self.prefix_cache = prefix_cache
        self.stopping = threading.Event()
        self.model = model
        self.api_key = api_key
        self._address = (host, port)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.reset_stats()

    def reset_stats(self) -> None:
        with self._lock:
            self.requests = 0
            self.rejected = 0  # requests refused with 401 (wrong or missing key)
            self.in_flight = 0
            self.in_flight_peak = 0
            self.calls: list[ScriptedCall] = []
            self.bodies: list[dict[str, Any]] = []
            self.refused = 0  # requests answered 400 because of a field in ``refuse``
            self._seen_prefixes: set[str] = set()

    # ── lifecycle ──

    def start(self) -> OpenAICompatibleServer:
        if self._httpd is not None:
            return self
        self.stopping.clear()
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(self._address, handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            name="openai-compatible-server",
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self.stopping.set()  # ends hung and trickling fault responses
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager or call start()")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what ``api_base`` takes."""
        return f"http://{self._address[0]}:{self.port}/v1"

    # ── one request ──

    def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [
            {"role": str(m.get("role", "user")), "content": _text(m.get("content"))}
            for m in body.get("messages") or []
            if isinstance(m, dict)
        ]
        if not messages:
            raise ValueError("messages must be a non-empty list")
        fmt = _response_format(body)
        options = {
            k: body[k]
            for k in ("model", "temperature", "max_tokens", "max_completion_tokens", "seed", "stop", "logprobs",
                      "top_logprobs")
            if body.get(k) is not None
        }
        n = int(body.get("n") or 1)
        prompt_tokens = approx_tokens("".join(m["content"] for m in messages))
        choices: list[dict[str, Any]] = []
        first = -1
        for i in range(n):
            with self._lock:
                call = build_call(len(self.calls), messages, fmt, options)
                self.calls.append(call)
            first = call.index if first < 0 else first
            answer = self.responder(call)
            text = render_answer(answer, call)
            call.reply = text
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}
            if body.get("logprobs") and isinstance(answer, TokenDistribution):  # as vLLM / llama.cpp server
                choice["logprobs"] = answer.openai_logprobs(body.get("top_logprobs"))
            choices.append(choice)
        completion_tokens = sum(approx_tokens(c["message"]["content"]) for c in choices)
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if self.prefix_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": self._cached_prefix(messages)}
        return {
            "id": f"chatcmpl-scripted-{first}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": choices,
            "usage": usage,
        }

    def _cached_prefix(self, messages: list[dict[str, str]]) -> int:
        """Tokens of the leading system message when an earlier request began with the same one."""
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        with self._lock:
            seen = system in self._seen_prefixes
            self._seen_prefixes.add(system)
        return approx_tokens(system) if seen and system else 0


class _Handler(BaseHTTPRequestHandler):
    server_state: OpenAICompatibleServer
    protocol_version = "HTTP/1.1"
    # Small JSON replies: without TCP_NODELAY, Nagle plus delayed ACKs add ~40 ms to every response.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep tests and logs quiet
        pass

    def _send(self, status: int, payload: dict[str, Any] | bytes, headers: dict[str, str] | None = None,
              trickle: float = 0.0) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if trickle <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            if self.server_state.stopping.wait(trickle):
                return
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()

    def _fault(self, fault: Fault, body: dict[str, Any]) -> None:
        state = self.server_state
        if fault.delay and state.stopping.wait(fault.delay):
            return
        payload: dict[str, Any] | bytes
        if fault.body is not None:
            payload = fault.body
        elif 200 <= fault.status < 300:
            payload = state._complete(body)
        else:
            payload = {"error": {"message": f"injected fault {fault.status}", "type": "server_error",
                                 "code": fault.status}}
        self._send(fault.status, payload, fault.headers, fault.trickle)

    def _error(self, status: int, message: str, kind: str) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def _authorised(self) -> bool:
        key = self.server_state.api_key
        if key is None or self.headers.get("Authorization") == f"Bearer {key}":
            return True
        with self.server_state._lock:
            self.server_state.rejected += 1
        self._error(401, "invalid or missing API key", "authentication_error")
        return False

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authorised():
            return
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, f"no route {self.path}", "not_found_error")
        state = self.server_state
        self._send(
            200, {"object": "list", "data": [{"id": state.model, "object": "model", "owned_by": "syntra"}]}
        )

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorised():
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route {self.path}", "not_found_error")
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            return self._error(400, f"request body is not JSON: {exc}", "invalid_request_error")
        if body.get("stream"):
            return self._error(400, "streaming is not supported by this test server", "invalid_request_error")
        state = self.server_state
        refused = [name for name in state.refuse if name in body]
        if refused:
            with state._lock:
                state.refused += 1
            return self._error(400, f"unsupported request field: {refused[0]}", "invalid_request_error")
        with state._lock:
            number = state.requests
            state.requests += 1
            state.bodies.append(body)
            state.in_flight += 1
            state.in_flight_peak = max(state.in_flight_peak, state.in_flight)
        fault = state.faults(number) if state.faults is not None else None
        if fault is not None:
            try:
                return self._fault(fault, body)
            finally:
                with state._lock:
                    state.in_flight -= 1
        try:
            if state.latency:
                time.sleep(state.latency)
            payload = state._complete(body)
        except ValueError as exc:
            return self._error(400, str(exc), "invalid_request_error")
        except Exception as exc:  # the responder failed: report it like a server would
            return self._error(500, f"{type(exc).__name__}: {exc}", "server_error")
        finally:
            with state._lock:
                state.in_flight -= 1
        self._send(200, payload)
