"""Credentials in a server address are refused before any connection and never echoed; a bad address, an output
path with no name, a full disk or an absurd --top-k is a clear error or message, never a traceback; documents a
stopping run abandons are logged as left pending, not failed."""

from __future__ import annotations

import errno
import hashlib
import logging
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError
from syntra_dspy.lm import OpenAICompatibleServer, parse_lm_flag
from syntra_dspy.production import RunStore, StoreError, produce
from syntra_dspy.task import LMSpec, parse_task
from syntra_dspy.testing import SyntraBrain, scripted_lm

from reliability.conftest import SMALL

SECRET = "SECRET-pw-4711"
MINI_CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "mini" / "corpus.jsonl"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def produce_cli(mini, store: Path, generator: str, *extra: str) -> int:
    art, index = mini
    return main(["produce", str(art), "--store", str(store), "--generator", generator, "--index-dir", str(index),
                 "--docs", "1", "--queries-per-doc", "1", "--chunk-size", "2", "--retries", "0", "--timeout", "3",
                 "--no-progress", *extra])


def task_with(api_base: str) -> dict:
    return {"name": "t", "corpus": {"path": "c.jsonl"}, "examples": [{"query": "q", "positive_id": "1"}] * 3,
            "lms": {"generator": {"model": "hosted_vllm/m", "api_base": api_base}}}


# -- credentials in a server address ---------------------------------------------------------------------------------

def test_credentials_in_a_server_address_are_refused_before_any_lookup_and_not_echoed(mini, tmp_path, monkeypatch,
                                                                                      capsys):
    looked_up: list[str] = []
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: looked_up.append(str(host)) or real(host, *a, **k))
    code = produce_cli(mini, tmp_path / "run.db", f"hosted_vllm/x@http://admin:{SECRET}@audit.invalid:8000/v1",
                       "--top-k", "2")
    captured = capsys.readouterr()
    assert code == 2 and "api_key_env" in captured.err and "Traceback" not in captured.err
    assert SECRET not in captured.err + captured.out
    assert not [host for host in looked_up if "audit.invalid" in host or SECRET in host]
    assert not (tmp_path / "run.db").exists()


def test_credentials_in_a_task_files_api_base_are_refused_without_the_secret():
    for api_base in (f"http://admin:{SECRET}@h:8000/v1", [f"http://admin:{SECRET}@h:8000/v1", "http://g:8000/v1"]):
        with pytest.raises(ConfigError, match="api_key_env") as raised:
            parse_task(task_with(api_base), source="task.yaml")
        assert raised.value.field.startswith("lms.generator.api_base") and SECRET not in str(raised.value)
    with pytest.raises(ValueError) as raised:  # the Python API: pydantic would quote the input
        LMSpec(model="hosted_vllm/m", api_base=f"http://admin:{SECRET}@h:8000/v1")
    assert SECRET not in str(raised.value)


# -- addresses that are no http(s) server ----------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["hosted_vllm/x@ftp://h/v1", "hosted_vllm/x@file:///etc/passwd", "@",
                                  "hosted_vllm/x@", "hosted_vllm/x@localhost:8000/v1"])
def test_a_generator_flag_with_a_non_http_address_is_refused(flag):
    with pytest.raises(ConfigError, match=r"http\(s\)"):
        parse_lm_flag(flag)


def test_a_non_http_generator_never_reaches_the_default_server(mini, tmp_path, capsys):
    code = produce_cli(mini, tmp_path / "run.db", "hosted_vllm/x@ftp://files.example/v1", "--top-k", "2")
    err = capsys.readouterr().err
    assert code == 2 and "http(s)" in err and "Traceback" not in err
    assert not (tmp_path / "run.db").exists()


def test_an_ipv6_address_typo_is_a_clear_error(mini, tmp_path, capsys):
    code = produce_cli(mini, tmp_path / "run.db", "hosted_vllm/x@http://[::1/v1", "--top-k", "2")
    err = capsys.readouterr().err
    assert code == 2 and "IPv6" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="IPv6"):
        parse_task(task_with("http://[::1/v1"), source="task.yaml")


# -- an output path with no name -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "hf"])
def test_export_out_dot_is_a_clear_error(store, tmp_path, monkeypatch, capsys, fmt):
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(store), "--out", ".", "--format", fmt, "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "names a folder" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db"]


# -- a full disk -----------------------------------------------------------------------------------------------------

def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def assert_clear_disk_full(err: str, out: Path) -> None:
    assert "disk is full" in err and str(out) in err and "intact" in err and "Traceback" not in err


def left_in(folder: Path) -> list[str]:
    """What a failed write left in ``folder``, besides the run store and the files SQLite keeps beside it."""
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("run.db"))


def test_disk_full_during_export_is_a_clear_error(store, tmp_path, monkeypatch, capsys):
    from syntra_dspy.production import export as export_module

    def half(*args, **kwargs):
        yield {"query": "half"}
        no_space()

    before = digest(store)
    monkeypatch.setattr(export_module, "_records", half)
    out = tmp_path / "train.jsonl"
    assert main(["export", str(store), "--out", str(out)]) == 2
    assert_clear_disk_full(capsys.readouterr().err, out)
    assert digest(store) == before and left_in(tmp_path) == []


