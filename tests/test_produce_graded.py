"""Production with the graded judge: one call per candidate, label-token probabilities, the compiled calibration."""

from __future__ import annotations

import json
import sqlite3

import pytest

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import produce
from syntra_dspy.programs.judge_calibration import CLASS_LABEL
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import mini_artifact

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
