"""The question guard: where a task's queries are never questions, a query decoded under it is never one by the
write step's own check, and the write step's rewrites ask for it only when told to (``syntra produce
--question-guard``)."""

from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.decoding_guards import pop_mark
from syntra_dspy.lm.scripted import ScriptedLM
from syntra_dspy.programs.components import ComponentState, FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.query_form import QUESTION_GUARD_KEY, QuestionGuard, question_guard_mark, shape

from test_query_form import BLUEPRINTS, CLAIMS, DOC


def decode(guard: QuestionGuard, wanted: list[str], instead: dict[str, str]) -> tuple[str, list[str]]:
    """A stand-in decoder: it wants each piece in turn, and takes ``instead[piece]`` (its next best) for one the guard
    refuses."""
    text, refused = "", []
    for piece in wanted:
        if guard.refuses(piece.encode()):
            refused.append(piece)
            piece = instead[piece]
            assert not guard.refuses(piece.encode())
        guard.accept(piece.encode())
        text += piece
    return text, refused


def test_an_interrogative_opening_is_refused_when_written_and_the_query_becomes_a_claim():
    guard = QuestionGuard()
    wanted = ['{"queries": [{"blueprint": 0, "query": "', "Does", " Notch", " signalling", " drive", " myeloma", "?",
              '"}]}']
    text, refused = decode(guard, wanted, instead={"Does": "That", "?": "."})
    query = json.loads(text)["queries"][0]["query"]
    assert refused == ["Does", "?"]
    assert shape(query) == "sentence"  # what the check keeps
    unguarded = json.loads("".join(wanted))["queries"][0]["query"]
    assert shape(unguarded) == "question"  # what the writer wanted


def test_a_word_is_refused_only_once_it_is_an_interrogative_not_while_it_may_become_another_word():
    guard = QuestionGuard()
    guard.accept(b'{"query": "')
    assert guard.refuses(b"What") and guard.refuses(b" How")  # leading space: still the first word
    assert not guard.refuses(b"Wh")
    guard.accept(b"Wh")
    assert guard.refuses(b"at") and not guard.refuses(b"ether")  # "whether" opens no question for the check
    guard.reset()
    guard.accept(b'{"query": "Is')  # kept when nothing else was allowed: the check rejects it later
    assert not guard.refuses(b" it")  # not refused over and over
    guard.reset()
    guard.accept(b'{"query": "Isoflurane protects the heart')
    assert not guard.refuses(b".") and guard.refuses(b"?") and guard.refuses(b'?"')  # the mark, then its close


def test_keys_and_values_other_than_questions_pass_and_a_full_width_mark_is_a_question_too():
    guard = QuestionGuard()
    for piece in ('{"', "queries", '": [{"', "blueprint", '": 0, "', "query", '": "', "肿瘤", "细胞"):
        assert not guard.refuses(piece.encode())
        guard.accept(piece.encode())
    assert guard.refuses("？".encode())
    assert not guard.refuses("？".encode()[:2])  # half a character is read once it is whole


def test_the_mark_rides_in_a_fields_schema_and_is_taken_out_whole():
    schema = {"type": "object", "properties": {"queries": {"type": "array", **question_guard_mark()},
                                               "note": {"type": "string"}}, "required": ["queries", "note"]}
    plain, mark = pop_mark(schema, QUESTION_GUARD_KEY)
    assert mark == {} and QUESTION_GUARD_KEY not in json.dumps(plain)
    assert plain["properties"]["queries"] == {"type": "array"} and plain["required"] == ["queries", "note"]


def program(examples: list[str]) -> SynthesisProgram:
    return SynthesisProgram(ComponentState(examples=tuple(FewShotPair(query=q, positive_text="an abstract")
                                                          for q in examples)))


def _writer(call) -> dict:
    if "rewritten" in call.output_fields:
        return {"rewritten": "Notch signalling drives myeloma cell proliferation."}
    return {"queries": [{"blueprint": 0, "query": "Notch signaling occurs between myeloma and stromal cells."},
                        {"blueprint": 1, "query": "How does Notch act on stem cells?"}]}


def _marks(lm: ScriptedLM) -> tuple[int, int]:
    write, rewrite = lm.calls[0], next(c for c in lm.calls if "rewritten" in c.output_fields)
    return tuple(json.dumps(c.response_format["schema"]).count(QUESTION_GUARD_KEY) for c in (write, rewrite))


@pytest.mark.parametrize("guarded", [True, False])
def test_the_rewrite_calls_carry_the_guard_only_when_asked_and_the_write_call_never(guarded):
    lm = ScriptedLM(_writer)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        queries = program(CLAIMS).write_queries(DOC, BLUEPRINTS[:2], question_guard=guarded)
    assert queries[1] == "Notch signalling drives myeloma cell proliferation."  # the question was restated
    assert _marks(lm) == ((0, 1) if guarded else (0, 0))  # a guarded writer copies instead of asking
    # the prompt is the artifact's either way
    plain = ScriptedLM(_writer)
    with dspy.context(lm=plain, adapter=dspy.JSONAdapter()):
        program(CLAIMS).write_queries(DOC, BLUEPRINTS[:2])
    assert lm.calls[0].messages == plain.calls[0].messages


def test_a_task_whose_queries_are_questions_gets_no_question_guard():
    def asks(call) -> dict:
        return {"queries": [{"blueprint": 0, "query": "Does Notch signalling drive myeloma?"},
                            {"blueprint": 1, "query": "Which ligands does Notch meet in the marrow?"}]}

    lm = ScriptedLM(asks)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        program(["What does FGF21 do?", "Is ATF4 a marker of stress?", "How do formins build junctions?"]
                ).write_queries(DOC, BLUEPRINTS[:2], question_guard=True)
    assert all(QUESTION_GUARD_KEY not in json.dumps(c.response_format or {}) for c in lm.calls)


def test_a_served_route_is_sent_no_guard():
    lm = ScriptedLM(_writer)
    lm.engine.narrows_schemas = False  # a hosted API may refuse keys it does not know
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        program(CLAIMS).write_queries(DOC, BLUEPRINTS[:2], question_guard=True)
    assert all(QUESTION_GUARD_KEY not in json.dumps(c.response_format or {}) for c in lm.calls)


class AskAbout(dspy.Signature):
    """Write one question a reader of the document might ask about its finding."""

    document: str = dspy.InputField()
    question: str = dspy.OutputField()


@pytest.mark.llm
@pytest.mark.timeout(600)
def test_real_small_model_told_to_ask_writes_no_question_under_the_guard(small_generator):
    """What the guard is for, on the embedded engine: asked for a question, the model writes one without it, and
    under it an answer the check does not call a question (a real grammar, real tokens)."""
    from syntra_dspy.programs.narrowing import narrowed_outputs

    with dspy.context(lm=small_generator, adapter=dspy.JSONAdapter()):
        free = dspy.Predict(AskAbout)(document=DOC).question
        with narrowed_outputs({}, {"question": question_guard_mark()}):
            guarded = dspy.Predict(AskAbout)(document=DOC).question
    assert shape(free) == "question", free  # the model does ask when let
    assert shape(guarded) != "question" and len(guarded.split()) >= 3, guarded
