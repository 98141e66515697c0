"""The embedded backend's engine: a GGUF model (:mod:`~syntra_dspy.models.registry`) run in-process by llama.cpp.

It is the default LM so that everything works on a fresh machine with no server and no key. The engine plugs into
DSPy 3.4's engine interface (``dspy.LM(..., engine=LlamaCppEngine(...))``), so DSPy keeps owning the cache,
retries, history, callbacks and usage tracking; before its first load in a process, :mod:`engine_check` runs a
smoke decode in a child process.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syntra_dspy.copying import CopyGuard, pop_copy_guard
from syntra_dspy.decoding_guards import AllGuards, Guard, pop_mark
from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.lm.llamacpp import engine_check, variants
from syntra_dspy.lm.llamacpp.grammar_sampling import grammar_checked
from syntra_dspy.lm.llamacpp.lookup_drafts import DEFAULT_DRAFT_TOKENS, lookup_drafts
from syntra_dspy.lm.llamacpp.prompt_states import DEFAULT_CAPACITY_BYTES, PromptStateCache, stateful
from syntra_dspy.models.install import ensure_gguf
from syntra_dspy.models.registry import DEFAULT_EMBEDDED_MODEL, EmbeddedModel, get_embedded_model
from syntra_dspy.query_form import QUESTION_GUARD_KEY, QuestionGuard

logger = logging.getLogger(__name__)

# RAM for saved prompt states (one per step; ~35 MB each for the 1.5B model): see lm.llamacpp.prompt_states
DEFAULT_PROMPT_CACHE_BYTES = DEFAULT_CAPACITY_BYTES


@dataclass
class _Loaded:
    llama: Any
    lock: threading.Lock


_LOADED: dict[tuple[str, int, int], _Loaded] = {}
_LOADED_LOCK = threading.Lock()


def _load_llama(path: Path, n_ctx: int, n_threads: int, prompt_cache_bytes: int = 0) -> _Loaded:
    """One ``llama_cpp.Llama`` per (file, context size, prompt cache) per process: loading costs seconds and memory.

    ``prompt_cache_bytes > 0`` keeps the state after each step's latest prompt (:mod:`~.prompt_states`), so a
    step's fixed instruction is restored instead of evaluated again after another step ran."""
    key = (str(path.resolve()), n_ctx, prompt_cache_bytes)
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise DependencyError(
                    "the embedded backend needs llama-cpp-python", hint='pip install "syntra-dspy[embedded]"'
                ) from None
            llama = grammar_checked(lookup_drafts(stateful(Llama)))(model_path=str(path), n_ctx=n_ctx,
                                                                    n_threads=n_threads, seed=0, verbose=False)
            if prompt_cache_bytes > 0:
                llama.cache = PromptStateCache(prompt_cache_bytes)  # what Llama.set_cache does
            loaded = _LOADED[key] = _Loaded(llama, threading.Lock())
        return loaded


def release_models() -> None:
    """Drop every loaded model (frees its memory once no engine call is running)."""
    with _LOADED_LOCK:
        for loaded in _LOADED.values():
            with loaded.lock:
                close = getattr(loaded.llama, "close", None)
                if callable(close):
                    close()
        _LOADED.clear()


_EXTENSIONS = frozenset({"min_p", "repeat_penalty", "typical_p"})
_GUARD = "_guard"  # the request's decoding guards (syntra_dspy.decoding_guards), carried from _options to complete()
#: The request setting naming the engine build that must answer, ``{"engine_build": NAME}``: it puts the build into
#: DSPy's cache key (:class:`~.embedded_lm.EmbeddedLM`); the engine checks it and drops it.
METADATA = "metadata"
ENGINE_BUILD = "engine_build"
_BUILD = "_build"  # the engine build the request names (EmbeddedLM's cache key), carried from _options to complete()


