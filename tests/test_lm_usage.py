from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest
from dspy.clients.cache import Cache

from syntra_dspy.lm import ScriptedLM, UsageMeter, current_stage, submit_in_context
from syntra_dspy.lm.scripted import ScriptedEngine


def _echo(call):
    return {"answer": "x" * 40}


def _ask(lm, question="q"):
    with dspy.context(lm=lm):
        return dspy.Predict("question -> answer")(question=question)


def test_counts_calls_and_tokens_per_stage():
    lm = ScriptedLM(_echo)
    meter = UsageMeter()
    with meter.stage("plan"):
        _ask(lm)
        _ask(lm)
    with meter.stage("write"):
        _ask(lm)
    snap = meter.snapshot()
    assert snap["plan"]["calls"] == 2 and snap["write"]["calls"] == 1
    history = [h["usage"] for h in lm.history]
    assert snap["plan"]["prompt_tokens"] == sum(u["prompt_tokens"] for u in history[:2])
    assert snap["write"]["completion_tokens"] == history[2]["completion_tokens"]
    assert meter.total()["calls"] == 3
    assert meter.total()["total_tokens"] == sum(u["total_tokens"] for u in history)
    assert snap["plan"]["cached"] == snap["plan"]["failures"] == 0 and snap["plan"]["seconds"] > 0


def test_two_threads_in_different_stages():
    lm = ScriptedLM(_echo)
    meter = UsageMeter()
    barrier = threading.Barrier(2)

    def work(stage, n):
        with meter.stage(stage):
            barrier.wait()  # both stages are open at the same time
            for i in range(n):
                _ask(lm, f"{stage}-{i}")
            return current_stage()

    with ThreadPoolExecutor(2) as pool:
        futures = [submit_in_context(pool, work, "alpha", 5), submit_in_context(pool, work, "beta", 3)]
        assert [f.result() for f in futures] == ["alpha", "beta"]
    snap = meter.snapshot()
    assert (snap["alpha"]["calls"], snap["beta"]["calls"]) == (5, 3)
    assert current_stage() is None


def test_stage_reaches_our_pool_workers_and_dspy_parallel():
    lm = ScriptedLM(_echo)
    meter = UsageMeter()
    program = dspy.Predict("question -> answer")
    with meter.stage("pool"), ThreadPoolExecutor(3) as pool:
        for f in [submit_in_context(pool, _ask, lm, f"q{i}") for i in range(6)]:
            f.result()
    with meter.stage("parallel"), dspy.context(lm=lm):
        dspy.Parallel(num_threads=3)([(program, {"question": f"p{i}"}) for i in range(7)])
    snap = meter.snapshot()
    assert snap["pool"]["calls"] == 6 and snap["parallel"]["calls"] == 7
    assert snap["parallel"]["prompt_tokens"] > 0
    assert "unstaged" not in snap


def test_nested_stage_wins_and_restores():
    lm = ScriptedLM(_echo)
    meter = UsageMeter()
    with meter.stage("outer"):
        _ask(lm)
        with meter.stage("inner"):
            _ask(lm)
        _ask(lm)
    assert {k: v["calls"] for k, v in meter.snapshot().items()} == {"inner": 1, "outer": 2}


def test_cache_hits_and_failures(monkeypatch):
    monkeypatch.setattr(
        dspy, "cache", Cache(enable_disk_cache=False, enable_memory_cache=True, disk_cache_dir=None)
    )
    cached_lm = dspy.LM("scripted/cached", engine=ScriptedEngine(_echo), cache=True)
    meter = UsageMeter()
    with meter.stage("judge"):
        first = _ask(cached_lm, "same")
        second = _ask(cached_lm, "same")
    assert first.answer == second.answer
    stats = meter.snapshot()["judge"]
    assert (stats["calls"], stats["cached"]) == (2, 1)
    assert stats["prompt_tokens"] == cached_lm.history[0]["usage"]["prompt_tokens"]  # the hit adds none

    def broken(call):
        raise RuntimeError("backend down")

    with meter.stage("judge"), pytest.raises(Exception, match="backend down"):
        _ask(ScriptedLM(broken))
    assert meter.snapshot()["judge"]["failures"] == 1


def test_existing_usage_tracker_still_fed():
    lm = ScriptedLM(_echo)
    meter = UsageMeter()
    with dspy.track_usage() as tracker, meter.stage("s"):
        _ask(lm)
    total = tracker.get_total_tokens()["scripted"]
    assert total["prompt_tokens"] == meter.total()["prompt_tokens"] > 0


def test_two_meters_nest_without_stealing_stages():
    lm = ScriptedLM(_echo)
    run, compile_ = UsageMeter(), UsageMeter()
    with run.stage("compile"), compile_.stage("query_instruction"):
        assert (run.current_stage(), current_stage()) == ("compile", "query_instruction")
        _ask(lm)
    assert run.snapshot()["compile"]["calls"] == compile_.snapshot()["query_instruction"]["calls"] == 1


def test_stage_needs_a_name_and_reset_clears():
    meter = UsageMeter()
    with pytest.raises(ValueError):
        with meter.stage(""):
            pass
    with meter.stage("a"):
        _ask(ScriptedLM(_echo))
    meter.reset()
    assert meter.snapshot() == {} and meter.total()["calls"] == 0
