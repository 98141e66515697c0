"""Measures and TREC files: ir_measures values checked against nDCG/R/Judged computed by hand."""

from __future__ import annotations

import math

import pytest

from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.evaluation import (
    DEFAULT_MEASURES,
    evaluate_run,
    parse_measures,
    read_qrels,
    read_run,
    score_run,
    write_qrels,
    write_run,
)

# q1: graded judgments (gain 3 and 1), one unjudged document retrieved, one relevant never retrieved.
# q2: an unjudged document on top.  q3: judged but missing from the run.  q9: ranked but not judged.
QRELS = {
    "q1": {"d1": 3, "d2": 1, "d3": 0, "d4": 1},
    "q2": {"d5": 1, "d6": 1},
    "q3": {"d7": 3},
}
RUN = {
    "q1": {"d2": 0.9, "d9": 0.8, "d1": 0.7, "d3": 0.6},
    "q2": {"d8": 5.0, "d6": 4.0},
    "q9": {"d1": 1.0},
}


def dcg(gains: list[float]) -> float:
    """trec_eval's DCG: linear gain, log2(rank + 1) discount."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg(ranked_gains: list[float], judged_gains: list[float], k: int) -> float:
    return dcg(ranked_gains[:k]) / dcg(sorted(judged_gains, reverse=True)[:k])


# By hand: q1 ranks gains [1, unjudged=0, 3, 0]; ideal [3, 1, 1, 0].
Q1_NDCG = (1 / 1 + 3 / 2) / (3 / 1 + 1 / math.log2(3) + 1 / 2)
Q2_NDCG = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
Q1_RECALL, Q2_RECALL = 2 / 3, 1 / 2          # relevant = gain > 0
Q1_JUDGED, Q2_JUDGED = 3 / 4, 1 / 2          # ir_measures divides by min(20, documents ranked)


def test_hand_formula_matches_hand_numbers():
    assert ndcg([1, 0, 3, 0], [3, 1, 0, 1], 10) == pytest.approx(Q1_NDCG)
    assert ndcg([0, 1], [1, 1], 10) == pytest.approx(Q2_NDCG)
    assert Q1_NDCG == pytest.approx(0.605191, abs=1e-6)  # 2.5 / 4.130930


def test_toy_run_matches_hand_computed_values_missing_query_scores_zero():
    agg, per_query = score_run(QRELS, RUN, "nDCG@10 R@100 Judged@20")
    assert set(per_query) == {"q1", "q2", "q3"}  # q9 is not judged: never scored
    assert per_query["q1"]["nDCG@10"] == pytest.approx(Q1_NDCG)
    assert per_query["q2"]["nDCG@10"] == pytest.approx(Q2_NDCG)
    assert per_query["q3"] == {"nDCG@10": 0.0, "R@100": 0.0, "Judged@20": 0.0}
    assert per_query["q1"]["R@100"] == pytest.approx(Q1_RECALL)
    assert per_query["q1"]["Judged@20"] == pytest.approx(Q1_JUDGED)
    # default policy: the missing query counts as 0 (ir_measures, trec_eval -c): mean over 3 queries
    assert agg["nDCG@10"] == pytest.approx((Q1_NDCG + Q2_NDCG + 0) / 3)
    assert agg["R@100"] == pytest.approx((Q1_RECALL + Q2_RECALL + 0) / 3)
    assert agg["Judged@20"] == pytest.approx((Q1_JUDGED + Q2_JUDGED + 0) / 3)


def test_skip_policy_averages_over_ranked_queries_like_plain_trec_eval():
    agg, per_query = score_run(QRELS, RUN, "nDCG@10 R@100", missing="skip")
    assert set(per_query) == {"q1", "q2"}
    assert agg["nDCG@10"] == pytest.approx((Q1_NDCG + Q2_NDCG) / 2)
    assert agg["R@100"] == pytest.approx((Q1_RECALL + Q2_RECALL) / 2)


def test_default_policy_equals_ir_measures_directly():
    import ir_measures

    ms = parse_measures(None)
    expected = {str(m): v for m, v in ir_measures.calc_aggregate(ms, QRELS, RUN).items()}
    agg, _ = score_run(QRELS, RUN)
    assert agg == pytest.approx(expected)
    assert list(agg) == list(DEFAULT_MEASURES)


def test_gain_three_counts_more_than_gain_one():
    high_first, _ = score_run(QRELS, {"q1": {"d1": 2.0, "d2": 1.0}}, "nDCG@10", queries=["q1"])
    low_first, _ = score_run(QRELS, {"q1": {"d2": 2.0, "d1": 1.0}}, "nDCG@10", queries=["q1"])
    assert high_first["nDCG@10"] == pytest.approx(ndcg([3, 1], [3, 1, 0, 1], 10))
    assert low_first["nDCG@10"] == pytest.approx(ndcg([1, 3], [3, 1, 0, 1], 10))
    assert high_first["nDCG@10"] > low_first["nDCG@10"]


def test_empty_ranking_counts_as_missing():
    agg, per_query = score_run(QRELS, {"q1": {}, "q2": RUN["q2"]}, "Judged@20 nDCG@10")
    assert per_query["q1"] == {"Judged@20": 0.0, "nDCG@10": 0.0}
    assert agg["nDCG@10"] == pytest.approx(Q2_NDCG / 3)


def test_queries_restrict_the_scored_set():
    agg, per_query = score_run(QRELS, RUN, "nDCG@10", queries=["q2", "nope"])
    assert list(per_query) == ["q2"]
    assert agg["nDCG@10"] == pytest.approx(Q2_NDCG)


def test_any_ir_measures_string_is_accepted():
    ms = parse_measures("nDCG@10, P(rel=2)@5 RR AP nDCG@10")
    assert [str(m) for m in ms] == ["nDCG@10", "P(rel=2)@5", "RR", "AP"]
    agg, _ = score_run(QRELS, RUN, ["P(rel=2)@5", "RR"])
    assert agg["P(rel=2)@5"] == pytest.approx((1 / 5 + 0 + 0) / 3)  # d1 (gain 3) in q1's top 5
    assert agg["RR"] == pytest.approx((1 + 1 / 2 + 0) / 3)


@pytest.mark.parametrize("bad, why", [("XYZ@3", "not found"), ("P", "needs a cutoff"),
                                      ("nDCG(foo=1)@10", "foo"), ("__import__('os')", "malformed")])
def test_bad_measures_fail_early_with_the_name(bad, why):
    with pytest.raises(ConfigError, match=why):
        parse_measures([bad])


def test_unknown_missing_policy_is_rejected():
    with pytest.raises(ConfigError, match="missing-query policy"):
        score_run(QRELS, RUN, missing="ignore")


def test_run_round_trip_keeps_trec_eval_order(tmp_path):
    run = {"10": {"b": 1.0, "a": 1.0, "c": 2.0}, "9": {"x": 0.5}}
    path = write_run(run, tmp_path / "out" / "r.trec", tag="my model")
    lines = path.read_text().splitlines()
    assert lines[0] == "9 Q0 x 1 0.5 my_model"
    # ties broken by doc id descending, as trec_eval does
    assert [line.split()[2] for line in lines[1:]] == ["c", "b", "a"]
    assert [line.split()[3] for line in lines[1:]] == ["1", "2", "3"]
    assert all(len(line.split()) == 6 and line.split()[1] == "Q0" for line in lines)
    assert read_run(path) == run
    close = {"1": {"a": 0.81234512, "b": 0.81234508}}  # distinct scores stay distinct
    assert read_run(write_run(close, tmp_path / "close.trec", tag="t")) == close


def test_read_run_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("1 Q0 d1 1 2.0 t\n1 Q0 d2 2 high t\n")
    with pytest.raises(InputError, match=r"bad.trec:2 field 'score'"):
        read_run(path)
    path.write_text("1 Q0 d1 1 2.0\n")
    with pytest.raises(InputError, match=r":1: found 5 columns, expected 6"):
        read_run(path)
    path.write_text("1 Q0 d1 1 2.0 t\n1 Q0 d1 2 1.0 t\n")
    with pytest.raises(InputError, match="appears twice"):
        read_run(path)


def test_qrels_trec_and_beir_formats(tmp_path):
    trec = write_qrels(QRELS, tmp_path / "q.txt")
    assert trec.read_text().splitlines()[0] == "q1 0 d1 3"
    assert read_qrels(trec) == QRELS
    beir = tmp_path / "train.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td5\t1\n")
    assert read_qrels(beir) == {"q1": {"d1": 1, "d2": 2}, "q2": {"d5": 1}}
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\tyes\n")
    with pytest.raises(InputError, match=r"train.tsv:2 field 'score'"):
        read_qrels(beir)


def test_evaluate_run_result_and_exclusions():
    result = evaluate_run(RUN, QRELS, "nDCG@10", exclude=["q3"], name="toy")
    assert result.n_queries == 2 and result.excluded == ["q3"]
    assert result.aggregate["nDCG@10"] == pytest.approx((Q1_NDCG + Q2_NDCG) / 2)
    d = result.to_dict()
    assert d["per_query"]["q1"]["nDCG@10"] == pytest.approx(Q1_NDCG) and "run" not in d
    assert "toy" in result.format_table() and "nDCG@10" in result.format_table()
