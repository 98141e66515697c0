"""Human calibration from judgments people made: a qrels file as the annotation loop's calibration set, and a
manifest that says where every human decision came from."""

from __future__ import annotations

import io

from helpers import MINI_TASK, scripted_roles
from test_compare_helpers import HELDOUT_QUERIES, use_fast_encoder, write_heldout_beir

from syntra_dspy.optimizers import CompileSettings, HumanLabels, ReviewSession
from syntra_dspy.judging.labels import read_human_labels
from syntra_dspy.optimizers.terminal_review import TerminalReviewer


def test_beir_qrels_become_confirmed_labels_with_their_query_texts(tmp_path):
    qrels = write_heldout_beir(tmp_path / "beir")
    labels = read_human_labels(qrels, max_queries=2, seed=0)
    assert len({p.query for p in labels}) == 2
    texts = {text: doc for text, doc in HELDOUT_QUERIES.values()}
    assert all(p.label == "positive" and texts[p.query] == p.doc_id for p in labels)
    tsv = tmp_path / "labels.tsv"
    tsv.write_text("query\tdoc_id\tlabel\nsome claim\td1\t3\nsome claim\td2\t0\n")
    assert [(p.doc_id, p.label) for p in read_human_labels(tsv)] == [("d1", "positive"), ("d2", "easy_negative")]


def _compile(tmp_path, labels=None, judge="written", **review):
    """``review``: the review session's fields (feedback, record, terminal, reviewer, reviewed)."""
    from syntra_dspy.compiler import compile_task

    roles, _ = scripted_roles()
    return compile_task(MINI_TASK, strategy="human", out=tmp_path / "artifacts", lms=roles,
                        index_dir=tmp_path / "index",
                        settings=CompileSettings(sample_docs=3, selection_target=20, judge=judge,
                                                 judge_feature="expected", calibration_queries=3),
                        optimizer_kwargs={"labels": HumanLabels.of(labels), "review": ReviewSession(**review)})


def test_the_human_strategy_calibrates_on_a_qrels_file_and_names_every_source(tmp_path, monkeypatch):
    use_fast_encoder(monkeypatch)
    monkeypatch.chdir(tmp_path)
    qrels = write_heldout_beir(tmp_path / "beir")
    terminal = TerminalReviewer(io.StringIO("\n" * 40), io.StringIO())  # accepts every verdict
    artifact = _compile(tmp_path, terminal=terminal, labels=qrels, reviewer="Ada", record=tmp_path / "session.jsonl")
    loop = artifact.manifest["history"][-1]
    checked = loop["attempts"][0]["details"]["calibration"]
    assert {row["doc_id"] for row in checked} <= {doc for _, doc in HELDOUT_QUERIES.values()} and len(checked) == 3
    sources = artifact.manifest["optimizer"]["human_decisions"]
    assert sources["labels"]["source"] == "qrels file (human relevance judgments)"
    assert sources["labels"]["path"].endswith("test.tsv") and sources["labels"]["pairs"] == 3
    # who reviewed is this compile's record, not part of the program id (a replay makes the same program)
    assert artifact.manifest["record"]["reviews"] == {"source": "recorded terminal session", "file": "session.jsonl",
                                                      "reviewer": "Ada"}
    replayed = _compile(tmp_path, feedback=tmp_path / "session.jsonl", labels=qrels)
    assert replayed.program_id == artifact.program_id
    assert replayed.manifest["record"]["reviews"] == {"source": "replayed terminal session", "file": "session.jsonl",
                                                      "reviewer": "Ada"}


def test_people_s_labels_alone_calibrate_the_graded_judge_when_no_one_reviews(tmp_path, monkeypatch):
    """The comparison's human row: SciFact-like qrels calibrate the graded annotation loop, and no person is asked."""
    use_fast_encoder(monkeypatch)
    monkeypatch.chdir(tmp_path)
    qrels = write_heldout_beir(tmp_path / "beir")
    artifact = _compile(tmp_path, labels=qrels, judge="graded", reviewed=False)
    assert not list(tmp_path.glob("human-feedback-*.jsonl"))  # nothing recorded: no session
    assert artifact.manifest["record"]["reviews"]["source"] == "no review: every verifier judgement stands"
    assert artifact.manifest["optimizer"]["human_feedback"]["reviewed"] is False
    labels = artifact.manifest["optimizer"]["human_decisions"]["labels"]
    assert labels["pairs"] == 3 and len(labels["queries"]) == 3
    judge = artifact.program.state.judge  # people's claims join the calibration set as a few-shot query does:
    assert set(labels["queries"]) <= set(judge.summary.query_texts) and judge.summary.sources.get("human", 0) == 3
    theirs = [x for x in judge.samples if x.query in labels["queries"]]  # judged positive, retrieved rest, control
    assert {x.gold for x in theirs} == {"positive", "hard_negative", "easy_negative"}
    assert {x.source for x in theirs} == {"human", "retrieved", "control"}


def test_no_review_needs_people_s_labels_and_no_session():
    import pytest

    from syntra_dspy.errors import ConfigError
    from syntra_dspy.optimizers import HumanCalibration

    roles, _ = scripted_roles()
    with pytest.raises(ConfigError, match="calibrates on people's labels, and none were given"):
        HumanCalibration(lms=roles, review=ReviewSession(reviewed=False))
    with pytest.raises(ConfigError, match="no one reviews has no feedback file"):
        ReviewSession(reviewed=False, feedback="f.jsonl")
