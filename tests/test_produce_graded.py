"""Production with the graded judge: one call per candidate, label-token probabilities, the compiled calibration."""

from __future__ import annotations

import json
import sqlite3

import pytest

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import produce
from syntra_dspy.judging.calibration import CLASS_LABEL
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import derived_version, mini_artifact

K, QUERIES = 5, 2


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return mini_artifact(tmp_path_factory, judge="graded")


def rows(store, sql):
    with sqlite3.connect(store) as conn:
        return conn.execute(sql).fetchall()


def test_graded_production_stores_probabilities_and_applies_the_compiled_calibration(graded, minilm, tmp_path):
    art, index = graded
    calibration = load_artifact(art).program.state.judge
    assert calibration is not None and calibration.feature == "expected"
    brain = SyntraBrain()
    lm = scripted_lm(brain)
    store = tmp_path / "run.db"
    summary = produce(art, store, generator=lm, index_dir=index, encoder=minilm, progress=False, docs=3,
                      queries_per_doc=QUERIES, top_k=K, concurrency=1)
    assert summary.documents["done"] == 3
    candidates = rows(store, "SELECT c.query_id, c.rank, c.label, g.p0, g.p1, g.p2, g.p3, g.expected, g.written, "
                             "g.judge_score FROM candidates c JOIN grades g USING (query_id, rank)")
    assert len(candidates) == rows(store, "SELECT count(*) FROM candidates")[0][0] == 3 * QUERIES * K
    for _, _, label, *probs, expected, written, score in candidates:
        assert sum(probs) == pytest.approx(1.0) and expected == pytest.approx(sum(k * p for k, p in enumerate(probs)))
        assert label == CLASS_LABEL[calibration.classify(expected, None)] and score == pytest.approx(expected)
        assert written == max(range(4), key=lambda k: probs[k])
    assert brain.calls["grade"] == len(candidates) and "annotate" not in brain.calls
    graded_calls = [c for c in lm.calls if c.user.rstrip().endswith("(one digit, 0-3):")]
    assert all(c.options["max_tokens"] == 1 and c.options["logprobs"] == 20 for c in graded_calls)
    # the fixed instruction, then the query, then the document: a query's candidates share the prompt prefix
    assert all(c.user.startswith("Query: ") and "\n\nDocument: " in c.user for c in graded_calls)
    meta = {k: json.loads(v) for k, v in rows(store, "SELECT key, value FROM meta")}
    assert meta["judge"]["mode"] == "graded" and meta["judge"]["calibrated"] is True
    assert meta["judge"]["calibration"]["positive_threshold"] == calibration.positive_threshold
    ranks = rows(store, "SELECT query_id, bm25_source_rank FROM query_ranks")
    assert len(ranks) == 3 * QUERIES and any(r == 0 for _, r in ranks)


def test_a_relative_calibration_labels_each_candidate_against_the_rest_of_its_list(tmp_path_factory, minilm,
                                                                                  tmp_path):
    from syntra_dspy.judging.calibration import list_contexts

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="relative")
    calibration = load_artifact(art).program.state.judge
    assert calibration is not None and calibration.feature == "relative" and calibration.needs_list
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=2)
    found = rows(store, "SELECT c.query_id, c.label, c.score, g.expected, g.judge_score FROM candidates c "
                        "JOIN grades g USING (query_id, rank) ORDER BY c.query_id, c.rank")
    by_query: dict[str, list] = {}
    for query_id, *rest in found:
        by_query.setdefault(query_id, []).append(rest)
    assert len(by_query) == 2 * QUERIES
    for group in by_query.values():
        contexts = list_contexts([e for _, _, e, _ in group], [c for _, c, _, _ in group], [True] * len(group))
        for (label, cosine, expected, score), context in zip(group, contexts):
            assert label == calibration.label(expected, cosine, context)
            assert score == pytest.approx(calibration.score(expected, cosine, context))


def test_a_hybrid_calibration_adds_each_candidates_bm25_score_and_stores_it(tmp_path_factory, minilm, tmp_path):
    from syntra_dspy.judging.calibration import list_contexts

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="hybrid")
    calibration = load_artifact(art).program.state.judge
    assert calibration is not None and calibration.feature == "hybrid" and calibration.needs_lexical
    assert calibration.summary.auc["lexical"] is not None  # the calibration set was scored with BM25 at compile
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=2)
    found = rows(store, "SELECT c.query_id, c.label, c.score, g.expected, g.judge_score, g.lexical FROM candidates c "
                        "JOIN grades g USING (query_id, rank) ORDER BY c.query_id, c.rank")
    assert found and all(lexical is not None for *_, lexical in found)
    assert any(lexical > 0 for *_, lexical in found)
    by_query: dict[str, list] = {}
    for query_id, *rest in found:
        by_query.setdefault(query_id, []).append(rest)
    for group in by_query.values():
        contexts = list_contexts([g[2] for g in group], [g[1] for g in group], [True] * len(group),
                                 [g[4] for g in group])
        for (label, cosine, expected, score, lexical), context in zip(group, contexts):
            assert label == calibration.label(expected, cosine, context, lexical)
            assert score == pytest.approx(calibration.score(expected, cosine, context, lexical))


