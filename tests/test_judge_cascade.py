"""The judge cascade: which candidates the graded judge need not ask, and what the store and stats say of them."""

from __future__ import annotations

import random

import pytest

from syntra_dspy.judging.calibration import CalibrationSample, JudgeCalibration, list_contexts
from syntra_dspy.judging.cascade import (
    MIN_MARGIN_LISTS,
    GradedCandidate,
    JudgeCascade,
    fixed_class,
    list_parts,
    sample_lists,
    split_score,
)
from syntra_dspy.judging.grading import Grade
from syntra_dspy.judging.judge import Candidate, RelevanceJudge

#: A fused calibration whose cosine can outweigh any grade: E spreads widely on its calibration set, the cosine
#: narrowly, so a candidate far from the calibration set's cosines has a class no E in [0, 3] changes.
FUSED = JudgeCalibration(feature="fused", positive_threshold=3.0, hard_threshold=-2.0, expected_mean=1.0,
                         expected_std=1.0, cosine_mean=0.3, cosine_std=0.1)
HYBRID = JudgeCalibration(feature="hybrid", positive_threshold=4.0, hard_threshold=-4.2, expected_mean=1.15,
                          expected_std=0.22, cosine_mean=0.45, cosine_std=0.17, expected_standing_mean=0.0,
                          expected_standing_std=1.7, cosine_standing_mean=-1.0, cosine_standing_std=4.2,
                          lexical_mean=6.0, lexical_std=4.9, lexical_standing_mean=-0.2, lexical_standing_std=1.8)
GRID = [3 * k / 60 for k in range(61)]


class Program:
    """Grades a candidate by the E written in its text; counts the calls."""

    def __init__(self, calibration):
        self.state = type("S", (), {"judge": calibration})()
        self.asked: list[str] = []

    def grade_candidate(self, query, text, logprobs=True, order="query-first"):
        self.asked.append(text)
        e = float(text)
        return Grade((1 - e / 3, 0.0, 0.0, e / 3), None, 1.0)


def test_the_lossless_rule_skips_exactly_the_candidates_whose_class_no_grade_changes():
    cascade = JudgeCascade.lossless(FUSED)
    assert cascade is not None and cascade.score_range == pytest.approx((-1.0, 2.0))
    cosines = [k / 100 for k in range(-20, 121)]
    skips = cascade.skips(FUSED, cosines)
    for i, cosine in enumerate(cosines):
        classes = {FUSED.classify(e, cosine) for e in GRID}
        if i in skips:
            assert classes == {skips[i].klass}, cosine
        else:  # the rule is tight for a per-candidate score: E = 0 and E = 3 bound it
            assert len(classes) > 1, cosine
    assert {s.klass for s in skips.values()} == {"positive", "hard_negative", "easy_negative"}
    assert "every E in [0, 3]" in next(iter(skips.values())).reason
    assert cascade.skips(FUSED, cosines, keep=set(skips)) == {}


def test_a_list_score_is_never_skipped_losslessly():
    for feature in ("relative", "hybrid", "weighted"):
        assert JudgeCascade.lossless(HYBRID.model_copy(update={"feature": feature})) is None
    # the reason: another candidate's grade moves this one's standing, and so its class
    cosine, lexical = [0.5, 0.5, 0.45, 0.4], [5.0, 6.0, 5.0, 4.0]
    classes = []
    for others in ([1.0, 1.0, 1.01], [2.5, 2.4, 0.1]):  # the same E of its own, other grades around it
        context = list_contexts([1.4, *others], cosine, [True] * 4, lexical)[0]
        classes.append(HYBRID.classify(1.4, 0.5, context, 5.0))
    assert classes == ["positive", "hard_negative"]


def test_split_score_adds_up_to_the_calibrated_score():
    rng = random.Random(0)
    weighted = HYBRID.model_copy(update={"feature": "weighted", "weights": {
        "expected": 0.3, "cosine": 0.3, "expected_standing": -0.2, "cosine_standing": -0.3, "lexical": 0.4,
        "lexical_standing": 0.8}})
    for cal in (FUSED, HYBRID, weighted, FUSED.model_copy(update={"feature": "expected"})):
        expected = [rng.uniform(0, 3) for _ in range(6)]
        cosine, lexical = [rng.uniform(0, 1) for _ in range(6)], [rng.uniform(0, 20) for _ in range(6)]
        contexts = list_contexts(expected, cosine, [True] * 6, lexical)
        for e, c, b, context in zip(expected, cosine, lexical, contexts):
            parts = split_score(cal, e, c, context, b)
            score, related = cal.scores(e, c, context, b)
            assert parts.score_free + parts.score_grade == pytest.approx(score)
            assert parts.related_free + parts.related_grade == pytest.approx(related)


def test_fixed_class_is_the_class_of_every_point_of_the_box():
    assert fixed_class((3.0, 5.0), (3.0, 5.0), 3.0, -2.0) == "positive"
    assert fixed_class((-1.0, 2.9), (-1.0, 2.9), 3.0, -2.0) == "hard_negative"
    assert fixed_class((-9.0, -2.1), (-9.0, -2.1), 3.0, -2.0) == "easy_negative"
    assert fixed_class((2.0, 3.0), (2.0, 3.0), 3.0, -2.0) is None
    assert fixed_class((-3.0, 0.0), (-3.0, 0.0), 3.0, -2.0) is None


def _graded_lists(n=12, seed=1):
    rng = random.Random(seed)
    return [[GradedCandidate(expected=rng.gauss(1.15, 0.22), cosine=rng.uniform(0.3, 0.7),
                             lexical=rng.uniform(0, 20)) for _ in range(8)] for _ in range(n)]


