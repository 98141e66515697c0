"""The plan step sends a schema narrowed to the document's own lists; the prompt it sends does not change."""

from __future__ import annotations

import importlib.util
import json

import dspy
import pytest

from syntra_dspy.lm.llamacpp.engine import grammar_safe_literals, require_nonempty_lists
from syntra_dspy.models.registry import EMBEDDED_MODELS
from syntra_dspy.lm.scripted import ScriptedLM
from syntra_dspy.programs.narrowing import blueprint_list_schema, narrowed_outputs
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.programs.validation import Features, check_blueprints
from syntra_dspy.signatures.types import AttributeDimension, Identifier

FEATURES = Features(
    identifiers=(Identifier(kind="entity", text="RanGAP"), Identifier(kind="relationship", text='Ran binds "RanBP1"')),
    attributes=(AttributeDimension(dimension="specificity", options=["specific claim", "general claim"]),
                AttributeDimension(dimension="answer type", options=["mechanism", "effect", "association"])),
)
#: Identifiers every grammar can hold as literals (non-ASCII included).
LISTED = Features(identifiers=(Identifier(kind="entity", text="RanGAP"), Identifier(kind="entity", text="鸟苷酸交换因子")),
                  attributes=FEATURES.attributes)
DOCUMENT = "RanGAP and RanBP1 together activate GTP hydrolysis by Ran; the acidic tail of RanGAP is required."


def _plan_answer(call) -> dict:
    return {"blueprints": [
        {"identifier": "RanGAP", "choices": [{"dimension": "specificity", "option": "specific claim"},
                                             {"dimension": "answer type", "option": "mechanism"}]},
        {"identifier": 'Ran binds "RanBP1"', "choices": [{"dimension": "specificity", "option": "general claim"},
                                                         {"dimension": "answer type", "option": "effect"}]},
    ]}


def _plan(adapter: dspy.Adapter | None) -> tuple[list, ScriptedLM]:
    lm = ScriptedLM(_plan_answer)
    with dspy.context(lm=lm, adapter=adapter):
        blueprints = SynthesisProgram().plan_blueprints(DOCUMENT, FEATURES, 2)
    return blueprints, lm


def test_the_schema_allows_only_the_documents_identifiers_dimensions_and_options():
    schema = blueprint_list_schema(FEATURES, 3)
    assert (schema["minItems"], schema["maxItems"]) == (3, 3)
    blueprint = schema["items"]
    assert blueprint["properties"]["identifier"]["enum"] == ["RanGAP", 'Ran binds "RanBP1"']
    choices = blueprint["properties"]["choices"]
    assert (choices["minItems"], choices["maxItems"]) == (2, 2)
    variants = {v["properties"]["dimension"]["enum"][0]: v["properties"]["option"]["enum"]
                for v in choices["items"]["anyOf"]}
    assert variants == {"specificity": ["specific claim", "general claim"],
                        "answer type": ["mechanism", "effect", "association"]}
    assert blueprint["additionalProperties"] is False and blueprint["required"] == ["identifier", "choices"]


def test_the_plan_call_carries_the_narrowed_schema_and_the_same_prompt():
    narrowed, lm = _plan(dspy.JSONAdapter())
    plain, plain_lm = _plan(dspy.ChatAdapter())  # an adapter we leave alone: no narrowing
    assert [bp.identifier for bp in narrowed] == ["RanGAP", 'Ran binds "RanBP1"']
    sent = lm.calls[0].response_format["schema"]["properties"]["blueprints"]
    assert sent["items"]["properties"]["identifier"]["enum"] == ["RanGAP", 'Ran binds "RanBP1"']
    assert (sent["minItems"], sent["maxItems"]) == (2, 2)
    # the prompt is the artifact's, whatever the schema: same messages as an un-narrowed JSONAdapter call
    lm2 = ScriptedLM(_plan_answer)
    with dspy.context(lm=lm2, adapter=dspy.JSONAdapter()):
        dspy.Predict(SynthesisProgram().plan.signature)(
            document=DOCUMENT, identifiers="1. RanGAP\n2. Ran binds \"RanBP1\"",
            attributes="- specificity: specific claim | general claim\n- answer type: mechanism | effect | association",
            count=2, already_used="", retry_note="")
    assert lm.calls[0].messages == lm2.calls[0].messages
    assert "enum" not in json.dumps(lm2.calls[0].response_format)
    assert plain_lm.calls[0].response_format is None and [bp.identifier for bp in plain] == ["RanGAP",
                                                                                          'Ran binds "RanBP1"']