class NoProbabilities(SyntraBrain):
    """A backend that answers the digit but returns no log probabilities."""

    def grade(self, system, user):
        return super().grade(system, user).token


def test_a_backend_without_probabilities_falls_back_to_the_written_digit_and_says_so(graded, minilm, tmp_path):
    art, index = graded
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(NoProbabilities()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=1)
    assert rows(store, "SELECT count(*) FROM candidates WHERE label IS NULL")[0][0] == 0
    assert rows(store, "SELECT count(*) FROM grades WHERE p0 IS NOT NULL")[0][0] == 0
    assert rows(store, "SELECT count(*) FROM grades WHERE written IS NULL")[0][0] == 0
    meta = {k: json.loads(v) for k, v in rows(store, "SELECT key, value FROM meta")}
    assert "no log probabilities" in meta["judge"]["fallback"]


def test_a_served_model_is_asked_for_top_logprobs_over_http(graded, minilm, tmp_path):
    art, index = graded
    with OpenAICompatibleServer(SyntraBrain()) as server:
        produce(art, tmp_path / "run.db", generator=f"hosted_vllm/fake@{server.base_url}", index_dir=index,
                encoder=minilm, progress=False, docs=1, queries_per_doc=1, top_k=3, concurrency=1)
        asked = [c for c in server.calls if c.user.rstrip().endswith("(one digit, 0-3):")]
    assert len(asked) == 3 and all(c.options.get("logprobs") is True and c.options.get("top_logprobs") == 20
                                   for c in asked)
    assert rows(tmp_path / "run.db", "SELECT count(*) FROM grades WHERE p3 IS NOT NULL")[0][0] == 3


def test_stats_report_the_judge_the_difficulty_and_agreement_with_given_qrels(graded, minilm, tmp_path):
    from syntra_dspy.cli import main
    from syntra_dspy.production import compute_stats, export_records

    art, index = graded
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=1)
    # qrels for the produced queries: the source document relevant, everything else judged not relevant
    lines = [f"{qid} 0 {doc} {int(doc == qid.split('#')[0])}"
             for qid, doc in rows(store, "SELECT query_id, doc_id FROM candidates")]
    (tmp_path / "qrels.txt").write_text("\n".join(lines) + "\n")
    stats = compute_stats(store, qrels=tmp_path / "qrels.txt")
    q = stats["quality"]
    assert q["judge"]["mode"] == "graded" and q["grades"]["with_probabilities"] == 2 * QUERIES * K
    queries = rows(store, "SELECT count(*) FROM queries")[0][0]
    dense1 = rows(store, "SELECT count(*) FROM queries WHERE source_rank = 0")[0][0]
    bm25 = rows(store, "SELECT count(*) FROM query_ranks WHERE bm25_source_rank = 0")[0][0]
    assert q["source_ranks"]["dense_rank1"] == pytest.approx(dense1 / queries)
    assert q["source_ranks"]["bm25_rank1"] == pytest.approx(bm25 / queries)
    assert q["qrels_agreement"]["pairs"] == 2 * QUERIES * K and "kappa" in q["qrels_agreement"]["binary"]
    summary = export_records(store, tmp_path / "train.jsonl", negatives="hard+easy")
    sidecar = json.loads(open(summary.meta_path).read())
    assert sidecar["quality"]["source_ranks"] == q["source_ranks"]
    assert main(["export", str(store), "--stats", "--qrels", str(tmp_path / "qrels.txt")]) == 0


def test_an_older_store_without_grades_or_ranks_still_reports(tmp_path, graded, minilm):
    from syntra_dspy.production import compute_stats

    art, index = graded
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=1, queries_per_doc=1, top_k=K, concurrency=1)
    with sqlite3.connect(store) as conn:  # as a store written before these tables existed
        conn.execute("DROP TABLE grades")
        conn.execute("DROP TABLE query_ranks")
        conn.execute("DELETE FROM meta WHERE key = 'judge'")
    q = compute_stats(store)["quality"]
    assert q["judge"] == {"mode": "written"} and q["source_ranks"]["bm25_rank1"] is None and "grades" not in q


