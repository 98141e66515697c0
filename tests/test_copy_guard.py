"""The copy guard: a query decoded under it never copies more of its document than the write step's check allows,
and the write step asks for it only when told to (``syntra produce --copy-guard``)."""

from __future__ import annotations

import json
import random

import dspy
import pytest

from syntra_dspy.copying import (
    COPY_GUARD_KEY,
    MAX_COPIED_WORDS,
    CopyGuard,
    copy_guard_mark,
    longest_copy,
    pop_copy_guard,
)
from syntra_dspy.lm.scripted import ScriptedLM
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.signatures.types import AttributeChoice, Blueprint

DOCUMENT = ("Formins are major regulators of actin dynamics and are required for the formation of adherens "
            "junctions between epithelial cells, where the Arp2/3 complex and formin-1 act together to build the "
            "actin belt that holds the epithelium in shape.")


def decode(guard: CopyGuard, wanted: list[str], instead: str = " however") -> tuple[str, int]:
    """A stand-in decoder: it wants each piece in turn and takes ``instead`` for one the guard refuses."""
    text, refused = "", 0
    for piece in wanted:
        if guard.refuses(piece.encode()):
            refused += 1
            piece = instead
        guard.accept(piece.encode())
        text += piece
    return text, refused


def test_a_copy_is_cut_at_the_word_that_would_pass_the_limit_and_not_before():
    words = DOCUMENT.split()
    guard = CopyGuard(DOCUMENT)
    text, refused = decode(guard, ['{"queries": [{"number": 0, "query": "', words[0], *(" " + w for w in words[1:16]),
                                   '"}]}'])
    query = json.loads(text)["queries"][0]["query"]
    assert refused >= 1 and query.startswith(" ".join(words[:MAX_COPIED_WORDS]))  # ten copied words are allowed
    assert longest_copy(query, DOCUMENT)[1] <= MAX_COPIED_WORDS
    unguarded = " ".join(words[:16])
    assert longest_copy(unguarded, DOCUMENT)[1] == 16  # what the writer wanted: a copied passage


def test_a_word_split_over_tokens_is_caught_on_the_token_that_completes_it():
    guard = CopyGuard(DOCUMENT)
    start = '{"query": "Formins are major regulators of actin dynamics and are required'  # ten words copied
    guard.accept(start.encode())
    assert guard.refuses(b" for")  # the eleventh
    assert not guard.refuses(b" fo")  # a prefix is no copy yet: "fo" is not "for"
    guard.accept(b" fo")
    assert guard.refuses(b"r")  # the token that makes it "for"
    assert not guard.refuses(b"rty")  # "forty" is another word


def test_only_strings_are_watched_and_escapes_are_read_as_text():
    guard = CopyGuard("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu", max_words=3)
    guard.accept(b'{"alpha beta gamma": "x", "q": "alpha beta gamma')  # a key that copies is a string too
    assert guard.refuses(b" delta")
    guard.reset()
    guard.accept(b'{"q": "say \\"alpha beta gamma')
    assert guard.refuses(b" delta")  # an escaped quote does not close the string
    guard.reset()
    guard.accept(b'{"q": "alpha beta gamma", "r": ')
    assert not guard.refuses(b"1")  # outside a string: numbers, commas, brackets
    assert not guard.refuses(b'"delta')  # a new string starts its own run


def test_a_character_split_over_two_tokens_is_read_when_whole():
    doc = "细胞 骨架 蛋白 调控 上皮 连接"
    guard = CopyGuard(doc, max_words=2)
    guard.accept('{"q": "细胞 骨架 '.encode())
    whole = "蛋".encode()
    assert not guard.refuses(whole[:2])  # half a character is nothing yet
    guard.accept(whole[:2])
    assert guard.refuses(whole[2:] + "白".encode())  # "蛋白" whole: a third copied word


@pytest.mark.parametrize("seed", range(20))
def test_whatever_the_writer_wants_the_decoded_query_passes_the_check(seed):
    """A writer that copies runs from random places, in whole words and in word pieces: every string it is let
    write is one the write step's check (longest_copy) keeps."""
    rng = random.Random(seed)
    words = DOCUMENT.split()
    wanted: list[str] = ['{"queries": [{"number": 0, "query": "']
    for _ in range(3):
        start = rng.randrange(len(words))
        for word in words[start:start + rng.randrange(5, 20)]:
            cut = rng.randrange(1, len(word) + 1)
            wanted += [" " + word[:cut], word[cut:]] if cut < len(word) else [" " + word]
    wanted.append('"}]}')
    guard = CopyGuard(DOCUMENT)
    text, refused = decode(guard, wanted, instead=rng.choice([" so", " thus", ","]))
    query = json.loads(text)["queries"][0]["query"]
    assert longest_copy(query, DOCUMENT)[1] <= MAX_COPIED_WORDS
    unguarded = json.loads("".join(wanted))["queries"][0]["query"]
    assert (refused > 0) == (longest_copy(unguarded, DOCUMENT)[1] > MAX_COPIED_WORDS)  # acts when needed, only then


