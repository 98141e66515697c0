"""One document per call slot vs two, for the embedded engine: real production runs side by side.

The embedded engine runs every call on one llama.cpp context, and a call reuses the prompt the previous call left
there. With two documents in flight per call slot (what production does for a served model), one document's calls
come between the other's, and a step's next call (a repair, a rewrite, the next step) loses the document its
predecessor left. (A grading call loses little: its candidate is new text either way; measured, grading did not
change.) This runs ``syntra produce`` on the same documents twice, each in its own process
and fresh store, DSPy's cache off: once with the embedded engine scheduled as a served model (two documents per slot)
and once as production schedules it now (one). Every engine call is timed; calls are paired by their exact request
(messages and options), so the comparison is over the same prompts, with a Wilcoxon signed-rank test.

    python benchmarks/documents_in_flight.py --artifact artifacts/scifact/22e653baa2bb --docs 4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "documents_in_flight"
MODES = {"two": "two documents per call slot (as for a served model)", "one": "one document per call slot"}


def request_key(request) -> str:
    """The request's identity: messages and the options that shape the answer."""
    from syntra_dspy.lm.embedded import _chat_messages

    config = request.config
    body = {"messages": _chat_messages(request), "max_tokens": config.max_tokens, "logprobs": config.logprobs,
            "format": str(config.response_format)}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def child(args: argparse.Namespace) -> None:
    """One production run in this process, every engine call timed into ``args.calls``."""
    from syntra_dspy.lm.roles import build_lm
    from syntra_dspy.production import produce
    from syntra_dspy.task import LMSpec

    lm = build_lm(LMSpec(model=f"embedded:{args.model}"), role="generator", cache=False)
    engine = lm.engine
    if args.child == "two":
        engine.shares_one_context = False  # scheduled as a served model: two documents per slot
    original, log, lock = engine.complete, [], threading.Lock()

    def timed(request):
        start = time.perf_counter()
        response = original(request)
        seconds = time.perf_counter() - start
        usage = response.usage
        with lock:
            log.append({"key": request_key(request), "grade": request.config.logprobs is not None,
                        "seconds": round(seconds, 4), "prompt_tokens": getattr(usage, "input_tokens", None),
                        "thread": threading.current_thread().name})
        return response

    engine.complete = timed
    start = time.perf_counter()
    summary = produce(args.artifact, args.store, generator=lm, index_dir=args.index_dir, docs=args.docs,
                      queries_per_doc=args.queries_per_doc, top_k=args.top_k, concurrency=1, progress=False)
    wall = time.perf_counter() - start
    Path(args.calls).write_text(json.dumps({"wall_seconds": wall, "summary": summary.to_dict(), "calls": log}))


