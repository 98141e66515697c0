from __future__ import annotations

from typing import Literal

import dspy
import pydantic
import pytest

from syntra_dspy.lm import NoScriptedAnswerError, RuleResponder, ScriptedLM
from syntra_dspy.lm.scripted import parse_output_fields


class Query(pydantic.BaseModel):
    text: str
    language: Literal["en", "fr"]


class WriteQuery(dspy.Signature):
    """Write a search query for the document."""

    document: str = dspy.InputField()
    query: Query = dspy.OutputField()


def _language_responder(call):
    language = "fr" if "French" in call.system else "en"
    return {"query": Query(text=f"query in {language}", language=language)}


ADAPTERS = [pytest.param(dspy.JSONAdapter, id="json"), pytest.param(dspy.ChatAdapter, id="chat")]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("response_schema", [True, False])
def test_answer_follows_the_instruction(adapter, response_schema):
    lm = ScriptedLM(_language_responder, response_schema=response_schema)
    english = dspy.Predict(WriteQuery.with_instructions("Write an English search query."))
    french = dspy.Predict(WriteQuery.with_instructions("Write a French search query."))
    with dspy.context(lm=lm, adapter=adapter()):
        assert english(document="d").query == Query(text="query in en", language="en")
        assert french(document="d").query == Query(text="query in fr", language="fr")
    assert [c.output_fields for c in lm.calls] == [("query",), ("query",)]


def test_calls_expose_prompt_parts_and_schema():
    lm = ScriptedLM(_language_responder)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        dspy.Predict(WriteQuery)(document="the moon is made of rock")
    (call,) = lm.calls
    assert "Write a search query for the document." in call.system
    assert "the moon is made of rock" in call.user
    assert call.messages[0]["role"] == "system" and call.messages[-1]["role"] == "user"
    assert call.signature_name == "WriteQuery"
    assert call.response_format["type"] == "json_schema"
    assert set(call.response_format["schema"]["properties"]) == {"query"}
    assert call.reply.startswith("{")


def test_chat_adapter_gets_field_blocks():
    lm = ScriptedLM(lambda call: {"answer": "Paris", "confidence": 0.9})
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        pred = dspy.Predict("question -> answer, confidence: float")(question="capital of France?")
    assert (pred.answer, pred.confidence) == ("Paris", 0.9)
    assert lm.calls[0].chat_format
    assert "[[ ## answer ## ]]\nParis" in lm.calls[0].reply
    assert len(lm.calls) == 1  # parsed first time: no JSON fallback call


def test_bare_string_fills_a_single_output_field():
    lm = ScriptedLM(lambda call: "yes")
    with dspy.context(lm=lm):
        assert dspy.Predict("question -> answer")(question="?").answer == "yes"


def test_never_cached_and_usage_counted():
    lm = ScriptedLM(lambda call: {"answer": "same"})
    with dspy.context(lm=lm):
        for _ in range(2):
            dspy.Predict("question -> answer")(question="identical")
    assert len(lm.calls) == 2
    usage = lm.history[-1]["usage"]
    assert usage["prompt_tokens"] >= 10 and usage["completion_tokens"] >= 1


def test_copies_share_the_record():
    lm = ScriptedLM(lambda call: {"answer": str(call.options.get("temperature"))})
    hot = lm.copy(temperature=0.7)
    with dspy.context(lm=hot):
        assert dspy.Predict("question -> answer")(question="?").answer == "0.7"
    assert len(lm.calls) == 1


def test_thread_safe_under_parallel():
    lm = ScriptedLM(lambda call: {"answer": call.user.split("[[ ## question ## ]]\n")[1].split("\n")[0]})
    program = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        results = dspy.Parallel(num_threads=4)([(program, {"question": f"q{i}"}) for i in range(12)])
    assert [r.answer for r in results] == [f"q{i}" for i in range(12)]
    assert sorted(c.index for c in lm.calls) == list(range(12))


def test_rule_responder_first_match_wins_and_callables():
    responder = RuleResponder(
        [
            (r"Judge", {"score": 3}),
            (lambda call: "question" in call.output_fields, lambda call: {"question": f"#{call.index}"}),
        ],
        default={"answer": "fallback"},
    )
    lm = ScriptedLM(responder)
    with dspy.context(lm=lm):
        assert dspy.Predict(dspy.Signature("doc -> score: int", "Judge the doc."))(doc="x").score == 3
        assert dspy.Predict("doc -> question")(doc="x").question == "#1"
        assert dspy.Predict("doc -> answer")(doc="x").answer == "fallback"


def test_rule_responder_without_default_says_what_was_asked():
    lm = ScriptedLM(RuleResponder([(r"never matches", "x")]))
    with dspy.context(lm=lm), pytest.raises(Exception, match="no scripted rule matched call #0"):
        dspy.Predict("doc -> answer")(doc="hello")
    with pytest.raises(NoScriptedAnswerError):
        RuleResponder([])(lm.calls[0])


def test_rule_matcher_type_is_checked():
    with pytest.raises(TypeError, match="regex string"):
        RuleResponder([(42, "x")])


def test_parse_output_fields_from_each_prompt_style():
    assert parse_output_fields("Your output fields are:\n1. `a` (str): \n2. `b` (int):", "") == ("a", "b")
    json_user = "Respond with a JSON object in the following order of fields: `x`, then `y` (must be int)."
    assert parse_output_fields("", json_user) == ("x", "y")
    chat_user = (
        "starting with the field `[[ ## p ## ]]`, then `[[ ## q ## ]]`, and then `[[ ## completed ## ]]`."
    )
    assert parse_output_fields("", chat_user) == ("p", "q")
    schema = {"type": "json_schema", "schema": {"properties": {"z": {}}}}
    assert parse_output_fields("", chat_user, schema) == ("z",)


def test_bad_answer_type_is_reported():
    lm = ScriptedLM(lambda call: 42)
    with dspy.context(lm=lm), pytest.raises(Exception, match="must return str, dict or a pydantic model"):
        dspy.Predict("doc -> answer")(doc="x")
