"""Writing queries with scripted brains: repair notes, near-duplicates asked again alone, valid queries kept."""

from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.errors import LMOutputError, QueriesIncomplete
from syntra_dspy.programs.components import ComponentState, FewShotPair
from syntra_dspy.programs.synthesis import SynthesisProgram
from syntra_dspy.task import TaskDefinition
from syntra_dspy.testing import STYLE_MARK, SyntraBrain, scripted_lm
from syntra_dspy.programs.validation import WriteTally

from test_produce_support import mini_artifact, rows
from test_query_form import BLUEPRINTS, CLAIMS, DOC


def program(instruction: str = "") -> SynthesisProgram:
    definition = TaskDefinition(query_type="biomedical claim", doc_type="abstract",
                                relevance_definition="relevant if it reports evidence on the claim")
    examples = tuple(FewShotPair(query=q, positive_text="an abstract") for q in CLAIMS)
    return SynthesisProgram(ComponentState(task_definition=definition, examples=examples,
                                           query_instruction=instruction))


def write(brain: SyntraBrain, blueprints=BLUEPRINTS[:2], instruction: str = STYLE_MARK, tally=None) -> list[str]:
    with dspy.context(lm=scripted_lm(brain), adapter=dspy.JSONAdapter()):
        return program(instruction).write_queries(DOC, blueprints, tally=tally)


class Recording(SyntraBrain):
    """Keeps the blueprints and the retry note of every write call."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.asked: list[tuple[str, str]] = []

    def _route(self, system, inputs, outputs):
        if "queries" in outputs:
            self.asked.append((inputs.get("blueprints", ""), inputs.get("retry_note", "")))
        return super()._route(system, inputs, outputs)


class CannotRestate(Recording):
    """Writes questions, and restates a question as the same question (the restatement is rejected too)."""

    @staticmethod
    def rewrite(inputs):
        return {"rewritten": inputs.get("query", "")}


class HeedsNotes(CannotRestate):
    """Writes questions, but claims once a repair note asks for a declarative claim."""

    def _route(self, system, inputs, outputs):
        if "queries" in outputs and "declarative claim" in inputs.get("retry_note", ""):
            system += "\n" + STYLE_MARK
        return super()._route(system, inputs, outputs)


class Rewords(Recording):
    """On its first answer only, writes blueprint 1's query as blueprint 0's words in another order."""

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write" and len(self.asked) == 1:
            first = next(q["query"] for q in answer["queries"] if q["blueprint"] == 0)
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = " ".join(reversed(first.split()))
        return name, answer


class AlwaysAsks(SyntraBrain):
    """Writes blueprint 1's query as a question on every answer (the task's examples are claims)."""

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write":
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = f"What is known about {q['query']}?"
        return name, answer


class ReadsTheRule(Recording):
    """Writes questions unless the call itself says queries are declarative claims (a small writer asked for
    "search queries" writes questions, and ignores a rule far up in a long instruction)."""

    def _route(self, system, inputs, outputs):
        self.rules = [*getattr(self, "rules", []), inputs.get("language", "")]
        if "queries" in outputs and "as a declarative claim of 4-20 words" in inputs.get("language", ""):
            system += "\n" + STYLE_MARK
        return super()._route(system, inputs, outputs)


def test_a_writer_told_the_examples_form_in_the_call_needs_no_repair():
    brain, tally = ReadsTheRule(), WriteTally()
    assert write(brain, instruction="", tally=tally) == ["Notch has broad supporting effects",
                                                         "Notch has specific refuting effects"]
    assert len(brain.asked) == 1 and (tally.queries, tally.off_form) == (2, 0)
    assert brain.rules[-1].startswith("Write every query in English, as a declarative claim of 4-20 words ending")


def test_the_rule_follows_the_examples_form():
    from syntra_dspy.query_form import QueryForm

    assert "ending with a question mark" in QueryForm.from_examples(["What does FGF21 do?", "Is ATF4 a marker?"]).rule()
    assert "without final punctuation" in QueryForm.from_examples(["notch signalling", "fgf21 mice"]).rule()
    assert QueryForm.from_examples(["肿瘤细胞的增殖",
                                    "小鼠的基因表达"]).rule().startswith("as a few search terms (")


def test_questions_for_claim_examples_are_restated_as_claims_in_one_short_call_each():
    brain, tally = Recording(), WriteTally()
    assert write(brain, instruction="", tally=tally) == ["Notch has broad supporting effects.",
                                                         "Notch has specific refuting effects."]
    assert len(brain.asked) == 1 and brain.calls["rewrite"] == 2  # no second write call
    assert tally.restated == {0: "What is known about Notch (broad supporting)?",
                              1: "What is known about Notch (specific refuting)?"}
    assert (tally.queries, tally.off_form) == (2, 2)


class CopiesOnce(Recording):
    """Writes blueprint 1's query as a copied passage of the document (a claim by form, so only the copy is wrong)."""

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write":
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = "Notch receptors expressed on hematopoietic stem cells interact with their " \
                                 "ligands on bone marrow stromal cells."
        return name, answer


