"""SelfImprove and NoRefinement against the scripted brain: the loops really react to instructions."""

from __future__ import annotations

import pytest

from syntra_dspy.testing import GUIDANCE_MARK, LENIENT_MARK, STYLE_MARK, SyntraBrain

from helpers import compile_mini


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


def test_self_improve_passes_each_loop_after_one_refinement(tmp_path, index_dir):
    # E alone: in the mini corpus the retriever's cosine separates positives by itself, so a fused judge would
    # pass before any refinement; on E the strict first instruction cannot tell relevant from related.
    artifact, brain = compile_mini(tmp_path, index_dir=index_dir, judge_feature="expected")
    history = {h["name"]: h for h in artifact.manifest["history"]}
    assert list(history) == ["task_definition", "idattr", "query_instruction", "annotation_instruction"]
    for loop in history.values():
        assert loop["stop_reason"] == "passed" and loop["kept"] == 2
        assert len(loop["attempts"]) == 2 and loop["attempts"][0]["passed"] is False
        assert loop["attempts"][0]["feedback"]
    # the annotation loop's score is binary kappa on the calibration set (3 few-shot queries: their top-8, the
    # known positive among them, one random control each); the refined, lenient instruction separates them
    first, second = history["annotation_instruction"]["attempts"]
    assert first["score"] < 0.5 <= second["score"] and second["details"]["calibration"]["feature"] == "expected"
    assert second["details"]["candidates"] == 27
    state = artifact.program.state
    assert state.judge is not None and state.judge.summary.positives == 3
    assert state.judge.positive_threshold == second["details"]["calibration"]["positive_threshold"]
    assert GUIDANCE_MARK in state.idattr_guidance
    assert STYLE_MARK in state.query_instruction
    assert LENIENT_MARK in state.annotation_instruction
    assert "supports or refutes" in state.task_definition.relevance_definition
    # the refined instructions are what the program's steps now send
    assert STYLE_MARK in artifact.program.write.signature.instructions
    assert LENIENT_MARK in artifact.program.annotate.signature.instructions
    assert LENIENT_MARK in artifact.program.grade.signature.instructions
    assert brain.calls["refine_query"] == 1 and brain.calls["refine_annotation"] == 1
    assert brain.calls["grade"] == 2 * 27 and "annotate" not in brain.calls


def test_the_fused_judge_passes_where_the_retriever_already_separates(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, index_dir=index_dir)  # judge_feature auto
    loop = artifact.manifest["history"][-1]
    assert loop["passed"] and len(loop["attempts"]) == 1
    judge = artifact.program.state.judge
    assert judge.feature == "fused" \
        and judge.summary.cv_binary_kappa["fused"] > judge.summary.cv_binary_kappa["expected"]


def test_stubborn_brain_runs_to_attempt_limit_and_records_everything(tmp_path, index_dir):
    artifact, brain = compile_mini(tmp_path, brain=SyntraBrain(stubborn=True), index_dir=index_dir, max_attempts=3,
                                   judge_feature="expected")
    for loop in artifact.manifest["history"]:
        assert loop["stop_reason"] == "attempt_limit" and len(loop["attempts"]) == 3 and loop["kept"] == 3
    # refined after attempts 1 and 2, never after the last; each unchanged rewrite is resampled once
    assert brain.calls["refine_query"] == 4


def test_keep_best_with_attempt_limit(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, brain=SyntraBrain(stubborn=True), index_dir=index_dir,
                               max_attempts=2, keep="best")
    for loop in artifact.manifest["history"]:
        scores = [a["score"] for a in loop["attempts"]]
        best = max(range(len(scores)), key=lambda i: (scores[i], i)) + 1
        assert loop["kept"] == best


def test_no_refinement_uses_initial_instructions_only(tmp_path, index_dir):
    artifact, brain = compile_mini(tmp_path, strategy="none", index_dir=index_dir)
    assert all(h["stop_reason"] == "not_evaluated" for h in artifact.manifest["history"])
    assert not any(name.startswith(("judge", "refine")) for name in brain.calls)
    assert "extract" not in brain.calls and "annotate" not in brain.calls
    assert STYLE_MARK not in artifact.program.state.query_instruction
    # the graded judge's drafted instruction grades the calibration set once, untried, and is calibrated on it
    judge = artifact.program.state.judge
    assert judge is not None and brain.calls["grade"] == judge.summary.candidates
    assert artifact.manifest["settings"]["judge"] == "graded" \
        and artifact.manifest["usage"]["annotation_instruction"]["calls"] == judge.summary.candidates
    assert LENIENT_MARK not in artifact.program.grade.signature.instructions


def test_usage_is_recorded_per_loop(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, index_dir=index_dir)
    usage = artifact.manifest["usage"]
    for loop in artifact.manifest["history"]:
        stage = usage[loop["name"]]
        assert stage["calls"] > 0 and stage["prompt_tokens"] > 0 and stage["completion_tokens"] > 0
        assert sum(a["usage"].get("calls", 0) for a in loop["attempts"]) <= stage["calls"]


class YesManBrain(SyntraBrain):
    """Labels every candidate 3: the paper's positives-only check cannot tell."""

    @staticmethod
    def annotate(system, inputs):
        import re

        ids = re.findall(r"\[doc_id (\d+)\]", inputs.get("candidates", ""))
        return {"judgements": [{"doc_id": int(i), "score": 3} for i in ids]}


