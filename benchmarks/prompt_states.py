"""Saved prompt states on vs off: the embedded engine replaying production's own prompts, side by side in one run.

The prompts are those production sends for a document (extract, plan, write, then one grading call per candidate of
each query), rendered by the artifact's program from a run store's documents, blueprints, queries and candidates.
Two engines replay them with the same options (grammar, token budget, logprobs): one without saved states
(``prompt_cache_bytes=0``, llama.cpp reuses only the previous prompt's prefix) and one with the default. Documents
alternate which engine goes first; the first ``--warmup`` documents are replayed by the engine with saved states
only and not counted (a fresh cache holds no states yet; a long run is in steady state). Reports seconds per
document and per step for both, their ratio with a paired test over calls, and how many answers differ.

    python benchmarks/prompt_states.py --artifact artifacts/scifact/22e653baa2bb \\
        --store ~/syntra-runs/scifact-hybrid.db --docs 4 --warmup 1
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def document_prompts(program, store: sqlite3.Connection, corpus, doc_id: str, top_k: int) -> list[tuple[str, object]]:
    """(step, first call) for every LM call production makes for one document that needs no retry."""
    import dspy

    from syntra_dspy.lm.scripted import ScriptedLM
    from syntra_dspy.programs.validation import Features
    from syntra_dspy.signatures.types import Blueprint

    features = Features.from_dict(json.loads(store.execute("select features from documents where doc_id=?",
                                                           (doc_id,)).fetchone()[0]))
    queries = store.execute("select query_id, text, blueprint from queries where doc_id=? order by position",
                            (doc_id,)).fetchall()
    text = corpus[doc_id].content
    lm = ScriptedLM(lambda call: "{}")  # every answer is rejected: only the first call of each step is kept
    steps = [("extract", lambda: program.extract_features(text)),
             ("plan", lambda: program.plan_blueprints(text, features, len(queries), retries=0)),
             ("write", lambda: program.write_queries(text, [Blueprint.model_validate(json.loads(b))
                                                           for _, _, b in queries], rewrite=False))]
    for query_id, query, _ in queries:
        for (cand,) in store.execute("select doc_id from candidates where query_id=? and rank<? order by rank",
                                     (query_id, top_k)):
            steps.append((f"grade {query_id}", lambda q=query, c=cand: program.grade_candidate(q, corpus[c].content)))
    calls = []
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for step, run in steps:
            first = len(lm.calls)
            try:
                run()
            except Exception:  # noqa: BLE001 - the scripted answer is meant to fail
                pass
            calls.append((step, lm.calls[first]))
    return calls  # (step, or "grade QUERY_ID" for a grading call, first call)


def replay(lm, call) -> tuple[float, str]:
    options = {"max_tokens": call.options["max_tokens"]}
    if call.options.get("logprobs"):  # the scripted engine records the number of top log probabilities asked
        options.update(logprobs=True, top_logprobs=int(call.options["logprobs"]))
    if call.response_format is not None:  # recorded in DSPy's canonical form; asked again in the OpenAI form
        rf = call.response_format
        options["response_format"] = {"type": "json_schema",
                                      "json_schema": {"name": rf.get("name") or "answer", "schema": rf["schema"]}}
    start = time.perf_counter()
    out = lm(messages=[dict(m) for m in call.messages], temperature=0.0, **options)
    seconds = time.perf_counter() - start
    first = out[0]
    text = first["text"] if isinstance(first, dict) else str(first)
    if isinstance(first, dict) and first.get("logprobs"):  # a grade: its expected label E, to three decimals
        top = {t["token"]: math.exp(t["logprob"]) for t in first["logprobs"]["content"][0]["top_logprobs"]}
        mass = sum(top.get(d, 0.0) for d in "0123")
        text += f" E={sum(int(d) * top.get(d, 0.0) for d in '0123') / mass:.3f}"
    return seconds, text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--store", required=True, help="a run store of that artifact with done documents")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--model", default=None, help="embedded model name (default: the project's default)")
    ap.add_argument("--out", default=str(RESULTS / "prompt_states"))
    args = ap.parse_args()

    import dspy
    from scipy.stats import wilcoxon

    from syntra_dspy.lm.llamacpp import DEFAULT_EMBEDDED_MODEL, LlamaCppEngine
    from syntra_dspy.production.setup import load_inputs

    args.model = args.model or DEFAULT_EMBEDDED_MODEL
    inputs = load_inputs(args.artifact)
    store = sqlite3.connect(Path(args.store).expanduser())
    doc_ids = [d for (d,) in store.execute("select doc_id from documents where status='done' and n_queries>=2 "
                                           "order by position limit ?", (args.docs,))]
    rendered = {d: document_prompts(inputs.artifact.program, store, inputs.corpus, d, args.top_k) for d in doc_ids}
    groups = {d: [step for step, _ in calls] for d, calls in rendered.items()}  # grading calls grouped by query
    prompts = {d: [(step.split()[0], call) for step, call in calls] for d, calls in rendered.items()}
    model = args.model
    engines = {"off": LlamaCppEngine(model, prompt_cache_bytes=0), "on": LlamaCppEngine(model)}
    lms = {name: dspy.LM(f"embedded/{name}", engine=e, cache=False, num_retries=0) for name, e in engines.items()}
    rows, differ, total, pairs = [], 0, 0, []
    for n, doc_id in enumerate(doc_ids):
        warmup = n < args.warmup
        # a warm-up document fills the saved states; the engine without them needs none (it reuses one prefix)
        order = ["on"] if warmup else (["off", "on"] if n % 2 == 0 else ["on", "off"])
        per: dict[str, dict] = {}
        for name in order:
            steps: dict[str, float] = {}
            texts, seconds = [], []
            for step, call in prompts[doc_id]:
                took, text = replay(lms[name], call)
                steps[step] = steps.get(step, 0.0) + took
                texts.append(text)
                seconds.append(took)
            per[name] = {"seconds": sum(steps.values()), "steps": steps, "texts": texts, "calls": seconds}
            print(f"doc {n} {doc_id} {name}: {per[name]['seconds']:.1f} s "
                  + " ".join(f"{k} {v:.1f}" for k, v in steps.items()), file=sys.stderr, flush=True)
        if warmup:
            continue
        differing = [{"step": step, "off": a, "on": b} for (step, _), a, b
                     in zip(prompts[doc_id], per["off"]["texts"], per["on"]["texts"]) if a != b]
        changed = len(differing)
        rows.append({"doc_id": doc_id, "calls": len(prompts[doc_id]), "differing": differing,
                     "off": per["off"]["seconds"], "on": per["on"]["seconds"],
                     "steps_off": per["off"]["steps"], "steps_on": per["on"]["steps"], "answers_differ": changed})
        # the calls a saved state can serve: each one that follows another step's call (the others continue the
        # previous prompt, which llama.cpp reuses either way)
        opens = [k for k in range(len(prompts[doc_id])) if k == 0 or groups[doc_id][k] != groups[doc_id][k - 1]]
        pairs += [(per["off"]["calls"][k], per["on"]["calls"][k]) for k in opens]
        rows[-1]["call_seconds"] = {"off": per["off"]["calls"], "on": per["on"]["calls"], "opening": opens}
        differ, total = differ + changed, total + len(prompts[doc_id])
    llama = engines["on"].load().llama
    cache = llama.cache
    off, on = sum(r["off"] for r in rows), sum(r["on"] for r in rows)
    steps = sorted({s for r in rows for s in r["steps_off"]})
    summary = {
        "model": model, "docs": len(rows), "warmup": args.warmup, "calls": total,
        "seconds_per_doc_off": off / len(rows), "seconds_per_doc_on": on / len(rows), "ratio_on_off": on / off,
        "per_step": {s: {"off": sum(r["steps_off"][s] for r in rows) / len(rows),
                         "on": sum(r["steps_on"][s] for r in rows) / len(rows)} for s in steps},
        "opening_calls": len(pairs),
        "opening_seconds_off": sum(a for a, _ in pairs), "opening_seconds_on": sum(b for _, b in pairs),
        "wilcoxon_p_opening_calls": float(wilcoxon([a for a, _ in pairs], [b for _, b in pairs]).pvalue),
        "answers_differ": differ, "states_kept": len(cache), "state_bytes": cache.cache_size,
        "states_restored": llama.states_restored, "rows": rows,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Saved prompt states: on vs off", "",
             f"Embedded {model}, 2 threads; production's prompts for {len(rows)} SciFact documents "
             f"({total} calls; {args.warmup} warm-up document(s) replayed first by the engine with saved states, not "
             "counted), replayed by two engines in one process, alternating which goes first.", "",
             "| step | s/doc off | s/doc on | on / off |", "|---|---|---|---|"]
    for s, v in summary["per_step"].items():
        lines.append(f"| {s} | {v['off']:.1f} | {v['on']:.1f} | {v['on'] / v['off']:.2f} |")
    lines.append(f"| **document** | **{summary['seconds_per_doc_off']:.1f}** | **{summary['seconds_per_doc_on']:.1f}** "
                 f"| **{summary['ratio_on_off']:.2f}** |")
    grades = [(float(d["off"].rsplit("E=", 1)[1]), float(d["on"].rsplit("E=", 1)[1]))
              for r in rows for d in r["differing"] if d["step"] == "grade"]
    other = [d["step"] for r in rows for d in r["differing"] if d["step"] != "grade"]
    summary["grade_E_abs_diff_max"] = max((abs(a - b) for a, b in grades), default=0.0)
    lines += ["", f"Answers that differ between the two engines: {differ} of {total} ({len(grades)} grades, their "
              f"expected label E by at most {summary['grade_E_abs_diff_max']:.3f}; other steps: "
              f"{', '.join(other) or 'none'}). A restored state is exact (tests/test_lm_embedded.py compares it with "
              "llama.cpp's own prefix reuse); the engine without saved states evaluates more of each prompt in one "
              "batch, which moves the last digits of the logits. States kept at the end: "
              f"{len(cache)} ({cache.cache_size / 2**20:.0f} MiB); states restored {llama.states_restored}.",
              "", f"The calls a saved state can serve (each call that opens a step or a new query's grading: "
              f"{len(pairs)} of {total}) took {summary['opening_seconds_off']:.0f} s without saved states and "
              f"{summary['opening_seconds_on']:.0f} s with them; Wilcoxon signed-rank over those calls: "
              f"p = {summary['wilcoxon_p_opening_calls']:.2g}. The other calls continue the previous prompt, which "
              "llama.cpp reuses either way.",
              "", "    " + " ".join(["python", *sys.argv])]
    (out / "prompt_states.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