def test_a_query_that_copies_the_document_is_rewritten_in_other_words_by_one_short_call():
    brain, tally = CopiesOnce(), WriteTally()
    queries = write(brain, tally=tally)
    assert queries == ["Notch has broad supporting effects", "Notch receptors expressed in other words."]
    assert len(brain.asked) == 1 and brain.calls["rewrite"] == 1
    assert tally.restated[1].startswith("Notch receptors expressed on hematopoietic stem cells")


class AnswersInChinese(Recording):
    """Writes blueprint 1's query in Chinese (a cross-language writer answering in the document's language); the
    rewrite translates it only when its note asks for a translation into English."""

    CHINESE = "造血干细胞上表达的Notch受体"
    ENGLISH = "Notch receptors on blood stem cells have supporting effects."

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write":
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = self.CHINESE
        return name, answer

    def rewrite(self, inputs):
        if inputs.get("query") == self.CHINESE and "translate it into English" in inputs.get("problem", ""):
            return {"rewritten": self.ENGLISH}
        return {"rewritten": inputs.get("query", "")}


def test_a_query_in_the_documents_language_is_translated_by_one_short_call():
    brain, tally = AnswersInChinese(), WriteTally()
    queries = write(brain, tally=tally)
    assert queries == ["Notch has broad supporting effects", AnswersInChinese.ENGLISH]
    assert len(brain.asked) == 1 and brain.calls["rewrite"] == 1  # no second write call
    assert tally.restated[1] == AnswersInChinese.CHINESE


class LeavesAChineseWord(Recording):
    """Writes blueprint 1's claim in English with one Chinese word left in it (the CSL run's commonest failure:
    "sources of PM10 in厦门"); its rewrites keep the word, as the 1.5B writer's did; the glossary translates it."""

    MIXED = "Notch receptors on 造血干细胞 have supporting effects."

    def __init__(self, rewrite_to: str | None = None, **kw):
        super().__init__(glossary={"blood stem cells": "造血干细胞"}, **kw)
        self.rewrite_to = rewrite_to
        self.rewrites: list[str] = []

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write":
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = self.rewrite_to or self.MIXED
        return name, answer

    def rewrite(self, inputs):
        self.rewrites.append(inputs.get("query", ""))
        return {"rewritten": self.MIXED}


def test_chinese_words_left_in_an_english_query_are_translated_one_by_one_without_a_rewrite():
    brain, tally = LeavesAChineseWord(), WriteTally()
    queries = write(brain, tally=tally)
    assert queries == ["Notch has broad supporting effects",
                       "Notch receptors on blood stem cells have supporting effects."]
    assert brain.calls["translate"] == 2 and brain.calls.get("rewrite", 0) == 0 and len(brain.asked) == 1  # there, back
    assert tally.restated[1] == LeavesAChineseWord.MIXED


