"""Fitting the graded judge's calibration: thresholds by kappa, the fused score, cross-validated feature choice."""

from __future__ import annotations

import pytest

from syntra_dspy.judging.grading import Grade, grade_from_logprobs
from syntra_dspy.judging.calibration import (
    UNCALIBRATED,
    CalibrationSample,
    best_cut,
    fit_calibration,
    roc_auc,
)


def sample(q, e, cos, gold, source="retrieved"):
    return CalibrationSample(q, e, cos, gold, source)


def test_best_cut_separates_and_takes_the_middle_of_the_best_interval():
    assert best_cut([0.1, 0.2, 2.0, 2.4], [False, False, True, True]).threshold == pytest.approx(1.1)
    assert best_cut([0.1, 0.2, 2.0, 2.4], [False, False, True, True]).kappa == 1.0
    assert best_cut([0.1, 2.0, 0.2, 2.4], [False, False, True, True]).kappa == pytest.approx(0.5)
    assert best_cut([0.1, 0.2], [True, True]).kappa is None  # one class: no threshold agrees beyond chance
    assert roc_auc([0.1, 0.2, 2.0, 2.4], [False, False, True, True]) == 1.0
    assert roc_auc([1.0, 1.0], [True, False]) == 0.5 and roc_auc([1.0], [True]) is None


def test_expected_alone_is_chosen_when_it_separates_and_the_cosine_does_not():
    samples = []
    for q in range(4):
        samples += [sample(f"q{q}", 2.6, 0.3, "positive", "example_positive"),
                    sample(f"q{q}", 1.0, 0.6, "hard_negative"), sample(f"q{q}", 0.9, 0.5, "hard_negative"),
                    sample(f"q{q}", 0.1, 0.1, "easy_negative", "control")]
    cal = fit_calibration(samples)
    assert cal.feature == "expected" and 1.0 < cal.positive_threshold < 2.6
    assert 0.1 < cal.hard_threshold < 0.9  # related vs unrelated negatives
    assert cal.summary.binary_kappa == 1.0 and cal.summary.three_class_kappa == 1.0
    assert cal.summary.cv_binary_kappa["expected"] == 1.0 and cal.summary.positives == 4
    assert cal.summary.query_texts == ("q0", "q1", "q2", "q3") and cal.summary.sources["control"] == 4
    assert [cal.label(2.7, None), cal.label(1.0, None), cal.label(0.0, None)] == [2, 1, 0]


def test_the_fused_score_wins_when_the_two_witnesses_complement_each_other():
    samples = []
    for q in range(5):  # E alone confuses one negative per query with the positive; the cosine tells them apart
        samples += [sample(f"q{q}", 2.0, 0.8, "positive"), sample(f"q{q}", 2.0, 0.2, "hard_negative"),
                    sample(f"q{q}", 0.5, 0.7, "hard_negative"), sample(f"q{q}", 0.0, 0.1, "easy_negative")]
    cal = fit_calibration(samples)
    assert cal.feature == "fused"
    assert cal.summary.cv_binary_kappa["fused"] > cal.summary.cv_binary_kappa["expected"]
    assert cal.classify(2.0, 0.8) == "positive" and cal.classify(2.0, 0.2) != "positive"
    with pytest.raises(ValueError, match="similarity"):
        cal.score(2.0, None)


def test_a_calibration_set_without_positives_is_refused():
    with pytest.raises(ValueError, match="known positive"):
        fit_calibration([sample("q", 1.0, 0.2, "hard_negative")])


def test_label_probabilities_are_read_from_the_first_tokens_alternatives():
    import math

    logprobs = {"content": [{"token": "2", "logprob": math.log(0.5), "top_logprobs": [
        {"token": "2", "logprob": math.log(0.5)}, {"token": " 3", "logprob": math.log(0.3)},
        {"token": "3", "logprob": math.log(0.1)}, {"token": "The", "logprob": math.log(0.1)}]}]}
    grade = grade_from_logprobs(logprobs, written=2)
    assert grade.probs == pytest.approx((0.0, 0.0, 0.5 / 0.8, 0.3 / 0.8))  # " 3" is the likelier spelling of 3
    assert grade.mass == pytest.approx(0.8) and grade.expected == pytest.approx(2 + 0.3 / 0.8)
    assert grade_from_logprobs(None, written=1) == Grade(None, 1)
    unsure = {"content": [{"token": "The", "logprob": -0.01, "top_logprobs": [{"token": "1", "logprob": -6.0}]}]}
    assert grade_from_logprobs(unsure, written=None).probs is None  # too little mass on the labels
    assert UNCALIBRATED.classify(1.6, None) == "positive" and UNCALIBRATED.classify(0.4, None) == "easy_negative"


