"""Check, in a child process, that the installed llama.cpp engine can decode on this machine.

A llama.cpp library built for another CPU does not fail politely: it dies with SIGSEGV or SIGILL at the
first decode (seen: a build with native CPU detection used AMX tile instructions on a VM that advertises AMX
but does not grant it, and every decode hit a general protection fault). A crash in-process would kill a
compile or a production run with a bare "Segmentation fault". So before the embedded engine is loaded, a
short decode runs in a subprocess; a crash there becomes :class:`EngineCrashError`, which says what failed,
the likely cause, how to rebuild, and how to use a server instead.

The result is cached per build and machine (the hash of the engine's shared libraries plus the CPU's model
and flags), so the check costs a few seconds once per environment, not per command.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from syntra_dspy.errors import DependencyError
from syntra_dspy.lm.llamacpp import variants

#: What the project's setup builds with on x86-64 (scripts/build-llama.sh picks these when the CPU has AVX2).
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
_CHILD_TIMEOUT_S = 300.0
_passed: dict[str, EngineCheck] = {}  # build key -> the check that passed, in this process
_selected: str | None = None  # the build this process loads, once chosen (ensure_engine_works)
_ours: str | None = None  # the LLAMA_CPP_LIB_PATH _select set (any other value is the user's)
_keys: dict[tuple, str] = {}  # the libraries' paths, sizes, times and inodes -> their build key, in this process
_SELECTING = threading.Lock()
logger = logging.getLogger(__name__)


class EngineCrashError(DependencyError):
    """The embedded engine crashed or failed its smoke decode; the message says how to fix it."""


@dataclass(frozen=True)
class EngineCheck:
    """The outcome of one smoke decode."""

    ok: bool
    key: str
    llama_cpp_version: str
    model: str
    seconds: float
    detail: str
    cached: bool = False
    #: which build of the libraries: ``portable``, a variant's name (:mod:`.variants`) or ``LLAMA_CPP_LIB_PATH``
    build: str = variants.PORTABLE

    def to_dict(self) -> dict:
        return asdict(self)


def _package() -> tuple[str, Path]:
    """The installed llama-cpp-python's version and folder, found without importing it: importing loads its
    libraries, and which build to load is chosen first (:func:`_select`)."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        raise DependencyError(
            "the embedded backend needs llama-cpp-python",
            hint='run scripts/setup.sh, or pip install "syntra-dspy[embedded]" (see the README on portable builds)',
        )
    return variants.installed_llama_cpp_version() or "unknown", Path(spec.origin).parent


def _library_dir() -> tuple[str, Path]:
    """The llama-cpp-python version, and the folder whose libraries this process loads (``LLAMA_CPP_LIB_PATH`` when
    set, as llama-cpp-python itself reads it)."""
    version, folder = _package()
    override = os.environ.get(variants.LIB_PATH_ENV)
    return version, Path(override) if override else folder


def _cpu_signature() -> str:
    """The CPU's model name and feature flags: a build that works on one CPU may not on another."""
    try:
        info = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    keep = [line for line in info.splitlines() if line.startswith(("model name", "flags", "Features"))]
    return "\n".join(dict.fromkeys(keep))


def build_key() -> str:
    """Hash of the engine's shared libraries, its version and this CPU: what a check result holds for.

    The engine asks on every LM call, and hashing ~25 MB of libraries took 25-40 ms: the hash is kept per process
    for the files' paths, sizes, modification times and inodes, so only a rebuild (or a file replaced) hashes again."""
    version, folder = _library_dir()
    libs = sorted(p for p in folder.rglob("*") if p.is_file() and (".so" in p.name or p.suffix in (".dylib", ".dll")))
    stats = [lib.stat() for lib in libs]
    stamp = (version, tuple((str(lib), st.st_size, st.st_mtime_ns, st.st_ino) for lib, st in zip(libs, stats)))
    if (known := _keys.get(stamp)) is not None:
        return known
    _keys[stamp] = key = _hash_libraries(version, libs)
    return key


def _hash_libraries(version: str, libs: list[Path]) -> str:
    digest = hashlib.sha256(f"{version}\n{_cpu_signature()}\n".encode())
    for lib in libs:
        digest.update(lib.name.encode())
        with lib.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:20]