def test_a_rewrite_that_keeps_a_chinese_word_has_it_translated():
    # a question where the examples are claims: rewritten, and the rewrite keeps a Chinese word, which is translated
    brain = LeavesAChineseWord(rewrite_to="What do Notch receptors on stem cells do?")
    queries = write(brain)
    assert queries[1] == "Notch receptors on blood stem cells have supporting effects."
    assert brain.rewrites == ["What do Notch receptors on stem cells do?"]
    assert brain.calls["translate"] == 2


class Mistranslates(LeavesAChineseWord):
    """Translates the left word wrongly (as the 1.5B model did 厦门 -> "Shanghai"), and that back as another word."""

    def translate(self, inputs):
        self.calls["translate_asked"] = self.calls.get("translate_asked", 0) + 1
        return {"translation": "上海" if "Chinese" in inputs.get("target_language", "") else "Shanghai"}


def test_a_word_translation_that_does_not_translate_back_is_refused():
    brain = Mistranslates()
    with pytest.raises(QueriesIncomplete) as exc:
        write(brain)
    assert exc.value.kept == {0: "Notch has broad supporting effects"}  # no query naming the wrong place
    assert brain.calls["translate"] >= 2  # there and back


def test_a_word_that_cannot_be_translated_leaves_the_query_rejected():
    brain = LeavesAChineseWord()
    brain.glossary = {}  # the translation comes back unchanged and is refused; the rewrite keeps the word too
    with pytest.raises(QueriesIncomplete) as exc:
        write(brain)
    assert exc.value.kept == {0: "Notch has broad supporting effects"}
    assert "blueprint 1 is not written in English" in str(exc.value)
    assert brain.calls["translate"] >= 1 and brain.rewrites  # both fixes were tried


KEYWORDS = ["notch signalling in tumour stroma", "fgf21 and atherosclerosis in mice", "breast cancer risk factors"]


def test_questions_for_keyword_examples_are_cut_to_their_subject_in_code_without_a_rewrite_call():
    definition = TaskDefinition(query_type="keyword search request", doc_type="abstract",
                                relevance_definition="relevant if it addresses the request's subject")
    state = ComponentState(task_definition=definition, query_instruction="",
                           examples=tuple(FewShotPair(query=q, positive_text="an abstract") for q in KEYWORDS))
    brain, tally = CannotRestate(), WriteTally()
    with dspy.context(lm=scripted_lm(brain), adapter=dspy.JSONAdapter()):
        queries = SynthesisProgram(state).write_queries(DOC, BLUEPRINTS[:2], tally=tally)
    assert queries == ["known about Notch (broad supporting)", "known about Notch (specific refuting)"]
    assert len(brain.asked) == 1 and brain.calls.get("rewrite", 0) == 0  # neither a second write nor a rewrite
    assert tally.restated == {0: "What is known about Notch (broad supporting)?",
                              1: "What is known about Notch (specific refuting)?"}
    # claim examples: a question cannot be cut into a claim, so the same writer is rejected (next test)


class AsksYesNo(CannotRestate):
    """Writes yes/no questions (and cannot restate them): the SciFact writer's commonest question after wh-ones."""

    QUESTIONS = {0: "Does Notch drive proliferation of myeloma cells?", 1: "Is Notch required for stromal cell fate?"}

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write":
            for q in answer["queries"]:
                q["query"] = self.QUESTIONS[q["blueprint"]]
        return name, answer


def test_yes_no_questions_for_claim_examples_are_restated_as_their_claims_in_code_without_a_call():
    brain, tally = AsksYesNo(), WriteTally()
    assert write(brain, instruction="", tally=tally) == ["Notch drives proliferation of myeloma cells.",
                                                         "Notch is required for stromal cell fate."]
    assert len(brain.asked) == 1 and brain.calls.get("rewrite", 0) == 0  # neither a second write nor a rewrite
    assert tally.restated == AsksYesNo.QUESTIONS


