"""The embedded engine's smoke decode runs in a subprocess: a crash there is a clear error, never a segfault."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

from syntra_dspy.lm.llamacpp import engine as embedded
from syntra_dspy.errors import ConfigError
from syntra_dspy.lm.llamacpp import engine_check, variants
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
    monkeypatch.setattr(engine_check, "_package", lambda: ("9.9.9", lib.parent))
    monkeypatch.setattr(engine_check, "_passed", {})
    monkeypatch.setattr(engine_check, "_selected", None)
    monkeypatch.setattr(engine_check, "_ours", None)
    monkeypatch.setattr(engine_check, "_keys", {})
    monkeypatch.setattr(variants, "variants_root", lambda prefix=None: tmp_path / "variants")  # none installed
    monkeypatch.setattr(variants, "installed_llama_cpp_version", lambda: "9.9.9")
    monkeypatch.setenv(variants.LIB_PATH_ENV, "restored-after-the-test")
    monkeypatch.delenv(variants.LIB_PATH_ENV)
    monkeypatch.delenv(variants.CHOICE_ENV, raising=False)
    monkeypatch.setenv("SYNTRA_CACHE_DIR", str(tmp_path / "cache"))
    runs = tmp_path / "runs.txt"

    def use(code: str) -> None:
        counted = f"open({str(runs)!r}, 'a').write('x'); " + code
        monkeypatch.setattr(engine_check, "child_command", lambda path: [sys.executable, "-c", counted])

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return types.SimpleNamespace(lib=lib, use=use, gguf=gguf,
                                 runs=lambda: len(runs.read_text()) if runs.exists() else 0,
                                 cache=tmp_path / "cache" / "engine-check", variants=tmp_path / "variants")


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


def test_the_build_key_hashes_the_libraries_again_only_when_a_file_changes(fake_engine, monkeypatch):
    hashed = []
    real = engine_check._hash_libraries
    monkeypatch.setattr(engine_check, "_hash_libraries", lambda *a: hashed.append(1) or real(*a))
    lib = fake_engine.lib / "libggml-cpu.so"
    first = engine_check.build_key()
    assert engine_check.build_key() == first and len(hashed) == 1  # every LM call asks: no second hash
    lib.write_bytes(b"build two, longer")  # rebuilt in place
    second = engine_check.build_key()
    assert second != first and len(hashed) == 2
    replacement = fake_engine.lib / "new.tmp"
    replacement.write_bytes(b"build 3, longer!!")  # same size, then the old file's time: only the inode tells
    times = lib.stat()
    os.utime(replacement, ns=(times.st_atime_ns, times.st_mtime_ns))
    os.replace(replacement, lib)
    assert engine_check.build_key() != second and len(hashed) == 3
    (fake_engine.lib / "libggml-extra.so").write_bytes(b"x")  # a library added
    engine_check.build_key()
    assert len(hashed) == 4


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


# --- faster builds beside the portable one (variants.py) ---------------------------------------------------------

AVX512_FLAGS = ["avx2", "fma", "avx512f", "avx512bw"]


def install_variant(root, name="avx512", version="9.9.9", cpu_flags=AVX512_FLAGS, content=b"avx512 build"):
    """What scripts/build-llama.sh --variant writes: the libraries and variant.json."""
    lib = root / name / "lib"
    lib.mkdir(parents=True)
    (lib / "libggml-cpu.so").write_bytes(content)
    (root / name / "variant.json").write_text(json.dumps(
        {"name": name, "llama_cpp_version": version, "cmake_args": "-DGGML_AVX512=ON", "cpu_flags": cpu_flags}))
    return lib


@pytest.fixture
def cpu(monkeypatch):
    """This CPU's advertised flags, set by the test; llama_cpp not imported yet (the choice is still open)."""
    flags: set[str] = set()
    monkeypatch.setattr(variants, "cpu_flags", lambda cpuinfo=None: frozenset(flags))
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    return flags


def recording_child(monkeypatch, record, *, crash_with_variant: bool) -> None:
    """A child that decodes with whatever LLAMA_CPP_LIB_PATH it inherits and records it in ``record``; told to, it
    crashes with the variant, as an AVX-512 library on a VM that does not grant AVX-512 would."""
    head = f"import os; open({str(record)!r}, 'a').write(os.environ.get('LLAMA_CPP_LIB_PATH', 'portable') + '\\n'); "
    crash = "import signal; os.kill(os.getpid(), signal.SIGILL) if os.environ.get('LLAMA_CPP_LIB_PATH') else None; "
    code = head + (crash if crash_with_variant else "") + PASS
    monkeypatch.setattr(engine_check, "child_command", lambda path: [sys.executable, "-c", code])