def _cache_file(key: str) -> Path:
    root = os.environ.get("SYNTRA_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "syntra-dspy"
    return base / "engine-check" / f"{key}.json"


def child_command(model_path: Path) -> list[str]:
    """The subprocess that loads the model and decodes a few tokens (replaced in tests by one that crashes)."""
    return [sys.executable, "-m", "syntra_dspy.lm.llamacpp.engine_check", "--child", str(model_path)]


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with status {code}"


def run_check(model_path: Path, *, timeout: float = _CHILD_TIMEOUT_S, build: str = variants.PORTABLE) -> EngineCheck:
    """Run the smoke decode in a subprocess now (no cache), with the libraries this process would load."""
    version, folder = _library_dir()
    key = build_key()
    started = time.perf_counter()
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    failed = lambda detail: EngineCheck(False, key, version, str(model_path), time.perf_counter() - started, detail,
                                        build=build)  # noqa: E731
    try:
        proc = subprocess.run(child_command(model_path), capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return failed(f"the smoke decode did not finish within {timeout:.0f} s")
    seconds = time.perf_counter() - started
    if proc.returncode == 0:
        try:
            report = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report = {}
        if report.get("ok"):
            # a variant whose libraries resolve another build's (a missing file, a wrong run path) is not that variant
            stray = [lib for lib in report.get("libraries") or [] if not Path(lib).resolve().is_relative_to(
                folder.resolve())] if os.environ.get(variants.LIB_PATH_ENV) else []
            if stray:
                return failed(f"decoded, but with libraries from outside {folder}: {', '.join(stray)}")
            detail = f"decoded {report.get('tokens')} tokens: {report.get('text')!r}"
            return EngineCheck(True, key, version, str(model_path), seconds, detail, build=build)
    tail = " | ".join(line for line in (proc.stderr or "").strip().splitlines()[-4:] if line.strip())
    return failed(_describe_exit(proc.returncode) + (f"; last output: {tail[-600:]}" if tail else ""))


def crash_message(check: EngineCheck) -> str:
    return (
        f"the embedded llama.cpp engine (llama-cpp-python {check.llama_cpp_version}) failed its smoke decode on "
        f"this machine: {check.detail}"
    )


def crash_hint(check: EngineCheck) -> str:
    return (
        "likely cause: llama.cpp was built for another CPU (pip's default build detects the build machine's CPU; "
        "a VM that advertises AMX or AVX-512 without granting it crashes such a build). Rebuild it portably: "
        "`scripts/setup.sh` does, or run "
        f'`CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir --no-deps '
        f'llama-cpp-python=={check.llama_cpp_version}`. Or skip the embedded engine: serve a model with any '
        "OpenAI-compatible server (vLLM, `python -m llama_cpp.server` on another machine) and pass "
        "--generator/--verifier/--refiner hosted_vllm/MODEL@http://HOST:PORT/v1"
    )


def ensure_engine_works(model_path: Path, *, force: bool = False) -> EngineCheck:
    """Raise :class:`EngineCrashError` unless the engine decodes on this machine; cached per build and CPU.

    The first call in a process also chooses which build of the libraries to load (:func:`_select`)."""
    global _selected
    with _SELECTING:  # threads that load the engine at once choose (and set LLAMA_CPP_LIB_PATH) once
        if _selected is None:
            _selected, check = _select(model_path, force=force)
            if check is not None:  # the chosen variant's own decode, just run (or read from the cache)
                return check
    return _checked(model_path, force=force, build=_selected)


def _checked(model_path: Path, *, force: bool, build: str) -> EngineCheck:
    key = build_key()
    if key in _passed and not force:
        return _passed[key]
    cache = _cache_file(key)
    if cache.is_file() and not force:
        try:
            saved = EngineCheck(**{**json.loads(cache.read_text()), "cached": True})
        except (ValueError, TypeError):
            saved = None
        if saved is not None and saved.ok:
            _passed[key] = saved
            return saved
    check = run_check(model_path, build=build)
    if not check.ok:  # failures are not cached: a rebuild changes the key, a fix elsewhere is seen at once
        raise EngineCrashError(crash_message(check), hint=crash_hint(check))
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(check.to_dict(), indent=2) + "\n")
    os.replace(tmp, cache)
    _passed[key] = replace(check, cached=True)
    return check


def loaded_build() -> str | None:
    """The build :func:`ensure_engine_works` chose in this process (None before the engine's first load)."""
    return _selected


def _select(model_path: Path, *, force: bool) -> tuple[str, EngineCheck | None]:
    """Which build of the engine's libraries this process loads (and its check when one ran), chosen once, before
    ``llama_cpp`` is imported: the fastest installed variant (:mod:`.variants`) whose CPU flags this machine advertises
    and whose smoke decode passes here; otherwise the portable build, with a warning when a variant failed its decode.
    A ``LLAMA_CPP_LIB_PATH`` set by the user (or inherited from the process that chose) is kept as it is."""
    global _ours
    given = os.environ.get(variants.LIB_PATH_ENV)
    if given and given != _ours:
        named = [v.name for v in variants.installed() if v.lib_dir.resolve() == Path(given).resolve()]
        return (named[0] if named else variants.LIB_PATH_ENV), None
    if "llama_cpp" in sys.modules:  # its libraries are loaded already: nothing left to choose
        return variants.PORTABLE, None
    options, notes = variants.candidates()
    for note in notes:
        logger.info(note)
    for n, variant in enumerate(options):
        os.environ[variants.LIB_PATH_ENV] = _ours = str(variant.lib_dir)
        try:
            return variant.name, _checked(model_path, force=force, build=variant.name)
        except EngineCrashError as exc:
            del os.environ[variants.LIB_PATH_ENV]
            _ours = None
            following = (f"trying the {options[n + 1].name} build" if n + 1 < len(options)
                         else "using the portable build")
            logger.warning("the %s build of the embedded engine failed its smoke decode on this machine (%s); %s",
                           variant.name, exc.message, following)
    return variants.PORTABLE, None


def physical_cores() -> int:
    """Physical cores available to this process: llama.cpp runs slower on hyper-threads than without them."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return max(1, available)
    # one "physical id" / "core id" pair per physical core, repeated for each of its hardware threads
    cores = set(re.findall(r"physical id\s*:\s*(\d+).*?core id\s*:\s*(\d+)", info, re.DOTALL))
    return max(1, min(available, len(cores) or available))


def _mapped_libraries() -> list[str]:
    """The engine libraries this process has mapped (Linux; empty elsewhere): which build really decoded."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    paths = {line.split(None, 5)[-1] for line in maps.splitlines() if line.count(" ") >= 5}
    return sorted(p for p in paths if Path(p).name.startswith(("libllama", "libggml")))


def _child(model_path: str) -> int:
    """Load the model, decode a few tokens greedily, then a few under a JSON grammar as the engine decodes them (the
    grammar checked on the chosen token, the vocabulary masked when it is refused); print a JSON line."""
    from llama_cpp import Llama

    from syntra_dspy.lm.llamacpp.grammar_sampling import grammar_checked

    llama = grammar_checked(Llama)(model_path=model_path, n_ctx=512, n_threads=physical_cores(), seed=0,
                                   verbose=False)
    messages = [{"role": "user", "content": "Reply with the word ok."}]
    plain = llama.create_chat_completion(messages=messages, max_tokens=4, temperature=0.0)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    framed = llama.create_chat_completion(messages=messages, max_tokens=8, temperature=0.0,
                                          response_format={"type": "json_object", "schema": schema})
    tokens = plain["usage"]["completion_tokens"] + framed["usage"]["completion_tokens"]
    text = (plain["choices"][0]["message"]["content"] or "") + " | " \
        + (framed["choices"][0]["message"]["content"] or "")
    print(json.dumps({"ok": True, "tokens": tokens, "text": text[:80], "libraries": _mapped_libraries()}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m syntra_dspy.lm.llamacpp.engine_check",
        description="Check that the embedded llama.cpp engine decodes on this machine (in a subprocess).")
    parser.add_argument("--model", default=None,
                        help="embedded registry name or .gguf path (default: the default model)")
    parser.add_argument("--force", action="store_true", help="check again even if this build passed before")
    parser.add_argument("--child", metavar="GGUF", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child)
    from syntra_dspy.models.install import ensure_gguf

    model = args.model or None
    path = Path(model).expanduser() if model and (model.endswith(".gguf") or os.sep in model) else ensure_gguf(model)
    try:
        check = ensure_engine_works(path, force=args.force)
    except DependencyError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"       {exc.hint}", file=sys.stderr)
        return 1
    how = "cached result" if check.cached else f"{check.seconds:.1f} s"
    print(f"embedded engine ok: llama-cpp-python {check.llama_cpp_version} ({check.build} build) decodes on this "
          f"machine ({how}; build key {check.key})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