@pytest.mark.parametrize("attempts", [1, 3])
def test_the_graded_loop_explains_mismatches_only_for_an_attempt_it_refines(tmp_path, attempts):
    from tests.helpers import compile_mini

    artifact, brain = compile_mini(tmp_path, judge="graded", judge_feature="expected", max_attempts=attempts)
    (loop,) = [h for h in artifact.manifest["history"] if h["name"] == "annotation_instruction"]
    tried = loop["attempts"]
    refined = len(tried) - 1
    assert brain.calls.get("explain_mismatches", 0) == refined
    if attempts == 1:
        assert len(tried) == 1 and not tried[0]["passed"]
        assert tried[0]["details"]["mismatches"] and tried[0]["feedback"]  # the raw mismatches are recorded
    else:
        assert refined >= 1 and tried[-1]["passed"]


def _shifted_lists(queries=6):
    """Each query's list has its own level (a generous judge on one query, a strict one on the next): the positive
    is always the one that stands out from its list, but no absolute cut separates positives from negatives."""
    samples = []
    for q in range(queries):
        level = 0.25 * q
        samples += [sample(f"q{q}", 1.6 + level, 0.55 + 0.03 * q, "positive")]
        samples += [sample(f"q{q}", 1.0 + level + 0.05 * n, 0.45 + 0.03 * q + 0.01 * n, "hard_negative")
                    for n in range(5)]
        samples += [CalibrationSample(f"q{q}", 0.1 + level, 0.05, "easy_negative", "control", listed=False)]
    return samples


def test_the_relative_score_wins_when_positives_stand_out_from_their_own_list():
    samples = _shifted_lists()
    cal = fit_calibration(samples)
    assert cal.feature == "relative" and cal.needs_list
    cv = cal.summary.cv_binary_kappa
    assert cv["relative"] == 1.0 and cv["relative"] > max(cv["expected"], cv["fused"])
    assert cal.summary.binary_kappa == 1.0 and cal.summary.auc["relative"] == 1.0
    with pytest.raises(ValueError, match="rest of its query's list"):
        cal.score(2.0, 0.5)


def test_the_relative_judge_settles_a_querys_labels_against_its_list():
    from syntra_dspy.judging.grading import Grade
    from syntra_dspy.judging.judge import Candidate, RelevanceJudge

    cal = fit_calibration(_shifted_lists())

    class Program:  # grades a candidate by the E written in its text
        state = type("S", (), {"judge": cal})()

        def grade_candidate(self, query, text, logprobs=True, order="query-first"):
            e = float(text)
            return Grade((1 - e / 3, 0.0, 0.0, e / 3), None, 1.0)

    judge = RelevanceJudge(Program())
    # a strict query: every E is low, but the first candidate stands out from the rest of its list
    texts = ["1.2", "0.6", "0.65", "0.7", "0.62", "0.68"]
    cands = [Candidate(t, 0.5 - 0.01 * n) for n, t in enumerate(texts)] + [Candidate("0.1", 0.05, listed=False)]
    judged = judge.judge_all("q", cands)
    assert [j.klass for j in judged[:2]] == ["positive", "hard_negative"]
    assert judged[-1].klass == "easy_negative"
    # the same first candidate judged alone has no list to stand out from
    (alone,) = judge.judge("q", cands[:1])
    assert alone.klass != "positive"
    # `syntra agreement` logs each candidate's judgment as it is made, then settles the query's labels
    from syntra_dspy.judging.candidates import JudgedCandidate
    from syntra_dspy.judging.measure import settle_rows

    judged_alone = [judge.judge("q", [c])[0] for c in cands]
    rows = [{"key": str(n), "judgment": j.to_dict()} for n, j in enumerate(judged_alone)]
    listed = [JudgedCandidate("q", "q", str(n), n if c.listed else None, c.cosine, "x", "retrieved")
              for n, c in enumerate(cands)]
    settled = settle_rows(judge, listed, rows, corpus=None)
    assert [r["judgment"]["class"] for r in settled] == [j.klass for j in judged]
    assert rows[0]["judgment"]["class"] != "positive"  # the log's provisional row is left as it was


