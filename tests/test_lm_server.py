from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import dspy
import pytest

from syntra_dspy.lm import OpenAICompatibleServer, RuleResponder, UsageMeter, build_lm
from syntra_dspy.lm.openai_server import _response_format
from syntra_dspy.lm.scripted import approx_tokens
from syntra_dspy.task import LMSpec


def _answer_with_question(call):
    question = call.user.split("[[ ## question ## ]]\n")[1].split("\n")[0]
    return {"answer": f"re: {question}"}


def _ask(lm, question, adapter=None):
    with dspy.context(lm=lm, adapter=adapter):
        return dspy.Predict("question -> answer")(question=question)


def test_models_endpoint_and_auth():
    with OpenAICompatibleServer(_answer_with_question, model="qwen", api_key="k") as srv:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
        request = urllib.request.Request(srv.base_url + "/models", headers={"Authorization": "Bearer k"})
        with urllib.request.urlopen(request) as resp:
            assert json.load(resp)["data"][0]["id"] == "qwen"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(srv.base_url + "/models")
        assert info.value.code == 401


@pytest.mark.parametrize(
    ("model", "token_param"), [("hosted_vllm/qwen", "max_tokens"), ("openai/qwen", "max_completion_tokens")]
)
def test_dspy_routes_reach_the_server_and_usage_is_metered(model, token_param, monkeypatch):
    monkeypatch.setenv("SYNTRA_TEST_SERVER_KEY", "k-123")
    meter = UsageMeter()
    with OpenAICompatibleServer(_answer_with_question, api_key="k-123") as srv:
        lm = build_lm(
            LMSpec(model=model, api_base=srv.base_url, api_key_env="SYNTRA_TEST_SERVER_KEY"), role="generator"
        )
        with meter.stage("served"):
            assert _ask(lm, "one").answer == "re: one"
            assert _ask(lm, "two", dspy.JSONAdapter()).answer == "re: two"
    assert srv.requests == 2
    body = srv.bodies[0]
    assert body["model"] == "qwen" and body[token_param] == 2048 and body["temperature"] == 0.0
    # the JSON step carries its schema as OpenAI's response_format on both routes (every vLLM since 2024 takes it)
    sent = srv.bodies[1]["response_format"]["json_schema"]["schema"]
    assert set(sent["properties"]) == {"answer"}
    stats = meter.snapshot()["served"]
    expected_prompt = sum(approx_tokens("".join(m["content"] for m in b["messages"])) for b in srv.bodies)
    assert (stats["calls"], stats["prompt_tokens"]) == (2, expected_prompt)
    assert stats["completion_tokens"] == sum(approx_tokens(c.reply) for c in srv.calls)


def test_two_servers_with_one_model_name_do_not_share_answers():
    with (
        OpenAICompatibleServer(lambda c: {"answer": "from A"}) as a,
        OpenAICompatibleServer(lambda c: {"answer": "from B"}) as b,
    ):
        lm_a = build_lm(LMSpec(model="hosted_vllm/same", api_base=a.base_url), role="generator")
        lm_b = build_lm(LMSpec(model="hosted_vllm/same", api_base=b.base_url), role="verifier")
        assert _ask(lm_a, "q").answer == "from A"
        assert _ask(lm_b, "q").answer == "from B"
        assert (a.requests, b.requests) == (1, 1)


def test_latency_makes_concurrency_observable():
    latency, n = 0.3, 4
    with OpenAICompatibleServer(_answer_with_question, latency=latency) as srv:
        lm = build_lm(LMSpec(model="hosted_vllm/qwen", api_base=srv.base_url), role="generator")
        program = dspy.Predict("question -> answer")
        start = time.perf_counter()
        with dspy.context(lm=lm):
            results = dspy.Parallel(num_threads=n)([(program, {"question": f"q{i}"}) for i in range(n)])
        elapsed = time.perf_counter() - start
    assert [r.answer for r in results] == [f"re: q{i}" for i in range(n)]
    assert srv.in_flight_peak >= 3 and srv.in_flight == 0
    assert elapsed < latency * n * 0.75  # overlapped, not one after another


def test_responder_failure_is_a_server_error_and_metered():
    meter = UsageMeter()
    with OpenAICompatibleServer(RuleResponder([])) as srv:
        lm = build_lm(LMSpec(model="hosted_vllm/qwen", api_base=srv.base_url), role="generator").copy(
            num_retries=0
        )
        with meter.stage("broken"), pytest.raises(Exception, match="no scripted rule matched"):
            _ask(lm, "q")
    assert meter.snapshot()["broken"]["failures"] == 1


def test_response_format_shapes_are_normalised():
    schema = {"properties": {"a": {"type": "string"}}}
    openai_style = {
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    }
    llama_style = {"response_format": {"type": "json_object", "schema": schema}}
    assert (
        _response_format(openai_style)
        == _response_format(llama_style)
        == {"type": "json_schema", "schema": schema}
    )
    assert _response_format({"response_format": {"type": "json_object"}}) == {"type": "json_object"}
    assert _response_format({}) is None


def test_a_served_lm_reads_dspy_model_catalog_once_per_model_and_address(monkeypatch):
    """DSPy scans its whole model catalog for a model it does not know on every structured call; the served LM keeps
    the answer, and a copy at another address asks again."""
    import dspy.clients.capabilities as capabilities

    asked = []
    real = capabilities.capabilities
    monkeypatch.setattr(capabilities, "capabilities", lambda lm: asked.append(lm.kwargs.get("api_base")) or real(lm))
    lm = build_lm(LMSpec(model="hosted_vllm/qwen", api_base="http://127.0.0.1:9/v1"), role="generator")
    assert "response_format" in lm.supported_params and "response_format" in lm.supported_params
    assert asked == ["http://127.0.0.1:9/v1"]
    moved = lm.copy(api_base="http://127.0.0.1:10/v1")
    assert moved.supported_params == lm.supported_params and lm.copy(temperature=0.5).supported_params
    assert asked == ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
