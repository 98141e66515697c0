"""The comparison's ranking: downstream measure when measured, else agreement beyond chance, never accuracy."""

from __future__ import annotations

from syntra_dspy.judging.agreement import label_agreement
from syntra_dspy.comparison.compare import ComparisonResult, StrategyResult, rank
from syntra_dspy.comparison.report import markdown

# 20 pairs over 5 queries, 5 relevant: calling everything negative is 75% accurate and agrees no better than chance.
GOLD = ["positive", "hard_negative", "hard_negative", "easy_negative"] * 5
SILENT = ["hard_negative"] * 20
# finds 3 of the 5 relevant pairs at the cost of 5 false alarms: 65% accurate, kappa 0.22
CAREFUL = (["positive", "positive", "hard_negative", "easy_negative"] * 3
           + ["hard_negative", "positive", "hard_negative", "easy_negative"]
           + ["hard_negative", "positive", "hard_negative", "easy_negative"])


def _result(strategy: str, pred: list[str], *, tokens: int = 100, downstream: dict | None = None) -> StrategyResult:
    labels = [{"query_id": f"q{n // 4}", "doc_id": f"d{n}", "gold": g, "source": "judged", "predicted": p}
              for n, (g, p) in enumerate(zip(GOLD, pred))]
    metrics = {"idattr_score": 2.0, "query_score": 2.0, "annotation": label_agreement(GOLD, pred), "labels": labels}
    return StrategyResult(strategy, f"a/{strategy}", f"v-{strategy}", "0" * 64, {"total_tokens": tokens}, metrics,
                          downstream=downstream)


def _report(results: list[StrategyResult], measure: str | None = None) -> str:
    return markdown(ComparisonResult("toy", results, {"documents": [], "pairs": 20, "queries": 5}, {},
                                     ranking=rank(results, measure=measure), measure=measure))


def test_agreement_beyond_chance_ranks_above_raw_accuracy():
    silent, careful = _result("self-improve", SILENT), _result("human", CAREFUL)
    assert silent.metrics["annotation"]["binary"]["accuracy"] > careful.metrics["annotation"]["binary"]["accuracy"]
    assert careful.metrics["annotation"]["binary"]["kappa"] > silent.metrics["annotation"]["binary"]["kappa"]
    rule = rank([silent, careful])
    assert careful.rank == 1 and silent.rank == 2
    assert rule.key == "kappa"
    md = _report([silent, careful])
    assert "Ranking rule: binary Cohen's κ" in md
    assert "recall" in md
    # the paired bootstrap of human's kappa against self-improve's, on the same pairs
    diff = careful.kappa_vs_reference
    assert diff is not None and diff["difference"] > 0 and diff["ci95"][0] <= diff["difference"] <= diff["ci95"][1]
    assert silent.kappa_vs_reference is None  # the reference itself
    assert "κ − self-improve [95% CI]" in md


def test_the_configured_downstream_measure_ranks_when_measured_and_is_named():
    silent = _result("self-improve", SILENT, downstream={"nDCG@20": 0.41, "nDCG@10": 0.30})
    careful = _result("human", CAREFUL, downstream={"nDCG@20": 0.38, "nDCG@10": 0.35})
    rule = rank([silent, careful], measure="nDCG@20")
    assert rule.key == "downstream" and rule.measure == "nDCG@20"
    assert silent.rank == 1
    md = _report([silent, careful], measure="nDCG@20")
    head = next(line for line in md.splitlines() if line.startswith("| rank |"))
    assert "Ranking rule: downstream nDCG@20" in md and "| nDCG@20 |" in head and "nDCG@10" not in head


def test_without_labels_or_downstream_the_verifier_scores_rank():
    a, b = _result("none", SILENT), _result("self-improve", SILENT)
    for r in (a, b):
        del r.metrics["annotation"], r.metrics["labels"]
    b.metrics["query_score"] = 3.0
    rule = rank([a, b])
    assert rule.key == "verifier" and b.rank == 1
