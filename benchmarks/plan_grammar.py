"""Does a schema narrowed to the document's own lists make the plan step's first answer valid? Side by side.

The plan step copies an identifier, and one option per attribute dimension, from lists in its prompt. Under the
signature's plain schema (any string) the embedded 1.5B model put a document term where a dimension belongs in 6 of
the first 11 documents of the SciFact run, and such a document's blueprints were then drawn in code. With
``narrowed_outputs`` the schema's strings are enums of the document's lists (the prompt is the same). For documents
a run store has already extracted features for, the artifact's plan step is called once under each schema (one
call, no repair, as a first attempt in production), alternating which goes first, with the LM's cache off, and the
answer is checked by the plan step's own rules.

    python benchmarks/plan_grammar.py --artifact artifacts/scifact/22e653baa2bb \\
        --store benchmarks/runs/scifact-hybrid-v2.db --docs 12

Reported per schema: documents whose first answer gave every blueprint asked for (exact McNemar over the pairs),
valid blueprints, the problems found, seconds per call.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dspy

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "plan_grammar"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def stored_features(store: Path, limit: int) -> list[tuple[str, dict]]:
    """(doc_id, features) of the documents the run extracted features for, in the run's order."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = db.execute("SELECT doc_id, features FROM documents WHERE features IS NOT NULL ORDER BY position").fetchall()
    return [(doc_id, json.loads(features)) for doc_id, features in rows][:limit]


def problem_kind(problem: str) -> str:
    for marker, kind in (("not in the list", "identifier not listed"), ("attribute dimensions", "dimension not listed"),
                         ("not an option", "option not listed"), ("chosen twice", "dimension twice"),
                         ("choose an option", "dimension missing"), ("repeats", "combination repeated")):
        if marker in problem:
            return kind
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--docs", type=int, default=12)
    parser.add_argument("--count", type=int, default=2, help="blueprints asked per call (production: queries per doc)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    from judge_agreement import load
    from rewrite_questions import mcnemar_p

    from syntra_dspy.programs import context as ctx
    from syntra_dspy.programs.narrowing import blueprint_list_schema, narrowed_outputs
    from syntra_dspy.programs.validation import Features, check_blueprints

    inputs, lm = load(args.artifact)
    lm.cache = False  # every call is made, not answered from the compile's or the run's cache
    program, corpus = inputs.artifact.program, inputs.corpus
    names = ("plain", "narrowed")
    rows = []
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for n, (doc_id, raw) in enumerate(stored_features(args.store, args.docs)):
            features = Features.from_dict(raw)
            doc = ctx.clip(corpus[doc_id].content, program.max_doc_chars)
            row: dict = {"doc_id": doc_id}
            for name in (names if n % 2 == 0 else names[::-1]):
                schema = {"blueprints": blueprint_list_schema(features, args.count)} if name == "narrowed" else {}
                started = time.perf_counter()
                try:
                    with narrowed_outputs(schema) if schema else contextlib.nullcontext():
                        pred = program.plan(document=doc, identifiers=ctx.identifiers_text(features.identifiers),
                                            attributes=ctx.attributes_text(features.attributes), count=args.count,
                                            already_used="", retry_note="",
                                            config={"max_tokens": 80 + 160 * args.count})
                    good, problems = check_blueprints(pred.blueprints or [], features)
                    answer = [bp.model_dump() for bp in pred.blueprints or []]
                except (ValueError, dspy.utils.exceptions.AdapterParseError) as exc:
                    good, problems, answer = [], [f"no parsable answer: {exc}"[:200]], []
                row[name] = {"valid": min(len(good), args.count), "problems": problems, "answer": answer,
                             "seconds": round(time.perf_counter() - started, 1)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)

    complete = {name: [r[name]["valid"] == args.count for r in rows] for name in names}
    only_plain = sum(a and not b for a, b in zip(complete["plain"], complete["narrowed"]))
    only_narrowed = sum(b and not a for a, b in zip(complete["plain"], complete["narrowed"]))
    summary = {
        "artifact": inputs.artifact.version, "store": args.store.name, "documents": len(rows), "count": args.count,
        "complete_first_answer": {k: sum(v) for k, v in complete.items()},
        "valid_blueprints": {k: sum(r[k]["valid"] for r in rows) for k in names},
        "problems": {k: dict(collections.Counter(problem_kind(p) for r in rows for p in r[k]["problems"]))
                     for k in names},
        "seconds_per_call": {k: round(sum(r[k]["seconds"] for r in rows) / max(1, len(rows)), 1) for k in names},
        "only_plain": only_plain, "only_narrowed": only_narrowed,
        "mcnemar_p": round(mcnemar_p(only_plain, only_narrowed), 4), "rows": rows,
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "plan_grammar.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1) + "\n")
    lines = [
        "# The plan step's first answer under the signature's schema and under the document's lists",
        "",
        (f"Artifact `{summary['artifact']}` (its own generator), {len(rows)} documents of `{args.store.name}` with "
         f"their stored features, {args.count} blueprints asked per call, one call each, no repair."),
        "",
        "| schema | documents with every blueprint valid | valid blueprints | problems | s / call |",
        "|---|---:|---:|---|---:|",
    ]
    for k in names:
        probs = ", ".join(f"{kind} {c}" for kind, c in sorted(summary["problems"][k].items())) or "none"
        lines.append(f"| {k} | {summary['complete_first_answer'][k]}/{len(rows)} | "
                     f"{summary['valid_blueprints'][k]}/{args.count * len(rows)} | {probs} | "
                     f"{summary['seconds_per_call'][k]} |")
    lines += ["", (f"Complete with one schema only: plain {only_plain}, narrowed {only_narrowed} "
                   f"(exact McNemar p {summary['mcnemar_p']})."), ""]
    (args.results / "plan_grammar.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
