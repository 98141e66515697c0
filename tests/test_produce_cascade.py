"""The judge cascade in production: the store keeps which candidates were graded and which were skipped and why,
the export and ``--stats`` say so, and the lossless cascade leaves every label of a scripted run as it was."""

from __future__ import annotations

import json
import sqlite3

import pytest

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.cli import build_parser
from syntra_dspy.cli.produce_cmd import config_from_args
from syntra_dspy.errors import ConfigError
from syntra_dspy.judging.cascade import MIN_MARGIN_LISTS, GradedCandidate, Skip
from syntra_dspy.judging.grading import Grade
from syntra_dspy.production import compute_stats, export_records, format_stats, produce
from syntra_dspy.production.cascade import production_cascade
from syntra_dspy.production.store import RunStore
from syntra_dspy.production.units import Candidate, DocumentResult, QueryResult
from syntra_dspy.testing import SyntraBrain, scripted_lm


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


def test_regrades_of_a_stores_lists_replace_its_grades_and_count_only_lists_regraded_whole(tmp_path):
    """A margin for another prompt is learned from the same production lists graded again with it: the store's own
    grades (and its skips) are then beside the point, and a list missing one regrade is not a whole list."""
    path = tmp_path / "run.db"
    with RunStore.open(path) as run:
        run.plan(["d1", "d4"])
        session = run.begin_session(concurrency=1, generator={}, options={})
        run.commit(_result("d1"), session)
        run.commit(_result("d4"), session)
        regrades = {("d1#q0", 0): 2.5, ("d1#q0", 1): 0.25, ("d1#q0", 2): 1.0, ("d4#q0", 0): 3.0, ("d4#q0", 2): 0.0}
        assert run.graded_lists(regrades) == [[  # the query's own document is marked
            GradedCandidate(expected=2.5, cosine=0.9, lexical=12.0, source=True),
            GradedCandidate(expected=0.25, cosine=0.4, lexical=4.0),
            GradedCandidate(expected=1.0, cosine=0.3, lexical=2.0)]]
        assert run.graded_lists() == []  # its own grades: each list has a skipped candidate


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


