"""Where the writer must be told the query form: first answers of the write step, by prompt variant.

Runs the artifact's own write step on N documents (seeded shuffle of the corpus; features extracted once and cached
in --work, blueprints drawn in code so every variant sees the same ones) and checks each first answer with the
production check (form, copying, near-duplicates). Variants:

  A  the call says only the language ("Write every query in English.")  - the step before the per-call rule
  B  the call also states the examples' form (close to what ``write_queries`` now sends, ``QueryForm.rule``)
  C  A, with the same form rule placed in the fixed instruction instead
  D  C, plus a sentence against copying the document's words
  P  the per-call rule exactly as ``write_queries`` sends it (``QueryForm.rule``)
  P+copy  P, with a clause against copying the document's title or sentences in the same per-call rule
  full  ``SynthesisProgram.write_queries`` as production runs it (per-call rule, repair notes, three tries)

Results of the committed run (embedded 1.5B, SciFact, 8 documents) are in benchmarks/results/write_rule/; the
README's Queries section quotes them. Usage:

  python benchmarks/write_rule.py --artifact artifacts/scifact/897cfc595ffc --docs 8 --variants A,B,C,D,full
  python benchmarks/write_rule.py --artifact artifacts/scifact/22e653baa2bb --store ~/syntra-runs/scifact-hybrid.db \
      --docs 16 --variants P,P+copy --work ~/syntra-runs/write-rule-copy

``--store`` takes the documents and their extracted features from a production run store (documents it processed)
instead of extracting them again.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import sys
import time
import zlib
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--variants", default="A,B,C,D,full")
    parser.add_argument("--work", type=Path, default=Path.home() / "syntra-runs" / "write-rule")
    parser.add_argument("--store", type=Path, help="a run store whose documents' features to reuse")
    args = parser.parse_args()

    import dspy

    from judge_agreement import load
    from syntra_dspy.errors import LMOutputError, QueriesIncomplete
    from syntra_dspy.programs import context as ctx
    from syntra_dspy.query_form import copied_share
    from syntra_dspy.programs.validation import (Features, QueriesRejected, WriteTally, check_queries,
                                                fallback_blueprints, query_problem)

    inputs, lm = load(args.artifact)
    program = inputs.artifact.program
    form = program.query_form()
    args.work.mkdir(parents=True, exist_ok=True)
    cache = args.work / "features.json"
    feats = json.loads(cache.read_text()) if cache.exists() else {}
    if args.store is not None:
        db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
        feats = dict(db.execute("SELECT doc_id, features FROM documents WHERE features IS NOT NULL"))
        feats = {doc_id: json.loads(text) for doc_id, text in feats.items()}
    ids = sorted(feats) if args.store is not None else sorted(inputs.corpus.ids)
    random.Random(args.seed).shuffle(ids)
    # The exact texts of the committed run (claim examples); ``full`` sends ``QueryForm.rule`` as production does.
    language = "Write every query in English."
    rule = f"Write every query in English, as {form.describe()}: a finding stated as fact, like the example queries; " \
           "never a question."
    block = (f"Every query is a declarative claim of {form.min_length}-{form.max_length} {form.unit} ending with a "
             "period: one finding stated as fact, in your own words, like the example queries. Never write a question.")
    no_copy = (" Keep it shorter than the document's sentences, and do not reuse a run of more than four words from "
               "the document.")
    marker = "\n\n## Query instruction for this task"
    base = program.write.signature.instructions
    fixed = base.replace(marker, f"\n\n## Query form\n{block}{marker}") if marker in base else f"{base}\n\n## Query form\n{block}"
    production = program.query_rule()
    steps = {"A": (program.write, language), "B": (program.write, rule), "P": (program.write, production),
             "P+copy": (program.write, production[:-1] + "; never the document's title or one of its sentences: say "
                                                          "the finding in your own words."),
             "C": (dspy.Predict(program.write.signature.with_instructions(fixed)), language),
             "D": (dspy.Predict(program.write.signature.with_instructions(fixed.replace(block, block + no_copy))),
                   language)}
    out = args.work / "results.jsonl"
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for doc_id in ids[:args.docs]:
            text = inputs.corpus[doc_id].content
            if doc_id not in feats:
                feats[doc_id] = program.extract_features(text).to_dict()
                cache.write_text(json.dumps(feats))
            blueprints = fallback_blueprints(Features.from_dict(feats[doc_id]), 2, seed=zlib.crc32(doc_id.encode()))
            doc = ctx.clip(text, program.max_doc_chars)
            for variant in args.variants.split(","):
                started, row = time.time(), {"doc": doc_id, "variant": variant}
                if variant == "full":
                    tally, error = WriteTally(), None
                    try:
                        queries = program.write_queries(text, blueprints, tally=tally)
                    except QueriesIncomplete as exc:
                        queries, error = list(exc.kept.values()), str(exc)
                    except LMOutputError as exc:
                        queries, error = [], str(exc)
                    row |= {"queries": queries, "problem": error, "written": tally.queries, "off_form": tally.off_form}
                else:
                    step, call_rule = steps[variant]
                    try:
                        pred = step(document=doc, blueprints=ctx.blueprints_text(blueprints), language=call_rule,
                                    retry_note="", config={"max_tokens": 60 + 120 * len(blueprints)})
                    except (ValueError, dspy.utils.exceptions.AdapterParseError) as exc:
                        row |= {"queries": [], "problem": f"unparseable answer: {str(exc)[:200]}"}
                        pred = None
                    if pred is not None:
                        queries = [w.query for w in (pred.queries or [])]
                        try:
                            check_queries(pred.queries or [], blueprints, language="en", document=doc, form=form)
                            problem = None
                        except QueriesRejected as exc:
                            problem = str(exc)
                        row |= {"queries": queries, "problem": problem,
                                "problems": [(query_problem(q, language="en", document=doc, form=form) or [None])[0]
                                             for q in queries]}
                    queries = row["queries"]
                row |= {"seconds": round(time.time() - started, 1),
                        "copied": [round(copied_share(q, text), 2) for q in queries]}
                print(json.dumps(row), flush=True)
                with out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