def test_control_negatives_catch_an_annotator_that_calls_everything_relevant(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path / "a", brain=YesManBrain(), index_dir=index_dir, max_attempts=2,
                               judge="written")
    loop = artifact.manifest["history"][-1]
    first = loop["attempts"][0]
    assert not loop["passed"] and first["details"]["control_errors"] == 3
    assert "Unrelated control document" in first["feedback"] or first["feedback"]
    for row in first["details"]["labels"]:
        assert len(row["control_positions"]) == 1
    positives_only, _ = compile_mini(tmp_path / "b", brain=YesManBrain(), index_dir=index_dir, max_attempts=2,
                                     control_negatives=0, judge="written")
    assert positives_only.manifest["history"][-1]["passed"]


class YesManGrader(SyntraBrain):
    """Grades every candidate 3 with the same confidence."""

    @staticmethod
    def grade(system, user):
        from syntra_dspy.lm import TokenDistribution

        return TokenDistribution({"3": 0.9, "2": 0.1})


def test_the_graded_loop_fails_an_annotator_that_calls_everything_relevant(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, brain=YesManGrader(), index_dir=index_dir, max_attempts=2,
                               judge_feature="expected")
    loop = artifact.manifest["history"][-1]
    assert not loop["passed"] and [a["score"] for a in loop["attempts"]] == [0.0, 0.0]
    assert loop["attempts"][0]["feedback"]


def test_a_definition_drawn_from_one_example_is_caught_in_code():
    from syntra_dspy.optimizers.definition_check import example_specific_terms
    from syntra_dspy.programs.components import FewShotPair
    from syntra_dspy.task import TaskDefinition

    pairs = [FewShotPair(query="Breast cancer risk rises with radiation exposure.", positive_text="Cohort of women."),
             FewShotPair(query="FGF21 lowers cholesterol.", positive_text="Mouse study of FGF21."),
             FewShotPair(query="Notch signalling guides stroma.", positive_text="Tumour stroma study.")]
    narrow = TaskDefinition(query_type="claim", doc_type="abstract",
                            relevance_definition="Relevant if it shows radiation exposure raises breast cancer risk.")
    general = TaskDefinition(query_type="claim", doc_type="abstract",
                             relevance_definition="Relevant if it reports evidence that supports or refutes the claim.")
    assert set(example_specific_terms(narrow, pairs)) >= {"radiation", "exposure", "breast", "cancer"}
    assert example_specific_terms(general, pairs) == []


def test_task_words_come_from_the_task_not_from_a_domain_list():
    """An insurance task: 'claims' is the one example's word here, and a word of the document type is the task's."""
    from syntra_dspy.optimizers.definition_check import example_specific_terms
    from syntra_dspy.programs.components import FewShotPair
    from syntra_dspy.task import TaskDefinition

    pairs = [FewShotPair(query="Are flood claims for a basement covered?", positive_text="Basement flood claims under "
                         "the homeowner policy."),
             FewShotPair(query="Is hail damage to a roof covered?", positive_text="Roof repair after hail."),
             FewShotPair(query="Does theft from a car count?", positive_text="Vehicle theft and contents cover.")]
    narrow = TaskDefinition(query_type="policyholder question", doc_type="adjuster memo",
                            relevance_definition="Relevant if it settles flood claims for a basement.")
    assert set(example_specific_terms(narrow, pairs)) == {"flood", "claims", "basement"}
    framed = TaskDefinition(query_type="policyholder question", doc_type="adjuster memo on homeowner policy",
                            relevance_definition="Relevant if the adjuster memo rules on the homeowner policy asked "
                                                 "about.")
    assert example_specific_terms(framed, pairs) == []


def test_clean_text_drops_looping_sentences_but_keeps_structure():
    from syntra_dspy.optimizers.text import clean_text

    looped = "```\nRole: a researcher.\n" + "The query must be easy to read. The query must be short. " * 30 \
        + "\n- keep this\n```"
    assert clean_text(looped) \
        == "Role: a researcher.\nThe query must be easy to read. The query must be short.\n- keep this"
    assert clean_text("1. Yes.\n2. Yes.") == "1. Yes.\n2. Yes."  # short items are not treated as loops


def test_clean_text_drops_sentences_that_repeat_an_earlier_one_with_a_word_changed():
    from syntra_dspy.optimizers.text import clean_text

    # what the embedded 1.5B refiner wrote as SciFact's query instruction (shortened)
    looped = ("The query must be written in a clear and concise manner. The query must be written in a way that is "
              "consistent with the claim. The query must be written in a way that is consistent with the evidence. "
              "The query must be written in a way that is consistent with the context. Name the finding, not the "
              "method.")
    assert clean_text(looped) == ("The query must be written in a clear and concise manner. The query must be "
                                  "written in a way that is consistent with the claim. Name the finding, not the "
                                  "method.")
    distinct = "Queries state one finding as a claim. Queries never copy a sentence of the abstract."
    assert clean_text(distinct) == distinct


def test_clean_text_drops_a_sentence_the_token_budget_cut_off():
    from syntra_dspy.optimizers.text import clean_text

    cut = "Relevant means it reports evidence on the claim. A label of 0 means"
    assert clean_text(cut) == "Relevant means it reports evidence on the claim."
    assert clean_text("Rules:\n- claims only\n- short") == "Rules:\n- claims only\n- short"  # list items kept
    assert clean_text("Write one claim per query") == "Write one claim per query"  # a lone sentence is kept
    assert clean_text("First rule. Second (see above)") == "First rule. Second (see above)"
