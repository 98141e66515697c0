"""Hangs and stops: a request is bounded in total time however the server behaves, Retry-After is capped and
logged, a second Ctrl-C stops within seconds, and errors that will not go away stop the run at once."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from syntra_dspy.cli import main
from syntra_dspy.lm import CallPolicy, CallTimedOut, Fault, GuardedLM, LMRoles, OpenAICompatibleServer, build_lm
from syntra_dspy.production import ProductionAborted, RunStore, produce
from syntra_dspy.task import LMRolesSpec, LMSpec, parse_task
from syntra_dspy.testing import SyntraBrain

from reliability.conftest import SMALL

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-RIGHT-KEY-77"


def hi(call) -> str:
    return "hi"


def ask(lm) -> float:
    started = time.monotonic()
    lm("Say hi.")
    return time.monotonic() - started


def served(url: str, **spec) -> GuardedLM:
    return build_lm(LMSpec(model="hosted_vllm/fake", api_base=url, **spec), role="generator")


def test_a_hung_request_is_cut_at_the_total_timeout():
    with OpenAICompatibleServer(hi, faults=lambda n: Fault(delay=60)) as server:
        lm = served(server.base_url, timeout={"connect": 1, "total": 1.5}, retries=0)
        started = time.monotonic()
        with pytest.raises(CallTimedOut, match="1.5 s"):
            ask(lm)
    assert time.monotonic() - started < 5


def test_a_trickling_server_is_cut_at_the_total_timeout():
    body = b'{"id": "x", "choices": []}' + b" " * 2000  # one byte every 0.1 s: over three minutes in all
    with OpenAICompatibleServer(hi, faults=lambda n: Fault(body=body, trickle=0.1)) as server:
        lm = served(server.base_url, timeout=2, retries=0)
        started = time.monotonic()
        with pytest.raises(CallTimedOut):
            ask(lm)
    assert time.monotonic() - started < 6


def test_retry_after_is_capped_and_every_long_wait_is_logged(caplog):
    rate_limited = Fault(status=429, headers={"Retry-After": "3600"})
    with OpenAICompatibleServer(hi, faults=lambda n: rate_limited if n == 0 else None) as server:
        lm = GuardedLM("hosted_vllm/fake", api_base=server.base_url, cache=False,
                       policy=CallPolicy(total=10, max_wait=2.5, retries=2))
        with caplog.at_level(logging.WARNING, logger="syntra_dspy"):
            seconds = ask(lm)
        assert server.requests == 2
    assert seconds < 6  # not an hour
    waits = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(waits) == 1 and "waiting 2.5 s" in waits[0] and "3600" in waits[0]


def test_the_default_policy_bounds_requests_and_waits():
    lm = build_lm(LMSpec(model="hosted_vllm/fake", api_base="http://127.0.0.1:9/v1"), role="generator")
    policy = lm.guard.policy
    assert policy.total <= 180 and policy.connect <= 10 and policy.max_wait <= 60 and policy.retries <= 3
    assert lm.num_retries == 0  # DSPy's own uncapped retry loop is off


def test_a_timeout_in_the_task_file_reaches_the_http_client():
    spec = parse_task({
        "name": "t", "corpus": {"path": "c.jsonl"},
        "examples": [{"query": f"q{i}", "positive_text": "d"} for i in range(3)],
        "lms": {"generator": {"model": "hosted_vllm/fake", "api_base": "http://127.0.0.1:9/v1",
                              "timeout": {"connect": 2, "total": 30}, "retries": 1}},
    })
    lm = LMRoles.from_spec(spec.lms).generator
    assert (lm.guard.policy.connect, lm.guard.policy.total, lm.guard.policy.retries) == (2, 30, 1)
    timeout = lm.kwargs["timeout"]  # what DSPy hands its client: connect and read bounded
    assert (timeout.connect, timeout.read) == (2, 32)  # the client read limit sits 2 s past the total


def test_a_timeout_flag_applies_to_every_served_role_and_never_to_the_embedded_one():
    spec = LMRolesSpec(generator=LMSpec(model="hosted_vllm/a", api_base="http://127.0.0.1:9/v1"),
                       verifier=LMSpec(model="embedded"))
    roles = LMRoles.from_spec(spec, timeout=7)
    assert roles.generator.guard.policy.total == 7 and roles.refiner.guard.policy.total == 7
    assert not hasattr(roles.verifier, "guard")
    with pytest.raises(Exception, match="timeout"):
        build_lm(LMSpec(model="embedded", timeout=5), role="verifier")


def test_produce_timeout_and_retries_flags_bound_a_hung_server(mini, tmp_path, capsys):
    art, index = mini
    with OpenAICompatibleServer(SyntraBrain(), faults=lambda n: Fault(delay=60)) as server:
        started = time.monotonic()
        code = main(["produce", str(art), "--store", str(tmp_path / "run.db"), "--generator",
                     f"hosted_vllm/fake@{server.base_url}", "--index-dir", str(index), "--docs", "1",
                     "--timeout", "3", "--retries", "0", "--no-progress"])
        assert server.requests == 1  # 3 s: LiteLLM's route (vLLM's schema field) loads modules on its first call
    assert code == 2 and time.monotonic() - started < 60
    assert "within 3 s" in capsys.readouterr().err


def produce_served(mini, minilm, store, url, **kw):
    art, index = mini
    kw = {"docs": 3, "concurrency": 1, **SMALL, **kw}
    return produce(art, store, generator=f"hosted_vllm/fake@{url}", index_dir=index, encoder=minilm,
                   progress=False, **kw)


def test_an_auth_error_stops_the_run_at_once_with_the_real_cause(mini, minilm, tmp_path, monkeypatch):
    store = tmp_path / "run.db"
    monkeypatch.setenv("SYNTRA_WRONG_KEY", "sk-test-WRONG-KEY-00")
    monkeypatch.setenv("SYNTRA_RIGHT_KEY", KEY)
    with OpenAICompatibleServer(SyntraBrain(), api_key=KEY) as server:
        with pytest.raises(ProductionAborted) as raised:
            produce_served(mini, minilm, store, server.base_url, api_key_env="SYNTRA_WRONG_KEY")
        assert server.rejected == 1 and server.requests == 0  # no retry, no second document
        message = str(raised.value)
        assert "401" in message and "invalid or missing API key" in message
        assert "rerun the same command to resume (3 documents to do)" in message
        with RunStore.open(store, readonly=True) as run:
            assert run.document_counts()["pending"] == 3
        # the hint is true: the same command with the right key finishes the run
        summary = produce_served(mini, minilm, store, server.base_url, api_key_env="SYNTRA_RIGHT_KEY")
    assert summary.processed == 3 and summary.documents["done"] == 3


def test_a_non_json_200_stops_the_run_at_once(mini, minilm, tmp_path):
    html = Fault(status=200, body=b"<html><body>Gateway login</body></html>")
    with OpenAICompatibleServer(SyntraBrain(), faults=lambda n: html) as server:
        # vLLM's guided-decoding field takes the request through LiteLLM's hosted_vllm route, which words it its way
        with pytest.raises(ProductionAborted, match="not JSON|Unable to get json response") as raised:
            produce_served(mini, minilm, tmp_path / "run.db", server.base_url)
        assert server.requests == 1
    assert "3 documents to do" in str(raised.value)


def test_the_resume_hint_is_only_given_when_a_rerun_would_do_something(mini, minilm, tmp_path):
    store = tmp_path / "run.db"
    bad_request = Fault(status=400, body=b'{"error": {"message": "unsupported parameter", "code": 400}}')
    with OpenAICompatibleServer(SyntraBrain(), faults=lambda n: bad_request) as server:
        with pytest.raises(ProductionAborted) as raised:
            produce_served(mini, minilm, store, server.base_url, docs=2, max_consecutive_errors=2)
        message = str(raised.value)
        assert "rerun the same command to resume" not in message
        assert "--retry-failed" in message
        again = produce_served(mini, minilm, store, server.base_url, docs=2)  # what the hint says: nothing to do
    assert again.processed == 0


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_second_ctrl_c_stops_within_seconds_and_keeps_finished_documents(mini, minilm, tmp_path, stop):
    """Ctrl-C, and SIGTERM alike (``kill PID``, schedulers, a ``nohup`` run that ignores SIGINT): the first signal
    waits for the documents in flight, the second abandons them; the session is marked interrupted either way."""
    art, index = mini
    store = tmp_path / "run.db"
    hang = threading.Event()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with OpenAICompatibleServer(SyntraBrain(), faults=lambda n: Fault(delay=300) if hang.is_set() else None) as server:
        produce_served(mini, minilm, store, server.base_url, docs=1)  # one finished document to keep
        hang.set()  # from now on every request hangs
        before = server.requests
        command = [sys.executable, "-m", "syntra_dspy.cli", "produce", str(art), "--store", str(store),
                   "--generator", f"hosted_vllm/fake@{server.base_url}", "--index-dir", str(index), "--docs", "3",
                   "--queries-per-doc", "1", "--top-k", "2", "--chunk-size", "2", "--concurrency", "1",
                   "--no-progress"]
        # A suite started in the background of a non-interactive shell (`make test &`) ignores SIGINT, and the
        # child would inherit that: give it the default disposition, so Python installs its Ctrl-C handler.
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, b"")), daemon=True)
        reader.start()

        def output_so_far() -> str:
            return b"".join(lines).decode(errors="replace") if lines and isinstance(lines[0], bytes) else ""

        try:
            deadline = time.monotonic() + 180
            while server.requests == before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if not (proc.poll() is None and server.requests > before):
                proc.kill()  # the run never reached the hung server: fail with its output, never wait on it
                proc.wait(timeout=30)
                pytest.fail("the run did not reach the server within 180 s:\n" + output_so_far()[-3000:])
            time.sleep(0.5)
            proc.send_signal(stop)  # first: stop taking documents, wait for the ones in flight
            # As a user does: press again once the first press was acknowledged (two presses that land while the
            # interpreter is busy in C code reach Python as one).
            deadline = time.monotonic() + 30
            while "Ctrl-C again to abandon" not in output_so_far() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None, output_so_far()[-3000:]  # still waiting for the hung call, as promised
            assert "Ctrl-C again to abandon" in output_so_far(), output_so_far()[-3000:]
            proc.send_signal(stop)  # second: abandon them
            started = time.monotonic()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
                pytest.fail("the second Ctrl-C did not stop the run within 15 s:\n" + output_so_far()[-3000:])
            assert time.monotonic() - started < 10
            reader.join(timeout=10)
            output = output_so_far()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
    assert proc.returncode == 130 and "interrupted" in output, output[-3000:]
    with RunStore.open(store, readonly=True) as run:
        assert run.document_counts() == {"planned": 3, "pending": 2, "done": 1, "partial": 0, "failed": 0}
        assert [s["status"] for s in run.sessions()] == ["completed", "interrupted"]