def _lexical_lists(queries=6):
    """The grades and cosines confuse the positive with one negative of its list in every query; only the BM25
    score (the lexical witness) tells them apart."""
    samples = []
    for q in range(queries):
        level = 0.2 * q
        samples += [CalibrationSample(f"q{q}", 1.5 + level, 0.6, "positive", "retrieved", lexical=14.0 + q)]
        samples += [CalibrationSample(f"q{q}", 1.5 + level, 0.6, "hard_negative", "retrieved", lexical=5.0 + q)]
        samples += [CalibrationSample(f"q{q}", 1.0 + level + 0.05 * n, 0.45 + 0.01 * n, "hard_negative",
                                      "retrieved", lexical=4.0 + 0.5 * n) for n in range(4)]
        samples += [CalibrationSample(f"q{q}", 0.1, 0.05, "easy_negative", "control", listed=False, lexical=0.0)]
    return samples


def test_the_hybrid_score_wins_when_bm25_separates_what_grades_and_cosine_cannot():
    from syntra_dspy.judging.calibration import list_contexts

    samples = _lexical_lists()
    cal = fit_calibration(samples)
    cv = cal.summary.cv_binary_kappa
    assert cal.feature == "hybrid" and cal.needs_list and cal.needs_lexical
    assert cv["hybrid"] == 1.0 and cv["hybrid"] > max(cv["expected"], cv["fused"], cv["relative"])
    assert cal.summary.auc["lexical"] > cal.summary.auc["expected"]
    group = [s for s in samples if s.query == "q2" and s.listed]
    contexts = list_contexts([s.expected for s in group], [s.cosine for s in group], [True] * len(group),
                             [s.lexical for s in group])
    assert [cal.classify(s.expected, s.cosine, c, s.lexical) for s, c in zip(group, contexts)][:2] == \
        ["positive", "hard_negative"]
    with pytest.raises(ValueError, match="BM25"):
        cal.score(1.5, 0.6, contexts[0])


def test_without_bm25_scores_the_hybrid_score_is_not_offered_and_cannot_be_forced():
    from dataclasses import replace

    samples = [replace(s, lexical=None) for s in _lexical_lists()]
    cal = fit_calibration(samples)
    assert cal.feature != "hybrid" and "hybrid" not in cal.summary.cv_binary_kappa
    with pytest.raises(ValueError, match="BM25 score of every calibration candidate"):
        fit_calibration(samples, feature="hybrid")
    one_missing = _lexical_lists()
    one_missing[3] = replace(one_missing[3], lexical=None)  # e.g. a few-shot positive given as text
    assert "hybrid" not in fit_calibration(one_missing).summary.cv_binary_kappa


def test_a_judged_candidate_set_gets_bm25_scores_per_query_and_none_outside_the_corpus():
    from syntra_dspy.judging.candidates import JudgedCandidate, with_lexical

    class Lexical:
        def __init__(self):
            self.asked = []

        def scores(self, query, doc_ids):
            self.asked.append(query)
            return [float(len(d)) if d != "missing" else None for d in doc_ids]

    cands = [JudgedCandidate("a", "qa", "d1", 0, 0.5, "positive", "retrieved"),
             JudgedCandidate("a", "qa", "doc22", 1, 0.4, "hard_negative", "retrieved"),
             JudgedCandidate("b", "qb", "given", None, 0.3, "positive", "example_positive", text="a text"),
             JudgedCandidate("b", "qb", "missing", 0, 0.2, "hard_negative", "retrieved")]
    lexical = Lexical()
    scored = with_lexical(cands, lexical)
    assert [c.lexical for c in scored] == [2.0, 5.0, 5.0, None] and lexical.asked == ["qa", "qb"]
    assert [c.doc_id for c in scored] == [c.doc_id for c in cands]


