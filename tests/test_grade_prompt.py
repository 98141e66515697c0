"""The brief grading prompt (``grade_prompt="brief"``): what it keeps of the task and what it leaves out."""

from syntra_dspy.programs.components import ComponentState, ProgramComponents
from syntra_dspy.programs.synthesis import compose_instructions
from syntra_dspy.task import TaskDefinition

DEFINITION = dict(query_type="research claim", doc_type="paper abstract",
                  relevance_definition="the abstract reports evidence for or against the claim")


def test_brief_grading_keeps_the_relevance_definition_and_a_scale_and_drops_the_guidance():
    state = ComponentState(task_definition=TaskDefinition(**DEFINITION), annotation_instruction="Prefer trials.")
    full = compose_instructions(state)["grade"]
    brief = compose_instructions(state.model_copy(update={"grade_prompt": "brief"}))
    assert "Prefer trials." in full and "Prefer trials." not in brief["grade"]
    assert brief["grade"].splitlines()[0] == "Relevance: the abstract reports evidence for or against the claim"
    assert all(f"{k} = " in brief["grade"] for k in range(4)) and "written in" not in brief["grade"]
    assert {k: v for k, v in brief.items() if k != "grade"} == {
        k: v for k, v in compose_instructions(state).items() if k != "grade"}  # every other step as before


def test_brief_grading_names_the_languages_only_where_queries_and_documents_differ():
    state = ComponentState(task_definition=TaskDefinition(**DEFINITION, query_language="en", document_language="zh"),
                           grade_prompt="brief")
    assert "Queries are written in English, documents in Chinese (Simplified)." in compose_instructions(state)["grade"]


def test_the_default_grading_prompt_saves_no_key_and_brief_round_trips():
    assert "grade_prompt" not in ProgramComponents(ComponentState()).dump_state()
    saved = ProgramComponents(ComponentState(grade_prompt="brief")).dump_state()
    assert saved["grade_prompt"] == "brief"
    assert ProgramComponents().load_state(saved).state.grade_prompt == "brief"
