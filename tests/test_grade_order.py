"""Grade order: a judge calibrated on document-first grades reads the document before the query, and production asks
about one candidate for all its queries in a row, so an engine that keeps the prompt it holds evaluates the document
once. The calibration holds the order (``syntra artifacts recalibrate --grade-order``): a judge never cuts grades of
the other order with it, and a judgment log or run store never lets one order's grade stand for the other's. The labels
of a scripted run are those of the query-first run."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from itertools import groupby

import pytest

from syntra_dspy.artifacts import grading_identity, load_artifact, save_artifact
from syntra_dspy.cli import build_parser
from syntra_dspy.judging.calibration import JudgeCalibration
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.grading import DigitLabelAdapter, Grade
from syntra_dspy.judging.judge import Candidate, RelevanceJudge
from syntra_dspy.judging.measure import JudgmentLog, judge_candidates, judge_key
from syntra_dspy.production import produce
from syntra_dspy.signatures.annotation import GradeCandidateRelevance
from syntra_dspy.testing import SyntraBrain, grading_inputs, scripted_lm


def test_document_first_shows_the_same_words_with_the_document_before_the_query():
    inputs = {"query": "a claim", "document": "an abstract"}
    system, user = DigitLabelAdapter().format(GradeCandidateRelevance, [], inputs)
    system2, user2 = DigitLabelAdapter(("document", "query")).format(GradeCandidateRelevance, [], inputs)
    assert system == system2
    assert user["content"] == "Query: a claim\n\nDocument: an abstract\n\nLabel (one digit, 0-3):"
    assert user2["content"].startswith("Document: an abstract\n\nQuery: a claim\n\n")
    assert sorted(user["content"].split("\n\n")) == sorted(user2["content"].split("\n\n"))
    with pytest.raises(ValueError, match="does not name the signature's inputs"):
        DigitLabelAdapter(("document",)).format(GradeCandidateRelevance, [], inputs)


class _Program:
    """Grades every candidate 3 and counts the calls, by order; ``calibration``: its judge's (None: uncalibrated)."""

    def __init__(self, calibration=None):
        self.state = type("S", (), {"judge": calibration})()
        self.calls: list[str] = []

    def grade_candidate(self, query, text, logprobs=True, order="query-first"):
        self.calls.append(order)
        return Grade((0.0, 0.0, 0.0, 1.0), 3, 1.0)


def test_the_judge_grades_in_its_calibrations_order_and_refuses_the_other():
    fitted = JudgeCalibration(positive_threshold=1.5, hard_threshold=0.5, grade_order="document-first")
    program = _Program(fitted)
    judge = RelevanceJudge(program, mode="graded")
    judge.judge_all("q", [Candidate("d")])
    assert program.calls == ["document-first"]
    assert judge.groups_by_document and judge.describe()["grade_order"] == "document-first"
    with pytest.raises(ValueError, match="fitted on document-first grades, so it cannot cut query-first grades"):
        RelevanceJudge(program, mode="graded", grade_order="query-first")
    plain = _Program(JudgeCalibration(positive_threshold=1.5, hard_threshold=0.5))
    assert RelevanceJudge(plain, mode="graded").grade_order == "query-first"
    assert "grade_order" not in RelevanceJudge(plain, mode="graded").describe()  # the default, as before
    # the calibration set itself is graded by an uncalibrated judge, in the order asked
    assert RelevanceJudge(_Program(), mode="graded", grade_order="document-first").grade_order == "document-first"
    assert not RelevanceJudge(program, mode="written").groups_by_document
    with pytest.raises(ValueError, match="unknown grade order 'last'"):
        RelevanceJudge(_Program(), mode="graded", grade_order="last")  # type: ignore[arg-type]


