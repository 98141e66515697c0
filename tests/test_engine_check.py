"""The embedded engine's smoke decode runs in a subprocess: a crash there is a clear error, never a segfault."""

from __future__ import annotations

import json
import sys
import types

import pytest

from syntra_dspy.lm.llamacpp import engine as embedded
from syntra_dspy.lm.llamacpp import engine_check
from syntra_dspy.lm.llamacpp import LlamaCppEngine
from syntra_dspy.lm.llamacpp.engine_check import EngineCrashError, ensure_engine_works

CRASH = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
PASS = "import json; print(json.dumps({'ok': True, 'tokens': 3, 'text': 'ok'}))"


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    """A stand-in llama_cpp package folder with one 'shared library', a private cache, and a child that counts runs."""
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    (lib / "libggml-cpu.so").write_bytes(b"build one")
    monkeypatch.setattr(engine_check, "_library_dir", lambda: ("9.9.9", lib.parent))
    monkeypatch.setattr(engine_check, "_passed", {})
    monkeypatch.setenv("SYNTRA_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs.txt"

    def use(code: str) -> None:
        counted = f"open({str(runs)!r}, 'a').write('x'); " + code
        monkeypatch.setattr(engine_check, "child_command", lambda path: [sys.executable, "-c", counted])

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return types.SimpleNamespace(lib=lib, use=use, gguf=gguf, runs=lambda: len(runs.read_text()) if runs.exists() else 0,
                                 cache=tmp_path / "cache" / "engine-check")


def test_a_crashing_engine_gives_the_cause_the_rebuild_command_and_the_server_route(fake_engine):
    fake_engine.use(CRASH)
    with pytest.raises(EngineCrashError) as info:
        ensure_engine_works(fake_engine.gguf)
    err = info.value
    assert "failed its smoke decode" in err.message and "killed by SIGSEGV" in err.message
    assert "llama-cpp-python 9.9.9" in err.message
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON' in err.hint
    assert "llama-cpp-python==9.9.9" in err.hint and "--no-cache-dir" in err.hint
    assert "AMX" in err.hint and "hosted_vllm/MODEL@http://HOST:PORT/v1" in err.hint
    assert not fake_engine.cache.exists()  # a failure is never cached: the next command checks again
    with pytest.raises(EngineCrashError):
        ensure_engine_works(fake_engine.gguf)
    assert fake_engine.runs() == 2


def test_a_passing_check_is_cached_per_build(fake_engine, monkeypatch):
    fake_engine.use(PASS)
    first = ensure_engine_works(fake_engine.gguf)
    assert first.ok and not first.cached and "decoded 3 tokens" in first.detail
    assert ensure_engine_works(fake_engine.gguf).cached  # same process
    monkeypatch.setattr(engine_check, "_passed", {})
    saved = ensure_engine_works(fake_engine.gguf)  # a new process: read from the cache file
    assert saved.cached and saved.key == first.key
    assert fake_engine.runs() == 1
    assert json.loads((fake_engine.cache / f"{first.key}.json").read_text())["ok"] is True
    (fake_engine.lib / "libggml-cpu.so").write_bytes(b"build two")  # a rebuild is checked again
    fake_engine.use(CRASH)
    with pytest.raises(EngineCrashError, match="SIGSEGV"):
        ensure_engine_works(fake_engine.gguf)


def test_a_failed_decode_or_a_hang_is_reported_too(fake_engine, monkeypatch):
    fake_engine.use("import sys; print('GGML_ASSERT failed', file=sys.stderr); sys.exit(3)")
    with pytest.raises(EngineCrashError, match=r"exited with status 3; last output: GGML_ASSERT failed"):
        ensure_engine_works(fake_engine.gguf)
    fake_engine.use("import time; time.sleep(30)")
    monkeypatch.setattr(engine_check, "_CHILD_TIMEOUT_S", 1.0)
    check = engine_check.run_check(fake_engine.gguf, timeout=1.0)
    assert not check.ok and "did not finish within 1 s" in check.detail


def test_the_engine_never_loads_a_model_in_process_when_the_check_fails(fake_engine, monkeypatch):
    built = []
    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=lambda **kw: built.append(kw)))
    monkeypatch.setattr(embedded, "_LOADED", {})
    fake_engine.use(CRASH)
    with pytest.raises(EngineCrashError):
        LlamaCppEngine(fake_engine.gguf).load()
    assert built == []


def test_the_check_command_exits_1_with_the_message(fake_engine, capsys):
    fake_engine.use(CRASH)
    assert engine_check.main(["--model", str(fake_engine.gguf)]) == 1
    err = capsys.readouterr().err
    assert "error: the embedded llama.cpp engine" in err and "GGML_NATIVE=OFF" in err
    fake_engine.use(PASS)
    assert engine_check.main(["--model", str(fake_engine.gguf)]) == 0
    assert "embedded engine ok" in capsys.readouterr().out