def test_a_margin_is_the_central_share_of_the_grades_part_and_needs_enough_lists():
    lists = _graded_lists()
    cascade = JudgeCascade.margin(HYBRID, lists, coverage=0.9, learned_from="test")
    parts = sorted(p.score_grade for group in lists for p in list_parts(HYBRID, group))
    inside = [p for p in parts if cascade.score_range[0] <= p <= cascade.score_range[1]]
    assert 0.88 <= len(inside) / len(parts) <= 0.93
    assert cascade.impute == HYBRID.expected_mean and cascade.lists == len(lists)
    wider = JudgeCascade.margin(HYBRID, lists, coverage=1.0, learned_from="test")
    assert wider.score_range == (parts[0], parts[-1])
    with pytest.raises(ValueError, match=f"at least {MIN_MARGIN_LISTS}"):
        JudgeCascade.margin(HYBRID, lists[:MIN_MARGIN_LISTS - 1], coverage=0.9, learned_from="test")
    # a per-candidate score's margin is never wider than what E in [0, 3] allows
    fused = JudgeCascade.margin(FUSED, lists, coverage=1.0, learned_from="test")
    assert -1.0 <= fused.score_range[0] <= fused.score_range[1] <= 2.0


def test_the_skipped_share_counts_what_skips_would_skip_and_never_the_querys_own_document():
    """The share production logs for a margin's coverage: the same candidates the judge would not ask, over all
    calls; the source is graded whatever its class, so marking it takes it out of the count."""
    lists = _graded_lists(n=30)
    cascade = JudgeCascade.margin(HYBRID, lists, coverage=0.8, learned_from="test")
    by_hand = [cascade.skips(HYBRID, [c.cosine for c in g], lexical=[c.lexical for c in g]) for g in lists]
    skipped = sum(len(s) for s in by_hand)
    assert 0 < skipped < 240
    assert cascade.skipped_share(HYBRID, lists) == pytest.approx(skipped / 240)
    marked = [[c.model_copy(update={"source": i in s}) for i, c in enumerate(g)] for g, s in zip(lists, by_hand)]
    assert cascade.skipped_share(HYBRID, marked) == 0.0  # every skip was a source, and sources are always graded
    assert cascade.skipped_share(HYBRID, []) == 0.0


def test_calibration_samples_become_one_list_per_query():
    samples = [CalibrationSample("a", 1.0, 0.5, "positive", "retrieved"),
               CalibrationSample("b", 1.1, 0.4, "hard_negative", "retrieved"),
               CalibrationSample("a", 0.2, 0.1, "easy_negative", "control", listed=False)]
    lists = sample_lists(samples)
    assert [[c.expected for c in group] for group in lists] == [[1.0, 0.2], [1.1]]
    assert lists[0][1].listed is False


def test_the_judge_does_not_ask_what_the_cascade_skips_and_keeps_what_it_must():
    program = Program(FUSED)
    judge = RelevanceJudge(program, cascade=JudgeCascade.lossless(FUSED))
    cands = [Candidate("2.0", 0.95), Candidate("1.0", 0.55), Candidate("2.5", -0.4), Candidate("0.5", 0.26)]
    judged = judge.judge_all("q", cands, keep=[0])
    assert program.asked == ["2.0", "1.0"]  # 0 is kept; 2 is easy and 3 hard whatever their grade
    assert [j.klass for j in judged] == ["positive", "hard_negative", "easy_negative", "hard_negative"]
    assert judged[2].skipped is not None and judged[2].grade is None and judged[2].score is None
    assert judged[0].skipped is None and judged[0].grade is not None
    assert "skipped" in judged[2].to_dict() and "skipped" not in judged[0].to_dict()
    # without the cascade every candidate is asked, and the labels are the same
    plain = RelevanceJudge(Program(FUSED)).judge_all("q", cands)
    assert [j.label for j in plain] == [j.label for j in judged]
    assert judge.describe()["cascade"]["mode"] == "lossless"
    with pytest.raises(ValueError, match="graded judge"):
        RelevanceJudge(Program(None), cascade=JudgeCascade.lossless(FUSED))


def test_a_list_judge_counts_a_skipped_candidate_with_the_stand_in_grade():
    cascade = JudgeCascade(mode="margin", score_range=(-1.0, 1.0), related_range=(-1.0, 1.0), impute=1.15,
                           coverage=0.9, learned_from="test", lists=12)
    program = Program(HYBRID)
    judge = RelevanceJudge(program, cascade=cascade)
    cosine = [0.62, 0.55, 0.5, 0.48, 0.46, 0.45, 0.44, 0.43]
    lexical = [30.0, 8.0, 6.0, 5.0, 4.5, 4.0, 3.5, 3.0]
    texts = ["1.6", "1.2", "1.1", "1.15", "1.05", "1.2", "1.0", "1.1"]
    cands = [Candidate(t, c, lexical=b) for t, c, b in zip(texts, cosine, lexical)]
    skipped = judge.skips(cands)
    assert skipped and 0 in skipped and skipped[0].klass == "positive"  # BM25 alone puts it far above the cut
    judged = judge.judge_all("q", cands)
    assert len(program.asked) == len(cands) - len(skipped)
    stand_in = [1.15 if i in skipped else float(t) for i, t in enumerate(texts)]
    contexts = list_contexts(stand_in, cosine, [True] * 8, lexical)
    for i, (j, context) in enumerate(zip(judged, contexts)):
        if i in skipped:
            assert j.label == skipped[i].label
        else:
            assert j.label == HYBRID.label(float(texts[i]), cosine[i], context, lexical[i])
