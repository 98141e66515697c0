"""The paired production benchmark's reading over documents: the unit a paired run draws is a document, so its
ratio, interval and test are taken over documents, and the per-step table says where the time went."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def side(label: str, seconds: dict[str, float | None], *, steps: dict[str, float] | None = None,
         first: dict[str, int] | None = None, cached: int | None = None) -> dict:
    """``cached``: each step's prompt tokens reused from a cached prefix (None: a report from before they were kept)."""
    return {"label": label,
            "per_document": {d: {"status": "done", "seconds": s, "queries": 2, "records": 1}
                             for d, s in seconds.items()},
            "by_step": {st: {"calls": 2, "prompt_tokens": 100, "completion_tokens": 10, "seconds": s,
                             **({"cached_prompt_tokens": cached} if cached is not None else {})}
                        for st, s in (steps or {}).items()},
            "writing": {"first_answer": first, "rewrite_calls": 3} if first else {}}


def test_paired_documents_takes_the_ratio_of_sums_over_documents_both_sides_finished():
    from benchmarks.paired_produce import paired_documents

    before = side("before", {"a": 100.0, "b": 200.0, "c": 300.0, "d": 400.0, "e": 500.0, "f": 600.0,
                             "pending": None})
    after = side("after", {"a": 80.0, "b": 150.0, "c": 240.0, "d": 330.0, "e": 400.0, "f": 480.0,
                           "only-after": 50.0})
    out = paired_documents(before, after)
    assert out["documents"] == 6  # not the one without seconds, not the one only one side ran
    assert out["ratio"] == pytest.approx(1680 / 2100)
    low, high = out["ratio_ci95"]
    assert low <= out["ratio"] <= high < 1.0  # every document got faster: the interval stays below 1
    assert out["wilcoxon_p"] == pytest.approx(0.03125)  # six of six in one direction, exact two-sided
    assert (out["records_before"], out["records_after"]) == (6, 6)


def test_paired_documents_says_nothing_from_one_document_and_no_change_is_p_one():
    from benchmarks.paired_produce import paired_documents

    assert paired_documents(side("b", {"a": 1.0}), side("a", {"a": 2.0})) == {"documents": 1}
    same = side("b", {"a": 10.0, "b": 20.0, "c": 30.0})
    out = paired_documents(same, same)
    assert out["ratio"] == 1.0 and out["wilcoxon_p"] == 1.0 and out["ratio_ci95"] == [1.0, 1.0]


def test_the_report_shows_each_side_against_the_first_by_document_by_step_and_by_first_answer():
    from benchmarks.paired_produce import _paired_lines, paired_documents

    before = side("before", {"a": 100.0, "b": 200.0, "c": 300.0}, steps={"write": 400.0, "extract": 500.0},
                  first={"kept": 7, "copy": 7, "question": 2}, cached=40)
    after = side("after", {"a": 90.0, "b": 150.0, "c": 310.0}, steps={"write": 300.0, "extract": 250.0},
                 first={"kept": 10, "copy": 6}, cached=80)
    after["paired"] = paired_documents(before, after)
    lines = _paired_lines(before, after)
    text = "\n".join(lines)
    assert "per document, wall seconds after/before: 0.92 (sum 600 -> 550 s over the 3 documents" in text
    assert "write step, before: 7 of 16 first answers kept (rejected: copy 7, question 2); 3 rewrite calls" in text
    assert "write step, after: 10 of 16 first answers kept (rejected: copy 6)" in text
    steps = [line for line in lines if line.startswith(("| extract", "| write"))]
    assert steps == ["| extract | 2 -> 2 | 500 -> 250 | 0.50 | 100 -> 100 | 60 -> 20 | 10 -> 10 |",  # costliest first
                     "| write | 2 -> 2 | 400 -> 300 | 0.75 | 100 -> 100 | 60 -> 20 | 10 -> 10 |"]
    old = side("before", {"a": 100.0}, steps={"write": 400.0})  # a report made before cached tokens were kept
    assert "| write | 2 -> 2 | 400 -> 400 | 1.00 | 100 -> 100 | — -> — | 10 -> 10 |" in _paired_lines(old, old)


def test_the_report_says_how_close_each_sides_queries_stay_to_their_abstracts():
    from benchmarks.paired_produce import _paired_lines

    before = {**side("before", {}), "copied_words": [1, 2, 3, 5], "bm25_rank1": 0.75}
    after = {**side("after", {}), "copied_words": [3, 4, 7, 10, 10], "bm25_rank1": 1.0}
    text = "\n".join(_paired_lines(before, after))
    assert "queries, before: 4; BM25 ranks the source first for 75%; consecutive words copied from the source: " \
           "median 3, 0 copy 7 or more" in text
    assert "queries, after: 5; BM25 ranks the source first for 100%" in text and "median 7, 3 copy 7 or more" in text


