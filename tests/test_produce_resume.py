"""A real ``syntra produce`` subprocess killed with SIGKILL mid-run resumes to exactly the uninterrupted output."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from syntra_dspy.cli import main
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import export_records, produce
from syntra_dspy.testing import SyntraBrain

from test_produce_support import mini_artifact, read_jsonl, rows

DOCS, LATENCY = 10, 0.1
_CLI = "import sys; from syntra_dspy.cli import main; sys.exit(main(sys.argv[1:]))"


def _done(db) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
        try:
            return conn.execute("SELECT count(*) FROM documents WHERE status != 'pending'").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0  # not created yet


def kill_9_once_done(proc: subprocess.Popen, db, *, done: int, within: float) -> None:
    """SIGKILL ``proc`` as soon as ``done`` documents of ``db`` are settled (or after ``within`` seconds)."""
    deadline = time.monotonic() + within
    while _done(db) < done and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    output = proc.communicate()[0].decode(errors="replace")
    assert proc.returncode == -signal.SIGKILL, output[-3000:]


def _command(artifact, index, store, url):
    return [sys.executable, "-c", _CLI, "produce", str(artifact), "--store", str(store), "--docs", str(DOCS),
            "--queries-per-doc", "2", "--top-k", "8", "--chunk-size", "4", "--concurrency", "2",
            "--generator", f"hosted_vllm/fake@{url}", "--index-dir", str(index), "--no-progress"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kill_9_mid_run_then_resume_matches_an_uninterrupted_run(tmp_path_factory, tmp_path, minilm, monkeypatch):
    artifact, index = mini_artifact(tmp_path_factory)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    brain = SyntraBrain()
    with OpenAICompatibleServer(brain, latency=LATENCY) as server:
        # the uninterrupted reference, in this process, at another concurrency
        produce(artifact, tmp_path / "ref.db", docs=DOCS, queries_per_doc=2, top_k=8, chunk_size=4, concurrency=4,
                generator=f"hosted_vllm/fake@{server.base_url}", index_dir=index, encoder=minilm, progress=False)
        export_records(tmp_path / "ref.db", tmp_path / "ref.jsonl")

        store = tmp_path / "run.db"
        command = _command(artifact, index, store, server.base_url)
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        kill_9_once_done(proc, store, done=3, within=150)
        time.sleep(2 * LATENCY + 0.3)  # let the server answer the killed run's last requests
        kept = dict(rows(store, "SELECT doc_id, session_id FROM documents WHERE status != 'pending'"))
        assert 3 <= len(kept) < DOCS, "the kill must land mid-run"
        extracts_before = brain.calls["extract"]

        # the same command again (in this process, to spare a second interpreter start-up)
        monkeypatch.chdir(tmp_path)
        assert main(command[3:]) == 0

    # every finished unit was kept and none was done twice
    assert brain.calls["extract"] - extracts_before == DOCS - len(kept)
    after = dict(rows(store, "SELECT doc_id, session_id FROM documents"))
    assert all(after[d] == s for d, s in kept.items())
    assert rows(store, "SELECT count(*), sum(attempts) FROM documents WHERE status = 'done'")[0] == (DOCS, DOCS)
    assert [r[0] for r in rows(store, "SELECT status FROM sessions ORDER BY id")] == ["killed", "completed"]
    # and the resumed output is the uninterrupted output, byte for byte
    export_records(store, tmp_path / "run.jsonl")
    records = read_jsonl(tmp_path / "run.jsonl")
    assert records and len({r["query_id"] for r in records}) == len(records)
    assert (tmp_path / "run.jsonl").read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