def test_a_variant_the_cpu_runs_is_chosen_after_its_own_smoke_decode(fake_engine, cpu, monkeypatch, tmp_path):
    lib = install_variant(fake_engine.variants)
    cpu.update(AVX512_FLAGS)
    record = tmp_path / "children.txt"
    recording_child(monkeypatch, record, crash_with_variant=False)
    check = ensure_engine_works(fake_engine.gguf)
    assert check.ok and check.build == "avx512"
    assert os.environ[variants.LIB_PATH_ENV] == str(lib)  # what `import llama_cpp` will load in this process
    assert record.read_text().splitlines() == [str(lib)]  # the variant itself was decoded with, once
    assert ensure_engine_works(fake_engine.gguf).cached
    assert engine_check.main(["--model", str(fake_engine.gguf)]) == 0


def test_a_variant_that_crashes_falls_back_to_the_portable_build_with_a_warning(fake_engine, cpu, monkeypatch, tmp_path,
                                                                                caplog):
    install_variant(fake_engine.variants)
    cpu.update(AVX512_FLAGS)
    record = tmp_path / "children.txt"
    recording_child(monkeypatch, record, crash_with_variant=True)
    check = ensure_engine_works(fake_engine.gguf)
    assert check.ok and check.build == "portable"
    assert variants.LIB_PATH_ENV not in os.environ
    assert len(record.read_text().splitlines()) == 2  # the variant, then the portable build
    assert "avx512 build of the embedded engine failed its smoke decode" in caplog.text and "SIGILL" in caplog.text


def test_an_amx_build_that_crashes_gives_way_to_the_avx512_build(fake_engine, cpu, monkeypatch, tmp_path, caplog):
    """The most demanding variant first (amx: a VM may advertise AMX without granting it); its crash names the build
    tried next, not the portable one."""
    amx_flags = [*AVX512_FLAGS, "amx_tile", "amx_int8"]
    amx = install_variant(fake_engine.variants, name="amx", cpu_flags=amx_flags, content=b"amx build")
    avx512 = install_variant(fake_engine.variants)
    cpu.update(amx_flags)
    record = tmp_path / "children.txt"
    crash = ("import os, signal; "
             f"os.kill(os.getpid(), signal.SIGILL) if os.environ.get('LLAMA_CPP_LIB_PATH') == {str(amx)!r} else None; ")
    head = f"import os; open({str(record)!r}, 'a').write(os.environ.get('LLAMA_CPP_LIB_PATH', 'portable') + '\\n'); "
    monkeypatch.setattr(engine_check, "child_command", lambda path: [sys.executable, "-c", head + crash + PASS])
    check = ensure_engine_works(fake_engine.gguf)
    assert check.ok and check.build == "avx512" and os.environ[variants.LIB_PATH_ENV] == str(avx512)
    assert record.read_text().splitlines() == [str(amx), str(avx512)]
    assert "amx build of the embedded engine failed its smoke decode" in caplog.text
    assert "trying the avx512 build" in caplog.text


def test_a_variant_whose_decode_used_another_builds_libraries_is_refused(fake_engine, cpu, monkeypatch):
    install_variant(fake_engine.variants)
    cpu.update(AVX512_FLAGS)
    stray = str(fake_engine.lib / "libggml-cpu.so")  # the portable library, not the variant's
    code = f"import json; print(json.dumps({{'ok': True, 'tokens': 3, 'text': 'ok', 'libraries': [{stray!r}]}}))"
    monkeypatch.setattr(engine_check, "child_command", lambda path: [sys.executable, "-c", code])
    assert ensure_engine_works(fake_engine.gguf).build == "portable"


def test_a_variant_is_not_tried_where_the_cpu_lacks_its_flags_or_its_version_differs(fake_engine, cpu, tmp_path):
    install_variant(fake_engine.variants)
    cpu.update({"avx2", "fma"})
    fake_engine.use(PASS)
    assert ensure_engine_works(fake_engine.gguf).build == "portable"
    assert fake_engine.runs() == 1  # only the portable build was decoded
    options, notes = variants.candidates(root=fake_engine.variants, flags=frozenset(AVX512_FLAGS), version="1.0.0")
    assert options == [] and "built for llama-cpp-python 9.9.9, the installed one is 1.0.0" in notes[0]
    options, notes = variants.candidates(root=fake_engine.variants, flags=frozenset({"avx2"}), version="9.9.9")
    assert options == [] and "does not advertise fma, avx512f, avx512bw" in notes[0]