def test_the_order_is_kept_in_the_calibration_only_when_the_document_comes_first():
    plain = JudgeCalibration(positive_threshold=1.5, hard_threshold=0.5)
    assert "grade_order" not in plain.model_dump(mode="json")  # an earlier artifact's program.json keeps its bytes
    turned = plain.model_copy(update={"grade_order": "document-first"})
    assert JudgeCalibration.model_validate_json(turned.model_dump_json()) == turned


def test_a_judgment_log_keeps_the_two_orders_apart(tmp_path):
    log = JudgmentLog(tmp_path / "judgments.jsonl")
    cand = JudgedCandidate("q1", "a claim", "d1", 0, 0.5, "positive", "retrieved")
    corpus = {"d1": type("D", (), {"content": "an abstract"})()}
    first, second = _Program(), _Program()
    judge_candidates(RelevanceJudge(first, mode="graded"), "v1", [cand], corpus=corpus, log=log)
    judge_candidates(RelevanceJudge(second, mode="graded", grade_order="document-first"), "v1", [cand],
                     corpus=corpus, log=log, same_grades=["v1"])
    assert first.calls == ["query-first"] and second.calls == ["document-first"]  # asked again, not reused
    rows = [json.loads(line) for line in (tmp_path / "judgments.jsonl").read_text().splitlines()]
    assert [r["key"] for r in rows] == ["v1|graded|q1|d1", "v1|graded:document-first|q1|d1"]
    assert "grade_order" not in rows[0] and rows[1]["grade_order"] == "document-first"
    assert judge_key(RelevanceJudge(first, mode="written", grade_order="document-first")) == "written"


def test_the_order_is_the_artifacts_not_a_production_flag():
    args = build_parser().parse_args(["artifacts", "recalibrate", "art", "--grade-order", "document-first"])
    assert args.grade_order == "document-first"
    assert build_parser().parse_args(["artifacts", "recalibrate", "art"]).grade_order is None  # the artifact's
    with pytest.raises(SystemExit):
        build_parser().parse_args(["produce", "art", "--store", "r.db", "--grade-order", "document-first"])


