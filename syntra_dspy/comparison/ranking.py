"""How ``syntra compare`` orders strategies, and the sentence its report uses to say so.

The rule, first that applies: the configured downstream measure (e.g. nDCG@10, nDCG@20) when it was measured (a
strategy whose records could not train a model ranks below every measured one); otherwise agreement beyond
chance with the reference labels (binary Cohen's kappa), since on label sets dominated by negatives raw accuracy
rewards an annotator that calls everything negative; otherwise the mean of the verifier's held-out scores. Ties
go to the higher verifier mean, then to the cheaper compile (fewer tokens), then to the order the strategies
were given in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from syntra_dspy.judging.agreement import kappa_interval, paired_kappa_bootstrap

RankKey = Literal["downstream", "kappa", "verifier"]
#: The row every other one's kappa is compared with, unless the comparison names another.
REFERENCE = "self-improve"


@dataclass(frozen=True)
class RankingRule:
    """What the strategies were ordered by (``measure``: the downstream measure's name when that is the key)."""

    key: RankKey
    measure: str | None = None

    def value(self, result: Any) -> float | None:
        if self.key == "downstream":
            return (result.downstream or {}).get(self.measure)
        if self.key == "kappa":
            return binary_kappa(result.metrics)
        return verifier_mean(result.metrics)

    def describe(self) -> str:
        if self.key == "downstream":
            return (f"downstream {self.measure} of the model trained on each strategy's records (higher first); "
                    "ties by the verifier mean, then by fewer compile tokens")
        if self.key == "kappa":
            return ("binary Cohen's κ of the labels against the reference labels (agreement beyond chance, higher "
                    "first; raw accuracy is shown but never ranks); ties by the verifier mean, then by fewer "
                    "compile tokens")
        return "mean of the verifier's held-out scores (higher first); ties by fewer compile tokens"

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "measure": self.measure, "rule": self.describe()}


def binary_kappa(metrics: dict[str, Any]) -> float | None:
    return ((metrics.get("annotation") or {}).get("binary") or {}).get("kappa")


def verifier_mean(metrics: dict[str, Any]) -> float | None:
    """Mean of the identifier and query verifier scores, on 0-1 (the 0-3 scores divided by 3)."""
    scores = [metrics[k] / 3 for k in ("idattr_score", "query_score") if metrics.get(k) is not None]
    return sum(scores) / len(scores) if scores else None


def choose_rule(results: Sequence[Any], measure: str | None) -> RankingRule:
    if measure and any((r.downstream or {}).get(measure) is not None for r in results):
        return RankingRule("downstream", measure)
    if any(binary_kappa(r.metrics) is not None for r in results):
        return RankingRule("kappa")
    return RankingRule("verifier")


def kappa_against(results: Sequence[Any], reference: str = REFERENCE, *, rounds: int = 2000, seed: int = 0) -> None:
    """Set ``kappa_vs_reference`` on every result but the reference: its binary kappa minus the reference's, with a
    paired bootstrap 95% interval over queries (all strategies label the same held-out pairs); and ``kappa_ci`` on
    every result, its own kappa's interval from the same resampling."""
    ref = next((r for r in results if r.strategy == reference and r.metrics.get("labels")), None)
    for r in results:
        r.kappa_vs_reference = None
        rows = r.metrics.get("labels")
        r.kappa_ci = kappa_interval([x["gold"] for x in rows], [x["query_id"] for x in rows],
                                    [x["predicted"] for x in rows], rounds=rounds, seed=seed) if rows else None
        if ref is None or r is ref or not r.metrics.get("labels"):
            continue
        a, b = ref.metrics["labels"], r.metrics["labels"]
        if [(x["query_id"], x["doc_id"]) for x in a] != [(x["query_id"], x["doc_id"]) for x in b]:
            raise ValueError(f"{r.strategy} and {reference} were scored on different pairs; cannot pair them")
        r.kappa_vs_reference = {"reference": reference, **paired_kappa_bootstrap(
            [x["gold"] for x in a], [x["query_id"] for x in a], [x["predicted"] for x in a],
            [x["predicted"] for x in b], rounds=rounds, seed=seed)}


def rank(results: Sequence[Any], *, measure: str | None = None, reference: str = REFERENCE) -> RankingRule:
    """Set ``rank`` (1 = best) and ``overall`` (the ranking value) on every result, and each one's kappa against
    ``reference`` (:func:`kappa_against`); return the rule used."""
    rule = choose_rule(results, measure)
    kappa_against(results, reference)

    def key(item: tuple[int, Any]) -> tuple:
        n, r = item
        value, verifier = rule.value(r), verifier_mean(r.metrics)
        return (-(value if value is not None else -2.0), -(verifier if verifier is not None else -1.0),
                r.compile_cost.get("total_tokens", 0), n)

    for position, (_, r) in enumerate(sorted(enumerate(results), key=key), 1):
        r.rank, r.overall = position, rule.value(r)
    return rule
