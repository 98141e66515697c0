"""Probe: can the graded judge read a candidate once for all of a document's queries? A feasibility check (issue 42).

Production grades one (query, candidate) pair a call: a document's 4 queries often retrieve the same candidate, whose
~300 tokens are then sent once per query (SciFact's guidance-free store: 1,693 distinct document-candidate pairs for
2,448 query-candidate pairs). One call per candidate and document (the candidate once, the queries numbered, one
digit line per query) would send 0.69x the candidates' tokens, if each query's grade stayed what its own call gives.
The list judge (``../judge_listwise/``) showed the 1.5B model's grades following the position, so this asks first,
cheaply, whether they do here too, against the store's own single-call grades; no agreement with people is measured.

How it asks: the guidance-free grading instruction (``scifact/bfb6cfdf9e09``) said for numbered queries; the user
message is the candidate (clipped as production clips it), then ``Query 1: ...`` to ``Query n: ...``; the model's
answer is followed position by position on the embedded engine (``judge_listwise``'s method: the four label tokens'
probabilities at each grade position, the most probable label written and ``"\\n{next}: "`` fed). A control asks
each group's first query alone with production's single-call prompt through the same path, to check the path
reproduces the store's grades. Groups: ``--groups`` (document, candidate) pairs that two or more of the document's
queries retrieved, drawn with ``random.Random(--seed)``; prompt tokens are counted by the model's tokenizer.

    gunzip -k benchmarks/runs/scifact-noguidance.db.gz
    PYTHONPATH=. python experiments/judge_per_document/probe.py benchmarks/runs/scifact-noguidance.db \\
        --artifact artifacts/scifact/bfb6cfdf9e09 --out experiments/judge_per_document/per-document.json
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.grading import MIN_LABEL_MASS, DigitLabelAdapter
from syntra_dspy.lm.roles import build_lm, prepare_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.programs import context as ctx

POINT_FIRST = "Judge the one document below for the query on this scale:"
MULTI_FIRST = "Judge the one document below for each numbered query on this scale, each query on its own:"
POINT_LAST = re.compile(r"Your whole answer is the digit of your\s+label\.")
MULTI_LAST = ("Answer with one line per query, in the order shown: the query's number, a colon, and the digit of "
              "the document's label for that query.")
ASK = "Labels (one line per query, number: digit):"


def chatml(system: str, user: str) -> str:
    """The chat template of the embedded Qwen2.5 models, up to the start of the assistant's answer."""
    return (f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


class Follower:
    """Grades numbered positions in one pass over the embedded model's context."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.digits = [self.tokens(str(k))[0] for k in range(4)]

    def tokens(self, text: str) -> list[int]:
        return self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def _label_probs(self) -> np.ndarray:
        import llama_cpp

        n_vocab = self.llama.n_vocab()
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.llama._ctx.ctx, -1), shape=(n_vocab,))
        shifted = logits.astype(np.float64) - logits.max()
        return np.exp(shifted - np.log(np.exp(shifted).sum()))[self.digits]

    def grade(self, prompt: str, count: int) -> tuple[list[float | None], int]:
        """E at each of ``count`` positions (None: too little mass on the label tokens) and the prompt's tokens."""
        prompt_tokens = self.tokens(prompt)
        self.llama.reset()
        self.llama.eval(prompt_tokens)
        out: list[float | None] = []
        for position in range(1, count + 1):
            raw = self._label_probs()
            mass = float(raw.sum())
            out.append(float(np.dot(range(4), raw / mass)) if mass >= MIN_LABEL_MASS else None)
            if position < count:
                self.llama.eval([self.digits[int(np.argmax(raw))], *self.tokens(f"\n{position + 1}: ")])
        return out, len(prompt_tokens)


def groups_of(store: Path) -> list[dict[str, Any]]:
    """(document, candidate) pairs graded for two or more of the document's queries, with those queries' grades."""
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT q.doc_id, c.doc_id, q.position, q.text, g.expected, t.content FROM candidates c "
            "JOIN queries q USING (query_id) JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank "
            "JOIN texts t ON t.doc_id = c.doc_id WHERE g.expected IS NOT NULL "
            "ORDER BY q.doc_id, c.doc_id, q.position").fetchall()
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for source, cand, _, query, expected, text in rows:
        group = groups.setdefault((source, cand), {"source": source, "candidate": cand, "text": text, "queries": []})
        group["queries"].append({"query": query, "single": expected})
    return [g for g in groups.values() if len(g["queries"]) >= 2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", type=Path)
    p.add_argument("--artifact", type=Path, required=True)
    p.add_argument("--groups", type=int, default=40)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    art = load_artifact(args.artifact)
    program = art.program
    point = program.grade.signature.instructions
    if POINT_FIRST not in point or not POINT_LAST.search(point):
        raise SystemExit("the artifact's grading instruction is not the fixed scale's wording")
    multi = POINT_LAST.sub(MULTI_LAST, point.replace(POINT_FIRST, MULTI_FIRST))
    every = groups_of(args.store)
    drawn = random.Random(args.seed).sample(every, min(args.groups, len(every)))
    lm = build_lm(resolve_generator_spec(art.meta, None), role="generator", cache=False)
    prepare_lm(lm)
    follower = Follower(lm.engine.load().llama)
    adapter = DigitLabelAdapter()
    results = []
    started = time.perf_counter()
    for n, group in enumerate(drawn, 1):
        text = ctx.clip(group["text"], program.max_doc_chars)
        queries = [q["query"] for q in group["queries"]]
        user = "\n\n".join([f"Document: {text}", *(f"Query {i}: {q}" for i, q in enumerate(queries, 1)), ASK])
        grades, tokens = follower.grade(chatml(multi, user) + "1: ", len(queries))
        singles = []
        for q in queries:
            system, message = adapter.format(program.grade.signature, [], {"query": q, "document": text})
            singles.append(len(follower.tokens(chatml(system["content"], message["content"]))))
        system, message = adapter.format(program.grade.signature, [], {"query": queries[0], "document": text})
        (control,), _ = follower.grade(chatml(system["content"], message["content"]), 1)
        results.append({**group, "text": None, "multi": grades, "control_first": control, "multi_tokens": tokens,
                        "single_tokens": singles})
        print(f"{n}/{len(drawn)} {len(queries)} queries, {time.perf_counter() - started:.0f} s", flush=True)
    pairs = [(i + 1, q["single"], m) for r in results for i, (q, m) in enumerate(zip(r["queries"], r["multi"]))
             if m is not None]
    later = [(s, m) for pos, s, m in pairs if pos >= 2]
    by_position = {}
    for pos in sorted({pos for pos, _, _ in pairs}):
        diffs = [m - s for q, s, m in pairs if q == pos]
        by_position[pos] = {"pairs": len(diffs), "mean_multi_minus_single": round(statistics.fmean(diffs), 3)}
    controls = [(r["queries"][0]["single"], r["control_first"]) for r in results if r["control_first"] is not None]
    summary = {
        "store": str(args.store), "artifact": art.meta.version if hasattr(art.meta, "version") else str(args.artifact),
        "groups_available": len(every), "groups": len(results), "pairs": len(pairs),
        "pearson_all": round(float(np.corrcoef([s for _, s, _ in pairs], [m for _, _, m in pairs])[0, 1]), 3),
        "pearson_positions_2_on": round(float(np.corrcoef(*zip(*later))[0, 1]), 3) if len(later) > 2 else None,
        "by_position": by_position,
        "control_pearson": round(float(np.corrcoef(*zip(*controls))[0, 1]), 3) if len(controls) > 2 else None,
        "control_max_abs_difference": round(max(abs(a - b) for a, b in controls), 4) if controls else None,
        "prompt_tokens_multi": sum(r["multi_tokens"] for r in results),
        "prompt_tokens_single": sum(sum(r["single_tokens"]) for r in results),
        "seconds": round(time.perf_counter() - started, 1),
    }
    summary["token_ratio"] = round(summary["prompt_tokens_multi"] / summary["prompt_tokens_single"], 3)
    args.out.write_text(json.dumps({"summary": summary, "groups": results}, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
