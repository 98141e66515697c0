"""The compact prompt format (``syntra produce --prompt-format compact``): the same instructions and schema with far
less structure text, answers parsed as JSONAdapter parses them, narrowed schemas and guards kept."""

from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.lm.compact_layout import compact_inputs, sketched_fields
from syntra_dspy.lm.scripted import ScriptedLM
from syntra_dspy.programs.compact_format import CompactJSONAdapter, schema_sketch
from syntra_dspy.programs.narrowing import narrowed_outputs
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.query_form import QUESTION_GUARD_KEY
from syntra_dspy.signatures.identifiers import ExtractIdentifiersAndAttributes
from syntra_dspy.signatures.queries import RewriteRejectedQuery, WriteQueriesFromBlueprints

from test_plan_narrowing import DOCUMENT, FEATURES, _plan_answer
from test_question_guard import _writer, program
from test_query_form import BLUEPRINTS, CLAIMS, DOC

WRITE_INPUTS = {"document": DOCUMENT, "blueprints": "0. RanGAP | specificity: specific claim",
                "language": "English, a claim", "retry_note": ""}


def _messages(adapter: dspy.Adapter, signature: type[dspy.Signature], inputs: dict) -> list[dict]:
    return adapter.format(signature, [], inputs)


def test_the_compact_prompt_keeps_instruction_inputs_and_field_descriptions_with_far_less_structure():
    compact = _messages(CompactJSONAdapter(), WriteQueriesFromBlueprints, WRITE_INPUTS)
    full = _messages(dspy.JSONAdapter(), WriteQueriesFromBlueprints, WRITE_INPUTS)
    system, user = compact[0]["content"], compact[1]["content"]
    assert WriteQueriesFromBlueprints.instructions.strip() in system
    assert 'One JSON object: {"queries": [{"blueprint": integer, "query": string}, ...]}' in system
    assert "blueprint: 0-based position of the blueprint this query realises" in system
    assert "[[ ##" not in system + user and "Respond with" not in user
    assert user == (f"Document: {DOCUMENT}\n\nBlueprints: 0. RanGAP | specificity: specific claim\n\n"
                    "Language: English, a claim")  # the empty retry note is left out
    structure = lambda msgs: sum(len(m["content"]) for m in msgs) - len(WriteQueriesFromBlueprints.instructions)
    assert structure(compact) < 0.6 * structure(full)


def test_the_sketch_reads_refs_enums_arrays_and_unions():
    schema = {"type": "object", "$defs": {"Id": {"type": "object", "properties": {
        "kind": {"type": "string", "enum": ["entity", "relationship"]},
        "text": {"type": "string", "description": "copied"}}}},
        "properties": {"ids": {"type": "array", "items": {"$ref": "#/$defs/Id"}},
                       "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "tags": {"type": "array"}}}
    notes: dict[str, str] = {}
    assert schema_sketch(schema, notes=notes) == (
        '{"ids": [{"kind": "entity" | "relationship", "text": string}, ...], "n": integer | null, "tags": [...]}')
    assert notes == {"text": "copied"}


def test_the_format_reads_back_for_stand_in_models():
    messages = _messages(CompactJSONAdapter(), ExtractIdentifiersAndAttributes,
                         {"document": "Title: a finding\n\nIt holds.", "retry_note": "too few identifiers"})
    assert sketched_fields(messages[0]["content"]) == ("identifiers", "attributes")
    assert compact_inputs(messages[1]["content"]) == {"document": "Title: a finding\n\nIt holds.",
                                                      "retry_note": "too few identifiers"}
    assert sketched_fields(_messages(dspy.JSONAdapter(), RewriteRejectedQuery,
                                     {"query": "q", "problem": "p", "form": "f"})[0]["content"]) == ()


@pytest.mark.parametrize("schema", [True, False])
def test_answers_parse_as_under_json_with_or_without_a_schema_sent(schema):
    """A backend without structured outputs gets no schema: the sketch alone says which fields to answer."""
    def answer(call) -> dict:
        assert call.output_fields == ("queries",)
        return {"queries": [{"blueprint": 0, "query": "RanGAP needs its acidic tail to activate Ran."}]}

    lm = ScriptedLM(answer, response_schema=schema)
    with dspy.context(lm=lm, adapter=CompactJSONAdapter()):
        out = dspy.Predict(WriteQueriesFromBlueprints)(**WRITE_INPUTS)
    assert [q.query for q in out.queries] == ["RanGAP needs its acidic tail to activate Ran."]
    assert (lm.calls[0].response_format is not None and "schema" in lm.calls[0].response_format) is schema


def test_a_demo_answer_is_compact_json():
    demo = {**WRITE_INPUTS, "queries": [{"blueprint": 0, "query": "a claim"}]}
    messages = CompactJSONAdapter().format(WriteQueriesFromBlueprints, [demo], WRITE_INPUTS)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == '{"queries": [{"blueprint": 0, "query": "a claim"}]}'


def test_the_plan_call_is_narrowed_under_the_compact_format_with_its_own_prompt():
    lm = ScriptedLM(_plan_answer)
    with dspy.context(lm=lm, adapter=CompactJSONAdapter()):
        blueprints = SynthesisProgram().plan_blueprints(DOCUMENT, FEATURES, 2)
    assert [bp.identifier for bp in blueprints] == ["RanGAP", 'Ran binds "RanBP1"']
    sent = lm.calls[0].response_format["schema"]["properties"]["blueprints"]
    assert sent["items"]["properties"]["identifier"]["enum"] == ["RanGAP", 'Ran binds "RanBP1"']
    assert lm.calls[0].messages[0]["content"].endswith("choices: one option for every attribute dimension")
    with narrowed_outputs({}):  # nothing to narrow: the adapter in use is left as it is
        assert dspy.settings.adapter is None


def test_the_question_guard_rides_with_compact_rewrites():
    lm = ScriptedLM(_writer)
    with dspy.context(lm=lm, adapter=CompactJSONAdapter()):
        queries = program(CLAIMS).write_queries(DOC, BLUEPRINTS[:2], question_guard=True)
    assert queries[1] == "Notch signalling drives myeloma cell proliferation."
    rewrite = next(c for c in lm.calls if "rewritten" in c.output_fields)
    assert QUESTION_GUARD_KEY in json.dumps(rewrite.response_format["schema"])
    assert rewrite.messages[1]["content"].startswith("Query: How does Notch act on stem cells?")