def test_a_writer_of_questions_whose_restatements_fail_is_rejected_with_the_repair_note():
    brain, tally = CannotRestate(), WriteTally()
    with pytest.raises(LMOutputError, match="write a declarative claim like the examples, not a question") as caught:
        write(brain, instruction="", tally=tally)
    assert not isinstance(caught.value, QueriesIncomplete) and caught.value.stage == "write"
    assert len(brain.asked) == 3 and "not a question" in brain.asked[1][1]
    assert (tally.queries, tally.off_form, len(tally.notes)) == (6, 6, 3)


class RestatesOnSecondTry(Recording):
    """Writes questions; its first restatement is a question again, and restating that one gives the claim."""

    @staticmethod
    def rewrite(inputs):
        query = inputs.get("query", "")
        if query.startswith("Is it so that "):
            return {"rewritten": query.removeprefix("Is it so that ").rstrip("?") + "."}
        claim = SyntraBrain.rewrite(inputs)["rewritten"]
        return {"rewritten": "Is it so that " + claim.rstrip(".") + "?"}


def test_a_restatement_that_is_still_a_question_is_restated_once_more():
    from syntra_dspy.programs.synthesis import REWRITE_TRIES

    brain, tally = RestatesOnSecondTry(), WriteTally()
    assert write(brain, instruction="", tally=tally) == ["Notch has broad supporting effects.",
                                                          "Notch has specific refuting effects."]
    assert len(brain.asked) == 1  # no new write call: each question cost two short rewrites
    assert REWRITE_TRIES == 2 and brain.calls["rewrite"] == 2 * REWRITE_TRIES
    assert tally.restated[0].startswith("What is known about Notch")


class RecopiesOnRewrite(CopiesOnce):
    """Copies a passage for blueprint 1, and its rewrite of the passage copies another one."""

    @staticmethod
    def rewrite(inputs):
        return {"rewritten": "Notch receptors expressed on hematopoietic stem cells interact with their ligands on "
                             "bone marrow stromal cells in vitro."}


def test_a_rewrite_that_copies_again_gets_no_second_rewrite():
    brain = RecopiesOnRewrite()
    with pytest.raises(QueriesIncomplete) as caught:
        write(brain)
    assert caught.value.kept == {0: "Notch has broad supporting effects"}
    assert brain.calls["rewrite"] == len(brain.asked) == 3  # one rewrite per write try, never a second


def test_a_writer_that_heeds_the_note_is_repaired():
    brain, tally = HeedsNotes(), WriteTally()
    assert write(brain, instruction="", tally=tally) == ["Notch has broad supporting effects",
                                                          "Notch has specific refuting effects"]
    assert len(brain.asked) == 2 and (tally.queries, tally.off_form) == (4, 2)


def test_a_near_duplicate_second_query_is_asked_again_alone():
    brain = Rewords()
    queries = write(brain, BLUEPRINTS)
    assert queries == ["Notch has broad supporting effects", "Notch has specific refuting effects",
                       "Jagged1-induced has broad supporting effects"]
    (first, _), (second, note) = brain.asked
    assert first.count("identifier:") == 3
    assert second == "1. identifier: Notch; specificity = specific; stance = refuting"  # alone, under its own number
    assert "nearly duplicates 'Notch has broad supporting effects'" in note
    assert "The queries for blueprint 0, 2 are accepted" in note


def test_a_blueprint_that_stays_invalid_leaves_the_valid_queries_in_their_positions():
    with pytest.raises(QueriesIncomplete, match="query for blueprint 1 is a question") as caught:
        write(AlwaysAsks(), BLUEPRINTS)
    assert caught.value.kept == {0: "Notch has broad supporting effects",
                                 2: "Jagged1-induced has broad supporting effects"}
    assert caught.value.stage == "write" and caught.value.last_answer


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory, minilm):
    """A production run whose writer never gets blueprint 1 right."""
    from syntra_dspy.production import produce

    artifact, index = mini_artifact(tmp_path_factory)
    store = tmp_path_factory.mktemp("partial") / "run.db"
    produce(artifact, store, generator=scripted_lm(AlwaysAsks()), index_dir=index, encoder=minilm,
            progress=False, docs=2, queries_per_doc=3, top_k=4, chunk_size=4)
    return store