def pop_guards(schema: dict[str, Any]) -> tuple[dict[str, Any], Guard | None]:
    """(the schema without guard marks, the decoding guards its marks ask for as one, or None): the marks are the
    write step's (:mod:`syntra_dspy.decoding_guards`) and never reach the grammar."""
    schema, copy = pop_copy_guard(schema)
    schema, question = pop_mark(schema, QUESTION_GUARD_KEY)
    guards = [CopyGuard(str(copy["document"]), int(copy["max_words"]))] if copy is not None else []
    guards += [QuestionGuard()] if question is not None else []
    return schema, guards[0] if len(guards) == 1 else AllGuards(guards) if guards else None


def require_nonempty_lists(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with ``minItems: 1`` on every top-level list field that sets no minimum.

    Under a grammar an empty list is always valid and cheap, and a small model that is unsure settles for it:
    on SciFact the 1.5B model answered ``{"queries": []}`` and ``{"blueprints": []}`` on every retry. Every
    list a synthesis step asks for needs at least one item, so the grammar now requires one.
    """
    props = schema.get("properties")
    if not isinstance(props, dict):
        return schema
    fixed = {
        name: ({**prop, "minItems": 1} if isinstance(prop, dict) and prop.get("type") == "array"
               and "minItems" not in prop else prop)
        for name, prop in props.items()
    }
    return {**schema, "properties": fixed}


_UNSAFE_IN_LITERAL = re.compile(r'["\\\x00-\x1f]')


def grammar_safe_literals(schema: Any) -> Any:
    """The schema with every ``enum``/``const`` node that llama-cpp-python would write into a broken grammar
    widened to a plain string of the same type.

    Its JSON-schema converter writes ``json.dumps(value)`` into a GBNF literal escaping quotes but not backslashes,
    so a value holding a double quote gives a grammar llama.cpp cannot parse (and the process dies in native code),
    and one holding a backslash or a control character gives a grammar of invalid JSON. Non-ASCII text is safe (it
    becomes ``\\uXXXX`` escapes, which GBNF reads as the character). Widening only loosens the constraint: the
    step's answer is checked in code as without a schema.
    """
    if isinstance(schema, list):
        return [grammar_safe_literals(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: grammar_safe_literals(value) for key, value in schema.items()}
    literals = out.get("enum", []) + ([out["const"]] if "const" in out else [])
    if any(isinstance(v, str) and _UNSAFE_IN_LITERAL.search(v) for v in literals):
        out.pop("enum", None)
        out.pop("const", None)
        out["type"] = "string"
    return out


class LlamaCppEngine:
    """A DSPy 3.4 engine (``complete(Request) -> Response``) backed by llama.cpp in this process.

    ``model`` is a registry name (assembled with :func:`ensure_gguf` on first use) or a path to a GGUF
    file. Nothing is loaded until the first call. Generation is serialised per model because a
    llama.cpp context is not thread-safe; decoding is greedy (temperature 0, seed 0) unless the request
    says otherwise, so the same prompt gives the same answer. A JSON schema in the request's
    ``response_format`` becomes a llama.cpp grammar, which constrains decoding to valid output; its top-level
    lists must have at least one item (:func:`require_nonempty_lists`). ``prompt_cache_bytes`` of RAM hold the state
    after each step's latest prompt, so the next call of that step evaluates only what follows its fixed instruction
    (0 turns it off; see :mod:`~.prompt_states`). ``check_grammar_first``: a greedy completion under a grammar asks
    the grammar about the token the model chose and masks the vocabulary only when it is refused (the same answer;
    generation under a grammar ~1.7x faster: :mod:`~.grammar_sampling`); False gives
    llama-cpp-python's chain.
    """

    supports_response_schema = True
    narrows_schemas = True  # a grammar compiled here takes per-call enums (syntra_dspy.programs.narrowing)
    # Every call runs, one at a time, on one llama.cpp context: a call reuses the prompt the previous call left
    # there, so a document's calls should follow each other (syntra_dspy.production.runner.documents_in_flight).
    shares_one_context = True
    supports_function_calling = False
    supports_reasoning = False
    supported_params = frozenset(("response_format", "temperature", "max_tokens", "stop", "seed", "top_p",
                                  "top_k", "frequency_penalty", "presence_penalty", "logprobs",
                                  "top_logprobs"))  # fmt: skip

    def __init__(
        self,
        model: str | Path = DEFAULT_EMBEDDED_MODEL,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 0,
        prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE_BYTES,
        check_grammar_first: bool = True,
        draft_tokens: int = DEFAULT_DRAFT_TOKENS,
    ) -> None:
        if n_ctx < 512:
            raise ConfigError(
                f"n_ctx={n_ctx} is too small for DSPy prompts", field="n_ctx", hint="use 4096 or more"
            )
        is_path = not isinstance(model, str) or model.endswith(".gguf") or os.sep in model
        path = Path(model).expanduser() if is_path else None
        if path is None:
            get_embedded_model(str(model))  # validate the name now, not at the first call
        elif not path.is_file():
            raise ConfigError("GGUF model file not found", path=path)
        self.model = str(model)
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or engine_check.physical_cores()
        self.seed = seed
        if prompt_cache_bytes < 0:
            raise ConfigError(f"prompt_cache_bytes={prompt_cache_bytes} is negative", field="prompt_cache_bytes",
                              hint="0 turns the saved prompt states off")
        self.prompt_cache_bytes = prompt_cache_bytes
        self.check_grammar_first = check_grammar_first
        if draft_tokens < 0:
            raise ConfigError(f"draft_tokens={draft_tokens} is negative", field="draft_tokens",
                              hint="use 0 (no drafts, the default) or a few tokens, e.g. 4")
        self.draft_tokens = draft_tokens
        self._resolved: Path | None = path

    @property
    def registry_entry(self) -> EmbeddedModel | None:
        return None if self.path is not None else get_embedded_model(self.model)

    def load(self) -> _Loaded:
        """Assemble and load the model now (it is loaded on first use otherwise): fails fast at startup.

        Before the first load in a process, a smoke decode runs in a subprocess (cached per build and CPU):
        a llama.cpp build that crashes on this machine raises :class:`EngineCrashError` with the fix, instead
        of killing this process with a segfault.
        """
        if self._resolved is None:
            self._resolved = ensure_gguf(self.model)
        engine_check.ensure_engine_works(self._resolved)
        return _load_llama(self._resolved, self.n_ctx, self.n_threads, self.prompt_cache_bytes)

    def build(self) -> str:
        """The build of the engine's libraries this process loads (``portable`` or a variant's name), chosen before
        the first load (:func:`~.engine_check.ensure_engine_works`: the model file is assembled and the smoke decode
        run, or read from its cache, as a first call would). :class:`~.embedded_lm.EmbeddedLM` keys DSPy's cache on
        it."""
        if self._resolved is None:
            self._resolved = ensure_gguf(self.model)
        engine_check.ensure_engine_works(self._resolved)
        return engine_check.loaded_build() or variants.PORTABLE

    def complete(self, request):  # -> dspy.lm15.Response
        from dspy.clients.engines.base import validate_request
        from dspy.lm15 import ContextLengthError, InvalidRequestError, Message, Response, TextPart, Usage

        validate_request(request)
        messages = _chat_messages(request)
        options = self._options(request)
        guard = options.pop(_GUARD, None)
        named = options.pop(_BUILD, None)
        top = request.config.logprobs
        loaded = self.load()
        running = engine_check.loaded_build() or variants.PORTABLE  # chosen by load(): no second check of the build
        if named is not None and named != running:
            # the answer would be cached under another build's name (EmbeddedLM names the build of its own process)
            raise ConfigError(f"this request names the {named!r} build of the embedded engine, but this process "
                              f"loaded the {running!r} build", field=f"{METADATA}.{ENGINE_BUILD}",
                              hint="build the LM in the process that calls it (syntra_dspy.lm.build_lm)")
        logprobs = evaluated = None
        try:
            with loaded.lock:
                loaded.llama.check_grammar_first = self.check_grammar_first  # the model is shared by engines
                loaded.llama.guard = guard  # this request's own (syntra_dspy.decoding_guards), or None
                # a one-token answer (a grade read from its logits) has nothing to draft
                drafting = top is None and (request.config.max_tokens or 2) > 1
                loaded.llama.draft_tokens = self.draft_tokens if drafting else 0
                out = loaded.llama.create_chat_completion(messages=messages, **options)
                evaluated = getattr(loaded.llama, "prompt_tokens_evaluated", None)
                if top is not None:  # read before the next call replaces the context's logits
                    logprobs = (first_token_logprobs(loaded.llama, out["choices"][0]["message"].get("content") or "",
                                                     top),)
        except ValueError as exc:
            cls = ContextLengthError if "context window" in str(exc) else InvalidRequestError
            raise cls(f"llama.cpp refused the request: {exc}", provider="embedded") from exc
        choice, usage = out["choices"][0], out.get("usage") or {}
        finish = choice.get("finish_reason") or "stop"
        prompt = usage.get("prompt_tokens")
        reused = max(0, prompt - evaluated) if isinstance(prompt, int) and isinstance(evaluated, int) else None
        tokens = Usage(input_tokens=prompt, output_tokens=usage.get("completion_tokens"),
                       total_tokens=usage.get("total_tokens"), cache_read_tokens=reused)  # fmt: skip
        text = choice["message"].get("content") or ""
        finish = finish if finish in ("stop", "length") else "stop"
        message = Message.assistant((TextPart(text),))
        return Response(
            id=out.get("id"), model=request.model, message=message, finish_reason=finish, usage=tokens,
            logprobs=logprobs,
        )

    def _options(self, request) -> dict[str, Any]:
        from dspy.lm15 import UnsupportedFeatureError

        cfg = request.config
        extensions = dict(cfg.extensions or {})
        metadata = extensions.pop(METADATA, None)
        if metadata is not None and (not isinstance(metadata, dict) or set(metadata) != {ENGINE_BUILD}):
            raise UnsupportedFeatureError(
                f"the embedded engine takes only {{{ENGINE_BUILD!r}: NAME}} as metadata, not {metadata!r}",
                provider="embedded",
            )
        unknown = set(extensions) - _EXTENSIONS
        refused = ["tools"] * bool(request.tools) + sorted(unknown)
        if refused:
            raise UnsupportedFeatureError(
                f"the embedded llama.cpp engine does not take {refused} (extra settings "
                f"it accepts: {sorted(_EXTENSIONS)})",
                provider="embedded",
            )
        if cfg.logprobs is not None and (cfg.max_tokens != 1 or cfg.response_format is not None):
            raise UnsupportedFeatureError(
                "the embedded engine returns log probabilities for a one-token answer only: ask with "
                "max_tokens=1 and no response_format (it reads the logits of the last prompt position)",
                provider="embedded",
            )
        options: dict[str, Any] = {
            "temperature": 0.0 if cfg.temperature is None else cfg.temperature,
            "seed": self.seed if cfg.seed is None else cfg.seed,
            "max_tokens": cfg.max_tokens,
            "stop": list(cfg.stop),
        }
        for name in ("top_p", "top_k", "frequency_penalty", "presence_penalty"):
            if getattr(cfg, name) is not None:
                options[name] = getattr(cfg, name)
        options.update(extensions)
        if metadata is not None:
            options[_BUILD] = str(metadata[ENGINE_BUILD])
        if cfg.response_format is not None:
            # llama.cpp spells "this schema" as json_object + schema and compiles the schema into a grammar.
            schema = (
                cfg.response_format.get("schema")
                if cfg.response_format.get("type") == "json_schema"
                else None
            )
            if schema:
                schema, guard = pop_guards(schema)
                if guard is not None:
                    options[_GUARD] = guard
                schema = grammar_safe_literals(require_nonempty_lists(schema))
            options["response_format"] = {"type": "json_object", **({"schema": schema} if schema else {})}
        return options

    def stream(self, request):
        """One-shot stream (start, the whole text, end): enough for DSPy's streaming listeners."""
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Models are shared per process; use :func:`release_models` to free them."""

    def dump_state(self) -> dict[str, Any]:
        return {"model": self.model, "n_ctx": self.n_ctx, "seed": self.seed,
                "prompt_cache_bytes": self.prompt_cache_bytes, "check_grammar_first": self.check_grammar_first,
                "draft_tokens": self.draft_tokens}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        return cls(
            state.get("model", DEFAULT_EMBEDDED_MODEL),
            n_ctx=int(state.get("n_ctx", 8192)),
            seed=int(state.get("seed", 0)),
            prompt_cache_bytes=int(state.get("prompt_cache_bytes", DEFAULT_PROMPT_CACHE_BYTES)),
            check_grammar_first=bool(state.get("check_grammar_first", True)),
            draft_tokens=int(state.get("draft_tokens", DEFAULT_DRAFT_TOKENS)),
        )

    def __repr__(self) -> str:
        return f"LlamaCppEngine(model={self.model!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"


def first_token_logprobs(llama: Any, answer: str, top: int):  # -> dspy.lm15.TokenLogprob
    """Log probabilities of the first answer token, from the logits llama.cpp kept for the last prompt position.

    ``create_chat_completion(max_tokens=1)`` renders the chat template, reuses the cached prompt prefix, evaluates
    the rest and samples one token; the context still holds that position's logits, so reading them costs nothing
    more, and needs no ``logits_all=True`` (which would compute the vocabulary projection for every prompt token).
    The distribution is the model's, before any sampling setting: a log-softmax over the whole vocabulary.
    """
    import llama_cpp
    import numpy as np
    from dspy.lm15 import TokenLogprob, TopLogprob

    n_vocab = llama.n_vocab()
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llama._ctx.ctx, -1), shape=(n_vocab,))
    logits = logits.astype(np.float64)
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    count = max(1, min(int(top) if top else 1, n_vocab))
    best = np.argpartition(-logprobs, count - 1)[:count]
    best = best[np.argsort(-logprobs[best], kind="stable")]

    def piece(token_id: int) -> tuple[str, tuple[int, ...]]:
        raw = llama.detokenize([int(token_id)])
        return raw.decode("utf-8", errors="replace") or f"<token {int(token_id)}>", tuple(raw)

    tops = []
    for token_id in best:
        text, raw = piece(token_id)
        tops.append(TopLogprob(token=text, logprob=float(logprobs[token_id]), bytes=raw, token_id=int(token_id)))
    chosen = next((t for t in tops if t.token == answer), tops[0])
    return TokenLogprob(token=chosen.token, logprob=chosen.logprob, bytes=chosen.bytes, token_id=chosen.token_id,
                        top=tuple(tops))


def _chat_messages(request) -> list[dict[str, str]]:
    """lm15 request → OpenAI-style chat messages for llama.cpp's chat template."""
    from dspy.lm15 import UnsupportedFeatureError

    system = request.system
    if system is not None and not isinstance(system, str):
        system = "".join(getattr(p, "text", "") or "" for p in system)
    messages = [{"role": "system", "content": system}] if system else []
    for m in request.messages:
        if m.text is None or m.role not in ("user", "assistant", "system"):
            raise UnsupportedFeatureError(
                f"the embedded engine takes text chat messages only, not a {m.role} message with other parts",
                provider="embedded",
            )
        messages.append({"role": m.role, "content": m.text})
    return messages
