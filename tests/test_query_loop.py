"""The query loop measures difficulty and form in code: copying queries fail it until the instruction is refined."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from syntra_dspy.optimizers.query_measures import COPYING
from syntra_dspy.testing import PARAPHRASE_MARK, STYLE_MARK, SyntraBrain

from helpers import compile_mini


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("index")


class CopyingWriter(SyntraBrain):
    """Asks for claims from its first drafted instruction, and writes them from the document's own words."""

    def __init__(self, **kw):
        super().__init__(copies=True, **kw)

    def _route(self, system, inputs, outputs):
        name, answer = super()._route(system, inputs, outputs)
        if name == "draft_style":
            answer = {"style_guide": f"{answer['style_guide']}\n{STYLE_MARK}"}
        return name, answer


@dataclass(frozen=True)
class Doc:
    doc_id: str
    content: str


def query_loop(artifact) -> dict:
    return next(h for h in artifact.manifest["history"] if h["name"] == "query_instruction")


def test_queries_that_copy_the_document_fail_on_difficulty_and_pass_after_refinement(tmp_path, index_dir):
    artifact, brain = compile_mini(tmp_path, brain=CopyingWriter(), index_dir=index_dir)
    loop = query_loop(artifact)
    first, second = loop["attempts"]
    assert loop["passed"] and loop["kept"] == 2 and brain.calls["refine_query"] == 1
    copied = first["details"]["measures"]
    assert first["details"]["verifier_score"] == 3 and not first["passed"] and first["score"] == 1  # capped
    assert "ratings" not in first["details"]  # the written verifier is the default
    assert copied["queries"] == 6 and copied["bm25_top1"] == 1.0 and copied["copied"] == 1.0
    assert copied["form_fidelity"] == 1.0 and copied["dense_top1"] is not None
    assert all(row["bm25_rank"] == 0 for row in copied["rows"])
    assert COPYING in first["feedback"] and "at most 60%" in first["feedback"]
    measured = second["details"]["measures"]
    assert measured["bm25_top1"] <= 0.6 and measured["copied"] < 0.5 and second["passed"]
    assert PARAPHRASE_MARK in artifact.program.state.query_instruction


def test_the_difficulty_target_is_a_setting(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, brain=CopyingWriter(), index_dir=index_dir, bm25_top1_target=1.0)
    loop = query_loop(artifact)
    assert loop["passed"] and len(loop["attempts"]) == 1
    assert artifact.manifest["settings"]["bm25_top1_target"] == 1.0
    assert "ratings" not in loop["attempts"][0]["details"]


def test_with_the_difficulty_check_off_the_graded_verifier_still_tells_copied_claims_from_the_writers_own(
        tmp_path, index_dir):
    artifact, brain = compile_mini(tmp_path, brain=CopyingWriter(), index_dir=index_dir, bm25_top1_target=1.0,
                                   query_verifier="graded")
    loop = query_loop(artifact)
    first, second = loop["attempts"]
    ratings = first["details"]["ratings"]
    assert ratings["mode"] == "graded" and ratings["rated"] == 6 and ratings["unrated"] == 0
    assert all(r["copied"] == 1.0 and 1.5 < r["rating"] < 2 for r in ratings["ratings"])
    assert first["details"]["verifier_written"] == 3 and not first["passed"]
    assert first["score"] == ratings["mean"] < 2  # no measured miss: the score is the mean rating
    assert COPYING in first["feedback"] and "Rated lowest:" in first["feedback"]
    assert second["passed"] and second["details"]["ratings"]["mean"] > 2.5
    assert PARAPHRASE_MARK in artifact.program.state.query_instruction
    assert brain.calls["rate_query"] == 12  # one call per trial query per attempt


