from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.lm import (
    EMBEDDED_MODELS,
    LlamaCppEngine,
    LMRoles,
    build_lm,
    parse_lm_flag,
    sanitize_api_base,
)
from syntra_dspy.task import LMRolesSpec, LMSpec


def test_embedded_default_builds_without_loading_anything():
    lm = build_lm(LMSpec(), role="generator")
    assert isinstance(lm, dspy.LM) and isinstance(lm.engine, LlamaCppEngine)
    assert "metadata" not in lm.kwargs  # the engine build joins the cache key at the first call, not here
    assert lm.model == "embedded/qwen2.5-coder-1.5b"
    assert (lm.kwargs["temperature"], lm.kwargs["max_tokens"], lm.cache) == (0.0, 2048, True)
    small = build_lm(
        LMSpec(model="embedded:qwen2.5-coder-0.5b", temperature=0.3, max_tokens=64), role="verifier"
    )
    assert small.model == "embedded/qwen2.5-coder-0.5b"
    assert (small.kwargs["temperature"], small.kwargs["max_tokens"]) == (0.3, 64)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (LMSpec(model="embedded:nope"), "unknown embedded model 'nope'"),
        (LMSpec(model="embedded", api_base="http://h/v1"), "takes no api_base"),
        (LMSpec(model=" "), "model string is empty"),
        (LMSpec(model="openai/x", api_key_env="SYNTRA_TEST_UNSET_KEY"), "SYNTRA_TEST_UNSET_KEY is not set"),
    ],
)
def test_bad_specs_say_what_to_fix(spec, message, monkeypatch):
    monkeypatch.delenv("SYNTRA_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError, match=message):
        build_lm(spec, role="generator")


def test_unknown_role_is_refused():
    with pytest.raises(ConfigError, match="unknown LM role 'judge'"):
        build_lm(LMSpec(), role="judge")


def test_served_models_skip_dspy_cache_at_explicit_address(monkeypatch):
    monkeypatch.setenv("SYNTRA_TEST_KEY", "sk-test-123")
    served = build_lm(LMSpec(model="hosted_vllm/Qwen", api_base="http://127.0.0.1:8000/v1"), role="generator")
    assert served.cache is False and served.kwargs["api_base"] == "http://127.0.0.1:8000/v1"
    hosted = build_lm(LMSpec(model="openai/gpt-4o-mini", api_key_env="SYNTRA_TEST_KEY"), role="refiner")
    assert hosted.cache is True and hosted.kwargs["api_key"] == "sk-test-123"
    with pytest.raises(ConfigError, match="ignores api_base"):
        build_lm(LMSpec(model="hosted_vllm/Qwen", api_base="http://h:1/v1"), role="generator", cache=True)


@pytest.mark.parametrize(
    ("flag", "model", "api_base"),
    [
        ("hosted_vllm/Qwen@http://127.0.0.1:8000/v1", "hosted_vllm/Qwen", "http://127.0.0.1:8000/v1"),
        ("openai/gpt-4o-mini", "openai/gpt-4o-mini", None),
        ("embedded:qwen2.5-coder-0.5b", "embedded:qwen2.5-coder-0.5b", None),
        ("vertex_ai/claude-3@20240620", "vertex_ai/claude-3@20240620", None),
        (
            "vertex_ai/claude-3@20240620@https://h.example/v1",
            "vertex_ai/claude-3@20240620",
            "https://h.example/v1",
        ),
    ],
)
def test_parse_lm_flag(flag, model, api_base):
    assert parse_lm_flag(flag) == LMSpec(model=model, api_base=api_base)


def test_parse_lm_flag_rejects_empty_model():
    with pytest.raises(ConfigError, match="no model"):
        parse_lm_flag("@http://127.0.0.1:8000/v1")


def test_sanitize_api_base_strips_credentials():
    assert (
        sanitize_api_base("https://user:pw@Host.example:8443/v1?key=abc#frag")
        == "https://host.example:8443/v1"
    )
    assert sanitize_api_base("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert sanitize_api_base(None) is None


def test_roles_default_to_the_generator_and_overrides_apply(monkeypatch):
    monkeypatch.setenv("SYNTRA_TEST_KEY", "sk-live-secret")
    spec = LMRolesSpec(
        generator=LMSpec(
            model="hosted_vllm/Qwen",
            api_base="http://10.0.0.1:8000/v1",
            api_key_env="SYNTRA_TEST_KEY",
            temperature=0.2,
        )
    )
    roles = LMRoles.from_spec(spec, {"refiner": "embedded:qwen2.5-coder-0.5b"})
    assert roles.verifier.model == roles.generator.model == "hosted_vllm/Qwen"
    assert roles.verifier.kwargs["api_key"] == "sk-live-secret"
    assert roles.refiner.model == "embedded/qwen2.5-coder-0.5b"
    assert roles.refiner.kwargs["temperature"] == 0.2  # sampling settings survive a model override
    assert repr(roles).startswith("LMRoles(generator='hosted_vllm/Qwen'")
    same_server = LMRoles.from_spec(spec, {"verifier": "hosted_vllm/Other@http://10.0.0.1:8000/v1"})
    assert same_server.verifier.kwargs["api_key"] == "sk-live-secret"
    moved = LMRoles.from_spec(spec, {"verifier": "hosted_vllm/Qwen@http://10.0.0.2:8000/v1"})
    assert "api_key" not in moved.verifier.kwargs  # a key is never sent to another address
    with pytest.raises(ConfigError, match="unknown LM role"):
        LMRoles.from_spec(spec, {"judge": "openai/x"})


def test_roles_without_their_own_spec_follow_an_overridden_generator():
    spec = LMRolesSpec(refiner=LMSpec(model="openai/gpt-4o-mini"))
    roles = LMRoles.from_spec(spec, {"generator": "hosted_vllm/Qwen@http://127.0.0.1:8000/v1"})
    assert roles.verifier.model == roles.generator.model == "hosted_vllm/Qwen"
    assert roles.verifier.kwargs["api_base"] == "http://127.0.0.1:8000/v1"
    assert roles.refiner.model == "openai/gpt-4o-mini"


def test_describe_never_leaks_a_key(monkeypatch):
    monkeypatch.setenv("SYNTRA_TEST_KEY", "sk-live-secret")
    spec = LMRolesSpec(
        generator=LMSpec(
            model="openai/gpt-4o-mini",
            api_base="https://api.example/v1?token=t0k",  # user:password@ is refused (tests/reliability)
            api_key_env="SYNTRA_TEST_KEY",
        ),
        verifier=LMSpec(model="embedded:qwen2.5-coder-0.5b"),
    )
    described = LMRoles.from_spec(spec).describe()
    text = json.dumps(described)
    for secret in ("sk-live-secret", "hunter2", "bob", "t0k"):
        assert secret not in text
    assert described["generator"] == {
        "role": "generator",
        "model": "openai/gpt-4o-mini",
        "api_base": "https://api.example/v1",
        "api_key_env": "SYNTRA_TEST_KEY",
        "temperature": 0.0,
        "max_tokens": 2048,
        "cache": False,
        "timeout": {"connect_s": 10.0, "total_s": 120.0, "retries": 3, "max_wait_s": 60.0},
        "schema_form": {"form": "json_schema", "chosen_by": "default", "active": "json_schema", "fallback": None},
    }
    embedded = described["verifier"]["embedded"]
    assert embedded["sha256"] == EMBEDDED_MODELS["qwen2.5-coder-0.5b"].sha256
    assert described["refiner"]["model"] == "openai/gpt-4o-mini"


def test_default_roles_are_all_embedded():
    described = LMRoles.from_spec(None).describe()
    assert {d["model"] for d in described.values()} == {"embedded/qwen2.5-coder-1.5b"}
