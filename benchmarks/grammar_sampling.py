"""The grammar checked on the chosen token vs llama-cpp-python's grammar over the whole vocabulary, in production.

Every schema-constrained step of production (extract, plan, write and their repairs) decodes under a llama.cpp
grammar. llama-cpp-python masks the whole vocabulary with it for every generated token; the embedded engine now asks
the grammar about the token greedy decoding chose and masks only when that token is refused
(syntra_dspy/lm/grammar_sampling.py).

This runs ``syntra produce`` on real documents once, DSPy's cache off, and answers every schema-constrained call
twice, back to back, from the same llama.cpp state (saved before the call, restored before each answer): once with
llama-cpp-python's chain, once with the check, the order alternating from call to call. Both answers must be the
same text; the seconds are paired per call, so a shared host's changing speed (steal time) hits both alike, and
compared with a Wilcoxon signed-rank test. The saved prompt states are off here (a state saved by the first answer
would serve the second); both modes evaluate the same prompt tokens.

    python benchmarks/grammar_sampling.py --artifact artifacts/scifact/22e653baa2bb --docs 2 --work ~/grammar-1.5b
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
RESULTS = REPO / "benchmarks" / "results" / "grammar_sampling"


def measure(args: argparse.Namespace, log_path: Path, store: Path) -> dict:
    """One production run whose schema-constrained calls are each answered in both modes; the call log."""
    lm = embedded_generator(args)

    def setting(check: bool):
        def configure(engine) -> None:
            engine.check_grammar_first = check
            engine.draft_tokens = 0  # drafts change the passes both modes make (benchmarks/lookup_drafts.py)
            engine.load().llama.last_sampler = None
        return configure

    def note(llama, mode: str, row: dict) -> None:
        sampler = llama.last_sampler  # None unless the check ran: a sampled call (a retry) keeps the chain
        if mode == "checked" and sampler is not None:
            row["checked_tokens_allowed"], row["checked_tokens_masked"] = sampler.checked, sampler.masked

    log = answer_both_ways(lm.engine, {"chain": setting(False), "checked": setting(True)},
                           lambda request: request.config.response_format is not None, note)
    run = {**timed_production(args, store, lm), "calls": log}
    log_path.write_text(json.dumps(run))
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    run = load_or_measure(args, "grammar-", measure)

    calls = run["calls"]
    result: dict = {"artifact": args.artifact, "model": args.model, "docs": args.docs,
                    "queries_per_doc": args.queries_per_doc, "top_k": args.top_k,
                    **machine(),
                    "wall_seconds": round(run["wall_seconds"], 1), "records": run["summary"]["records"],
                    "schema_calls": len(calls), "same_answers": sum(c["same_answer"] for c in calls),
                    "greedy_calls": sum(c["greedy"] for c in calls),
                    "tokens_allowed": sum(c.get("checked_tokens_allowed", 0) for c in calls),
                    "tokens_masked": sum(c.get("checked_tokens_masked", 0) for c in calls), "steps": {}}
    groups = {f"{stage}, greedy": (lambda c, s=stage: c["greedy"] and (c["stage"] or "?") == s)
              for stage in sorted({c["stage"] or "?" for c in calls})}
    groups["all greedy"] = lambda c: c["greedy"]
    groups["retries (sampled at temperature 0.7: the chain in both modes)"] = lambda c: not c["greedy"]
    groups["all"] = lambda c: True
    for stage, keep in groups.items():
        rows = [c for c in calls if keep(c)]
        chain, checked = [c["chain_seconds"] for c in rows], [c["checked_seconds"] for c in rows]
        tokens = sum(c["checked_tokens"] or 0 for c in rows)
        result["steps"][stage] = {
            "calls": len(rows), "completion_tokens": tokens, "chain_seconds": round(sum(chain), 1),
            "checked_seconds": round(sum(checked), 1),
            "checked_over_chain": round(sum(checked) / sum(chain), 3) if sum(chain) else None,
            "wilcoxon_p": wilcoxon(chain, checked)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")

    lines = [
        "# Greedy decoding under a grammar: the chosen token checked vs the whole vocabulary masked",
        "",
        (f"`{args.model}` on {result['cpus']} CPUs, artifact `{args.artifact}`: `syntra produce` on {args.docs} "
         f"documents ({args.queries_per_doc} queries each, top {args.top_k} candidates graded), DSPy's cache and "
         "the saved prompt states off; every schema-constrained call answered in both modes from the same llama.cpp "
         "state, back to back, the order alternating."),
        "",
        (f"Same answer text in {result['same_answers']} of {result['schema_calls']} calls ({result['greedy_calls']} "
         "greedy; the repair retries sample, and a sampled call keeps llama-cpp-python's chain in both modes). "
         f"Tokens decoded under the check: {result['tokens_allowed']} let through as chosen, "
         f"{result['tokens_masked']} refused (the vocabulary masked for them; the end-of-answer token included)."),
        "",
        "| step | calls | tokens generated | vocabulary masked, s | chosen token checked, s | checked / masked | p |",
        "|---|---|---|---|---|---|---|",
    ]
    for stage, s in result["steps"].items():
        pv = f"{s['wilcoxon_p']:.2g}" if s["wilcoxon_p"] is not None else "n/a"
        name = f"**{stage}**" if stage.startswith("all") else stage
        lines.append(f"| {name} | {s['calls']} | {s['completion_tokens']} | {s['chain_seconds']} | "
                     f"{s['checked_seconds']} | {s['checked_over_chain']} | {pv} |")
    lines += ["", "Seconds include each call's prompt evaluation (the same in both modes).", "",
              "    python benchmarks/grammar_sampling.py " + " ".join(sys.argv[1:]), ""]
    write_report(args.out, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
