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
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paired_produce import (
    add_arguments,
    compare_paired,
    machine,
    paired,
    run_child,
    run_modes,
    same_records,
    write_report,
)

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "documents_in_flight"
MODES = {"two": "two documents per call slot (as for a served model)", "one": "one document per call slot"}


def configure(mode: str):
    def setup(engine) -> None:
        if mode == "two":
            engine.shares_one_context = False  # scheduled as a served model: two documents per slot
    return setup


def is_grade(call: dict) -> bool:
    return call.get("kind") == "grade" or bool(call.get("grade"))  # "grade": call logs written before "kind"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap, MODES)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.child:
        run_child(args, configure(args.child))
        return

    # The fix runs first: what a first run pays (the model file read from disk) counts against it.
    work, runs = run_modes(__file__, args, ["one", "two"], "inflight-")
    identical = same_records(work, ["one", "two"])
    pairs = paired(runs["two"]["calls"], runs["one"]["calls"])
    result: dict = {"artifact": args.artifact, "model": args.model, "docs": args.docs,
                    "queries_per_doc": args.queries_per_doc, "top_k": args.top_k, **machine(),
                    "same_records": identical, "modes": {}}
    for mode, run in runs.items():
        calls = run["calls"]
        grades = [c for c in calls if is_grade(c)]
        result["modes"][mode] = {
            "what": MODES[mode], "wall_seconds": round(run["wall_seconds"], 1), "calls": len(calls),
            "engine_seconds": round(sum(c["seconds"] for c in calls), 1),
            "grade_calls": len(grades), "grade_seconds": round(sum(c["seconds"] for c in grades), 1),
            "records": run["summary"]["records"], "queries": run["summary"]["queries"],
            "usage": run["summary"]["usage"]}
    kinds = {"all": lambda c: True, "grade": is_grade, "other": lambda c: not is_grade(c)}
    for kind, stats in compare_paired(pairs, kinds, "two", "one").items():
        result[f"paired_{kind}"] = stats
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
    lines += ["", f"Same exported records from both runs: {'yes' if identical else 'no'}.", "",
              "    python benchmarks/documents_in_flight.py " + " ".join(sys.argv[1:]), ""]
    write_report(args.out, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