def paired(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Calls of run ``a`` and run ``b`` with the same request, matched in order of occurrence."""
    queue: dict[str, list[dict]] = {}
    for call in b:
        queue.setdefault(call["key"], []).append(call)
    out = []
    for call in a:
        twins = queue.get(call["key"])
        if twins:
            out.append((call, twins.pop(0)))
    return out


def wilcoxon(x: list[float], y: list[float]) -> float | None:
    from scipy.stats import wilcoxon as test

    return float(test(x, y).pvalue) if len(x) >= 6 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--queries-per-doc", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--index-dir", help="the corpus index folder (default: .syntra/index/<fingerprint>)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--work", type=Path, help="where the two runs' stores and call logs go (default: a new temp dir)")
    ap.add_argument("--child", choices=sorted(MODES), help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--calls", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    runs: dict[str, dict] = {}
    work = args.work or Path(tempfile.mkdtemp(prefix="inflight-"))
    work.mkdir(parents=True, exist_ok=True)
    # The fix runs first: what a first run pays (the model file read from disk) counts against it. A run whose
    # calls file exists in --work is reused (the report can be redone without the model).
    for mode in ("one", "two"):
        calls = work / f"{mode}.json"
        if not calls.exists():
            store = work / f"{mode}.db"
            for stale in work.glob(f"{mode}.db*"):
                stale.unlink()
            cmd = [sys.executable, __file__, "--artifact", args.artifact, "--docs", str(args.docs),
                   "--queries-per-doc", str(args.queries_per_doc), "--top-k", str(args.top_k), "--model", args.model,
                   *(["--index-dir", args.index_dir] if args.index_dir else []),
                   "--child", mode, "--store", str(store), "--calls", str(calls)]
            print(f"{mode}: {' '.join(cmd)}", flush=True)
            subprocess.run(cmd, check=True)
        runs[mode] = json.loads(calls.read_text())
    from syntra_dspy.production import export_records

    for mode in runs:
        export_records(work / f"{mode}.db", work / f"{mode}.jsonl")
    same_records = (work / "one.jsonl").read_bytes() == (work / "two.jsonl").read_bytes()

    pairs = paired(runs["two"]["calls"], runs["one"]["calls"])
    result: dict = {"artifact": args.artifact, "model": args.model, "docs": args.docs,
                    "queries_per_doc": args.queries_per_doc, "top_k": args.top_k, "machine": platform.processor() or
                    platform.machine(), "cpus": os.cpu_count(), "same_records": same_records, "modes": {}}
    for mode, run in runs.items():
        calls = run["calls"]
        grades = [c for c in calls if c["grade"]]
        result["modes"][mode] = {
            "what": MODES[mode], "wall_seconds": round(run["wall_seconds"], 1), "calls": len(calls),
            "engine_seconds": round(sum(c["seconds"] for c in calls), 1),
            "grade_calls": len(grades), "grade_seconds": round(sum(c["seconds"] for c in grades), 1),
            "records": run["summary"]["records"], "queries": run["summary"]["queries"],
            "usage": run["summary"]["usage"]}
    for kind, keep in (("all", lambda c: True), ("grade", lambda c: c["grade"]), ("other", lambda c: not c["grade"])):
        chosen = [(t, o) for t, o in pairs if keep(t)]
        two, one = [t["seconds"] for t, _ in chosen], [o["seconds"] for _, o in chosen]
        result[f"paired_{kind}"] = {"calls": len(chosen), "two_seconds": round(sum(two), 1),
                                    "one_seconds": round(sum(one), 1),
                                    "one_over_two": round(sum(one) / sum(two), 3) if sum(two) else None,
                                    "wilcoxon_p": wilcoxon(two, one)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    m = result["modes"]
    lines = [
        "# Documents in flight with the embedded engine: two per call slot vs one",
        "",
        (f"`{args.model}` on {result['cpus']} CPUs, artifact `{args.artifact}`, the same {args.docs} documents "
         f"({args.queries_per_doc} queries each, top {args.top_k} candidates graded), concurrency 1, each run in "
         "its own process and fresh store, DSPy's cache off; the one-per-slot run went first."),
        "",
        "| | two per slot | one per slot | one / two |",
        "|---|---|---|---|",
        (f"| wall seconds | {m['two']['wall_seconds']} | {m['one']['wall_seconds']} | "
         f"{m['one']['wall_seconds'] / m['two']['wall_seconds']:.3f} |"),
        f"| engine calls | {m['two']['calls']} | {m['one']['calls']} | |",
        (f"| grading calls, s each | {m['two']['grade_seconds'] / max(1, m['two']['grade_calls']):.2f} | "
         f"{m['one']['grade_seconds'] / max(1, m['one']['grade_calls']):.2f} | |"),
        f"| records | {m['two']['records']} | {m['one']['records']} | |",
        "",
        "Calls with the same request in both runs, paired (seconds summed; Wilcoxon signed-rank over calls):",
        "",
        "| calls | pairs | two per slot | one per slot | one / two | p |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("grade", "other", "all"):
        p = result[f"paired_{kind}"]
        pv = f"{p['wilcoxon_p']:.2g}" if p["wilcoxon_p"] is not None else "n/a"
        lines.append(f"| {kind} | {p['calls']} | {p['two_seconds']} | {p['one_seconds']} | {p['one_over_two']} | {pv} |")
    lines += ["", f"Same exported records from both runs: {'yes' if same_records else 'no'}.", "",
              "    python benchmarks/documents_in_flight.py " + " ".join(sys.argv[1:]), ""]
    (args.out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
