"""The production log's progress line: a slow run reads in seconds per document with the time left."""

from __future__ import annotations

import pytest

from syntra_dspy.production import ledger
from syntra_dspy.production.units import DocumentResult


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(ledger.time, "perf_counter", lambda: now[0])
    return now


def _finish(progress: ledger.Progress, clock: list[float], seconds: float, n: int = 1) -> None:
    for _ in range(n):
        clock[0] += seconds
        progress.update(DocumentResult(doc_id="d"))


def test_a_slow_run_shows_seconds_per_document_and_the_time_left(clock):
    progress = ledger.Progress(163, enabled=False)
    _finish(progress, clock, 180.0, n=3)
    line = progress.line()
    assert line.startswith("progress: 3/163 documents (180 s/doc, about 8 h 00 min left)"), line


def test_a_fast_run_shows_documents_per_second_and_minutes_left(clock):
    progress = ledger.Progress(1000, enabled=False)
    _finish(progress, clock, 0.25, n=100)
    assert "(4.00/s, about 4 min left)" in progress.line()


def test_a_finished_or_unstarted_run_shows_no_time_left(clock):
    progress = ledger.Progress(2, enabled=False)
    clock[0] += 5
    assert "(none finished yet)" in progress.line()
    _finish(progress, clock, 30.0, n=2)
    assert "left" not in progress.line() and "2/2 documents" in progress.line()


def test_the_time_left_follows_the_recent_pace_not_a_pause_or_a_slow_start(clock):
    progress = ledger.Progress(100, enabled=False)
    clock[0] += 3600  # loading models, building an index, or a run paused for an hour
    _finish(progress, clock, 100.0, n=ledger.PACE_WINDOW)
    # fewer than the window's documents after the first: the session's average still counts the hour
    assert "(460 s/doc" in progress.line()
    _finish(progress, clock, 100.0, n=5)
    line = progress.line()
    assert line.startswith("progress: 15/100 documents (100 s/doc, about 2 h 22 min left)"), line
