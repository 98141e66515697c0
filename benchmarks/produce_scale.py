"""Production on one process, on several endpoints and on Ray workers, against loopback OpenAI-compatible servers
with a set latency.

The LM server is the bottleneck production is built around: with ``C`` calls in flight and ``L`` seconds per
call, no client does better than ``C / L`` calls per second. Each row runs the same documents at the same
``--concurrency C``: in one process (the thread pool) against one server; in one process against 2 and 3
servers of one model (the role lists them; LiteLLM's Router balances them); with the older ``hosted_vllm``
default schema form (``structured_outputs``, which goes through LiteLLM); and, when Ray is installed, spread
over 2 and 4 Ray workers (``C`` split among them) on a local Ray cluster of 2 CPUs. It reports documents/s,
calls/s and calls/s as a share of ``C / L``, LM calls and prompt tokens per exported record, and the client's
CPU time per LM call (the driver's Python runs under one GIL, so ``1000 / ms`` calls/s is its ceiling on one
core, whatever the concurrency). Every row starts fresh server processes (as vLLM would run) answering with the
scripted SyntraBrain, tokens estimated at 4 characters each. Seconds start at the first document (the time
before it is reported apart: for Ray, the workers loading). All rows must export the same records, byte for
byte; the script checks it.

    python benchmarks/produce_scale.py                      # writes benchmarks/results/produce_scale/README.md
    python benchmarks/produce_scale.py --concurrency 8 --latency 0.25 --docs 12 --workers --endpoints 2 --no-write
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

try:  # python -m benchmarks.produce_scale (make bench-produce-scale)
    from benchmarks.common import FAKE_SERVER, MINI_TASK, REPO, RESULTS, offline_environment
except ModuleNotFoundError:  # python benchmarks/produce_scale.py: this folder is first on the path
    from common import FAKE_SERVER, MINI_TASK, REPO, RESULTS, offline_environment  # type: ignore

offline_environment()
RESULTS = RESULTS / "produce_scale" / "README.md"


def compile_artifact(root: Path) -> tuple[Path, Path]:
    """The mini task compiled with the scripted brain and the written judge (annotation in chunks of 4, as in the
    single-process figures of ``experiments/produce_throughput``): (artifact dir, index dir)."""
    from syntra_dspy.compiler import compile_task
    from syntra_dspy.lm.roles import LMRoles
    from syntra_dspy.optimizers import CompileSettings
    from syntra_dspy.testing import scripted_lm

    lm = scripted_lm()
    settings = CompileSettings(sample_docs=3, selection_target=20, judge="written", judge_feature="expected")
    artifact = compile_task(MINI_TASK, out=root / "artifacts", lms=LMRoles(generator=lm, verifier=lm, refiner=lm),
                            index_dir=root / "index", settings=settings)
    return artifact.path, root / "index"


@contextmanager
def fake_servers(count: int, latency: float) -> Iterator[list[str]]:
    """``count`` loopback servers, each its own process: their base URLs."""
    with ExitStack() as stack:
        urls = []
        for _ in range(count):
            server = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(latency)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)

            def stop(server: subprocess.Popen = server) -> None:
                server.stdin.close()
                server.wait(timeout=10)

            stack.callback(stop)
            urls.append(server.stdout.readline().strip())
        yield urls


@contextmanager
def cpu_from_first_document() -> Iterator[dict[str, float]]:
    """This process's CPU seconds (every thread) from the moment the runner builds its pipeline, just before the
    first document, to the end: what the driver spends per call, without loading the inputs."""
    from syntra_dspy.production import runner

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    box: dict[str, float] = {}
    build = runner.build_pipeline

    def timed(*args: Any, **kwargs: Any) -> Any:
        box.setdefault("start", cpu())
        return build(*args, **kwargs)

    runner.build_pipeline = timed
    try:
        yield box
    finally:
        runner.build_pipeline = build
        if "start" in box:
            box["seconds"] = cpu() - box["start"]


def run_one(artifact: Path, index: Path, work: Path, *, label: str, concurrency: int, latency: float, docs: int,
            queries_per_doc: int, top_k: int, workers: int | None = None, endpoints: int = 1,
            schema_form: str | None = None) -> dict[str, Any]:
    """One production run into a fresh store; ``workers=None`` runs in this process."""
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.production import RayOptions, export_records, produce
    from syntra_dspy.task import LMSpec

    stem = f"{workers or 0}w-{endpoints}e-{schema_form or 'default'}-c{concurrency}"
    with fake_servers(endpoints, latency) as urls:
        generator: Any = [f"hosted_vllm/fake@{url}" for url in urls]
        if schema_form is not None:  # the artifact's sampling settings, as a MODEL@URL flag keeps them
            recorded = load_artifact(artifact).meta.generator
            generator = LMSpec(model="hosted_vllm/fake", api_base=urls if len(urls) > 1 else urls[0],
                               temperature=recorded.temperature, max_tokens=recorded.max_tokens,
                               schema_form=schema_form)
        store = work / f"run-{stem}.db"
        wall = time.perf_counter()
        with cpu_from_first_document() as cpu:
            summary = produce(artifact, store, docs=docs, queries_per_doc=queries_per_doc, top_k=top_k,
                              concurrency=concurrency, generator=generator, index_dir=index, progress=False,
                              ray=RayOptions(workers=workers) if workers else None)
        wall = time.perf_counter() - wall
    out = work / f"train-{stem}.jsonl"
    exported = export_records(store, out)
    calls = summary.calls
    prompt = sum(u["prompt_tokens"] for u in summary.usage.values())
    limit = concurrency / latency
    shares = [row["calls"] for row in summary.backend.get("endpoints", [])]
    return {
        "label": label, "concurrency": concurrency, "latency": latency,
        "docs": summary.documents["done"], "calls": calls, "seconds": summary.seconds,
        "startup": wall - summary.seconds, "docs_per_s": summary.documents["done"] / summary.seconds,
        "calls_per_s": calls / summary.seconds, "limit": limit, "fraction": calls / summary.seconds / limit,
        "records": exported.records, "calls_per_record": calls / max(exported.records, 1),
        "prompt_per_record": prompt / max(exported.records, 1), "export": out.read_bytes(),
        "cpu_ms_per_call": 1000 * cpu["seconds"] / calls if workers is None and "seconds" in cpu and calls else None,
        "split": "/".join(str(n) for n in shares) if len(shares) > 1 else "",
    }


def report(rows: list[dict[str, Any]], args: argparse.Namespace, load: float, ray_note: str) -> str:
    same = all(r["export"] == rows[0]["export"] for r in rows)
    command = (f"python benchmarks/produce_scale.py --concurrency {' '.join(map(str, args.concurrency))} "
               f"--latency {args.latency} --docs {args.docs} --endpoints {' '.join(map(str, args.endpoints))} "
               f"--workers {' '.join(map(str, args.workers))}").rstrip()
    lines = [
        "# Production at scale: one process vs several endpoints vs Ray workers (loopback OpenAI-compatible servers)",
        "",
        (f"Measured {time.strftime('%Y-%m-%d')} with `{command}` on {os.cpu_count()} CPU cores "
         f"({platform.python_implementation()} {platform.python_version()}; load average at start {load:.1f}, "
         f"shared with other jobs{', the benchmark at nice 19' if os.nice(0) >= 19 else ''}). Mini task "
         f"(SciFact abstracts), {args.queries_per_doc} queries per document, K={args.top_k}, annotation chunks "
         "of 4. The limit is `concurrency / latency` calls per second; with several endpoints `concurrency` is "
         "the total across them, with Ray it is split among the workers. Seconds count from the first document; "
         "`startup` is the time before it. `client CPU` is the driver process's CPU time (all threads) per LM "
         "call from the first document on: its Python runs under one GIL, so `1000 / ms` calls/s is a ceiling "
         f"on one core. {ray_note}"),
        "",
        ("| run | concurrency | latency (s) | documents | LM calls | seconds | startup (s) | documents/s | calls/s "
         "| limit | fraction of limit | client CPU (ms/call) | calls per endpoint | records | calls/record "
         "| prompt tokens/record |"),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cpu = f"{r['cpu_ms_per_call']:.1f}" if r["cpu_ms_per_call"] is not None else "n/a"
        lines.append(f"| {r['label']} | {r['concurrency']} | {r['latency']} | {r['docs']} | {r['calls']} | "
                     f"{r['seconds']:.1f} | {r['startup']:.1f} | {r['docs_per_s']:.2f} | {r['calls_per_s']:.1f} | "
                     f"{r['limit']:.0f} | {r['fraction']:.0%} | {cpu} | {r['split']} | {r['records']} | "
                     f"{r['calls_per_record']:.1f} | {r['prompt_per_record']:,.0f} |")
    lines += ["", ("Every run exported the same records, byte for byte." if same else
                   "**The runs exported different records** (a bug: the records must not depend on where "
                   "documents ran or which server answered).")]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--latency", type=float, default=0.25, help="seconds per call on the fake server")
    parser.add_argument("--docs", type=int, default=24)
    parser.add_argument("--queries-per-doc", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--endpoints", type=int, nargs="*", default=[2, 3],
                        help="server counts for the several-endpoints rows (none: no such rows)")
    parser.add_argument("--old-form", default="structured_outputs",
                        help="schema form of a comparison row on one server ('' for none)")
    parser.add_argument("--workers", type=int, nargs="*", default=[2, 4],
                        help="Ray worker counts to compare (none, or Ray not installed: no Ray rows)")
    parser.add_argument("--no-write", action="store_true", help="print the table instead of writing results/")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        ray, ray_note = None, "Ray is not installed here, so there are no Ray rows " \
                              "(`pip install \"syntra-dspy[ray]\"`)."
    else:
        ray_note = ("Ray on a local cluster of 2 CPUs (a worker asks for 1 CPU, or an equal share when there are "
                    "more workers than CPUs); on one small machine Ray adds no CPU, so its rows measure what "
                    "spreading costs, not what a cluster gains.")
    workers = args.workers if ray is not None else []

    load = os.getloadavg()[0]
    if workers:
        # Ray workers import the code this script runs (a checkout, not necessarily the installed copy).
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="syntra-bench-") as tmp:
            work = Path(tmp)
            artifact, index = compile_artifact(work)
            common = {"latency": args.latency, "docs": args.docs, "queries_per_doc": args.queries_per_doc,
                      "top_k": args.top_k}
            for c in args.concurrency:
                plan: list[tuple[str, dict[str, Any]]] = [("one process", {})]
                if args.old_form:
                    plan.append((f"one process, {args.old_form}", {"schema_form": args.old_form}))
                plan += [(f"{n} endpoints", {"endpoints": n}) for n in args.endpoints]
                plan += [(f"ray-{w}w", {"workers": w}) for w in workers]
                for label, options in plan:
                    rows.append(run_one(artifact, index, work, label=label, concurrency=c, **common, **options))
                    cpu = rows[-1]["cpu_ms_per_call"]
                    print(f"{label} c={c}: {rows[-1]['fraction']:.0%} of the limit"
                          + (f", {cpu:.1f} ms CPU per call" if cpu is not None else ""), flush=True)
    finally:
        if workers:
            ray.shutdown()
    text = report(rows, args, load, ray_note)
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text, encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
