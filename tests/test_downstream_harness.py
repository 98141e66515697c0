"""The downstream harness the benchmarks and ``syntra compare --downstream`` share: trained models reused by records
and settings, systems scored on the same queries, the table with bootstrap intervals and paired comparisons."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from syntra_dspy.comparison import downstream
from syntra_dspy.evaluation.evaluate import EvalResult
from syntra_dspy.training import TrainConfig


@pytest.fixture
def trainings(monkeypatch):
    """A stand-in trainer that writes what the real one leaves (merged model, training.json); counts its calls."""
    calls: list[tuple[str, Path]] = []

    def train(records, *, base, out, config=None, overwrite=False, progress=True):
        calls.append((base, Path(out)))
        (Path(out) / "merged").mkdir(parents=True, exist_ok=True)
        (Path(out) / "training.json").write_text(json.dumps({"steps": 3, "base": base}), encoding="utf-8")
        return types.SimpleNamespace(seconds=1.0, steps=3, final_loss=0.5, merged_dir=Path(out) / "merged")

    monkeypatch.setattr("syntra_dspy.training.train_embedding_model", train)
    return calls


def test_a_model_is_trained_once_per_records_and_settings(tmp_path, trainings):
    records = tmp_path / "r.jsonl"
    records.write_text('{"query": "q"}\n', encoding="utf-8")
    said: list[str] = []
    first, report = downstream.train_once("judged", records, tmp_path, TrainConfig(), say=said.append)
    again, _ = downstream.train_once("judged", records, tmp_path, TrainConfig(), say=said.append)
    assert first == again and first.name == "merged" and report["steps"] == 3 and len(trainings) == 1
    assert said[0].startswith("judged: trained in") and said[1] == f"judged: reusing {first.parent}"
    other, _ = downstream.train_once("judged", records, tmp_path, TrainConfig(epochs=2), say=said.append)
    records.write_text('{"query": "q2"}\n', encoding="utf-8")
    changed, _ = downstream.train_once("judged", records, tmp_path, TrainConfig(), say=said.append)
    rebased, _ = downstream.train_once("judged", records, tmp_path, TrainConfig(), base="e5", say=said.append)
    assert len({first, other, changed, rebased}) == 4 and len(trainings) == 4
    assert [b for b, _ in trainings] == [downstream.DEFAULT_BASE] * 3 + ["e5"]


def _result(name: str, scores: dict[str, float]) -> EvalResult:
    per = {q: {"nDCG@10": s, "nDCG@20": s, "R@100": s} for q, s in scores.items()}
    agg = {m: sum(v[m] for v in per.values()) / len(per) for m in ("nDCG@10", "nDCG@20", "R@100")}
    return EvalResult(model=name, dataset="d", measures=list(agg), aggregate=agg, per_query=per, run={})


def test_systems_are_scored_on_the_same_queries_and_compared_in_pairs(monkeypatch):
    seen = []

    def evaluate(model, dataset, measures=None, *, exclude=None, show_progress=False, index_root=None):
        seen.append((model, exclude, measures, index_root))
        return _result(model, {f"q{i}": (i % 4) / 4 + (0.25 if model == "better" else 0.0) for i in range(8)})

    monkeypatch.setattr("syntra_dspy.evaluation.evaluate_model", evaluate)
    done = []
    results, seconds = downstream.score_systems([("base", "plain"), ("tuned", "better")], "d", exclude={"q9"},
                                                measures="nDCG@10", index_root="idx",
                                                each=lambda name, r, s: done.append(name))
    assert list(results) == list(seconds) == done == ["base", "tuned"]
    assert seen == [("plain", {"q9"}, "nDCG@10", "idx"), ("better", {"q9"}, "nDCG@10", "idx")]
    lines, rows = downstream.systems_table(results, "nDCG@10", [("base", "tuned")], over="claims")
    assert lines[0] == "| system | nDCG@10 [95% CI] | nDCG@20 | R@100 |"
    assert lines[2].startswith("| base | 0.3750 [") and "| paired (over claims) |" in lines[5]
    assert lines[-1] == "| tuned vs base | +0.2500 | [+0.2500, +0.2500] | 0 | 8/0/0 |"
    assert rows[0]["a"] == "base" and rows[0]["b"] == "tuned" and rows[0]["diff"] == pytest.approx(0.25)