def test_production_keeps_a_documents_valid_queries_and_records_the_missing_blueprint(partial_run):
    store = partial_run
    assert {s for s, in rows(store, "SELECT status FROM documents")} == {"partial"}
    for doc_id, in rows(store, "SELECT doc_id FROM documents"):
        assert [p for p, in rows(store, "SELECT position FROM queries WHERE doc_id=? ORDER BY position",
                                 (doc_id,))] == [0, 2]
    failures = rows(store, "SELECT stage, kind, detail FROM failures")
    assert len(failures) == 2 and all(f[:2] == ("write", "output") for f in failures)
    assert all(json.loads(f[2])["missing_blueprints"] == [1] for f in failures)


def test_export_stats_measure_form_and_near_duplicates_from_the_stored_texts(partial_run, tmp_path):
    """Also for a store written before these checks: here, one with a question and a reworded twin put back in."""
    import shutil
    import sqlite3

    from syntra_dspy.production import compute_stats, format_stats

    checked = compute_stats(partial_run)["quality"]["queries"]
    assert checked == {"queries": 4, "form": {"kind": "claim", "min_length": 4, "max_length": 20, "unit": "words"},
                       "in_form": 1.0, "near_duplicate_threshold": 0.7, "near_duplicates": 0.0, "restated": 0.0}
    older = tmp_path / "older.db"
    shutil.copy(partial_run, older)
    with sqlite3.connect(older) as conn:
        doc_id, text = conn.execute("SELECT doc_id, text FROM queries WHERE position = 0 LIMIT 1").fetchone()
        conn.execute("UPDATE queries SET text = ? WHERE doc_id = ? AND position = 2",
                     (" ".join(reversed(text.split())), doc_id))
        conn.execute("UPDATE queries SET text = 'What does it do?' WHERE doc_id != ? AND position = 0", (doc_id,))
    stats = compute_stats(older)
    assert stats["quality"]["queries"]["in_form"] == 0.75 and stats["quality"]["queries"]["near_duplicates"] == 0.25
    assert "form       75% of queries have the examples' form (claim, 4-20 words); 25% nearly duplicate" in \
        format_stats(stats)


class RewordsTwice(Recording):
    """Rewords blueprint 1's query as blueprint 0's on the first answer, and as blueprint 2's on the second."""

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write" and len(self.asked) <= 2:
            twin = "Notch has broad supporting effects" if len(self.asked) == 1 else \
                "Jagged1-induced has broad supporting effects"
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = " ".join(reversed(twin.split()))
        return name, answer


def test_every_retry_names_all_the_queries_kept_so_far():
    brain = RewordsTwice()
    assert write(brain, BLUEPRINTS)[1] == "Notch has specific refuting effects"
    assert [a[0].count("identifier:") for a in brain.asked] == [3, 1, 1]
    assert "nearly duplicates 'Jagged1-induced has broad supporting effects'" in brain.asked[2][1]
    assert "The queries for blueprint 0, 2 are accepted" in brain.asked[2][1]


class AlwaysQuestions(SyntraBrain):
    """Writes every query as a question, whatever the instruction says (a small writer's habit)."""

    def _route(self, system, inputs, outputs):
        return super()._route(system.replace(STYLE_MARK, ""), inputs, outputs)


def test_production_stores_a_restated_query_with_the_question_it_came_from(tmp_path_factory, minilm, tmp_path,
                                                                           capsys):
    from syntra_dspy.production import produce

    artifact, index = mini_artifact(tmp_path_factory)
    store = tmp_path / "run.db"
    brain = AlwaysQuestions()
    produce(artifact, store, generator=scripted_lm(brain), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=2, top_k=4, chunk_size=4)
    found = rows(store, "SELECT text, restated_from FROM queries")
    assert len(found) == 4 and brain.calls["write"] == 2  # one write call per document: nothing asked again
    for text, question in found:
        assert question.startswith("What is known about ") and question.endswith("?")
        assert text.endswith(" effects.") and not text.endswith("?")
    from syntra_dspy.cli import main

    assert main(["export", str(store), "--stats"]) == 0
    assert "100% rewritten from a rejected query" in capsys.readouterr().out