def test_the_mark_rides_in_a_fields_schema_and_is_taken_out_whole():
    schema = {"type": "object", "properties": {"queries": {"type": "array", **copy_guard_mark("doc", 7)},
                                               "note": {"type": "string"}}, "required": ["queries", "note"]}
    plain, guard = pop_copy_guard(schema)
    assert guard == {"document": "doc", "max_words": 7}
    assert COPY_GUARD_KEY not in json.dumps(plain) and plain["properties"]["queries"] == {"type": "array"}
    assert plain["required"] == ["queries", "note"]
    untouched = {"type": "object", "properties": {"note": {"type": "string"}}}
    assert pop_copy_guard(untouched) == (untouched, None)


BLUEPRINTS = [Blueprint(identifier="formins", choices=[AttributeChoice(dimension="specificity", option="specific")]),
              Blueprint(identifier="Arp2/3", choices=[AttributeChoice(dimension="specificity", option="general")])]
COPIED = " ".join(DOCUMENT.split()[:14])


def _writer(call) -> dict:
    if "rewritten" in call.output_fields:
        return {"rewritten": "Formins and Arp2/3 shape epithelial junctions"}
    return {"queries": [{"blueprint": 0, "query": "Formins regulate adherens junctions in epithelia"},
                        {"blueprint": 1, "query": COPIED}]}


@pytest.mark.parametrize("guarded", [6, None])
def test_the_write_and_rewrite_calls_carry_the_guard_only_when_asked(guarded):
    lm = ScriptedLM(_writer)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        queries = SynthesisProgram().write_queries(DOCUMENT, BLUEPRINTS, copy_guard=guarded)
    assert queries[1] == "Formins and Arp2/3 shape epithelial junctions"  # the copy was rewritten
    write, rewrite = lm.calls[0], next(c for c in lm.calls if "rewritten" in c.output_fields)
    marks = [json.dumps(c.response_format["schema"]).count(COPY_GUARD_KEY) for c in (write, rewrite)]
    assert marks == ([1, 1] if guarded else [0, 0])
    if guarded:
        assert write.response_format["schema"]["properties"]["queries"][COPY_GUARD_KEY] == {
            "document": DOCUMENT, "max_words": 6}
        assert rewrite.response_format["schema"]["properties"]["rewritten"][COPY_GUARD_KEY]["document"] == DOCUMENT
    # the prompt is the artifact's either way
    lm_plain = ScriptedLM(_writer)
    with dspy.context(lm=lm_plain, adapter=dspy.JSONAdapter()):
        SynthesisProgram().write_queries(DOCUMENT, BLUEPRINTS)
    assert write.messages == lm_plain.calls[0].messages


def test_a_served_route_is_sent_no_guard():
    lm = ScriptedLM(_writer)
    lm.engine.narrows_schemas = False  # a hosted API may refuse keys it does not know
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        SynthesisProgram().write_queries(DOCUMENT, BLUEPRINTS, copy_guard=10)
    assert all(COPY_GUARD_KEY not in json.dumps(c.response_format or {}) for c in lm.calls)


def test_the_guard_never_allows_more_than_the_check_does():
    lm = ScriptedLM(_writer)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        SynthesisProgram().write_queries(DOCUMENT, BLUEPRINTS, copy_guard=25)
    assert lm.calls[0].response_format["schema"]["properties"]["queries"][COPY_GUARD_KEY]["max_words"] == 10


class CopyOut(dspy.Signature):
    """Repeat the document's first sentence word for word."""

    document: str = dspy.InputField()
    sentence: str = dspy.OutputField()


@pytest.mark.llm
@pytest.mark.timeout(600)
def test_real_small_model_told_to_copy_decodes_no_copy_under_the_guard(small_generator):
    """What the guard is for, on the embedded engine: asked to copy, the model copies without it, and under it the
    answer holds no run the check would reject (a real grammar, real tokens: words split, spaces in tokens)."""
    from syntra_dspy.programs.narrowing import narrowed_outputs

    with dspy.context(lm=small_generator, adapter=dspy.JSONAdapter()):
        free = dspy.Predict(CopyOut)(document=DOCUMENT).sentence
        with narrowed_outputs({}, {"sentence": copy_guard_mark(DOCUMENT)}):
            guarded = dspy.Predict(CopyOut)(document=DOCUMENT).sentence
    assert longest_copy(free, DOCUMENT)[1] > MAX_COPIED_WORDS, free  # the model does copy when let
    assert longest_copy(guarded, DOCUMENT)[1] <= MAX_COPIED_WORDS, guarded
    assert len(guarded.split()) > MAX_COPIED_WORDS  # it still wrote a sentence, not an empty string
