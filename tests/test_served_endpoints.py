"""A role spread over several servers: balanced and failed over by LiteLLM's Router, with per-endpoint books in
the run store (three loopback servers, one of which dies mid-run)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.lm import Fault, OpenAICompatibleServer, RoutedEngine
from syntra_dspy.lm.roles import LMRoles, build_lm, parse_lm_flags
from syntra_dspy.production import RunStore, export_records, produce
from syntra_dspy.task import LMSpec, parse_task
from syntra_dspy.testing import SyntraBrain

from test_produce_support import mini_artifact, read_jsonl

REPO = Path(__file__).resolve().parent.parent
SETTINGS = {"docs": 4, "queries_per_doc": 2, "top_k": 6, "chunk_size": 4}


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


def _dies_after(n: int):
    """A server that answers its first ``n`` requests, then only 503 (its model worker crashed)."""
    return lambda number: Fault(status=503) if number >= n else None


#: Early in the run, so the balancer surely asks the dead server again however the calls are scheduled (it once
#: answered exactly 4 of its calls before the run ended on a loaded machine, and was never asked a 5th).
DIES_AFTER = 2


def test_three_endpoints_one_dies_mid_run_nothing_lost_or_duplicated(mini, minilm, tmp_path, caplog):
    art, index = mini
    brain = SyntraBrain()
    servers = [OpenAICompatibleServer(brain, latency=0.02, faults=_dies_after(DIES_AFTER) if i == 1 else None).start()
               for i in range(3)]
    try:
        with caplog.at_level(logging.WARNING):
            summary = produce(art, tmp_path / "routed.db",
                              generator=[f"hosted_vllm/fake@{s.base_url}" for s in servers],
                              concurrency=3, index_dir=index, encoder=minilm, progress=False, **SETTINGS)
        answered = [min(s.requests, DIES_AFTER) if i == 1 else s.requests for i, s in enumerate(servers)]
        requests = [s.requests for s in servers]
        urls = [s.base_url for s in servers]
    finally:
        for s in servers:
            s.stop()
    assert summary.documents == {"planned": 4, "pending": 0, "done": 4, "partial": 0, "failed": 0}
    assert all(n > 0 for n in requests)  # balanced: every server took part
    assert requests[1] > DIES_AFTER  # the dead one was asked again and failed (and rested in between)
    books = {row["endpoint"]: row for row in summary.backend["endpoints"]}
    assert set(books) == set(urls)
    assert [books[u]["calls"] for u in urls] == answered  # every answer counted against the server that gave it
    assert books[urls[1]]["failures"] == requests[1] - DIES_AFTER and not books[urls[1]]["healthy"]
    assert "503" in books[urls[1]]["last_error"]
    assert books[urls[0]]["failures"] == books[urls[2]]["failures"] == 0
    assert sum(b["calls"] for b in books.values()) == summary.calls  # each LM call answered exactly once
    assert sum(b["prompt_tokens"] for b in books.values()) == sum(u["prompt_tokens"] for u in summary.usage.values())
    assert any(f"LM endpoint {urls[1]} failed" in r.getMessage() for r in caplog.records)
    # the same run on one healthy server gives the same export, byte for byte
    with OpenAICompatibleServer(SyntraBrain()) as server:
        produce(art, tmp_path / "single.db", generator=f"hosted_vllm/fake@{server.base_url}", concurrency=3,
                index_dir=index, encoder=minilm, progress=False, **SETTINGS)
    export_records(tmp_path / "routed.db", tmp_path / "routed.jsonl")
    export_records(tmp_path / "single.db", tmp_path / "single.jsonl")
    assert (tmp_path / "routed.jsonl").read_bytes() == (tmp_path / "single.jsonl").read_bytes()
    records = read_jsonl(tmp_path / "routed.jsonl")
    assert records and len({r["query"] for r in records}) == len(records)


def test_an_answer_to_a_request_sent_before_a_failure_does_not_make_the_endpoint_healthy():
    """With several calls in flight, the answer to a request sent before an endpoint failed can arrive after the
    failure: it must not clear the failure (seen under load: the dead endpoint was reported healthy)."""
    import types

    import litellm

    engine = RoutedEngine("hosted_vllm/fake", ["http://a/v1", "http://b/v1"], labels=["a", "b"])
    answer = types.SimpleNamespace(_hidden_params={"model_id": "endpoint-1"}, usage={"prompt_tokens": 3})
    failure = litellm.ServiceUnavailableError("injected 503", llm_provider="hosted_vllm", model="fake")
    failure.failed_deployment_id = "endpoint-1"
    before = time.monotonic()
    engine._failed(failure, 0.1)
    engine._answered(answer, 0.2, before)  # sent before the failure, answered after it
    book = engine.snapshot()["b"]
    assert (book["calls"], book["failures"], book["healthy"]) == (1, 1, False)
    engine._answered(answer, 0.2, time.monotonic())  # sent after it: the endpoint answers again
    assert engine.snapshot()["b"]["healthy"] is True


def test_cli_repeated_generator_flags_spread_the_role(mini, tmp_path, capsys):
    art, index = mini
    with OpenAICompatibleServer(SyntraBrain()) as a, OpenAICompatibleServer(SyntraBrain()) as b:
        code = main(["produce", str(art), "--store", str(tmp_path / "run.db"), "--docs", "2", "--queries-per-doc", "1",
                     "--top-k", "4", "--index-dir", str(index), "--no-progress", "--json",
                     "--generator", f"hosted_vllm/fake@{a.base_url}", "--generator", f"hosted_vllm/fake@{b.base_url}"])
        urls, requests = [a.base_url, b.base_url], a.requests + b.requests
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["documents"]["done"] == 2
    assert sorted(r["endpoint"] for r in out["backend"]["endpoints"]) == sorted(urls)
    assert sum(r["calls"] for r in out["backend"]["endpoints"]) == requests
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        generator = run.meta()["generator"]
    assert generator["api_base"] == urls and generator["schema_form"]["form"] == "json_schema"
    assert main(["export", str(tmp_path / "run.db"), "--stats"]) == 0
    stats = capsys.readouterr().out
    assert "schema     session 1 generator: json_schema (default)" in stats
    assert all(f"generator {url}: " in stats for url in urls) and "healthy" in stats


def test_retry_with_backoff_when_every_endpoint_is_rate_limited():
    first_refused = lambda n: Fault(status=429) if n == 0 else None  # noqa: E731
    with OpenAICompatibleServer(lambda call: "fine", faults=first_refused) as a, \
            OpenAICompatibleServer(lambda call: "fine", faults=first_refused) as b:
        lm = build_lm(LMSpec(model="hosted_vllm/fake", api_base=[a.base_url, b.base_url], cooldown=1.0),
                      role="generator")
        started = time.monotonic()
        assert lm("hi") == ["fine"]
        waited = time.monotonic() - started
        books = lm.engine.snapshot()
        assert a.requests + b.requests == 3  # failed over at once, then one retry once an endpoint had rested
    assert waited >= 0.9
    assert sorted((s["calls"], s["failures"]) for s in books.values()) == [(0, 1), (1, 1)]


def test_task_file_api_base_list_builds_a_routed_role_without_secrets():
    task = parse_task({"name": "t", "corpus": {"path": "c.jsonl"}, "examples": [{"query": "q", "positive_id": "1"}] * 3,
                       "lms": {"generator": {"model": "hosted_vllm/m", "schema_form": "guided_json",
                                             "api_base": ["http://10.0.0.1:8000/v1?key=pw",
                                                          "http://10.0.0.2:8000/v1"]}}},
                      source="task.yaml")
    roles = LMRoles.from_spec(task.lms)
    assert isinstance(roles.generator.engine, RoutedEngine) and isinstance(roles.refiner.engine, RoutedEngine)
    info = roles.describe()["generator"]
    assert info["api_base"] == ["http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"]
    assert info["schema_form"]["form"] == "guided_json" and "pw" not in json.dumps(info)


def test_bad_endpoint_lists_are_refused_with_the_field_and_the_fix():
    with pytest.raises(ConfigError, match="different models"):
        parse_lm_flags(["hosted_vllm/a@http://h:1/v1", "hosted_vllm/b@http://h:2/v1"])
    with pytest.raises(ConfigError, match="server address in each"):
        parse_lm_flags(["hosted_vllm/a@http://h:1/v1", "hosted_vllm/a"])
    with pytest.raises(ConfigError, match="repeats an earlier address"):
        parse_lm_flags(["hosted_vllm/a@http://h:1/v1", "hosted_vllm/a@http://h:1/v1"])
    with pytest.raises(ConfigError, match="only to a role spread over several servers"):
        build_lm(LMSpec(model="hosted_vllm/m", api_base="http://h:1/v1", cooldown=5), role="generator")
    with pytest.raises(ConfigError, match=r"lms\.generator\.api_base"):
        parse_task({"name": "t", "corpus": {"path": "c"}, "examples": [{"query": "q", "positive_id": "1"}] * 3,
                    "lms": {"generator": {"model": "hosted_vllm/m", "api_base": []}}}, source="task.yaml")


def test_a_command_line_server_replaces_the_task_file_servers_and_their_settings():
    spec = LMSpec(model="hosted_vllm/m", api_base=["http://a:1/v1", "http://b:1/v1"], cooldown=3,
                  schema_form="guided_json")
    one = LMRoles.from_spec(parse_task({"name": "t", "corpus": {"path": "c"}, "examples": [
        {"query": "q", "positive_id": "1"}] * 3, "lms": {"generator": spec.model_dump()}}, source="t.yaml").lms,
        {"generator": ["hosted_vllm/m@http://c:1/v1"]})
    assert one.specs["generator"].api_base == "http://c:1/v1" and one.specs["generator"].cooldown is None
    assert one.specs["generator"].schema_form == "guided_json"  # same route: the user's form stays
    other = LMRoles.from_spec(None, {"generator": ["openai/m@http://c:1/v1"]})
    assert other.describe()["generator"]["schema_form"]["form"] == "json_schema"


def test_endpoints_that_refuse_the_schema_form_fall_back_once_and_stay_healthy():
    asked = {"type": "json_schema", "json_schema": {"name": "Out", "schema": {
        "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}
    with OpenAICompatibleServer(lambda call: '{"answer": "yes"}', refuse=("structured_outputs",)) as a, \
            OpenAICompatibleServer(lambda call: '{"answer": "yes"}', refuse=("structured_outputs",)) as b:
        lm = build_lm(LMSpec(model="hosted_vllm/fake", api_base=[a.base_url, b.base_url],
                             schema_form="structured_outputs"), role="generator")
        assert lm("one", response_format=asked) == ['{"answer": "yes"}']
        assert lm("two", response_format=asked) == ['{"answer": "yes"}']
        refused, answered = a.refused + b.refused, a.requests + b.requests
    assert (refused, answered) == (1, 2)  # refused once, then plain requests only
    assert lm.structured.describe()["active"] == "none"
    books = lm.engine.snapshot().values()
    assert sum(s["failures"] for s in books) == 1 and all(s["healthy"] for s in books)


def test_an_artifact_compiled_on_several_servers_names_them_without_credentials():
    from syntra_dspy.production.setup import resolve_generator

    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.artifacts.manifest import LMRecord

    meta = load_artifact(REPO / "artifacts" / "scifact" / "897cfc595ffc").meta
    served = LMRecord(model="hosted_vllm/m", api_base=["http://u:pw@h1:1/v1", "http://h2:1/v1"], temperature=0.0,
                      max_tokens=100)
    with pytest.raises(ConfigError, match=r"at http://h1:1/v1, http://h2:1/v1; production takes") as raised:
        resolve_generator(meta.model_copy(update={"lms": {"generator": served}}), None)
    assert "pw" not in str(raised.value)
