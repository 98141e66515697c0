"""Production on one process vs on Ray workers, against a loopback OpenAI-compatible server with a set latency.

The LM server is the bottleneck production is built around: with ``C`` calls in flight and ``L`` seconds per
call, no client does better than ``C / L`` calls per second. Each row runs the same documents at the same
``--concurrency C``: in one process (the thread pool), then spread over 2 and 4 Ray workers (``C`` split among
them) on a local Ray cluster of 2 CPUs, and reports documents/s, calls/s and calls/s as a share of ``C / L``,
plus LM calls and prompt tokens per exported record. Every row starts a fresh server process (as vLLM would
run) answering with the scripted SyntraBrain, tokens estimated at 4 characters each. The Ray rows' seconds
start once their workers have loaded (the load time is reported apart): it is paid once per run, not per
document. All runs must export the same records; the script checks it.

    python benchmarks/produce_scale.py                      # writes benchmarks/results/produce_scale.md
    python benchmarks/produce_scale.py --concurrency 8 --latency 0.25 --docs 12 --workers 2 --no-write
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
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]  # this checkout's code, not an installed copy
from produce_throughput import _SERVER, MINI_TASK  # noqa: E402 - the same fake server and mini task

RESULTS = Path(__file__).resolve().parent / "results" / "produce_scale.md"


def compile_artifact(root: Path) -> tuple[Path, Path]:
    """The mini task compiled with the scripted brain and the written judge (annotation in chunks of 4, as in
    ``produce_throughput``'s figures): (artifact dir, index dir)."""
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.lm.roles import LMRoles
    from syntra_dspy.optimizers import CompileSettings
    from syntra_dspy.testing import scripted_lm

    lm = scripted_lm()
    settings = CompileSettings(sample_docs=3, selection_target=20, judge="written", judge_feature="expected")
    artifact = compile_task(MINI_TASK, out=root / "artifacts", lms=LMRoles(generator=lm, verifier=lm, refiner=lm),
                            index_dir=root / "index", settings=settings)
    return artifact.path, root / "index"


def run_one(artifact: Path, index: Path, work: Path, *, label: str, workers: int | None, concurrency: int,
            latency: float, docs: int, queries_per_doc: int, top_k: int) -> dict:
    """One production run into a fresh store; ``workers=None`` runs in this process."""
    from syntra_dspy.production import RayOptions, export_records, produce

    stem = f"{workers or 0}w-c{concurrency}"

    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        store = work / f"run-{stem}.db"
        wall = time.perf_counter()
        summary = produce(artifact, store, docs=docs, queries_per_doc=queries_per_doc, top_k=top_k,
                          concurrency=concurrency, generator=f"hosted_vllm/fake@{url}", index_dir=index,
                          progress=False, ray=RayOptions(workers=workers) if workers else None)
        wall = time.perf_counter() - wall
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    out = work / f"train-{stem}.jsonl"
    exported = export_records(store, out)
    calls = summary.calls
    prompt = sum(u["prompt_tokens"] for u in summary.usage.values())
    limit = concurrency / latency
    return {
        "label": label, "workers": workers, "concurrency": concurrency, "latency": latency,
        "docs": summary.documents["done"], "calls": calls, "seconds": summary.seconds,
        "startup": wall - summary.seconds, "docs_per_s": summary.documents["done"] / summary.seconds,
        "calls_per_s": calls / summary.seconds, "limit": limit, "fraction": calls / summary.seconds / limit,
        "records": exported.records, "calls_per_record": calls / max(exported.records, 1),
        "prompt_per_record": prompt / max(exported.records, 1), "export": out.read_bytes(),
    }


def report(rows: list[dict], args: argparse.Namespace, load: float) -> str:
    same = all(r["export"] == rows[0]["export"] for r in rows)
    lines = [
        "# Production at scale: one process vs Ray workers (loopback OpenAI-compatible fake server)",
        "",
        (f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/produce_scale.py --concurrency "
         f"{' '.join(map(str, args.concurrency))} --latency {args.latency} --docs {args.docs}` on {os.cpu_count()} "
         f"CPU cores ({platform.python_implementation()} {platform.python_version()}; load average at start "
         f"{load:.1f}, shared with other jobs), Ray on a local cluster of 2 CPUs (a worker asks for 1 CPU, or "
         f"an equal share when there are more workers than CPUs). Mini task (SciFact abstracts), "
         f"{args.queries_per_doc} queries per document, K={args.top_k}, annotation chunks of 4. The limit is "
         "`concurrency / latency` calls per second; with Ray, `concurrency` is split among the workers. Seconds "
         "count from the first document; `startup` is the time before it (for Ray: the workers loading the "
         "artifact, corpus, encoder and index), paid once per run."),
        "",
        ("| run | concurrency | latency (s) | documents | LM calls | seconds | startup (s) | documents/s | calls/s "
         "| limit | fraction of limit | records | calls/record | prompt tokens/record |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['label']} | {r['concurrency']} | {r['latency']} | {r['docs']} | {r['calls']} | "
                     f"{r['seconds']:.1f} | {r['startup']:.1f} | {r['docs_per_s']:.2f} | {r['calls_per_s']:.1f} | "
                     f"{r['limit']:.0f} | {r['fraction']:.0%} | {r['records']} | {r['calls_per_record']:.1f} | "
                     f"{r['prompt_per_record']:,.0f} |")
    lines += ["", ("Every run exported the same records, byte for byte." if same else
                   "**The runs exported different records** (a bug: the records must not depend on where "
                   "documents ran)."),
              "", ("Read with care: on one small machine Ray adds no CPU (4 workers share 2 CPUs), so the Ray rows "
                   "measure what spreading costs, not what a cluster gains; at the higher concurrency a run lasts "
                   "seconds, and starting up and draining the last documents weigh on the fraction.")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per call on the fake server")
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--queries-per-doc", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4], help="Ray worker counts to compare")
    parser.add_argument("--no-write", action="store_true", help="print the table instead of writing results/")
    args = parser.parse_args()
    import ray

    load = os.getloadavg()[0]
    # Ray workers import the code this script runs (a checkout, not necessarily the installed copy).
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="syntra-bench-") as tmp:
            work = Path(tmp)
            artifact, index = compile_artifact(work)
            for c in args.concurrency:
                for workers in [None, *args.workers]:
                    label = f"ray-{workers}w" if workers else "one process"
                    rows.append(run_one(artifact, index, work, label=f"{label}", workers=workers, concurrency=c,
                                        latency=args.latency, docs=args.docs, queries_per_doc=args.queries_per_doc,
                                        top_k=args.top_k))
                    print(f"{label} c={c}: {rows[-1]['fraction']:.0%} of the limit", flush=True)
    finally:
        ray.shutdown()
    text = report(rows, args, load)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
