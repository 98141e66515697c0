"""The three LM roles (generator, verifier, refiner) built from a task's ``lms`` section or CLI flags."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import dspy

from syntra_dspy.errors import ConfigError
from syntra_dspy.lm.llamacpp import DEFAULT_EMBEDDED_MODEL, LlamaCppEngine
from syntra_dspy.lm.llamacpp.embedded_lm import EmbeddedLM
from syntra_dspy.lm.endpoints import DEFAULT_COOLDOWN, RoutedEngine
from syntra_dspy.lm.guarded import CallPolicy, GuardedLM
from syntra_dspy.lm.schema_forms import LITELLM_FORMS, StructuredOutput, default_form
from syntra_dspy.redact import redact, register_secret
from syntra_dspy.task import LMRolesSpec, LMSpec, LMTimeout, server_address_problem

ROLES = ("generator", "verifier", "refiner")
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 2048
EMBEDDED = "embedded"

_FLAG = re.compile(r"^(?P<model>.*?)@(?P<base>https?://\S+)$")
# What a user meant as an address but is not an http(s) one: "@ftp://...", "@file:///...", "@host:8000/v1".
_NOT_HTTP = re.compile(r"@(?:[A-Za-z][A-Za-z0-9+.\-]*://|[\w.\-]+:\d+(?:/|$))")


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise ConfigError(f"unknown LM role {role!r}", hint=f"use one of: {', '.join(ROLES)}")


def embedded_name(model: str) -> str | None:
    """``"embedded"`` → the default registry name, ``"embedded:<name>"`` → name; None for served models."""
    if model == EMBEDDED:
        return DEFAULT_EMBEDDED_MODEL
    if model.startswith(EMBEDDED + ":"):
        return model.split(":", 1)[1]
    return None


def sanitize_api_base(api_base: str | None) -> str | None:
    """The server address without user:password, query string or fragment (safe for manifests and logs)."""
    if not api_base:
        return api_base
    try:
        parts = urlsplit(api_base)
    except ValueError:  # e.g. an unclosed IPv6 bracket in an address read from an artifact
        return "<malformed address>"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _api_key(spec: LMSpec, role: str) -> str | None:
    if not spec.api_key_env:
        return None
    key = os.environ.get(spec.api_key_env)
    register_secret(key)  # never printed, logged or stored, even inside an error message
    if not key:
        raise ConfigError(
            f"the {role} LM needs an API key but the environment variable {spec.api_key_env} is not set",
            field=f"lms.{role}.api_key_env",
            hint=f"export {spec.api_key_env}=<your key>",
        )
    return key


def build_lm(spec: LMSpec, *, role: str, cache: bool | None = None) -> dspy.LM:
    """Build the ``dspy.LM`` for one role.

    ``"embedded"`` / ``"embedded:<name>"`` (a registry name or a ``.gguf`` path) runs llama.cpp in this
    process; anything else is a DSPy/LiteLLM model string (``hosted_vllm/...``, ``openai/...``,
    ``ollama_chat/...``) with an optional ``api_base`` and a key read from ``$api_key_env``.
    Temperature defaults to 0.0 and max_tokens to 2048. A served model is a :class:`GuardedLM`: every request
    is bounded by ``spec.timeout`` (connect and total) and retried ``spec.retries`` times with capped, logged
    waits (see :mod:`syntra_dspy.lm.guarded`); structured steps send their JSON schema in ``spec.schema_form``
    (default by route, :mod:`syntra_dspy.lm.schema_forms`). Several ``api_base`` addresses make one role served
    by all of them through LiteLLM's Router (:mod:`syntra_dspy.lm.endpoints`).

    Caching: DSPy leaves ``api_base`` out of its response-cache key, so two servers that serve the same
    model name would share cached answers (the second is never asked). ``cache=None`` therefore turns
    DSPy's cache off for models reached at an explicit ``api_base`` (a vLLM server has its own prefix
    cache, and production resumes from its run store, not from LM caches) and keeps it on for the
    embedded model (its name pins one GGUF sha256; :class:`EmbeddedLM` adds the engine build to the key) and for
    providers at their default address.
    Passing ``cache=True`` with an ``api_base`` is refused rather than silently sharing answers.
    """
    _check_role(role)
    temperature = DEFAULT_TEMPERATURE if spec.temperature is None else spec.temperature
    max_tokens = DEFAULT_MAX_TOKENS if spec.max_tokens is None else spec.max_tokens
    name = embedded_name(spec.model)
    if name is not None:
        for attr in ("api_base", "api_key_env", "timeout", "retries", "schema_form", "cooldown"):
            if getattr(spec, attr) is not None:
                raise ConfigError(
                    f"the embedded model runs in-process and takes no {attr}",
                    field=f"lms.{role}.{attr}",
                    hint="remove it, or name a served model",
                )
        engine = LlamaCppEngine(name)
        label = os.path.basename(name).removesuffix(".gguf")
        return EmbeddedLM(
            f"embedded/{label}",
            engine=engine,
            temperature=temperature,
            max_tokens=max_tokens,
            cache=True if cache is None else cache,
        )
    if not spec.model.strip():
        raise ConfigError(
            "an LM model string is empty",
            field=f"lms.{role}.model",
            hint="e.g. hosted_vllm/Qwen2.5-7B-Instruct or embedded",
        )
    if cache and spec.api_base:
        raise ConfigError(
            "DSPy's cache ignores api_base, so cached answers would be shared between servers",
            field=f"lms.{role}.api_base",
            hint="leave cache unset (off for served models)",
        )
    key = _api_key(spec, role)
    policy = call_policy(spec)
    structured = StructuredOutput(spec.schema_form or default_form(spec.model),
                                  chosen_by="setting" if spec.schema_form else "default")
    kwargs: dict[str, Any] = {}
    bases = spec.api_bases
    if spec.cooldown is not None and len(bases) < 2:
        raise ConfigError("cooldown applies only to a role spread over several servers", field=f"lms.{role}.cooldown",
                          hint="list several api_base addresses, or remove cooldown")
    if len(bases) > 1:
        kwargs["engine"] = RoutedEngine(spec.model, bases, labels=[sanitize_api_base(b) or b for b in bases],
                                        api_key=key, timeout=policy.total, structured=structured,
                                        cooldown=spec.cooldown or DEFAULT_COOLDOWN)
    else:
        if bases:
            kwargs["api_base"] = bases[0]
        if key is not None:
            kwargs["api_key"] = key
    use_cache = (not bases) if cache is None else cache
    return GuardedLM(spec.model, policy=policy, structured=structured, temperature=temperature,
                     max_tokens=max_tokens, cache=use_cache, **kwargs)


def call_policy(spec: LMSpec) -> CallPolicy:
    """The time limits and retries of a served role (defaults: connect 10 s, total 120 s, 3 retries)."""
    policy = CallPolicy()
    if spec.timeout is not None:
        policy = replace(policy, connect=spec.timeout.connect, total=spec.timeout.total)
    if spec.retries is not None:
        policy = replace(policy, retries=spec.retries)
    return policy


def parse_lm_flag(value: str) -> LMSpec:
    """``"model[@http(s)://api_base]"`` → LMSpec, e.g. ``hosted_vllm/Qwen@http://127.0.0.1:8000/v1``.

    Only an ``@`` followed by a URL separates the address, so model names that contain ``@``
    (``vertex_ai/claude-3@20240620``) still parse.
    """
    text = value.strip()
    match = _FLAG.match(text)
    model, api_base = (match["model"], match["base"]) if match else (text, None)
    if not model:
        raise ConfigError(f"no model in LM flag {redact(value)!r}", hint="use MODEL or MODEL@http://host:port/v1")
    # A model name may hold "@" (claude-3@20240620), but not a bare "@" or a non-http address after one: taken as
    # part of the name, it would silently go to the provider's default server (localhost:8000 for hosted_vllm).
    if match is None and (text.endswith("@") or _NOT_HTTP.search(text)):
        raise ConfigError(f"LM flag {redact(value)!r} has no http(s) server address after its '@'",
                          hint="use MODEL or MODEL@http://host:port/v1; only http and https servers are reached")
    problem = server_address_problem(api_base) if api_base is not None else None
    if problem:
        raise ConfigError(f"the server address in LM flag {redact(value)!r} {problem}",
                          hint="use MODEL@http://host:port/v1")
    return LMSpec(model=model, api_base=api_base)


def parse_lm_flags(values: str | Sequence[str]) -> LMSpec:
    """One or several ``MODEL@API_BASE`` flags for one role → LMSpec; several name the same model at several
    servers (``--generator hosted_vllm/Qwen@http://a:8000/v1 --generator hosted_vllm/Qwen@http://b:8000/v1``)."""
    flags = [values] if isinstance(values, str) else list(values)
    if not flags:
        raise ConfigError("no LM flag given", hint="use MODEL or MODEL@http://host:port/v1")
    specs = [parse_lm_flag(v) for v in flags]
    if len(specs) == 1:
        return specs[0]
    models = {s.model for s in specs}
    if len(models) > 1:
        raise ConfigError(f"repeated LM flags name different models ({', '.join(sorted(models))})",
                          hint="repeat the flag only to name more servers of one model: MODEL@URL1 MODEL@URL2")
    if any(s.api_base is None for s in specs):
        raise ConfigError("a repeated LM flag needs a server address in each", hint="use MODEL@http://host:port/v1")
    try:
        return LMSpec(model=specs[0].model, api_base=[s.api_base for s in specs])
    except ValueError as exc:
        raise ConfigError(f"bad server addresses in repeated LM flags: {redact(str(exc))}",
                          hint="list each server once, as http(s)://host:port/v1") from None


def _provider(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else model


def _override(spec: LMSpec, flag: str | Sequence[str]) -> LMSpec:
    """A CLI flag replaces model and address; sampling settings stay. The key variable stays only when the
    address stays (same api_base, or both at the same provider's default), so a key meant for one server is
    never sent to another. The schema form stays with the same provider (another route gets its own default);
    the cooldown stays only while the role still has several servers."""
    new = parse_lm_flags(flag)
    same_place = new.api_base == spec.api_base and (
        new.api_base is not None or _provider(new.model) == _provider(spec.model)
    )
    keep_key = spec.api_key_env if same_place else None
    form = spec.schema_form if _provider(new.model) == _provider(spec.model) else None
    cooldown = spec.cooldown if len(new.api_bases) > 1 else None
    return spec.model_copy(update={"model": new.model, "api_base": new.api_base, "api_key_env": keep_key,
                                   "schema_form": form, "cooldown": cooldown})


def role_specs(spec: LMRolesSpec | None = None, overrides: dict[str, str | list[str]] | None = None,
               timeout: float | None = None) -> dict[str, LMSpec]:
    """Each role's settings, nothing built: verifier and refiner default to the generator; ``overrides`` are CLI
    flags and ``timeout`` (a ``--timeout`` flag, total seconds per request) applies to every served role."""
    spec = spec or LMRolesSpec()
    overrides = dict(overrides or {})
    for role in overrides:
        _check_role(role)
    given = {"generator": spec.generator, "verifier": spec.verifier, "refiner": spec.refiner}
    specs: dict[str, LMSpec] = {}
    for role in ROLES:  # generator first: a role without its own spec follows the (overridden) generator
        base = given[role] or specs["generator"]
        flag = overrides.get(role)
        specs[role] = _override(base, flag) if flag else base
        if timeout is not None and embedded_name(specs[role].model) is None:
            specs[role] = specs[role].model_copy(update={"timeout": LMTimeout.model_validate(timeout)})
    return specs


@dataclass
class LMRoles:
    """The generator, verifier and refiner LMs, plus the specs they were built from (for manifests)."""

    generator: dspy.LM
    verifier: dspy.LM
    refiner: dspy.LM
    specs: dict[str, LMSpec] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, spec: LMRolesSpec | None = None, overrides: dict[str, str | list[str]] | None = None,
                  timeout: float | None = None) -> LMRoles:
        """Build all roles (:func:`role_specs` says from what)."""
        specs = role_specs(spec, overrides, timeout)
        lms = {role: build_lm(specs[role], role=role) for role in ROLES}
        return cls(**lms, specs=specs)

    def __repr__(self) -> str:
        return f"LMRoles({', '.join(f'{role}={self.get(role).model!r}' for role in ROLES)})"

    def get(self, role: str) -> dspy.LM:
        _check_role(role)
        return getattr(self, role)

    def prepare(self) -> None:
        """Load in-process models now, so a missing model package fails before any work starts."""
        for role in ROLES:
            prepare_lm(self.get(role))

    def describe(self) -> dict[str, dict[str, Any]]:
        """What each role runs, for manifests and logs: never a key, addresses without credentials."""
        return {role: describe_lm(self.get(role), role=role, spec=self.specs.get(role)) for role in ROLES}


def prepare_lm(lm: dspy.LM) -> None:
    """Load an in-process model now: a missing model package, or an engine that crashes on this machine (checked
    in a subprocess), fails before any work starts or any store is opened. A served role whose schema form goes
    through LiteLLM imports it now, so the seconds that takes are not charged to the first request's time limit."""
    structured = getattr(lm, "structured", None)
    if isinstance(structured, StructuredOutput) and structured.form in LITELLM_FORMS:
        import litellm  # noqa: F401
    engine = getattr(lm, "engine", None)
    if hasattr(engine, "load"):
        engine.load()


def with_engine_build(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` (:func:`describe_lm`'s) with the build of the embedded engine's libraries this process loaded, once it
    is chosen (:mod:`~syntra_dspy.lm.llamacpp.variants`): an AVX-512 build's numbers differ from the portable one's
    in the last digits, so a store says which made its records."""
    from syntra_dspy.lm.llamacpp.engine_check import loaded_build

    build = loaded_build()
    if not info.get("embedded") or build is None:
        return info
    return {**info, "embedded": {**info["embedded"], "engine_build": build}}


def describe_lm(lm: dspy.LM, *, role: str, spec: LMSpec | None = None) -> dict[str, Any]:
    """A secret-free description of one LM: model, address, sampling settings, embedded model checksum."""
    bases = spec.api_bases if spec else []
    info: dict[str, Any] = {
        "role": role,
        "model": lm.model,
        "api_base": sanitize_api_base(lm.kwargs.get("api_base") or (bases[0] if len(bases) == 1 else None)),
        "api_key_env": spec.api_key_env if spec else None,
        "temperature": lm.kwargs.get("temperature"),
        "max_tokens": lm.kwargs.get("max_tokens") or lm.kwargs.get("max_completion_tokens"),
        "cache": bool(lm.cache),
    }
    if isinstance(lm, GuardedLM):
        info["timeout"] = lm.guard.policy.describe()
        if lm.structured is not None:
            info["schema_form"] = lm.structured.describe()
    engine = lm.engine
    if isinstance(engine, RoutedEngine):
        info["api_base"] = engine.endpoints
    if isinstance(engine, LlamaCppEngine):
        entry = engine.registry_entry
        info["embedded"] = {
            "name": engine.model if entry else os.path.basename(engine.model),
            "sha256": entry.sha256 if entry else None,
            "n_ctx": engine.n_ctx,
            "title": entry.title if entry else None,
        }
    return info
