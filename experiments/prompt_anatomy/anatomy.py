"""Where the prompt tokens of production's JSON steps go (no LM call, issue 42): the extract, write and rewrite
prompts of a SciFact artifact rendered as production renders them (DSPy's JSONAdapter, the artifact's composed
instructions, one SciFact document clipped as production clips it) and counted by the embedded model's tokenizer,
split into DSPy's structure text (field list, input layout, output schema), the instruction, and the inputs.

    PYTHONPATH=. python experiments/prompt_anatomy/anatomy.py --artifact artifacts/scifact/22e653baa2bb \
        --corpus ../shared/data/scifact/corpus.jsonl --docs 20 --out experiments/prompt_anatomy/anatomy.json
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import dspy
from llama_cpp import Llama

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.models.install import ensure_gguf
from syntra_dspy.programs import context as ctx
from syntra_dspy.retrieval.corpus import read_corpus
from syntra_dspy.signatures.queries import RewriteRejectedQuery

OBJECTIVE = "In adhering to this structure, your objective is:"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifact", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    program = load_artifact(args.artifact).program
    corpus = read_corpus(args.corpus)
    vocab = Llama(model_path=str(ensure_gguf()), vocab_only=True, verbose=False)
    count = lambda text: len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    adapter = dspy.JSONAdapter()
    steps: dict[str, list[dict[str, int]]] = {"extract": [], "write": [], "rewrite": []}
    for document_ in list(corpus)[: args.docs]:  # the corpus file's first documents
        doc = ctx.clip(document_.content, program.max_doc_chars)
        calls = {
            "extract": (program.extract.signature, {"document": doc, "retry_note": ""}, doc),
            "write": (program.write.signature, {"document": doc, "blueprints": "1. identifier: the finding; "
                                                "specificity: general", "language": program.query_rule(),
                                                "retry_note": ""}, doc),
            "rewrite": (RewriteRejectedQuery, {"query": document_.title, "problem": "it repeats the document",
                                               "form": program.rewrite_form()}, None)}
        for step, (signature, inputs, document) in calls.items():
            system, user = (m["content"] for m in adapter.format(signature, [], inputs))
            at = system.index(OBJECTIVE)
            structure = count(system[:at]) + count(user) - sum(count(str(v)) for v in inputs.values())
            parts = {"total": count(system) + count(user), "dspy_structure": structure,
                     "instruction": count(system[at + len(OBJECTIVE):]),
                     "document": count(document) if document else 0}
            parts["other_inputs"] = parts["total"] - parts["dspy_structure"] - parts["instruction"] - parts["document"]
            steps[step].append(parts)
    out = {"artifact": str(args.artifact), "documents": args.docs,
           "mean_tokens_a_call": {s: {k: round(statistics.mean(r[k] for r in rows), 1) for k in rows[0]}
                                  for s, rows in steps.items()}}
    instruction = program.write.signature.instructions
    if "## Query instruction for this task" in instruction:
        out["write_query_instruction_block"] = count(instruction[instruction.index("## Query instruction"):])
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