def test_sides_take_turns_one_document_at_a_time_and_a_rerun_resumes(tmp_path, monkeypatch):
    """ABBA order (a drift of the machine's speed weighs on both sides), one more planned document a turn, and a
    side whose store already plans more is asked for what it plans (a resumed run is not refused)."""
    import sqlite3
    from contextlib import nullcontext

    import benchmarks.paired_produce as paired
    from syntra_dspy import production

    calls: list[tuple[str, int]] = []

    artifacts: list[tuple[str, str]] = []

    def fake_produce(artifact, store, *, docs, **kwargs):
        calls.append((store.name[0], docs))
        artifacts.append((store.name[0], artifact.name))
        assert "artifact" not in kwargs
        with sqlite3.connect(store) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS documents (doc_id TEXT)")
            have = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
            conn.executemany("INSERT INTO documents VALUES (?)", [(str(i),) for i in range(have, docs)])

    monkeypatch.setattr(production, "produce", fake_produce)
    monkeypatch.setattr(paired, "side_row", lambda label, settings, store, wall: {"label": label, "wall": wall})
    sides = [("before", {}), ("after", {"hide_copied": True, "artifact": str(tmp_path / "recalibrated")})]
    rows = paired.run_in_turn(sides, tmp_path / "art", tmp_path, nullcontext, {"docs": 3})
    assert calls == [("1", 1), ("2", 1), ("2", 2), ("1", 2), ("1", 3), ("2", 3)]
    assert set(artifacts) == {("1", "art"), ("2", "recalibrated")}  # a side may produce from its own artifact
    assert "/" not in paired._stem(2, "artifact=/root/art/scifact/38f06c31fe21")  # its store is one file name
    assert [r["label"] for r in rows] == ["before", "after"]

    calls.clear()
    with sqlite3.connect(tmp_path / "2-after.db") as conn:  # the second side got one document further
        conn.execute("INSERT INTO documents VALUES ('3')")
    paired.run_in_turn(sides, tmp_path / "art", tmp_path, nullcontext, {"docs": 4})
    assert calls[:2] == [("1", 3), ("2", 4)]  # never fewer than a store plans: each resumes where it stopped


def test_the_scripted_mini_task_is_compiled_once_per_work_folder(tmp_path, monkeypatch):
    """A rerun with the same --work takes the artifact its stores were made from, so they resume."""
    from types import SimpleNamespace

    import benchmarks.paired_produce as paired
    from syntra_dspy import compiler

    compiled: list[Path] = []

    def fake_compile(task, *, out, **kwargs):
        path = out / "mini" / f"v{len(compiled)}"
        path.mkdir(parents=True)
        compiled.append(path)
        return SimpleNamespace(path=path)

    monkeypatch.setattr(compiler, "compile_task", fake_compile)
    first = paired.compile_mini(tmp_path / "mini", "expected")
    again = paired.compile_mini(tmp_path / "mini", "expected")
    assert first == again == compiled[0] and len(compiled) == 1


def test_a_side_that_names_an_engine_build_runs_every_turn_in_a_child_with_its_build(monkeypatch, tmp_path):
    """A process loads one build of the engine's libraries, so sides that differ by build take their turns in child
    processes, in ABBA order, each told its build; the setting itself never reaches produce()."""
    import benchmarks.paired_produce as paired

    turns, runs = [], []
    in_child = paired.run_turn_in_child
    monkeypatch.setattr(paired, "run_turn_in_child",
                        lambda artifact, store, kwargs, *, build, generator, latency:
                        turns.append((store.name, build, kwargs["docs"], sorted(kwargs))))
    monkeypatch.setattr(paired, "side_row", lambda label, settings, store, wall=None: {"label": label})
    sides = [("portable", {"engine_build": "portable"}), ("fast", {"engine_build": "avx512", "hide_copied": False})]
    paired.run_in_turn(sides, tmp_path / "artifact", tmp_path, generator=lambda: None,
                       common={"docs": 2, "top_k": 8}, child={"generator": "embedded", "latency": 0.0})
    assert [(store[0], build, docs) for store, build, docs, _ in turns] == [
        ("1", "portable", 1), ("2", "avx512", 1), ("2", "avx512", 2), ("1", "portable", 2)]
    assert all("engine_build" not in keys for *_, keys in turns)
    assert "hide_copied" in turns[1][3] and "hide_copied" not in turns[0][3]

    monkeypatch.setenv("LLAMA_CPP_LIB_PATH", "/somewhere/else")
    monkeypatch.setattr(paired.subprocess, "run", lambda cmd, env, check: runs.append((cmd, env)))
    in_child(tmp_path / "a", tmp_path / "s.db", {"docs": 1, "corpus": tmp_path / "c.jsonl"},
             build="avx512", generator="embedded", latency=0.0)
    (cmd, env), = runs
    assert env["SYNTRA_LLAMA_VARIANT"] == "avx512" and "LLAMA_CPP_LIB_PATH" not in env  # the named build, not the path
    assert cmd[-2] == "--turn" and '"corpus": "' in cmd[-1]


def test_the_held_out_corpus_leaves_out_every_stores_documents_and_the_listed_ones(tmp_path):
    """A margin taught by one store's grades and a lever designed on another: neither store's documents may be drawn
    (gzipped or not), nor those listed."""
    import gzip
    import json
    import shutil
    import sqlite3

    from benchmarks.paired_produce import held_out_corpus

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": "t"}) + "\n" for i in range(6)), encoding="utf-8")
    stores = []
    for name, docs in (("a.db", ["d0"]), ("b.db", ["d1", "d2"])):
        db = tmp_path / name
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE documents (doc_id TEXT)")
            conn.executemany("INSERT INTO documents VALUES (?)", [(d,) for d in docs])
        conn.close()
        stores.append(db)
    with stores[1].open("rb") as src, gzip.open(tmp_path / "b.db.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    work = tmp_path / "work"
    work.mkdir()
    out = held_out_corpus(corpus, [stores[0], tmp_path / "b.db.gz"], work, {"d5"})
    kept = [json.loads(line)["_id"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert kept == ["d3", "d4"]
