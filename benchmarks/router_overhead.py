"""Where the client's CPU goes per LM call: one endpoint (DSPy's own HTTP engine) against several endpoints
(LiteLLM's Router, which calls ``litellm.completion``), measured side by side in one run.

Two loopback servers answer every request at once with the same short text, so nothing but the client is
measured. For each role: the process CPU time per call, sequential and with 8 threads in flight, over the full
``GuardedLM`` path production uses; then a profile of the routed engine's calls (main thread, sequential), with the
functions that take the most time of their own.

    python benchmarks/router_overhead.py --calls 240
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parent.parent

_SERVER = """
import sys
from syntra_dspy.lm import openai_server
from syntra_dspy.lm.openai_server import OpenAICompatibleServer
openai_server._Handler.disable_nagle_algorithm = True
with OpenAICompatibleServer(lambda call: "ok") as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


def cpu_per_call(lm, calls: int, threads: int, tag: str) -> float:
    """Milliseconds of this process's CPU time per call (every prompt distinct, so no cache answers)."""
    def one(i: int) -> None:
        lm(messages=[{"role": "user", "content": f"{tag} {i} " + "word " * 200}])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, range(-20, 0)))  # warm up: connections, imports
        started = time.process_time()
        list(pool.map(one, range(calls)))
    return (time.process_time() - started) / calls * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=240)
    parser.add_argument("--top", type=int, default=12, help="profile rows to print")
    args = parser.parse_args()

    from syntra_dspy.lm.endpoints import RoutedEngine
    from syntra_dspy.lm.roles import build_lm
    from syntra_dspy.task import LMSpec

    servers = [subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, cwd=REPO) for _ in range(2)]
    try:
        urls = [s.stdout.readline().strip() for s in servers]
        lms = {"one endpoint": build_lm(LMSpec(model="hosted_vllm/fake", api_base=urls[0]), role="generator"),
               "two endpoints (Router)": build_lm(LMSpec(model="hosted_vllm/fake", api_base=urls), role="generator")}
        print("| role | CPU ms/call, sequential | CPU ms/call, 8 threads |\n|---|---:|---:|")
        for rnd in range(2):  # twice, interleaved: the second round shows the noise
            for name, lm in lms.items():
                seq = cpu_per_call(lm, args.calls, 1, f"{rnd}s{name}")
                par = cpu_per_call(lm, args.calls, 8, f"{rnd}p{name}")
                print(f"| {name} | {seq:.1f} | {par:.1f} |", flush=True)
        profile = cProfile.Profile()
        original = RoutedEngine.complete

        def profiled(self, request):
            profile.enable()
            try:
                return original(self, request)
            finally:
                profile.disable()

        RoutedEngine.complete = profiled
        cpu_per_call(lms["two endpoints (Router)"], 100, 1, "profile")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())
    finally:
        for server in servers:
            server.stdin.close()
            server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