def test_the_choice_can_be_forced_and_a_wrong_name_is_an_error(fake_engine, cpu, monkeypatch):
    install_variant(fake_engine.variants)
    cpu.update(AVX512_FLAGS)
    fake_engine.use(PASS)
    monkeypatch.setenv(variants.CHOICE_ENV, "portable")
    assert ensure_engine_works(fake_engine.gguf).build == "portable"
    with pytest.raises(ConfigError, match="names no installed engine build") as info:
        variants.candidates("avx1024", root=fake_engine.variants)
    assert "auto, portable, avx512" in info.value.hint
    with pytest.raises(ConfigError, match="cannot run here: this CPU does not advertise avx512f"):
        variants.candidates("avx512", root=fake_engine.variants, flags=frozenset({"avx2", "fma"}), version="9.9.9")


def test_a_library_path_the_user_set_is_kept_and_a_broken_variant_is_skipped(fake_engine, cpu, monkeypatch, tmp_path,
                                                                             caplog):
    install_variant(fake_engine.variants)
    (fake_engine.variants / "half").mkdir()
    (fake_engine.variants / "half" / "variant.json").write_text("{not json")
    assert [v.name for v in variants.installed(fake_engine.variants)] == ["avx512"]
    assert "half/variant.json" in caplog.text
    own = tmp_path / "own-build"
    own.mkdir()
    (own / "libggml-cpu.so").write_bytes(b"the user's own")
    monkeypatch.setenv(variants.LIB_PATH_ENV, str(own))
    cpu.update(AVX512_FLAGS)
    fake_engine.use(PASS)
    check = ensure_engine_works(fake_engine.gguf)
    assert check.build == "LLAMA_CPP_LIB_PATH" and os.environ[variants.LIB_PATH_ENV] == str(own)


def test_a_run_store_is_told_which_build_made_its_records(monkeypatch):
    from syntra_dspy.lm.roles import with_engine_build

    info = {"model": "embedded/qwen2.5-coder-1.5b", "embedded": {"name": "qwen2.5-coder-1.5b"}}
    monkeypatch.setattr(engine_check, "_selected", None)
    assert with_engine_build(info) == info  # not loaded yet: nothing to say
    monkeypatch.setattr(engine_check, "_selected", "avx512")
    assert with_engine_build(info)["embedded"] == {"name": "qwen2.5-coder-1.5b", "engine_build": "avx512"}
    served = {"model": "hosted_vllm/m", "api_base": "http://h/v1"}
    assert with_engine_build(served) == served


EMBEDDED_INFO = {"model": "embedded/qwen2.5-coder-1.5b", "embedded": {"name": "qwen2.5-coder-1.5b", "sha256": "ab"}}


def test_a_compiled_artifact_names_the_build_that_graded_its_calibration_set(monkeypatch, tmp_path):
    """An AVX-512 build's grades differ from the portable one's in the last digits (SciFact: binary kappa 0.519 vs
    0.497 on the same claims), so the manifest says which build the calibration was fitted on."""
    from helpers import compile_mini

    from syntra_dspy.lm.roles import LMRoles

    describe = LMRoles.describe
    monkeypatch.setattr(LMRoles, "describe",
                        lambda self: {**describe(self), "generator": {**EMBEDDED_INFO, "role": "generator"}})
    monkeypatch.setattr(engine_check, "_selected", "avx512")
    artifact, _ = compile_mini(tmp_path, judge="graded")
    lms = artifact.manifest["lms"]
    assert lms["generator"]["embedded"] == {**EMBEDDED_INFO["embedded"], "engine_build": "avx512"}
    assert "embedded" not in lms["verifier"] or lms["verifier"]["embedded"] is None  # the scripted roles: nothing


def test_a_recalibration_that_grades_names_its_build_and_one_that_reuses_grades_does_not(monkeypatch, tmp_path_factory,
                                                                                          tmp_path):
    from test_produce_support import mini_artifact

    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.production import setup
    from syntra_dspy.production.recalibrate import recalibrate_artifact
    from syntra_dspy.testing import SyntraBrain, scripted_lm

    art, index = mini_artifact(tmp_path_factory, judge="graded", feature="relative")
    monkeypatch.setattr(setup, "resolve_generator", lambda meta, generator, key_env: (generator, EMBEDDED_INFO))
    monkeypatch.setattr(engine_check, "_selected", "avx512")
    regraded = recalibrate_artifact(art, tmp_path / "a", feature="hybrid", generator=scripted_lm(SyntraBrain()),
                                    index_dir=index, regrade=True)
    record = load_artifact(regraded).manifest["record"]["recalibration"]
    assert record["graded"] > 0 and record["engine_build"] == "avx512"
    reused = recalibrate_artifact(art, tmp_path / "b", feature="hybrid", index_dir=index)
    record = load_artifact(reused).manifest["record"]["recalibration"]
    assert record["graded"] == 0 and "engine_build" not in record