def _document_first(tmp_path_factory):
    """The mini task's graded artifact with its calibration said to be of document-first grades (the scripted judge
    grades alike in either order, so the same cut points hold), saved as a new version."""
    from test_produce_support import mini_artifact

    path, index = mini_artifact(tmp_path_factory, judge="graded")
    loaded = load_artifact(path)
    judge = loaded.program.state.judge.model_copy(update={"grade_order": "document-first"})
    manifest = {k: v for k, v in loaded.manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    return path, save_artifact(loaded.program.with_components(judge=judge), manifest,
                               tmp_path_factory.mktemp("document-first")), index


class _RecordingBrain(SyntraBrain):
    """The scripted brain, keeping each grading call's (query, document) in the order asked."""

    def __init__(self):
        super().__init__()
        self.graded: list[tuple[str, str, bool]] = []

    def grade(self, system: str, user: str):  # type: ignore[override]
        query, document = grading_inputs(user)
        self.graded.append((query, document, user.startswith("Document: ")))
        return SyntraBrain.grade(system, user)


def _runs_of_one_candidate(calls: list[tuple[str, str]]) -> dict[str, int]:
    """How many separate runs of consecutive calls each candidate document has."""
    runs: dict[str, int] = {}
    for document, _ in groupby(document for _, document in calls):
        runs[document] = runs.get(document, 0) + 1
    return runs


def test_a_scripted_run_grades_each_candidate_for_its_queries_in_a_row_with_the_same_labels(tmp_path_factory,
                                                                                           minilm, tmp_path):
    plain, turned, index = _document_first(tmp_path_factory)
    runs = {}
    for order, art in (("query-first", plain), ("document-first", turned)):
        brain = _RecordingBrain()
        store = tmp_path / f"{order}.db"
        produce(art, store, generator=scripted_lm(brain), index_dir=index, encoder=minilm, progress=False, docs=3,
                queries_per_doc=3, top_k=5, concurrency=1)
        runs[order] = (store, brain.graded)
    (before, asked_before), (after, asked_after) = runs["query-first"], runs["document-first"]
    labels = "SELECT query_id, rank, doc_id, label FROM candidates ORDER BY query_id, rank"
    with sqlite3.connect(before) as a, sqlite3.connect(after) as b:
        assert a.execute(labels).fetchall() == b.execute(labels).fetchall()
        source = dict(b.execute("SELECT text, doc_id FROM queries").fetchall())
        options = json.loads(b.execute("SELECT options FROM sessions").fetchone()[0])
        judge = json.loads(b.execute("SELECT value FROM meta WHERE key = 'judge'").fetchone()[0])
    assert options["grade_order"] == "document-first" and judge["grade_order"] == "document-first"
    assert all(first for *_, first in asked_after) and not any(first for *_, first in asked_before)
    assert sorted((q, d) for q, d, _ in asked_before) == sorted((q, d) for q, d, _ in asked_after)  # reordered
    # within one source document's grading, each candidate's calls follow each other only when the document is first
    for asked, grouped in ((asked_after, True), (asked_before, False)):
        by_source = [[(q, d) for q, d, _ in calls] for _, calls in groupby(asked, key=lambda c: source[c[0]])]
        assert len(by_source) == 3
        split = [doc for calls in by_source for doc, n in _runs_of_one_candidate(calls).items() if n > 1]
        assert (not split) if grouped else split
    assert any(n > 1 for calls in by_source for n in Counter(d for _, d in calls).values())  # some are asked again


def test_a_run_stores_grades_of_the_other_order_do_not_teach_a_margin(tmp_path_factory, tmp_path):
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.production.store import RunStore

    plain, turned, _ = _document_first(tmp_path_factory)
    program = load_artifact(turned).program
    store = tmp_path / "run.db"
    with RunStore.open(store) as run:  # graded by the query-first artifact's judge (its prompt, its clip)
        run.set_meta(artifact={"prompts_sha256": {"grade": grading_identity(program)["prompt_sha256"]}},
                     judge={"mode": "graded"})
    with RunStore.open(store, readonly=True) as run, pytest.raises(ConfigError, match="graded query-first"):
        run.check_graded_like(program, path=store, field="cascade_grades", use="--cascade-grades", hint="")
    assert grading_identity(program)["grade_order"] == "document-first"
    assert grading_identity(load_artifact(plain).program)["grade_order"] == "query-first"


_ABSTRACT = ("Aspirin and paracetamol were compared in 240 adults with fever after influenza. Body temperature fell "
             "faster after aspirin within the first four hours, while the share of patients without fever at 24 hours "
             "did not differ. Gastric complaints were twice as common after aspirin.")


@pytest.mark.llm
def test_real_engine_evaluates_only_the_query_when_a_document_read_first_is_graded_again(small_generator):
    """What the order is for, on the embedded engine: graded again for another query, a document shown first is
    restored from the context, so only the query and the answer cue are evaluated; shown after the query, it is
    evaluated again."""
    import dspy

    from syntra_dspy.judging.grading import ask_digit

    predictor = dspy.Predict(GradeCandidateRelevance)
    llama = small_generator.engine.load().llama
    evaluated: dict[str, list[int]] = {}
    with dspy.context(lm=small_generator):
        for name, order in (("query-first", None), ("document-first", ("document", "query"))):
            evaluated[name] = []
            for query in ("Aspirin lowers fever faster than paracetamol.", "Paracetamol upsets the stomach less."):
                grade = ask_digit(predictor, order=order, query=query, document=_ABSTRACT)
                assert grade.probs is not None  # a real grade, read from the label tokens' probabilities
                evaluated[name].append(llama.prompt_tokens_evaluated)
    again_query_first, again_document_first = evaluated["query-first"][1], evaluated["document-first"][1]
    document = len(llama.tokenize(_ABSTRACT.encode(), add_bos=False))
    assert again_query_first > document > again_document_first, (document, evaluated)  # the document: again, or not
