"""The judge cascade in production: the store keeps which candidates were graded and which were skipped and why,
the export and ``--stats`` say so, and the lossless cascade leaves every label of a scripted run as it was."""

from __future__ import annotations

import sqlite3

from syntra_dspy.judging.cascade import Skip
from syntra_dspy.judging.grading import Grade
from syntra_dspy.production import compute_stats, export_records, format_stats
from syntra_dspy.production.store import RunStore
from syntra_dspy.production.units import Candidate, DocumentResult, QueryResult


def _result(doc_id: str = "d1") -> DocumentResult:
    skip = Skip(klass="hard_negative", rule="lossless", low=-1.5, high=2.5)
    query = QueryResult(query_id=f"{doc_id}#q0", position=0, text="a claim about d1", blueprint={}, source_rank=0,
                        candidates=[
                            Candidate(0, doc_id, 0.9, label=2, grade=Grade((0.1, 0.1, 0.2, 0.6), 3, 1.0),
                                      judge_score=3.5, lexical=12.0),
                            Candidate(1, "d2", 0.4, label=1, lexical=4.0, skipped=skip),
                            Candidate(2, "d3", 0.3, label=1, grade=Grade((0.5, 0.3, 0.1, 0.1), 0, 1.0),
                                      judge_score=-0.5, lexical=2.0)])
    return DocumentResult(doc_id=doc_id, queries=[query], texts={doc_id: "one", "d2": "two", "d3": "three"},
                          n_blueprints=1)


def test_the_store_keeps_each_skip_with_its_rule_class_range_and_bm25_score(tmp_path):
    path = tmp_path / "run.db"
    with RunStore.open(path) as run:
        run.plan(["d1"])
        session = run.begin_session(concurrency=1, generator={}, options={})
        run.commit(_result(), session)
        assert run.judge_skips() == {"graded": 2, "skipped": 1, "by_rule": {"lossless": {"hard_negative": 1}}}
        evidence = run.candidate_evidence(["d1#q0"])["d1#q0"]
        assert evidence[1] == {"score": None, "expected": None, "probs": None, "bm25": 4.0, "cosine": 0.4}
        assert evidence[0]["expected"] is not None and evidence[0]["bm25"] == 12.0
        assert run.graded_lists() == []  # a list with a skipped candidate is not a whole graded list
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT rule, class, low, high, lexical FROM judge_skips").fetchall() == [
            ("lossless", "hard_negative", -1.5, 2.5, 4.0)]
    exported = export_records(path, tmp_path / "train.jsonl")
    assert exported.records == 1
    stats = compute_stats(path)
    assert stats["judge_calls"]["skipped"] == 1
    assert "cascade    1 of 3 grading calls skipped (33%) (lossless: hard_negative 1)" in format_stats(stats)


def test_a_retry_replaces_the_skips_of_the_queries_it_redoes(tmp_path):
    path = tmp_path / "run.db"
    with RunStore.open(path) as run:
        run.plan(["d1"])
        session = run.begin_session(concurrency=1, generator={}, options={})
        partial = _result()
        partial.status = "partial"
        run.commit(partial, session)
        run.commit(_result(), session)  # the retry writes the query again: one skip, not two
        assert run.judge_skips()["skipped"] == 1