class CutsItsFirstAnswer(Recording):
    """Its first write answer stops mid-query at the token limit (the JSON never closed); what is cut off would
    still pass every check as a 4-word claim once the adapter's JSON repair has closed it."""

    def __call__(self, call):
        answer = super().__call__(call)
        if isinstance(answer, dict) and "queries" in answer and len(self.asked) == 1:
            text = json.dumps(answer)
            return text[:text.index(" effects", text.index('"blueprint": 1'))]
        return answer


def test_a_query_cut_off_at_the_token_limit_is_dropped_and_its_blueprint_asked_again():
    brain = CutsItsFirstAnswer()
    assert write(brain) == ["Notch has broad supporting effects", "Notch has specific refuting effects"]
    assert len(brain.asked) == 2 and brain.asked[1][0].startswith("1. identifier: Notch")
    assert "0. identifier" not in brain.asked[1][0]  # the complete query of the cut answer was kept


class CutRewrite(CopiesOnce):
    """Copies once; its rewrite runs to the token limit (an unclosed JSON answer)."""

    @staticmethod
    def rewrite(inputs):
        return '{"rewritten": "Notch receptors expressed on hematopoietic stem cells support their'


def test_a_rewrite_cut_off_at_the_token_limit_is_not_kept():
    brain = CutRewrite()
    with pytest.raises(QueriesIncomplete) as caught:
        write(brain)
    assert caught.value.kept == {0: "Notch has broad supporting effects"}
    assert brain.calls["rewrite"] >= 1


class CutsItsExtraction(SyntraBrain):
    """Its extraction answer stops at the token limit inside the last option of its last attribute dimension."""

    def __call__(self, call):
        answer = super().__call__(call)
        if isinstance(answer, dict) and "identifiers" in answer:
            text = json.dumps(answer)
            return text[:text.rindex("refuting") + 4]
        return answer


def test_an_extraction_cut_off_at_the_token_limit_loses_its_cut_dimension_not_a_fragment_of_it():
    with dspy.context(lm=scripted_lm(CutsItsExtraction()), adapter=dspy.JSONAdapter()):
        features = program().extract_features(DOC)
    assert [d.dimension for d in features.attributes] == ["specificity"]
    assert features.identifiers  # written before the cut, complete


def test_export_stats_find_a_moved_artifact_under_artifacts_by_its_checksum(partial_run, tmp_path, monkeypatch):
    """A store backed up and resumed elsewhere records an artifact path that is gone there: the stats look for the
    artifact under ./artifacts/<task>/<version> and use it only when its checksum is the one the run recorded."""
    import shutil
    from pathlib import Path

    from syntra_dspy.production import compute_stats
    from syntra_dspy.production.store import RunStore

    with RunStore.open(partial_run, readonly=True) as run:
        recorded = Path(run.meta()["artifact"]["path"])
    moved = tmp_path / "elsewhere" / "run.db"
    moved.parent.mkdir()
    shutil.copy(partial_run, moved)
    shutil.copytree(recorded, tmp_path / "checkout" / "artifacts" / recorded.parent.name / recorded.name)
    shutil.move(recorded, tmp_path / "gone")  # the folder the run found it in is no longer there
    monkeypatch.chdir(tmp_path / "checkout")
    try:
        assert compute_stats(moved)["quality"]["queries"]["in_form"] == 1.0
        # another artifact under the same name is not this run's: its form is not used
        found = tmp_path / "checkout" / "artifacts" / recorded.parent.name / recorded.name
        (found / "checksums.sha256").write_text((found / "checksums.sha256").read_text() + "\n", encoding="utf-8")
        assert compute_stats(moved)["quality"]["queries"]["in_form"] is None
    finally:
        shutil.move(tmp_path / "gone", recorded)