def test_keep_best_chooses_by_the_mean_rating(tmp_path, index_dir):
    """Two failing attempts that the written review scores alike: the graded one keeps the better."""
    artifact, _ = compile_mini(tmp_path, brain=CopyingWriter(), index_dir=index_dir, max_attempts=2, keep="best",
                               pass_threshold=3, query_verifier="graded")
    loop = query_loop(artifact)
    first, second = loop["attempts"]
    assert not loop["passed"] and first["details"]["verifier_written"] == second["details"]["verifier_written"] == 3
    assert first["score"] < second["score"] and loop["kept"] == 2


def test_the_rating_call_puts_the_examples_first_and_the_query_last():
    from syntra_dspy.optimizers.query_rating import QueryRater
    from syntra_dspy.optimizers.trials import QueryTrial
    from syntra_dspy.programs.authoring import InstructionAuthor
    from syntra_dspy.signatures import RateSyntheticQuery
    from syntra_dspy.testing import scripted_lm

    lm = scripted_lm()
    trials = [QueryTrial(Doc("d1", "Aspirin lowers the risk of stroke in older adults."),
                         queries=["Aspirin prevents strokes in the elderly.", "Does aspirin prevent strokes?"])]
    ratings = QueryRater(InstructionAuthor().rate_query, lm).rate("1. ATF4 is a stress marker.", trials)
    assert [round(r.rating, 2) for r in ratings.ratings] == [1.91, 1.09] and ratings.fallback is None
    assert [round(r.copied, 2) for r in ratings.ratings] == [0.5, 0.25]  # measured in code against the document
    call = lm.calls[0]
    assert call.system == RateSyntheticQuery.instructions
    assert call.user.startswith("Example queries: 1. ATF4 is a stress marker.\n\nQuery: Aspirin prevents strokes")
    assert "Aspirin lowers" not in call.user and call.user.rstrip().endswith("Rating (one digit, 0-3):")


def test_a_backend_without_probabilities_rates_by_the_written_digit_and_says_so():
    from syntra_dspy.optimizers.query_rating import QueryRater
    from syntra_dspy.optimizers.trials import QueryTrial
    from syntra_dspy.programs.authoring import InstructionAuthor
    from syntra_dspy.testing import scripted_lm

    class Digits(SyntraBrain):
        def rate_query(self, user):
            return super().rate_query(user).token

    trials = [QueryTrial(Doc("d1", "Aspirin lowers the risk of stroke in older adults."),
                         queries=["Aspirin prevents strokes in the elderly.", "Does aspirin prevent strokes?"])]
    ratings = QueryRater(InstructionAuthor().rate_query, scripted_lm(Digits())).rate("1. A claim.", trials)
    assert [r.rating for r in ratings.ratings] == [2.0, 1.0]
    assert "no log probabilities" in ratings.fallback and ratings.to_dict()["mode"] == "written"


def test_a_writer_of_the_wrong_form_fails_the_loop_with_the_examples_form_in_the_feedback(tmp_path, index_dir):
    artifact, _ = compile_mini(tmp_path, brain=SyntraBrain(stubborn=True), index_dir=index_dir, max_attempts=1)
    attempt = query_loop(artifact)["attempts"][0]
    assert not attempt["passed"] and attempt["score"] == 0  # trials never rewrite: no query of the right form
    assert attempt["details"]["measures"]["form_fidelity"] == 0.0
    assert attempt["details"]["form"] == {"kind": "claim", "min_length": 4, "max_length": 20, "unit": "words"}
    assert "the examples are declarative claims ending with a period of 4-20 words" in attempt["feedback"]
    assert "write a declarative claim like the examples, not a question" in attempt["feedback"]


def test_the_targets_and_the_near_duplicate_threshold_are_compile_flags():
    from syntra_dspy.cli import build_parser
    from syntra_dspy.cli.compile_cmd import settings_from_args

    args = build_parser().parse_args(["compile", "task.yaml", "--bm25-top1-target", "0.5", "--form-target", "0.8",
                                      "--near-duplicate", "0.6", "--query-verifier", "written"])
    settings = settings_from_args(args)
    assert (settings.bm25_top1_target, settings.form_target, settings.near_duplicate) == (0.5, 0.8, 0.6)
    assert settings.query_verifier == "written"
