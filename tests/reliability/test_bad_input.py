"""Bad input gets a clear error naming the file, line and field (never a traceback), and is never let
through silently; credentials in a server address never reach a log, the terminal or the run store."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.retrieval.corpus import read_corpus
from syntra_dspy.errors import ConfigError, InputError
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import ProductionAborted, produce
from syntra_dspy.task import LMSpec, load_task
from syntra_dspy.testing import SyntraBrain

from reliability.conftest import SMALL

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MINI_TASK = FIXTURES / "mini" / "task.yaml"
RECORDS = FIXTURES / "train" / "scifact_train.jsonl"


def task_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "task.yaml"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_non_utf8_task_yaml_names_the_file_and_line(tmp_path, capsys):
    text = MINI_TASK.read_bytes().replace(b"name: mini", b"name: mini\n# caf\xe9 au lait")
    path = task_file(tmp_path, text)
    with pytest.raises(ConfigError, match="UTF-8") as raised:
        load_task(path)
    assert raised.value.line == 2 and raised.value.path == str(path)
    assert main(["index", str(path)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_duplicate_yaml_key_is_refused_with_its_line(tmp_path):
    text = MINI_TASK.read_text(encoding="utf-8").replace("name: mini", "name: mini\nname: other")
    with pytest.raises(ConfigError, match="duplicate key 'name'") as raised:
        load_task(task_file(tmp_path, text))
    assert raised.value.line == 2


def test_a_duplicate_nested_yaml_key_is_refused(tmp_path):
    text = MINI_TASK.read_text(encoding="utf-8").replace("corpus: {path: corpus.jsonl, format: beir}",
                                                         "corpus: {path: corpus.jsonl, format: beir, format: tsv}")
    with pytest.raises(ConfigError, match="duplicate key 'format'"):
        load_task(task_file(tmp_path, text))


def corpus_file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_lone_surrogate_in_the_corpus_is_refused_at_reading(tmp_path):
    path = corpus_file(tmp_path, '{"_id": "d1", "text": "fine"}', r'{"_id": "d2", "text": "broken \ud800 text"}')
    with pytest.raises(InputError, match="surrogate") as raised:
        read_corpus(path)
    assert (raised.value.line, raised.value.field) == (2, "text")


def test_a_lone_surrogate_in_a_document_id_or_title_is_refused(tmp_path):
    for line, field in ((r'{"_id": "d\udfff", "text": "x"}', "_id"),
                        (r'{"_id": "d", "title": "\ud83d", "text": "x"}', "title")):
        with pytest.raises(InputError, match="surrogate") as raised:
            read_corpus(corpus_file(tmp_path, line))
        assert raised.value.field == field


@pytest.mark.parametrize("doc_id", ["a\\nb", "a\\rb", "a\\tb", "a\\u0000b"])
def test_a_control_character_inside_a_document_id_is_refused(tmp_path, doc_id):
    path = corpus_file(tmp_path, '{"_id": "ok", "text": "x"}', f'{{"_id": "{doc_id}", "text": "y"}}')
    with pytest.raises(InputError, match="control character") as raised:
        read_corpus(path)
    assert (raised.value.line, raised.value.field) == (2, "_id")


def test_retry_temperature_nan_is_refused(mini, minilm, tmp_path, capsys):
    art, index = mini
    with pytest.raises(SystemExit) as raised:
        main(["produce", str(art), "--store", str(tmp_path / "run.db"), "--retry-temperature", "nan"])
    assert raised.value.code == 2 and "finite" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="retry_temperature"):
        produce(art, tmp_path / "run.db", generator="hosted_vllm/x@http://127.0.0.1:9/v1", index_dir=index,
                encoder=minilm, progress=False, retry_temperature=float("nan"))
    assert not (tmp_path / "run.db").exists()


PASSWORD, QUERY_KEY = "PW-s3cret-77", "QK-s3cret-88"


@pytest.mark.parametrize("form", ["json_schema", "structured_outputs"])  # DSPy's native route, and LiteLLM's
def test_credentials_in_a_server_address_never_reach_logs_the_store_or_failures(mini, minilm, tmp_path, caplog,
                                                                               capsys, form):
    art, index = mini
    store = tmp_path / "run.db"
    with OpenAICompatibleServer(SyntraBrain()) as server:
        url = server.base_url + f"?api_key={QUERY_KEY}"  # user:password@ is refused: test_secrets_and_input
        spec = LMSpec(model="hosted_vllm/fake", api_base=url, retries=1, timeout=5, schema_form=form)
        with caplog.at_level(logging.DEBUG), pytest.raises(ProductionAborted) as raised:
            produce(art, store, generator=spec, index_dir=index, encoder=minilm, progress=False, docs=1,
                    concurrency=1, **SMALL)
    seen = [str(raised.value), *(r.getMessage() for r in caplog.records)]
    assert main(["export", str(store), "--failures"]) == 0
    seen.append(capsys.readouterr().out)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("run.db*"))
    failures = sqlite3.connect(store).execute("SELECT error FROM failures").fetchall()
    if form == "json_schema":  # LiteLLM takes the 404 for an unknown model: the run stops with nothing recorded
        assert failures and "api_key=***" in failures[0][0]  # the address is still recognisable, without its key
    for secret in (PASSWORD, QUERY_KEY):
        assert secret.encode() not in stored
        assert not [text for text in seen if secret in text]


def test_failures_stored_before_redaction_are_masked_by_export_failures(store, capsys):
    conn = sqlite3.connect(store)
    conn.execute("INSERT INTO failures (session_id, doc_id, stage, kind, error, detail, created_at) VALUES "
                 "(1, 'd', 'extract', 'call', ?, ?, '2025-01-01')",
                 (f"LMTransportError: failed to connect to http://bob:{PASSWORD}@host/v1?token={QUERY_KEY}",
                  json.dumps({"last_answer": f"url http://bob:{PASSWORD}@host"})))
    conn.commit()
    conn.close()
    assert main(["export", str(store), "--failures"]) == 0
    out = capsys.readouterr().out
    assert "bob" not in out and PASSWORD not in out and QUERY_KEY not in out and "***@host" in out


def test_the_cli_masks_credentials_in_error_messages_and_logs(mini, tmp_path, capsys):
    art, index = mini
    flag = f"hosted_vllm/fake@http://admin:{PASSWORD}@127.0.0.1:9/v1?token={QUERY_KEY}"
    code = main(["produce", str(art), "--store", str(tmp_path / "run.db"), "--generator", flag,
                 "--index-dir", str(index), "--docs", "1", "--retries", "0", "--timeout", "3", "--no-progress",
                 "--queries-per-doc", "1", "--top-k", "2", "--chunk-size", "2"])
    captured = capsys.readouterr()
    assert code == 2
    assert PASSWORD not in captured.err + captured.out and QUERY_KEY not in captured.err + captured.out


def test_train_on_cuda_without_cuda_is_a_clear_error(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SYNTRA_IN_CHILD", "1")  # in this process, where the patch above applies
    code = main(["train", str(RECORDS), "--base", "all-MiniLM-L6-v2", "--out", str(tmp_path / "model"),
                 "--device", "cuda", "--max-steps", "2", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "CUDA is not available" in err and "Traceback" not in err
    assert not (tmp_path / "model").exists()


def test_an_unknown_device_is_a_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SYNTRA_IN_CHILD", "1")  # the training's own check, read in this process
    code = main(["train", str(RECORDS), "--base", "all-MiniLM-L6-v2", "--out", str(tmp_path / "model"),
                 "--device", "gpu0", "--max-steps", "2", "--no-progress"])
    assert code == 2 and "device" in capsys.readouterr().err


def test_a_training_run_too_short_to_leave_warmup_is_refused_with_the_steps_needed(tmp_path):
    from syntra_dspy.training import TrainConfig, train_embedding_model

    with pytest.raises(ConfigError, match="at least 2 optimizer steps") as raised:
        train_embedding_model(RECORDS, base="all-MiniLM-L6-v2", out=tmp_path / "model",
                              config=TrainConfig(max_steps=1, batch_size=4, num_negatives=2))
    assert "learning rate" in str(raised.value)
    with pytest.raises(ConfigError, match="at least 2 optimizer steps"):  # 12 records, one batch of 16, one epoch
        train_embedding_model(RECORDS, base="all-MiniLM-L6-v2", out=tmp_path / "model",
                              config=TrainConfig(num_negatives=2))
    assert not (tmp_path / "model").exists()


def test_a_one_step_run_without_warmup_is_allowed():
    from syntra_dspy.training.config import TrainConfig, check_schedule

    check_schedule(1, TrainConfig(max_steps=1, warmup_ratio=0.0))
    check_schedule(1, TrainConfig(max_steps=1, lr_scheduler="constant"))
    with pytest.raises(ConfigError):
        check_schedule(1, TrainConfig(max_steps=1, lr_scheduler="constant_with_warmup"))