def test_a_served_route_keeps_the_signatures_schema():
    """Narrowing reaches only engines that declare it: a hosted API may refuse the narrowed schema, and a refused
    schema would switch a served role's schemas off for the whole run."""

    lm = ScriptedLM(_plan_answer)
    lm.engine.narrows_schemas = False  # what a served route's engine (none, or LiteLLM) says
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        SynthesisProgram().plan_blueprints(DOCUMENT, FEATURES, 2)
    assert lm.calls[0].response_format is not None and "enum" not in json.dumps(lm.calls[0].response_format)


def test_narrowing_a_field_the_signature_lacks_is_an_error():
    lm = ScriptedLM(lambda call: {"answer": "x"})
    with (dspy.context(lm=lm, adapter=dspy.JSONAdapter()), narrowed_outputs({"blueprints": {"type": "array"}}),
          pytest.raises(ValueError, match="no output field")):
        dspy.Predict("question -> answer")(question="q")


def test_llama_cpp_compiles_the_narrowed_schema_into_a_grammar_of_the_lists():
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = grammar_safe_literals(require_nonempty_lists(
        {"type": "object", "properties": {"blueprints": blueprint_list_schema(LISTED, 2)},
         "required": ["blueprints"], "additionalProperties": False}))
    gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
    for literal in ("RanGAP", "\\u9e1f", "specific claim", "answer type", "association"):
        assert literal in gbnf
    assert "string ::=" not in gbnf  # no free-text string left anywhere in the answer


_SMALL = EMBEDDED_MODELS["qwen2.5-coder-0.5b"]
_HAVE_SMALL = importlib.util.find_spec("llama_cpp") is not None and all(
    importlib.util.find_spec(_SMALL.module(i)) is not None for i in range(1, _SMALL.parts + 1))


def test_the_embedded_engine_widens_literals_its_grammar_converter_would_break():
    """llama-cpp-python's converter does not escape backslashes: a quote in an enum value made a grammar llama.cpp
    could not parse, and the process died (found by the real-model test below)."""
    schema = {"type": "object", "properties": {"blueprints": blueprint_list_schema(FEATURES, 2)}}
    safe = grammar_safe_literals(schema)
    item = safe["properties"]["blueprints"]["items"]["properties"]
    assert item["identifier"] == {"type": "string"}  # 'Ran binds "RanBP1"' cannot be a grammar literal
    assert item["choices"] == schema["properties"]["blueprints"]["items"]["properties"]["choices"]
    chinese = {"type": "string", "enum": ["鸟苷酸交换因子", "RanGAP"]}
    assert grammar_safe_literals(chinese) == chinese  # non-ASCII becomes \\uXXXX, which GBNF reads as the character
    for bad in ("back\\slash", "new\nline"):
        assert grammar_safe_literals({"enum": ["ok", bad]}) == {"type": "string"}


_SMALL = EMBEDDED_MODELS["qwen2.5-coder-0.5b"]
_HAVE_SMALL = importlib.util.find_spec("llama_cpp") is not None and all(
    importlib.util.find_spec(_SMALL.module(i)) is not None for i in range(1, _SMALL.parts + 1))


@pytest.mark.llm
@pytest.mark.timeout(600)
@pytest.mark.skipif(not _HAVE_SMALL, reason="needs llama-cpp-python and the 0.5B parts")
def test_real_small_model_plans_only_from_the_documents_lists_under_the_narrowed_grammar():
    """What the narrowing is for: the embedded engine decodes identifiers, dimensions and options from the lists
    (Chinese ones too), and an identifier no grammar literal can hold loosens the constraint instead of crashing."""
    from syntra_dspy.lm import build_lm
    from syntra_dspy.lm.llamacpp import release_models
    from syntra_dspy.programs import context as ctx
    from syntra_dspy.task import LMSpec

    lm = build_lm(LMSpec(model="embedded:qwen2.5-coder-0.5b", max_tokens=400), role="generator", cache=False)
    program = SynthesisProgram()
    problems = {}
    try:
        for name, features in (("listed", LISTED), ("quoted", FEATURES)):
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), narrowed_outputs(
                    {"blueprints": blueprint_list_schema(features, 2)}):
                pred = program.plan(document=DOCUMENT, identifiers=ctx.identifiers_text(features.identifiers),
                                    attributes=ctx.attributes_text(features.attributes), count=2, already_used="",
                                    retry_note="")
            assert len(pred.blueprints) == 2
            problems[name] = check_blueprints(pred.blueprints, features)[1]
    finally:
        release_models()
    assert not [p for p in problems["listed"] if "repeats" not in p], problems
    assert not [p for p in problems["quoted"] if "dimension" in p or "option" in p], problems