# -- a scripted run, with and without the lossless cascade ----------------------------------------------------------
def _wide_grade_artifact(tmp_path_factory):
    """The mini task's graded artifact with a fused calibration under which the cosine can outweigh any grade (E
    spread widely on its calibration set, the cosine narrowly), saved as a new version: a lossless cascade then
    skips the candidates far from the calibration set's cosines."""
    from test_produce_support import mini_artifact

    from syntra_dspy.artifacts import load_artifact, save_artifact
    from syntra_dspy.judging.calibration import JudgeCalibration

    path, index = mini_artifact(tmp_path_factory, judge="graded", feature="fused")
    loaded = load_artifact(path)
    judge = JudgeCalibration(feature="fused", positive_threshold=3.0, hard_threshold=-2.0, expected_mean=1.0,
                             expected_std=1.0, cosine_mean=0.2, cosine_std=0.04)
    manifest = {k: v for k, v in loaded.manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    root = tmp_path_factory.mktemp("wide-grade")
    return save_artifact(loaded.program.with_components(judge=judge), manifest, root), index


def _export(store, out):
    export_records(store, out)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_the_lossless_cascade_changes_no_label_of_a_scripted_run(tmp_path_factory, minilm, tmp_path):
    art, index = _wide_grade_artifact(tmp_path_factory)
    runs = {}
    for mode in ("off", "lossless"):
        brain = SyntraBrain()
        store = tmp_path / f"{mode}.db"
        produce(art, store, generator=scripted_lm(brain), index_dir=index, encoder=minilm, progress=False, docs=3,
                queries_per_doc=2, top_k=5, concurrency=2, judge_cascade=mode)
        runs[mode] = (store, brain.calls.get("grade", 0))
    (off, off_calls), (on, on_calls) = runs["off"], runs["lossless"]
    labels = "SELECT query_id, rank, doc_id, label FROM candidates ORDER BY query_id, rank"
    with sqlite3.connect(off) as a, sqlite3.connect(on) as b:
        assert a.execute(labels).fetchall() == b.execute(labels).fetchall()
        skipped = set(b.execute("SELECT query_id, rank FROM judge_skips").fetchall())
        graded = set(b.execute("SELECT query_id, rank FROM grades").fetchall())
        assert not a.execute("SELECT count(*) FROM judge_skips").fetchone()[0]
        # every skip is a grade the full run asked for and labelled the same; the source document is never skipped
        assert skipped and not skipped & graded
        assert skipped | graded == set(a.execute("SELECT query_id, rank FROM grades").fetchall())
        assert not b.execute("SELECT count(*) FROM judge_skips s JOIN candidates c USING (query_id, rank) "
                             "JOIN queries q USING (query_id) WHERE c.doc_id = q.doc_id").fetchone()[0]
        skipped_ids = {(qid, doc) for qid, doc in b.execute(
            "SELECT query_id, c.doc_id FROM judge_skips JOIN candidates c USING (query_id, rank)")}
    assert off_calls - on_calls == len(skipped)
    # the records are the same, byte for byte, but for the skipped candidates' grades (there are none to give)
    before, after = _export(off, tmp_path / "off.jsonl"), _export(on, tmp_path / "on.jsonl")
    assert before and len(before) == len(after)
    assert any((r["query_id"], d) in skipped_ids for r in after for d in r["pos_ids"] + r["neg_ids"])
    for record in before:
        for grade in record["labels"]:
            if (record["query_id"], grade["doc_id"]) in skipped_ids:
                grade.update(score=None, expected=None, probs=None)
        scores = {g["doc_id"]: g["score"] for g in record["labels"]}
        record["pos_scores"] = [scores[d] for d in record["pos_ids"]]
        record["neg_scores"] = [scores[d] for d in record["neg_ids"]]
    assert before == after
    text = format_stats(compute_stats(on))
    assert f"cascade    {len(skipped)} of {len(skipped | graded)} grading calls skipped" in text
    assert "last session's rule: lossless" in text


def test_a_margin_is_learned_from_an_earlier_sessions_grades_when_the_artifact_keeps_none(tmp_path_factory, minilm,
                                                                                         tmp_path, caplog):
    art, index = _wide_grade_artifact(tmp_path_factory)  # its calibration keeps no graded samples
    store = tmp_path / "run.db"
    settings = {"index_dir": index, "encoder": minilm, "progress": False, "queries_per_doc": 2, "top_k": 5}
    with pytest.raises(ConfigError, match=f"at least {MIN_MARGIN_LISTS} queries"):
        produce(art, store, generator=scripted_lm(), docs=2, judge_cascade="margin", **settings)
    produce(art, store, generator=scripted_lm(), docs=5, **settings)
    with sqlite3.connect(store) as conn:
        lists = conn.execute("SELECT count(*) FROM queries").fetchone()[0]
    assert lists >= MIN_MARGIN_LISTS
    produce(art, store, generator=scripted_lm(), docs=6, judge_cascade="margin", cascade_coverage=0.9, **settings)
    with sqlite3.connect(store) as conn:
        judge = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'judge'").fetchone()[0])
    assert judge["cascade"]["mode"] == "margin" and judge["cascade"]["learned_from"] == "run store"
    assert judge["cascade"]["lists"] == lists and judge["cascade"]["coverage"] == 0.9
    # a new run store learns it from another run's grades, when they were graded with the artifact's prompt
    fresh = tmp_path / "fresh.db"
    produce(art, fresh, generator=scripted_lm(), docs=1, judge_cascade="margin", cascade_grades=store, **settings)
    with sqlite3.connect(fresh) as conn:
        judge = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'judge'").fetchone()[0])
    assert judge["cascade"]["learned_from"] == "run store run.db" and judge["cascade"]["lists"] == lists
    # a margin from few lists is used, with the measured cost of a short teacher beside it
    assert f"learned from {lists} production lists (run store run.db)" in caplog.text
    other = tmp_path / "other.db"
    with RunStore.open(other) as run:
        run.set_meta(artifact={"prompts_sha256": {"grade": "another prompt"}})
    with pytest.raises(ConfigError, match="graded with another prompt"):
        production_cascade(load_artifact(art).program, "margin", coverage=0.9, grades=other)
    shorter = load_artifact(art).program  # the same prompt shown less of each document grades otherwise
    shorter.max_doc_chars = 700
    with pytest.raises(ConfigError, match="shown 1500 characters of each document, the artifact's is shown 700"):
        production_cascade(shorter, "margin", coverage=0.9, grades=store)


def test_the_command_line_sets_the_cascade():
    args = build_parser().parse_args(["produce", "art", "--store", "run.db", "--judge-cascade", "margin",
                                      "--cascade-coverage", "0.9", "--cascade-grades", "old.db"])
    config = config_from_args(args)
    assert (config.judge_cascade, config.cascade_coverage, str(config.cascade_grades)) == ("margin", 0.9, "old.db")
    assert config_from_args(build_parser().parse_args(["produce", "art", "--store", "r.db"])).judge_cascade == "off"


def test_a_margin_learned_from_the_calibration_set_is_used_with_a_warning_that_names_the_better_source(caplog):
    """experiments/judge_guidance: the margin from SciFact's 15 calibration lists cost 0.045 kappa, so production
    says where a better one comes from instead of taking it silently."""
    import logging

    from conftest import REPO

    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.production.cascade import production_cascade

    program = load_artifact(REPO / "artifacts/scifact/bfb6cfdf9e09").program  # keeps its 139 calibration grades
    with caplog.at_level(logging.WARNING, logger="syntra_dspy.production.cascade"):
        cascade = production_cascade(program, "margin", coverage=0.95)
    assert cascade is not None and cascade.describe()["learned_from"] == "calibration samples"
    assert "15 queries of the artifact's calibration set" in caplog.text and "--cascade-grades" in caplog.text


def test_production_says_what_share_of_its_teaching_lists_a_margin_skips(tmp_path, caplog):
    """The figures a user picks a coverage from are the measured ones: SciFact's guidance-free first session (306
    lists) skips 23.0% of its own grading calls at coverage 0.95 and 12.1% at 0.96 (experiments/judge_guidance,
    coverage-skips.json)."""
    import gzip
    import logging
    import shutil

    from conftest import REPO

    store = tmp_path / "noguidance.db"
    with gzip.open(REPO / "benchmarks/runs/scifact-noguidance.db.gz", "rb") as src, store.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    program = load_artifact(REPO / "artifacts/scifact/bfb6cfdf9e09").program
    measured = json.loads((REPO / "experiments/judge_guidance/coverage-skips.json").read_text(encoding="utf-8"))
    for row in measured["rows"][:2]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="syntra_dspy.production.cascade"):
            production_cascade(program, "margin", coverage=row["coverage"], grades=store)
        assert f"margin at coverage {row['coverage']:.2f} from 306 lists" in caplog.text
        assert f"it would skip {100 * row['share']:.1f}% of the grading calls" in caplog.text
