"""Production throughput against a loopback OpenAI-compatible fake server with a fixed per-call latency.

With ``C`` calls allowed in flight and every call taking ``L`` seconds on the server, no client can do better
than ``C / L`` calls per second; the benchmark reports the achieved rate as a fraction of that limit (what
the runner's scheduling, retrieval, validation and store commits cost), and the LM calls and prompt tokens
spent per exported record at K=20 (what a record costs on a real server). The server runs in its own process
(as vLLM would) and answers with the scripted SyntraBrain; tokens are its estimate (4 characters a token).
The fake's handler gets TCP_NODELAY, as uvicorn (vLLM's server) sets it: without it, Nagle's algorithm and
delayed ACKs add ~40 ms to every response (headers and body are written separately), which would measure
the fake server, not production.

    python benchmarks/produce_throughput.py                 # writes benchmarks/results/produce_throughput.md
    python benchmarks/produce_throughput.py --concurrency 8 --latency 0.1 --docs 20 --no-write
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
MINI_TASK = REPO / "tests" / "fixtures" / "mini" / "task.yaml"
RESULTS = Path(__file__).resolve().parent / "results" / "produce_throughput.md"
_SERVER = """
import sys
from syntra_dspy.lm import openai_server
from syntra_dspy.lm.openai_server import OpenAICompatibleServer
from syntra_dspy.testing import SyntraBrain
openai_server._Handler.disable_nagle_algorithm = True  # as uvicorn (vLLM) does; see the module docstring
with OpenAICompatibleServer(SyntraBrain(), latency=float(sys.argv[1])) as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


def compile_artifact(root: Path) -> tuple[Path, Path]:
    """The mini task compiled with the scripted brain (no model needed): (artifact dir, index dir)."""
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.lm.roles import LMRoles
    from syntra_dspy.optimizers import CompileSettings
    from syntra_dspy.testing import scripted_lm

    lm = scripted_lm()
    artifact = compile_task(MINI_TASK, out=root / "artifacts", lms=LMRoles(generator=lm, verifier=lm, refiner=lm),
                            index_dir=root / "index", settings=CompileSettings(sample_docs=3, selection_target=20))
    return artifact.path, root / "index"


def run_one(artifact: Path, index: Path, work: Path, *, concurrency: int, latency: float, docs: int,
            queries_per_doc: int, top_k: int) -> dict:
    from syntra_dspy.production import export_records, produce

    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        store = work / f"run-c{concurrency}-l{latency}.db"
        summary = produce(artifact, store, docs=docs, queries_per_doc=queries_per_doc, top_k=top_k,
                          concurrency=concurrency, generator=f"hosted_vllm/fake@{url}", index_dir=index,
                          progress=False)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    exported = export_records(store, work / f"train-c{concurrency}.jsonl")
    calls = summary.calls
    prompt = sum(u["prompt_tokens"] for u in summary.usage.values())
    limit = concurrency / latency
    return {
        "concurrency": concurrency, "latency": latency, "docs": summary.documents["done"], "calls": calls,
        "seconds": summary.seconds, "calls_per_s": calls / summary.seconds, "limit": limit,
        "fraction": calls / summary.seconds / limit, "records": exported.records,
        "calls_per_record": calls / max(exported.records, 1), "prompt_per_record": prompt / max(exported.records, 1),
        "calls_per_query": calls / max(exported.queries, 1), "queries": exported.queries,
        "prompt_per_query": prompt / max(exported.queries, 1),
        "by_stage": {k: v["calls"] for k, v in summary.usage.items()},
    }


def report(rows: list[dict], args: argparse.Namespace, load: float) -> str:
    lines = [
        "# Production throughput (loopback OpenAI-compatible fake server)",
        "",
        (f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/produce_throughput.py "
         f"--concurrency {' '.join(map(str, args.concurrency))} --latency {args.latency} --docs {args.docs}` on "
         f"{os.cpu_count()} CPU cores ({platform.python_implementation()} {platform.python_version()}; "
         f"load average at start {load:.1f}, shared with other jobs). Mini task (SciFact abstracts), "
         f"{args.queries_per_doc} queries per document, K={args.top_k}, annotation chunks of the artifact's size "
         "(4). The server sleeps the latency, then answers with the scripted brain; tokens are its estimate "
         "(4 characters a token). The limit is `concurrency / latency` calls per second."),
        "",
        ("| concurrency | latency (s) | documents | LM calls | seconds | calls/s | limit | fraction of limit "
         "| records | calls/record | prompt tokens/record |"),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['concurrency']} | {r['latency']} | {r['docs']} | {r['calls']} | {r['seconds']:.1f} | "
                     f"{r['calls_per_s']:.1f} | {r['limit']:.0f} | {r['fraction']:.0%} | {r['records']} | "
                     f"{r['calls_per_record']:.1f} | {r['prompt_per_record']:,.0f} |")
    r = rows[-1]
    lines += ["", (f"Calls by stage (last row): {r['by_stage']}; {r['queries']} queries, "
                   f"{r['calls_per_query']:.2f} calls and {r['prompt_per_query']:,.0f} prompt tokens per query. "
                   "A record is a query with >= 1 positive and >= 1 hard negative (default export); the scripted "
                   "annotator's label mix decides how many queries qualify, so calls and tokens per record depend "
                   "on the model and task, while calls per query (1/k each for extraction, planning and writing, "
                   "plus ceil(K/chunk) annotation calls) do not.")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per call on the fake server")
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--queries-per-doc", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--no-write", action="store_true", help="print the table instead of writing results/")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="syntra-bench-") as tmp:
        work = Path(tmp)
        artifact, index = compile_artifact(work)
        rows = [run_one(artifact, index, work, concurrency=c, latency=args.latency, docs=args.docs,
                        queries_per_doc=args.queries_per_doc, top_k=args.top_k) for c in args.concurrency]
    text = report(rows, args, load)
    if args.no_write:
        print(text)
    else:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        print(text)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
