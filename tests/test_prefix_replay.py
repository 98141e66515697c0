"""benchmarks/prefix_replay.py's caches and order, on token lists made up here: what a prefix cache serves decides
the figures the replay reports, so its block, eviction and last-token rules are checked against hand counts."""

from __future__ import annotations

import sys

from conftest import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def test_a_prefix_cache_serves_whole_blocks_up_to_the_first_one_it_lacks():
    from benchmarks.prefix_replay import BLOCK, PrefixCache

    cache = PrefixCache(None)
    first = list(range(3 * BLOCK + 5))
    assert cache.serve(first) == 0  # cold
    assert cache.serve(first) == 3 * BLOCK  # the partial last block is computed again
    other = first[:2 * BLOCK] + [-1] * (BLOCK + 5)  # shares two blocks, then differs
    assert cache.serve(other) == 2 * BLOCK
    exact = list(range(2 * BLOCK))
    assert cache.serve(exact) == 2 * BLOCK - 1  # a prompt held whole still computes its last token


def test_a_full_prefix_cache_drops_the_least_recently_used_blocks():
    from benchmarks.prefix_replay import BLOCK, PrefixCache

    cache = PrefixCache(2 * BLOCK)
    a, b = [1] * (2 * BLOCK), [2] * (2 * BLOCK)
    cache.serve(a)
    cache.serve(b)  # a's two blocks make room for b's
    assert cache.serve(a + [0]) == 0
    assert cache.serve(a + [0]) == 2 * BLOCK


def test_the_embedded_engine_reuses_the_previous_prompt_on_its_grid():
    from benchmarks.prefix_replay import LastPrompt
    from syntra_dspy.lm.llamacpp.prompt_states import ALIGN

    engine = LastPrompt()
    assert engine.serve(list(range(100))) == 0
    shared = list(range(61)) + [-1] * 40  # 61 tokens in common: kept up to the grid line before them
    assert engine.serve(shared) == 61 - 61 % ALIGN
    assert engine.serve(list(range(100))) == 61 - 61 % ALIGN  # only the previous prompt is kept


def test_document_first_asks_about_one_candidate_for_all_queries_in_a_row():
    from benchmarks.prefix_replay import in_order

    calls = [("q1", "d1"), ("q1", "d2"), ("q2", "d2"), ("q2", "d3"), ("q2", "d1")]
    assert in_order(calls, "query-first") == calls
    assert in_order(calls, "document-first") == [("q1", "d1"), ("q2", "d1"), ("q1", "d2"), ("q2", "d2"),
                                                 ("q2", "d3")]


def test_the_replay_counts_calls_about_a_candidate_met_before():
    from benchmarks.prefix_replay import PrefixCache, replay

    docs = [[("q1", "d1"), ("q1", "d2")], [("q2", "d2"), ("q2", "d3")]]
    prompts = {("q1", "d1"): [1] * 40, ("q1", "d2"): [2] * 40, ("q2", "d2"): [2] * 32 + [3] * 8,
               ("q2", "d3"): [4] * 40}
    out = replay(docs, "document-first", PrefixCache(None), lambda call, order: prompts[call])
    assert out["all"] == {"calls": 4, "prompt_tokens": 160, "served": 32, "computed": 128}
    assert out["candidate met before"] == {"calls": 1, "prompt_tokens": 40, "served": 32, "computed": 8}
    assert out["first half"]["calls"] == 2 and out["second half"]["calls"] == 2


def test_candidates_the_cascade_skipped_are_no_grading_calls(tmp_path):
    import sqlite3

    from benchmarks.prefix_replay import grading_calls
    from syntra_dspy.production.store import RunStore

    path = tmp_path / "run.db"
    RunStore.open(path).close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO documents (doc_id, position, status) VALUES ('src', 0, 'done')")
        db.execute("INSERT INTO queries (query_id, doc_id, position, text, blueprint, complete) "
                   "VALUES ('q1', 'src', 0, 'claim', '{}', 1)")
        db.executemany("INSERT INTO candidates (query_id, rank, doc_id, score) VALUES ('q1', ?, ?, 0.5)",
                       [(0, "d0"), (1, "d1"), (2, "d2")])
        db.execute("INSERT INTO judge_skips (query_id, rank, rule, class, low, high) "
                   "VALUES ('q1', 1, 'margin', 'negative', 0.0, 3.0)")
    with RunStore.open(path, readonly=True) as run:
        assert grading_calls(run) == [[("claim", "d0"), ("claim", "d2")]]
