"""Probe: what the embedded writer writes first under three grammars for the query string (issue 42).

One write call per document and grammar, no retry, on the blueprints a SciFact run store planned; prints each
query with its shape. Run from the repository root:

    PYTHONPATH=. python experiments/query_grammar/probe.py STORE.db DOC_ID [DOC_ID ...] > out.txt
"""
from __future__ import annotations

import json
import sqlite3
import sys
import time

import dspy

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.lm.roles import build_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs import context as ctx
from syntra_dspy.programs.narrowing import _closed, narrowed_outputs
from syntra_dspy.query_form import _INTERROGATIVE, shape
from syntra_dspy.retrieval.corpus import read_corpus
from syntra_dspy.signatures.types import Blueprint

ARTIFACT = "artifacts/scifact/22e653baa2bb"
#: Never in a constrained query: question marks, and the quote and backslash a JSON string would have to escape.
_NEVER_IN_QUERY = '?？"\\\\'


def query_list_schema(numbers: list[int], pattern: str | None) -> dict:
    """One query for each blueprint asked, in order, its text matching ``pattern`` (None: any string)."""
    text: dict = {"type": "string", "minLength": 1, **({"pattern": pattern} if pattern else {})}
    items = [_closed({"blueprint": {"type": "integer", "enum": [n]}, "query": text}) for n in numbers]
    return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items), "maxItems": len(items)}


def whole_word_ban() -> str:
    """No question mark, and a first word that is not a question word (the first draft: "Area" allowed, so "Are"
    could be continued by any letter)."""
    rest = f"[^{_NEVER_IN_QUERY}]*"
    letters = "abcdefghijklmnopqrstuvwxyz"
    trie: dict = {}
    for w in sorted(_INTERROGATIVE):
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def after(node: dict, depth: int) -> str:
        kids = sorted(k for k in node if k)
        opts = [f"[{''.join(c + c.upper() for c in letters if c not in kids)}]{rest}"]
        opts += [f"[{k}{k.upper()}]{after(node[k], depth + 1)}" for k in kids]
        if "" not in node:
            opts.append(f"([^A-Za-z{_NEVER_IN_QUERY}]{rest})?" if depth else f"[0-9]{rest}")
        return "(" + "|".join(opts) + ")"
    return f"^{after(trie, 0)}$"


def prefix_ban() -> str:
    """No question mark, and a first word that does not *begin* with a question word (Island, Cancer refused too):
    the probe's copy of the rule :func:`syntra_dspy.query_form.not_a_question_pattern` adopted, with the question
    words of :func:`shape` only."""
    rest = f"[^{_NEVER_IN_QUERY}]*"
    alts = []
    letters = "abcdefghijklmnopqrstuvwxyz"
    trie: dict = {}
    for w in sorted(_INTERROGATIVE):
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def after(node: dict) -> str:
        kids = sorted(k for k in node if k)
        opts = []
        others = "".join(c + c.upper() for c in letters if c not in kids)
        opts.append(f"[{others}]{rest}")
        opts += [f"[{k}{k.upper()}]{after(node[k])}" for k in kids if "" not in node[k]]
        if node is not trie:
            opts.append(f"([^A-Za-z{_NEVER_IN_QUERY}]{rest})?")
        else:
            opts.append(f"[0-9]{rest}")
        return "(" + "|".join(opts) + ")"
    return f"^{after(trie)}$"


GRAMMARS = {"none": None, "no-question-mark": f"^[^{_NEVER_IN_QUERY}]+$", "first-word": whole_word_ban(),
            "first-word-prefix": prefix_ban()}


def main() -> None:
    store, docs = sys.argv[1], sys.argv[2:]
    art = load_artifact(ARTIFACT)
    program = art.program
    lm = build_lm(resolve_generator_spec(art.meta, "embedded"), role="generator", cache=False)
    corpus = read_corpus("/work/shared/data/scifact/corpus.jsonl")
    conn = sqlite3.connect(store)
    for doc_id in docs:
        bps = [Blueprint.model_validate(json.loads(b)) for (b,) in conn.execute(
            "SELECT blueprint FROM queries WHERE doc_id = ? ORDER BY position", (doc_id,))]
        doc = ctx.clip(corpus[doc_id].content, program.max_doc_chars)
        for name, pattern in GRAMMARS.items():
            started = time.perf_counter()
            fields = {"queries": query_list_schema(list(range(len(bps))), pattern)} if name != "none" else {}
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()), narrowed_outputs(fields):
                pred = program.write(document=doc, blueprints=ctx.blueprints_text(bps, list(range(len(bps)))),
                                     language=program.query_rule(), retry_note="",
                                     config={"max_tokens": 60 + 120 * len(bps)})
            for q in pred.queries or []:
                print(json.dumps({"doc": doc_id, "grammar": name, "shape": shape(q.query), "query": q.query,
                                  "seconds": round(time.perf_counter() - started, 1)}), flush=True)


if __name__ == "__main__":
    main()