def test_disk_full_during_hf_export_is_a_clear_error(store, tmp_path, monkeypatch, capsys):
    import datasets

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", no_space)
    out = tmp_path / "records"
    assert main(["export", str(store), "--out", str(out), "--format", "hf"]) == 2
    assert_clear_disk_full(capsys.readouterr().err, out)
    assert left_in(tmp_path) == []


def test_disk_full_during_backup_is_a_clear_error(store, tmp_path, monkeypatch, capsys):
    def full(self, path):
        raise sqlite3.OperationalError("database or disk is full")

    before = digest(store)
    monkeypatch.setattr(RunStore, "copy_to", full)
    out = tmp_path / "copy.db"
    assert main(["backup", str(store), str(out)]) == 2
    assert_clear_disk_full(capsys.readouterr().err, out)
    assert digest(store) == before and left_in(tmp_path) == []


def test_disk_full_during_index_is_a_clear_error(minilm, tmp_path, monkeypatch, capsys):
    import faiss

    monkeypatch.setattr("syntra_dspy.retrieval.encoder.load_encoder", lambda *args, **kwargs: minilm)

    def faiss_full(*args, **kwargs):
        raise RuntimeError("Error in faiss::FileIOWriter::operator() at impl/io.cpp:107: Error: 'ret == nitems' "
                           "failed: write error in index.faiss: 0 != 1 (No space left on device)")

    monkeypatch.setattr(faiss, "write_index", faiss_full)
    index_dir = tmp_path / "index"
    assert main(["index", "--corpus", str(MINI_CORPUS), "--index-dir", str(index_dir), "--no-progress"]) == 2
    assert_clear_disk_full(capsys.readouterr().err, index_dir)
    assert not index_dir.exists()


def test_disk_full_while_index_writes_the_selection_is_a_clear_error(mini, minilm, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("syntra_dspy.retrieval.encoder.load_encoder", lambda *args, **kwargs: minilm)
    monkeypatch.setattr("syntra_dspy.outputs.atomic_write_text", no_space)
    out = tmp_path / "selected.txt"
    assert main(["index", "--corpus", str(MINI_CORPUS), "--index-dir", str(mini[1]), "--no-progress", "--select",
                 "5", "--out", str(out)]) == 2
    assert_clear_disk_full(capsys.readouterr().err, out)
    assert not out.exists()


# -- an absurd --top-k -----------------------------------------------------------------------------------------------

def test_an_absurd_top_k_is_capped_at_the_corpus_size_with_a_message(mini, minilm, tmp_path, caplog):
    art, index = mini
    store = tmp_path / "run.db"
    with caplog.at_level(logging.WARNING, logger="syntra_dspy"):
        produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
                docs=1, queries_per_doc=1, chunk_size=20, top_k=99999999999999999999)
    assert any("more than the corpus's 40 documents" in r.getMessage() for r in caplog.records)
    with RunStore.open(store, readonly=True) as run:
        assert run.meta()["identity"]["top_k"] == 40 and run.document_counts()["done"] == 1


def test_a_store_started_with_top_k_above_the_corpus_size_still_resumes(mini, minilm, tmp_path):
    art, index = mini
    store = tmp_path / "run.db"
    produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm, progress=False,
            docs=1, queries_per_doc=1, chunk_size=20, top_k=50)
    with RunStore.open(store) as run:  # as a store made before top_k was capped records it
        run.set_meta(identity={**run.meta()["identity"], "top_k": 50})
    again = produce(art, store, generator=scripted_lm(SyntraBrain()), index_dir=index, encoder=minilm,
                    progress=False, docs=2, queries_per_doc=1, chunk_size=20, top_k=50)
    assert again.documents["done"] == 2


def test_the_cli_takes_an_absurd_top_k_with_the_message(mini, tmp_path, caplog):
    with OpenAICompatibleServer(SyntraBrain()) as server, caplog.at_level(logging.WARNING, logger="syntra_dspy"):
        code = produce_cli(mini, tmp_path / "run.db", f"hosted_vllm/fake@{server.base_url}",
                           "--top-k", "99999999999999999999")
    assert code == 0 and any("more than the corpus's 40 documents" in r.getMessage() for r in caplog.records)


# -- documents a stopping run abandons -------------------------------------------------------------------------------

class SlowBrain(SyntraBrain):
    """SyntraBrain at 50 ms a call: the other documents are still in flight when the first one is committed."""

    def __call__(self, call):
        time.sleep(0.05)
        return super().__call__(call)


def test_documents_abandoned_by_a_full_disk_are_logged_as_left_pending(mini, minilm, store, monkeypatch, caplog,
                                                                        disk_fills_when_a_session_begins):
    art, index = mini
    with caplog.at_level(logging.INFO, logger="syntra_dspy"):
        with pytest.raises(StoreError, match="disk is full"):
            produce(art, store, generator=scripted_lm(SlowBrain()), index_dir=index, encoder=minilm,
                    progress=False, docs=8, concurrency=2, **SMALL)
        deadline = time.monotonic() + 30  # the documents in flight end in their worker threads
        while any(t.name.startswith("syntra-doc") and t.is_alive() for t in threading.enumerate()) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
    monkeypatch.undo()
    with RunStore.open(store, readonly=True) as run:
        pending = {doc for doc, in run.rows("SELECT doc_id FROM documents WHERE status = 'pending'")}
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "failed" in m and any(doc in m for doc in pending)], messages
    assert any("left pending" in m for m in messages), messages
