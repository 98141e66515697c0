"""Prompt-lookup drafts vs one token per forward pass, on production's own calls.

The embedded engine drafts the tokens an answer would copy from its prompt (or from itself) and checks them in one
forward pass with the chosen token (syntra_dspy/lm/lookup_drafts.py). This runs ``syntra produce`` on real
documents once, DSPy's cache off, and answers every generating call (extract, plan, write, their repairs and
rewrites; not the one-token grades) twice, back to back, from the same llama.cpp state: once token by token, once
with drafts of up to ``--draft-tokens`` tokens, the order alternating from call to call. The two answers must be the
same text; the seconds are paired per call (a shared host's changing speed hits both alike) and compared with a
Wilcoxon signed-rank test. The saved prompt states are off here; both modes evaluate the same prompt tokens.

    python benchmarks/lookup_drafts.py --artifact artifacts/scifact/22e653baa2bb --docs 2 --work ~/drafts-1.5b
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # paired_produce also sets the offline environment
from paired_produce import (
    add_arguments,
    answer_both_ways,
    embedded_generator,
    load_or_measure,
    machine,
    timed_production,
    wilcoxon,
    write_report,
)

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "lookup_drafts"


def generating(request) -> bool:
    """A call that generates more than one token (a grade is one token read as probabilities: nothing to draft)."""
    return request.config.logprobs is None and (request.config.max_tokens or 2) > 1


def measure(args: argparse.Namespace, log_path: Path, store: Path) -> dict:
    """One production run whose generating calls are each answered in both modes; the call log."""
    lm = embedded_generator(args)

    def drafts(count: int):
        def configure(engine) -> None:
            engine.draft_tokens = count
        return configure

    def note(llama, mode: str, row: dict) -> None:
        if mode == "drafted":
            row["passes"], row["drafted"] = llama.passes, llama.drafted

    log = answer_both_ways(lm.engine, {"token": drafts(0), "drafted": drafts(args.draft_tokens)}, generating, note)
    run = {**timed_production(args, store, lm), "calls": log}
    log_path.write_text(json.dumps(run))
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--draft-tokens", type=int, default=4)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    run = load_or_measure(args, "drafts-", measure)

    calls = run["calls"]
    result: dict = {"artifact": args.artifact, "model": args.model, "docs": args.docs,
                    "queries_per_doc": args.queries_per_doc, "top_k": args.top_k, "draft_tokens": args.draft_tokens,
                    **machine(), "wall_seconds": round(run["wall_seconds"], 1),
                    "records": run["summary"]["records"], "calls": len(calls),
                    "same_answers": sum(c["same_answer"] for c in calls), "steps": {}}
    groups = {stage: (lambda c, s=stage: (c["stage"] or "?") == s) for stage in sorted({c["stage"] or "?"
                                                                                        for c in calls})}
    groups["greedy"] = lambda c: c["greedy"]
    groups["sampled (retries at temperature 0.7)"] = lambda c: not c["greedy"]
    groups["all"] = lambda c: True
    for stage, keep in groups.items():
        rows = [c for c in calls if keep(c)]
        token, drafted = [c["token_seconds"] for c in rows], [c["drafted_seconds"] for c in rows]
        tokens = sum(c["drafted_tokens"] or 0 for c in rows)
        passes = sum(c["passes"] + 1 for c in rows)  # the first token comes from the prompt's own pass
        result["steps"][stage] = {
            "calls": len(rows), "completion_tokens": tokens, "passes_with_drafts": passes,
            "tokens_per_pass": round(tokens / passes, 2) if passes else None,
            "token_seconds": round(sum(token), 1), "drafted_seconds": round(sum(drafted), 1),
            "drafted_over_token": round(sum(drafted) / sum(token), 3) if sum(token) else None,
            "wilcoxon_p": wilcoxon(token, drafted)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")

    lines = [
        "# Prompt-lookup drafts vs one token per forward pass, on production's calls",
        "",
        (f"`{args.model}` on {result['cpus']} CPUs, artifact `{args.artifact}`: `syntra produce` on {args.docs} "
         f"documents ({args.queries_per_doc} queries each, top {args.top_k} candidates graded), DSPy's cache and "
         "the saved prompt states off; every generating call answered both ways from the same llama.cpp state, "
         f"back to back, the order alternating; drafts of up to {args.draft_tokens} tokens."),
        "",
        f"Same answer text in {result['same_answers']} of {result['calls']} calls.",
        "",
        ("| step | calls | tokens generated | forward passes with drafts | tokens / pass | token by token, s "
         "| drafted, s | drafted / token by token | p |"),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for stage, s in result["steps"].items():
        pv = f"{s['wilcoxon_p']:.2g}" if s["wilcoxon_p"] is not None else "n/a"
        name = f"**{stage}**" if stage == "all" else stage
        lines.append(f"| {name} | {s['calls']} | {s['completion_tokens']} | {s['passes_with_drafts']} | "
                     f"{s['tokens_per_pass']} | {s['token_seconds']} | {s['drafted_seconds']} | "
                     f"{s['drafted_over_token']} | {pv} |")
    lines += ["", "Seconds include each call's prompt evaluation (the same in both modes).", "",
              "    python benchmarks/lookup_drafts.py " + " ".join(sys.argv[1:]), ""]
    write_report(args.out, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
