"""Served models get each structured step's JSON schema in their server's form, fall back once when refused,
and report how much of each stage's prompt the server's prefix cache served (requests captured on loopback)."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.lm.schema_forms import shape
from syntra_dspy.production import RunStore, export_records, produce
from syntra_dspy.production.export import compute_stats, format_stats
from syntra_dspy.task import LMSpec
from syntra_dspy.testing import SyntraBrain

from test_produce_support import mini_artifact

SETTINGS = {"docs": 2, "queries_per_doc": 1, "top_k": 4, "chunk_size": 4}
JSON_STEP = "Outputs will be a JSON object"


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


def _structured(bodies):
    """The requests of JSON steps (the one-digit grading call asks for no JSON and carries no schema)."""
    found = [b for b in bodies if JSON_STEP in b["messages"][0]["content"]]
    assert found, "no structured step reached the server"
    return found


def _properties(schema):
    return set(schema["properties"])


def _produce(mini, minilm, store, generator, **kw):
    art, index = mini
    return produce(art, store, generator=generator, index_dir=index, encoder=minilm, progress=False,
                   **{**SETTINGS, **kw})


@pytest.mark.parametrize("model,form,where", [
    ("hosted_vllm/fake", None, "json_schema"),   # vLLM too: response_format is the form every vLLM since 2024 takes
    ("openai/fake", None, "json_schema"),        # any other server: OpenAI's response_format
    ("hosted_vllm/fake", "structured_outputs", "structured_outputs"),  # vLLM >= 0.10.2's own field, when named
    ("hosted_vllm/fake", "guided_json", "guided_json"),
    ("openai/fake", "json_object", "json_object"),     # llama.cpp server
])
def test_every_structured_step_sends_its_schema_in_the_backend_form(mini, minilm, tmp_path, monkeypatch, model, form,
                                                                    where):
    monkeypatch.setenv("FAKE_SERVER_KEY", "sk-fake")  # the openai/ route wants a key, any key
    with OpenAICompatibleServer(SyntraBrain()) as server:
        spec = LMSpec(model=model, api_base=server.base_url, schema_form=form, api_key_env="FAKE_SERVER_KEY")
        summary = _produce(mini, minilm, tmp_path / "run.db", spec)
        bodies = list(server.bodies)
    assert summary.documents["done"] == 2
    for body in _structured(bodies):
        if where == "structured_outputs":
            schema = body["structured_outputs"]["json"]
            assert "response_format" not in body and "guided_json" not in body
        elif where == "guided_json":
            schema = body["guided_json"]
            assert "response_format" not in body and "structured_outputs" not in body
        elif where == "json_object":
            assert body["response_format"]["type"] == "json_object"
            schema = body["response_format"]["schema"]
        else:
            assert body["response_format"]["type"] == "json_schema"
            schema = body["response_format"]["json_schema"]["schema"]
        assert schema["type"] == "object" and _properties(schema)  # the step's own output fields
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        rows = run.backend()["schema_forms"]
    assert [(r["role"], r["form"], r["chosen_by"], r["active"], r["fallback_reason"]) for r in rows] == \
        [("generator", where, "setting" if form else "default", where, None)]


def test_a_refused_form_falls_back_once_visibly_and_the_run_finishes(mini, minilm, tmp_path, caplog):
    spec = LMSpec(model="hosted_vllm/fake", schema_form="structured_outputs")
    with OpenAICompatibleServer(SyntraBrain(), refuse=("structured_outputs",)) as server:
        with caplog.at_level(logging.WARNING):
            summary = _produce(mini, minilm, tmp_path / "run.db", spec.model_copy(update={"api_base": server.base_url}),
                               concurrency=1)
        bodies, refused = list(server.bodies), server.refused
    assert summary.documents == {"planned": 2, "pending": 0, "done": 2, "partial": 0, "failed": 0}
    assert refused == 1  # one refusal, then never asked again
    assert not any("structured_outputs" in b or "response_format" in b for b in bodies)
    warnings = [r for r in caplog.records if "refused the structured_outputs schema form" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        (row,) = run.backend()["schema_forms"]
        failed_calls = sum(u["failures"] for u in run.usage().values())
    assert (row["form"], row["active"]) == ("structured_outputs", "none")
    assert "structured_outputs" in row["fallback_reason"] and row["fallback_at"]
    assert failed_calls == 1  # the refused request is counted, not hidden
    # the plain prompt-and-parse path gives the same records as a server that takes the schema
    with OpenAICompatibleServer(SyntraBrain()) as server:
        _produce(mini, minilm, tmp_path / "guided.db", f"hosted_vllm/fake@{server.base_url}", concurrency=1)
    export_records(tmp_path / "run.db", tmp_path / "a.jsonl")
    export_records(tmp_path / "guided.db", tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_a_400_about_something_else_is_not_taken_for_a_refused_form():
    from syntra_dspy.lm.schema_forms import StructuredOutput

    class BadRequest(Exception):
        status = 400

    state = StructuredOutput("structured_outputs")
    assert not state.fall_back_on(BadRequest("max_tokens is too large for this model"), model="m")
    assert state.active == "structured_outputs" and state.describe()["fallback"] is None
    assert state.fall_back_on(BadRequest("extra_forbidden: structured_outputs"), model="m")
    assert state.active == "none" and not state.sends_schema


def test_shape_moves_the_schema_and_keeps_everything_else():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    asked = {"temperature": 0.0,
             "response_format": {"type": "json_schema", "json_schema": {"name": "Out", "schema": schema}}}
    assert shape(asked, "structured_outputs") == {"temperature": 0.0,
                                                  "extra_body": {"structured_outputs": {"json": schema}}}
    assert shape(asked, "json_object") == {"temperature": 0.0,
                                           "response_format": {"type": "json_object", "schema": schema}}
    assert shape(asked, "none") == {"temperature": 0.0}
    plain_json = {"response_format": {"type": "json_object"}}
    assert shape(plain_json, "guided_json") == plain_json  # nothing to move: JSON mode without a schema
    with pytest.raises(ValueError, match="unknown schema form 'xml'"):
        shape(asked, "xml")


def test_fixed_prompt_part_first_and_cached_prefix_share_per_stage(mini, minilm, tmp_path):
    with OpenAICompatibleServer(SyntraBrain(), prefix_cache=True) as server:
        summary = _produce(mini, minilm, tmp_path / "run.db", f"hosted_vllm/fake@{server.base_url}", docs=3)
        bodies = list(server.bodies)
    # the system message (the step's fixed instruction) opens every request, and documents share it
    systems = [b["messages"][0] for b in bodies]
    assert all(m["role"] == "system" for m in systems)
    assert len({m["content"] for m in systems}) < len(bodies) / 2
    extract = summary.usage["extract"]
    assert extract["calls"] == 3 and 0 < extract["cached_prompt_tokens"] < extract["prompt_tokens"]
    assert 0 < extract["cached_prompt_share"] < 1  # the first document's call found nothing cached
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        stored = run.usage()
    assert all(u["cached_prompt_tokens"] > 0 for u in stored.values())
    report = format_stats(compute_stats(tmp_path / "run.db"))
    assert "of prompt tokens reused from a cached prefix" in report
    assert "in the sessions that counted it" not in report
    # a session whose backend did not count cached tokens leaves the share as it was, and the report says so
    conn = sqlite3.connect(tmp_path / "run.db")
    conn.execute("INSERT INTO usage (session_id, stage, calls, prompt_tokens) VALUES (99, 'extract', 5, 5000)")
    conn.commit()
    conn.close()
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        later = run.usage()["extract"]
    assert later["prompt_tokens"] == extract["prompt_tokens"] + 5000
    assert later["cached_prompt_share"] == extract["cached_prompt_share"]
    assert later["cached_prompt_basis"] == extract["prompt_tokens"]
    assert "(in the sessions that counted it)" in format_stats(compute_stats(tmp_path / "run.db"))


def test_a_store_from_before_these_tables_still_opens(mini, minilm, tmp_path):
    store = tmp_path / "old.db"
    with OpenAICompatibleServer(SyntraBrain()) as server:
        _produce(mini, minilm, store, f"hosted_vllm/fake@{server.base_url}", docs=1)
    conn = sqlite3.connect(store)  # make it look like a store written by the previous release
    conn.executescript("DROP TABLE schema_forms; DROP TABLE endpoint_usage; "
                       "ALTER TABLE usage DROP COLUMN cached_prompt_tokens;")
    conn.close()
    with RunStore.open(store, readonly=True) as run:
        assert run.backend() == {"schema_forms": [], "endpoints": []}
        assert all(u["cached_prompt_tokens"] == 0 for u in run.usage().values())
    with RunStore.open(store) as run:  # a writer adds what is missing and keeps what is there
        assert run.has_column("usage", "cached_prompt_tokens") and run.has_table("endpoint_usage")
        assert run.document_counts()["done"] == 1
