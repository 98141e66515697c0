"""Prompt and generation speed of the installed embedded engine (llama-cpp-python, this machine's build).

For each model: load it once, then (1) evaluate a fresh ~500-token prompt three times with the KV cache
cleared in between (prompt tokens/s), and (2) generate 96 tokens greedily after a short prompt, three times
(generated tokens/s). Reports medians, the build's CMake flags and whether the library holds AMX or AVX-512
instructions, and the reference figures from the offline-models notes for the same kind of machine.

    python benchmarks/engine_speed.py                    # both models; writes benchmarks/results/engine_speed/README.md
    python benchmarks/engine_speed.py --models qwen2.5-coder-0.5b --no-write

Every faster build the setup installed beside the portable one (``<venv>/llama-cpp-variants/``, loaded through
``LLAMA_CPP_LIB_PATH``) that this CPU can run is measured too, alternately with the portable build, two rounds each.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "engine_speed" / "README.md"
#: ../shared/reference/offline-models.md, "Speed with 2 threads" (measured on this kind of machine, Nov 2026).
REFERENCE = {"qwen2.5-coder-1.5b": (97.0, 31.0), "qwen2.5-coder-0.5b": (220.0, 48.0)}
_TEXT = ("Soluble guanylate cyclase is the receptor for nitric oxide in smooth muscle and platelets. "
         "Its activation raises cyclic GMP, which relaxes vascular tone and inhibits aggregation. ")


def _instructions(lib: Path) -> dict[str, int]:
    if not shutil.which("objdump"):
        return {}
    dump = subprocess.run(["objdump", "-d", str(lib)], capture_output=True, text=True).stdout
    return {"ldtilecfg (AMX)": dump.count("ldtilecfg"), "zmm registers (AVX-512)": dump.count("%zmm")}


def measure(name: str, threads: int, repeats: int = 3) -> dict[str, float]:
    from llama_cpp import Llama

    from syntra_dspy.lm.llamacpp import ensure_gguf

    llama = Llama(model_path=str(ensure_gguf(name)), n_ctx=2048, n_threads=threads, seed=0, verbose=False)
    prompt = llama.tokenize((_TEXT * 40).encode(), add_bos=False)[:500]
    prompt_rates = []
    for _ in range(repeats):
        llama.reset()
        started = time.perf_counter()
        llama.eval(prompt)
        prompt_rates.append(len(prompt) / (time.perf_counter() - started))
    gen_rates = []
    for i in range(repeats):
        llama.reset()
        llama.eval(llama.tokenize(f"Write a long list of facts about enzymes, number {i}:\n1.".encode()))
        started = time.perf_counter()  # the prompt is evaluated: from here on, only decoding is timed
        tokens = 0
        for _tok in llama.generate([], temp=0.0, reset=False):
            tokens += 1
            if tokens >= 96:
                break
        gen_rates.append(tokens / (time.perf_counter() - started))
    llama.close()
    return {"prompt_tok_s": statistics.median(prompt_rates), "gen_tok_s": statistics.median(gen_rates),
            "prompt_tokens": len(prompt)}


def _run_build(site: str | None, models: str, threads: int, lib_dir: str | None = None) -> dict:
    """Measure one build in a child process (``site`` first on sys.path: another llama_cpp build; ``lib_dir``: another
    build's libraries for the installed package)."""
    import json
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LLAMA_CPP_LIB_PATH"}
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    if lib_dir:
        env["LLAMA_CPP_LIB_PATH"] = lib_dir
    out = subprocess.run([sys.executable, __file__, "--child", "--models", models, "--threads", str(threads)],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _child(models: str, threads: int) -> None:
    import json

    import llama_cpp

    folder = Path(os.environ.get("LLAMA_CPP_LIB_PATH") or Path(llama_cpp.__file__).parent / "lib")
    lib = next(folder.glob("libggml-cpu.so"), None)
    result = {"version": llama_cpp.__version__, "lib": str(lib), "instructions": _instructions(lib) if lib else {},
              "models": {name: measure(name, threads) for name in models.split(",") if name}}
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="qwen2.5-coder-1.5b,qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--native-site", default=None,
                        help="a folder holding another llama_cpp build (e.g. pip's default native build, unpacked): "
                             "measured alternately with the installed one, two rounds each")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()

    from syntra_dspy.lm.llamacpp import physical_cores

    threads = args.threads or physical_cores()
    if args.child:
        _child(args.models, threads)
        return 0
    import llama_cpp

    from syntra_dspy.lm.llamacpp import variants

    usable, notes = variants.candidates("auto")
    for note in notes:
        print(f"note: {note}")
    builds: dict[str, tuple[str | None, str | None]] = {"portable (installed)": (None, None)}
    builds.update({f"{v.name} (variant)": (None, str(v.lib_dir)) for v in usable})
    if args.native_site:
        builds["native"] = (args.native_site, None)
    rounds = 2 if len(builds) > 1 else 1
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for _ in range(rounds):
        for name, (site, lib_dir) in builds.items():
            runs[name].append(_run_build(site, args.models, threads, lib_dir))
            print(name, {m: {k: round(v, 1) for k, v in r.items()} for m, r in runs[name][-1]["models"].items()},
                  flush=True)
    flags_file = sorted(Path(os.environ.get("SYNTRA_CACHE_DIR", Path.home() / ".cache/syntra-dspy")).glob(
        f"wheels/llama-cpp-python-{llama_cpp.__version__}-*/CMAKE_ARGS"))
    cmake = flags_file[0].read_text().strip() if flags_file else "(not built by scripts/build-llama.sh)"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    lines = [
        "# Embedded engine speed", "",
        f"llama-cpp-python {llama_cpp.__version__}, {threads} threads, CPU: {cpu}.  ",
        f"Portable build flags (scripts/build-llama.sh): `{cmake}`.", "",
        "Each build runs in its own process, builds alternating, medians of 3 measurements per run; 'reference' is "
        "the figure in `../shared/reference/offline-models.md` for this kind of machine (measured on another "
        "host of the kind).", "",
        "| build | model | prompt tok/s | gen tok/s | AMX (ldtilecfg) | AVX-512 (zmm) | prompt / reference | "
        "gen / reference |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, results in runs.items():
        ins = results[0]["instructions"]
        for model in results[0]["models"]:
            prompt = statistics.median(r["models"][model]["prompt_tok_s"] for r in results)
            gen = statistics.median(r["models"][model]["gen_tok_s"] for r in results)
            ref = REFERENCE.get(model, (float("nan"), float("nan")))
            lines.append(f"| {name} | {model} | {prompt:.1f} | {gen:.1f} | {ins.get('ldtilecfg (AMX)', '?')} | "
                         f"{ins.get('zmm registers (AVX-512)', '?')} | {prompt / ref[0]:.2f} | {gen / ref[1]:.2f} |")
    lines += ["", "    python benchmarks/engine_speed.py [--native-site DIR]", ""]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
