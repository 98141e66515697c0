"""Production against a real HTTP server that speaks the OpenAI chat-completions API (loopback fake)."""

from __future__ import annotations

import json

import dspy
import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import ProductionAborted, RunStore, export_records, produce
from syntra_dspy.testing import SyntraBrain, scripted_lm

from test_produce_support import mini_artifact, read_jsonl, rows

SECRET = "sk-test-SECRET-4711"
SETTINGS = {"docs": 4, "queries_per_doc": 2, "top_k": 8, "chunk_size": 4}


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


def test_served_generator_is_bounded_by_concurrency_and_fully_metered(mini, minilm, tmp_path):
    from syntra_dspy.artifacts import load_artifact

    art, index = mini
    with OpenAICompatibleServer(SyntraBrain(), latency=0.05) as server:
        summary = produce(art, tmp_path / "run.db", generator=f"hosted_vllm/fake@{server.base_url}", concurrency=3,
                          index_dir=index, encoder=minilm, progress=False, **SETTINGS)
        bodies = list(server.bodies)
        peak, requests, url = server.in_flight_peak, server.requests, server.base_url
    assert summary.documents["done"] == 4
    assert 2 <= peak <= 3  # calls overlap, and never more than --concurrency
    assert summary.calls == requests == len(bodies)
    recorded = {v["system_prompt"] for v in load_artifact(art).manifest["prompts"].values()}
    assert all(b["messages"][0]["role"] == "system" and b["messages"][0]["content"] in recorded for b in bodies)
    assert sum(u["prompt_tokens"] for u in summary.usage.values()) > 0
    with RunStore.open(tmp_path / "run.db", readonly=True) as run:
        generator = run.meta()["generator"]
    assert generator["model"] == "hosted_vllm/fake" and generator["api_base"] == url
    # the same brain in-process gives the same records: the backend does not change the data
    produce(art, tmp_path / "local.db", generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
            progress=False, **SETTINGS)
    export_records(tmp_path / "run.db", tmp_path / "a.jsonl")
    export_records(tmp_path / "local.db", tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_cli_produce_then_export_jsonl_hf_and_stats(mini, tmp_path, capsys, monkeypatch):
    from datasets import load_from_disk

    art, index = mini
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FAKE_SERVER_KEY", SECRET)
    store = tmp_path / "run.db"
    with OpenAICompatibleServer(SyntraBrain(), api_key=SECRET) as server:
        code = main(["produce", str(art), "--store", str(store), "--docs", "3", "--queries-per-doc", "2",
                     "--top-k", "6", "--generator", f"openai/fake@{server.base_url}", "--index-dir", str(index),
                     "--api-key-env", "FAKE_SERVER_KEY", "--json"])  # with the progress bar, on stderr
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["documents"]["done"] == 3
    assert "produce" in captured.err and "3/3" in captured.err  # the progress bar
    for file in tmp_path.glob("run.db*"):  # the key's variable name may be recorded, never its value
        assert SECRET.encode() not in file.read_bytes()
    assert main(["export", str(store), "--out", str(tmp_path / "train.jsonl"), "--negatives", "hard+easy"]) == 0
    records = read_jsonl(tmp_path / "train.jsonl")
    assert records and all(1 <= len(r["neg"]) <= 7 for r in records)
    meta = json.loads((tmp_path / "train.jsonl.meta.json").read_text())
    assert meta["counts"]["records"] == len(records) and meta["export_options"]["negatives"] == "hard+easy"
    assert main(["export", str(store), "--out", str(tmp_path / "hf"), "--format", "hf",
                 "--negatives", "hard+easy"]) == 0
    ds = load_from_disk(str(tmp_path / "hf"))
    assert ds.num_rows == len(records) and ds[0]["query"] == records[0]["query"]
    capsys.readouterr()
    assert main(["export", str(store), "--stats"]) == 0
    stats = capsys.readouterr().out
    assert "documents  planned 3, done 3" in stats and "dropped" in stats and "usage      annotate" in stats


def test_backend_outage_aborts_keeps_work_and_resumes_without_retry_flag(mini, minilm, tmp_path):
    art, index = mini
    store = tmp_path / "run.db"
    with OpenAICompatibleServer(SyntraBrain()) as server:
        dead = server.base_url
    down = dspy.LM("hosted_vllm/fake", api_base=dead, cache=False, num_retries=0)
    with pytest.raises(ProductionAborted, match="in a row failed"):
        produce(art, store, generator=down, index_dir=index, encoder=minilm, progress=False, concurrency=1,
                max_consecutive_errors=2, **SETTINGS)
    failed = rows(store, "SELECT status, stage, error_kind FROM documents WHERE status != 'pending'")
    assert failed and all(r == ("failed", "extract", "call") for r in failed)
    assert rows(store, "SELECT status FROM sessions") == [("aborted",)]
    # a server is back (at a new address): failures on the backend are retried without --retry-failed
    with OpenAICompatibleServer(SyntraBrain()) as server:
        back = produce(art, store, generator=f"hosted_vllm/fake@{server.base_url}", index_dir=index,
                       encoder=minilm, progress=False, **SETTINGS)
    with pytest.raises(ConfigError, match="generator"):
        produce(art, store, generator=scripted_lm(), index_dir=index, encoder=minilm, progress=False, **SETTINGS)
    assert back.documents == {"planned": 4, "pending": 0, "done": 4, "partial": 0, "failed": 0}