@pytest.mark.parametrize("brain_class", [ReadsTheRule, Recording, CannotRestate, HeedsNotes, CopiesOnce, AlwaysAsks])
def test_every_checked_answer_is_tallied_once_with_the_step_that_gave_it(brain_class):
    """What production stores for ``export --stats`` (issue 42): one check per blueprint a write call was asked for,
    one per rewrite call made, and the first check of each blueprint is the write call's."""
    brain, tally = brain_class(), WriteTally()
    try:
        queries = write(brain, instruction="", tally=tally)
    except QueriesIncomplete as exc:
        queries = list(exc.kept.values())
    except LMOutputError:
        queries = []
    asked = [len(json.loads(b)) if b.startswith("[") else b.count("\n") + 1 for b, _ in getattr(brain, "asked", [])]
    steps = [step for _, step, _ in tally.checks]
    assert steps.count("rewrite") == brain.calls.get("rewrite", 0)
    if asked:
        assert steps.count("write") == sum(asked)
    first = {}
    for blueprint, step, outcome in tally.checks:
        first.setdefault(blueprint, (step, outcome))
    assert sorted(first) == [0, 1] and all(step == "write" for step, _ in first.values())
    assert sum(outcome == "kept" for _, _, outcome in tally.checks) == len(queries)  # each kept query, once


def test_the_tally_names_the_check_that_rejected_each_first_answer():
    brain, tally = CopiesOnce(), WriteTally()
    write(brain, instruction=STYLE_MARK, tally=tally)
    assert tally.checks[:2] == [(0, "write", "kept"), (1, "write", "copy")]
    assert tally.checks[2][1:] in {("rewrite", "kept"), ("code", "kept")}


class CopiesWhatItSees(Recording):
    """Copies the document's second sentence for blueprint 1 whenever it is shown that sentence, and its rewrites
    copy it again (the 1.5B writer on held-out SciFact documents); otherwise writes as the scripted writer does."""

    COPIED = ("Notch receptors expressed on hematopoietic stem cells interact with their ligands on bone marrow "
              "stromal cells and control cell fate.")

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "write" and self.COPIED in inputs.get("document", ""):
            for q in answer["queries"]:
                if q["blueprint"] == 1:
                    q["query"] = self.COPIED
        return name, answer

    @staticmethod
    def rewrite(inputs):
        return {"rewritten": CopiesWhatItSees.COPIED}


@pytest.mark.parametrize("hide", [False, True])
def test_a_retry_after_a_copy_is_not_shown_the_sentence_copied(hide):
    brain, tally = CopiesWhatItSees(), WriteTally()
    with dspy.context(lm=scripted_lm(brain), adapter=dspy.JSONAdapter()):
        if not hide:
            with pytest.raises(QueriesIncomplete):  # three tries, the same copy each time: the blueprint is lost
                program(STYLE_MARK).write_queries(DOC, BLUEPRINTS[:2], tally=tally)
            return
        queries = program(STYLE_MARK).write_queries(DOC, BLUEPRINTS[:2], tally=tally, hide_copied=True)
    assert len(queries) == 2 and CopiesWhatItSees.COPIED not in queries
    assert len(brain.asked) == 2  # one retry
    assert [o for b, step, o in tally.checks if b == 1 and step == "write"] == ["copy", "kept"]


def test_only_the_copied_sentences_are_hidden():
    from syntra_dspy.programs.validation import without_copied_sentences

    first, second = DOC.split(". ", 1)
    assert without_copied_sentences(DOC, [CopiesWhatItSees.COPIED], 10) == first + "."
    assert without_copied_sentences(DOC, ["Notch signalling in myeloma"], 10) == DOC  # nothing copied
    assert without_copied_sentences(second, [second], 10) == second  # never the whole document