def test_a_run_that_grades_with_another_model_than_the_calibration_was_fitted_on_says_so(graded, minilm, tmp_path,
                                                                                         caplog):
    """The judge's cut points were set on the compile's model's grades; a run grading with another model (a served
    one, typically) is warned, told how to refit, and its store records both models."""
    from syntra_dspy.artifacts import save_artifact

    art, index = graded
    original = load_artifact(art)
    manifest = {k: v for k, v in original.manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    lms = {**manifest["lms"], "generator": {**manifest["lms"]["generator"], "model": "hosted_vllm/Other-7B"}}
    other = save_artifact(original.program, {**manifest, "lms": lms}, tmp_path / "other")
    kwargs = {"index_dir": index, "encoder": minilm, "progress": False, "docs": 1, "queries_per_doc": QUERIES,
              "top_k": K, "concurrency": 1}
    with caplog.at_level("WARNING"):
        produce(other, tmp_path / "other.db", generator=scripted_lm(SyntraBrain()), **kwargs)
    assert "calibration was fitted on grades of hosted_vllm/Other-7B" in caplog.text
    assert f"syntra artifacts recalibrate {other}" in caplog.text
    judge = json.loads(rows(tmp_path / "other.db", "SELECT value FROM meta WHERE key = 'judge'")[0][0])
    assert judge["calibration_grader"]["fitted_on"] == "hosted_vllm/Other-7B"
    assert judge["calibration_grader"]["grading_with"] == original.meta.generator.model
    from syntra_dspy.production.export import compute_stats, format_stats

    assert ("calibrated on grades of hosted_vllm/Other-7B, graded by "
            f"{original.meta.generator.model}") in format_stats(compute_stats(tmp_path / "other.db"))
    caplog.clear()
    with caplog.at_level("WARNING"):  # the compile's own model: nothing to say
        produce(art, tmp_path / "own.db", generator=scripted_lm(SyntraBrain()), **kwargs)
    assert "calibration was fitted" not in caplog.text
    judge = json.loads(rows(tmp_path / "own.db", "SELECT value FROM meta WHERE key = 'judge'")[0][0])
    assert "calibration_grader" not in judge


def test_export_labels_the_stored_grades_with_a_recalibrated_judge_without_grading_again(tmp_path_factory, minilm,
                                                                                       tmp_path):
    from syntra_dspy.errors import ConfigError
    from syntra_dspy.production import export_records
    from syntra_dspy.judging.calibration import list_contexts

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="relative")
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=1)
    stored_before = (store.read_bytes(), rows(store, "SELECT * FROM candidates ORDER BY query_id, rank"))
    # the run's own judge, applied to the stored grades, gives back the stored labels: the same records
    export_records(store, tmp_path / "stored.jsonl")
    export_records(store, tmp_path / "own.jsonl", judge=art)
    assert (tmp_path / "own.jsonl").read_bytes() == (tmp_path / "stored.jsonl").read_bytes()
    own = json.loads((tmp_path / "own.jsonl.meta.json").read_text())["labels_from"]
    assert own["relabelled"] == 2 * QUERIES * K and own["changed"] == 0
    # a recalibration with a lower positive cut labels what its calibration says of the stored grades
    original = load_artifact(art)
    scores = sorted(r[0] for r in rows(store, "SELECT judge_score FROM grades"))
    lower = original.program.state.judge.model_copy(update={"positive_threshold": scores[len(scores) // 2]})
    derived = derived_version(original, tmp_path / "artifacts", judge=lower)
    export_records(store, tmp_path / "lower.jsonl", judge=derived, include_partial=True)
    found = rows(store, "SELECT c.query_id, c.doc_id, c.score, g.expected FROM candidates c "
                        "JOIN grades g USING (query_id, rank) ORDER BY c.query_id, c.rank")
    expected_labels: dict[str, dict[str, int]] = {}
    for query_id in {r[0] for r in found}:
        group = [r for r in found if r[0] == query_id]
        contexts = list_contexts([r[3] for r in group], [r[2] for r in group], [True] * len(group))
        expected_labels[query_id] = {r[1]: lower.label(r[3], r[2], c) for r, c in zip(group, contexts)}
    records = [json.loads(line) for line in (tmp_path / "lower.jsonl").read_text().splitlines()]
    assert records and all({g["doc_id"]: g["label"] for g in r["labels"]} == expected_labels[r["query_id"]]
                           for r in records)
    # the scores are the recalibrated judge's too: each positive's is at or above its cut, each negative's below
    cut = lower.positive_threshold
    assert all(s >= cut for r in records for s in r["pos_scores"])
    assert all(s < cut for r in records for s in r["neg_scores"])
    report = json.loads((tmp_path / "lower.jsonl.meta.json").read_text())["labels_from"]
    assert report["artifact"].endswith(derived.name) and report["changed"] > 0
    assert set(report["transitions"]) <= {"hard_negative->positive", "easy_negative->positive"}
    assert (store.read_bytes(), rows(store, "SELECT * FROM candidates ORDER BY query_id, rank")) == stored_before
    # an artifact whose grading prompt differs never labels the run's grades
    stricter = derived_version(original, tmp_path / "other",
                               annotation_instruction="Call a document relevant only if it states the claim's finding.")
    with pytest.raises(ConfigError, match="another prompt"):
        export_records(store, tmp_path / "other.jsonl", judge=stricter)
    # nor one whose judge is shown another share of each document: the same prompt, other grades
    from syntra_dspy.artifacts import save_artifact

    manifest = {k: v for k, v in original.manifest.items()
                if k not in ("version", "program_id", "prompts", "schema_version", "kind")}
    clipped = save_artifact(original.program, {**manifest, "settings": {**manifest["settings"], "max_doc_chars": 700}},
                            tmp_path / "clipped")
    with pytest.raises(ConfigError, match="shown 1500 characters of each document, the artifact's is shown 700"):
        export_records(store, tmp_path / "clipped.jsonl", judge=clipped)


def test_export_carries_the_judges_grades_for_every_positive_and_negative(tmp_path_factory, minilm, tmp_path):
    """Each record holds the teacher score of every positive and negative (``pos_scores``/``neg_scores``, in the
    order of ``pos``/``neg``) and, per judged candidate, its label, calibrated score, E, p(0..3), BM25 score and
    retrieval cosine, the same in JSONL and in a datasets folder, and the training loader reads them back."""
    from syntra_dspy.production import export_records
    from syntra_dspy.training import load_training_data
    from syntra_dspy.training.teachers import TEACHERS, Teacher

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="hybrid")
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=2, queries_per_doc=QUERIES, top_k=K, concurrency=1)
    stored = {(q, d): (label, score, e, (p0, p1, p2, p3), bm25, cos)
              for q, d, label, score, e, p0, p1, p2, p3, bm25, cos in rows(store, "SELECT c.query_id, c.doc_id, "
                             "c.label, g.judge_score, g.expected, g.p0, g.p1, g.p2, "
                             "g.p3, g.lexical, c.score FROM candidates c JOIN grades g USING (query_id, rank)")}
    # the tiny scripted run has no positive under its own cut: label with a lower cut of the same judge (the
    # calibrated score is the same function, so the scores stay the run's)
    original = load_artifact(art)
    cut = sorted(v[1] for v in stored.values())[len(stored) // 2]
    lower = derived_version(original, tmp_path / "artifacts",
                            judge=original.program.state.judge.model_copy(update={"positive_threshold": cut}))
    export_records(store, tmp_path / "r.jsonl", negatives="hard+easy", judge=lower)
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert records
    for r in records:
        q = r["query_id"]
        assert r["pos_scores"] == pytest.approx([stored[(q, d)][1] for d in r["pos_ids"]])
        assert r["neg_scores"] == pytest.approx([stored[(q, d)][1] for d in r["neg_ids"]])
        assert min(r["pos_scores"]) >= cut > max(r["neg_scores"])
        assert r["prompt"] == r["instruction"]
        ranks = [g["rank"] for g in r["labels"]]
        assert ranks == sorted(ranks) and len(r["labels"]) == sum(1 for key in stored if key[0] == q)
        for g in r["labels"]:
            _, score, e, probs, bm25, cos = stored[(q, g["doc_id"])]
            assert (g["expected"], tuple(g["probs"]), g["bm25"], g["retrieval_score"]) == (e, probs, bm25, cos)
            assert g["score"] == pytest.approx(score) and (g["label"] >= 2) == (g["score"] >= cut)
    export_records(store, tmp_path / "hf", format="hf", negatives="hard+easy", judge=lower)
    from datasets import load_from_disk

    hf = load_from_disk(str(tmp_path / "hf"))
    assert hf["pos_scores"] == [r["pos_scores"] for r in records]
    assert [[g["doc_id"] for g in row] for row in hf["labels"]] == [[g["doc_id"] for g in r["labels"]] for r in records]
    for path in (tmp_path / "r.jsonl", tmp_path / "hf"):
        data = load_training_data(path)
        first = data.records[0]
        assert [g["score"] for g in first.pos_grades] == records[0]["pos_scores"]
        assert [g["bm25"] for g in first.neg_grades] == [stored[(records[0]["query_id"], d)][4]
                                                       for d in records[0]["neg_ids"]]
        for name in TEACHERS:  # every teacher can score these records
            pos, neg = Teacher(name).score(first)
            assert len(pos) == len(first.pos) and len(neg) == len(first.neg)