def _misleading_lists(queries=8):
    """In every query one negative has a higher grade and cosine than the positive; only the BM25 score (and
    its standing) tells them apart. Added with equal weight, the two misleading witnesses outvote the lexical
    one; weighed, they need not."""
    samples = []
    for q in range(queries):
        shift = 0.05 * q
        samples += [CalibrationSample(f"q{q}", 1.3 + shift, 0.50, "positive", "retrieved", lexical=12.0 + q)]
        samples += [CalibrationSample(f"q{q}", 2.2 + shift, 0.85, "hard_negative", "retrieved", lexical=6.0 + q)]
        samples += [CalibrationSample(f"q{q}", 1.0 + shift + 0.05 * n, 0.40 + 0.02 * n, "hard_negative",
                                      "retrieved", lexical=4.0 + 0.5 * n + 0.3 * q) for n in range(5)]
        # a random document sharing a few of the query's words: only its grade and cosine say it is unrelated
        samples += [CalibrationSample(f"q{q}", 0.1, 0.05, "easy_negative", "control", listed=False,
                                      lexical=5.0 + 0.3 * q)]
    return samples


def test_the_weighted_score_learns_to_trust_the_witness_that_separates():
    samples = _misleading_lists()
    chosen = fit_calibration(samples)
    cv = chosen.summary.cv_binary_kappa
    # cross-validated and reported, but auto does not choose it: it must be asked for
    assert cv["weighted"] == 1.0 and cv["weighted"] > cv["hybrid"] and chosen.feature != "weighted"
    cal = fit_calibration(samples, feature="weighted")
    assert cal.feature == "weighted" and cal.needs_list and cal.needs_lexical
    assert list(cal.weights) == ["expected", "cosine", "expected_standing", "cosine_standing", "lexical",
                                 "lexical_standing"]
    assert cal.weights["lexical"] > 0 and cal.weights["lexical"] > cal.weights["expected"]
    assert cal.summary.binary_kappa == 1.0
    # the weights are fitted for positives and weigh the standing of the grade and cosine against them, which
    # lifts a random document (far below the list on both); related and unrelated negatives are told apart by
    # the plain sum of the terms instead
    assert max(cal.weights["expected_standing"], cal.weights["cosine_standing"]) < 0
    assert cal.summary.three_class_kappa == 1.0
    hybrid = fit_calibration(samples, feature="hybrid")
    assert hybrid.summary.binary_kappa < 1.0 and not hybrid.weights


def test_a_weighted_calibration_round_trips_and_others_serialise_as_before():
    import json

    from syntra_dspy.judging.calibration import JudgeCalibration, sample_contexts

    samples = _misleading_lists()
    cal = fit_calibration(samples, feature="weighted")
    again = JudgeCalibration.model_validate(json.loads(json.dumps(cal.model_dump(mode="json"))))
    assert again == cal
    contexts = sample_contexts(samples)
    assert [again.score(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, contexts)] == \
        [cal.score(s.expected, s.cosine, c, s.lexical) for s, c in zip(samples, contexts)]
    # a score without weights writes no "weights" key: an artifact saved before weighted scores keeps its bytes
    assert "weights" not in fit_calibration(samples, feature="hybrid").model_dump(mode="json")


def test_without_bm25_scores_the_weighted_score_weighs_the_four_list_terms():
    from dataclasses import replace

    samples = [replace(s, lexical=None) for s in _shifted_lists()]
    cal = fit_calibration(samples, feature="weighted")
    assert list(cal.weights) == ["expected", "cosine", "expected_standing", "cosine_standing"]
    assert cal.needs_list and not cal.needs_lexical
    assert cal.summary.binary_kappa == 1.0


def test_the_hybrid_scores_logged_by_an_agreement_run_are_reproduced_exactly():
    """The scores of the committed SciFact measurement (provisional: each candidate alone) come out bit for bit
    from the committed artifact's calibration, so refactoring the score changes no label."""
    import json
    from pathlib import Path

    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.judging.calibration import ListContext

    root = Path(__file__).resolve().parents[1]
    cal = load_artifact(root / "artifacts/scifact/22e653baa2bb").program.state.judge
    results = root / "benchmarks/results/judge_agreement_hybrid_fresh"
    candidates = {(c["query_id"], c["doc_id"]): c for c in json.loads((results / "candidates.json").read_text())}
    rows = [json.loads(line) for line in (results / "judgments.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["artifact"] == "22e653baa2bb"]
    assert cal.feature == "hybrid" and len(rows) == 463
    for row in rows:
        c = candidates[(row["query_id"], row["doc_id"])]
        score = cal.score(row["judgment"]["grade"]["expected"], c["cosine"], ListContext((), ()), c["lexical"])
        assert score == row["judgment"]["score"]
