"""Does the write step's one-call rewrite fix a rejected query? Two prompts side by side, on the rejected queries a
production run's writer actually wrote: questions (``--kind question``: with and without worked examples) and copied
passages (``--kind copy``: the old note, "in your own words", against one quoting the copied words with a length cap).

A SciFact query must be a claim; the embedded writer often writes questions, and the write step asks one short
``RewriteRejectedQuery`` call to restate each. When that call answers with a question again, the blueprint has no
query and the document is partial or failed (12 of the SciFact run's write failures end that way). The questions
here are those of the run store: the ones the rewrite restated (``queries.restated_from``) and the rewrite's own
rejected answers kept in the failures table. Each is rewritten twice, with the production prompt as it is and with
``REWRITE_DEMOS`` as worked examples, and the answer is checked by the write step's own rules (form, length,
language, copying). Reported: how many pass, per prompt, and the pairs where only one of them passed (McNemar).

    python benchmarks/rewrite_questions.py --artifact artifacts/scifact/22e653baa2bb \\
        --store ~/syntra-runs/scifact-hybrid.db [--kind copy]

The copies are the queries a rewrite fixed (``queries.restated_from``) and the copied answers kept in the failures
table (the writer's or the rewrite's), each checked to copy more than 10 words of its document.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import dspy  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "rewrite_questions"


#: Worked examples for ``RewriteRejectedQuery`` (written for this probe; invented findings, not corpus text): a
#: yes-or-no question, a what-question and a copied passage, each with the fix its problem asks for.
_DEMO_FORM = ("Write every query in English, as a declarative claim of 5-18 words ending with a period: a finding "
              "stated as fact, like the example queries; never a question.")
REWRITE_DEMOS = [
    dspy.Example(query="Does exposure to cigarette smoke slow wound healing in mouse skin?",
                 problem="is a question; write a declarative claim like the examples, not a question",
                 form=_DEMO_FORM,
                 rewritten="Exposure to cigarette smoke slows wound healing in mouse skin."),
    dspy.Example(query="What is the role of vitamin K in arterial calcification?",
                 problem="is a question; write a declarative claim like the examples, not a question",
                 form=_DEMO_FORM,
                 rewritten="Vitamin K affects how arteries calcify."),
    dspy.Example(query="the levels of HIF-1 alpha protein were markedly increased in hypoxic regions of the tumours "
                       "compared with normoxic regions",
                 problem="copies a sentence of the document; rephrase it the way a searcher who has not read the "
                         "document would",
                 form=_DEMO_FORM,
                 rewritten="HIF-1 alpha is more abundant in oxygen-starved parts of tumours."),
]


def questions_of(store: Path, limit: int) -> list[tuple[str, str]]:
    """(question, doc_id) pairs from the run store, restated ones first, then rejected rewrites; no repeats."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    found: dict[str, str] = {}
    for text, doc_id in db.execute("SELECT restated_from, doc_id FROM queries WHERE restated_from LIKE '%?' "
                                   "ORDER BY query_id"):
        found.setdefault(text.strip(), doc_id)
    for detail, doc_id in db.execute("SELECT detail, doc_id FROM failures WHERE stage = 'write' AND error LIKE "
                                     "'%is a question%' ORDER BY id"):
        try:
            answer = json.loads(json.loads(detail)["last_answer"])["rewritten"].strip()
        except (KeyError, TypeError, ValueError):
            continue
        if answer.endswith("?"):
            found.setdefault(answer, doc_id)
    return list(found.items())[:limit]


def copies_of(store: Path, corpus: dict, limit: int) -> list[tuple[str, str]]:
    """(copied query, doc_id) pairs from the run store: queries a rewrite restated from a copy, then the copied
    answers of write failures (the writer's queries or the rewrite's answer); only those copying more than 10
    words of their document; no repeats."""
    from syntra_dspy.programs.validation import copied_words

    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    offered: list[tuple[str, str]] = list(db.execute(
        "SELECT restated_from, doc_id FROM queries WHERE restated_from IS NOT NULL AND restated_from NOT LIKE '%?' "
        "ORDER BY query_id"))
    for detail, doc_id in db.execute("SELECT detail, doc_id FROM failures WHERE stage = 'write' AND error LIKE "
                                     "'%copies a sentence%' ORDER BY id"):
        try:
            answer = json.loads(json.loads(detail)["last_answer"])
        except (KeyError, TypeError, ValueError):
            continue
        texts = [answer.get("rewritten")] if "rewritten" in answer else \
            [q.get("query") for q in answer.get("queries") or [] if isinstance(q, dict)]
        offered.extend((t, doc_id) for t in texts if isinstance(t, str))
    found: dict[str, str] = {}
    for text, doc_id in offered:
        text = " ".join(text.split())
        if doc_id in corpus and copied_words(text, corpus[doc_id].content) > 10:
            found.setdefault(text, doc_id)
    return list(found.items())[:limit]


def mcnemar_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p over the discordant pairs."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--kind", choices=("question", "copy"), default="question",
                        help="rejected queries to rewrite: the writer's questions, or its copied passages")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    from judge_agreement import load  # the artifact's inputs and its own generator, loaded once
    from syntra_dspy.programs.validation import REPAIRS, copy_repair, query_problem
    from syntra_dspy.signatures.queries import RewriteRejectedQuery

    inputs, lm = load(args.artifact)
    program, corpus = inputs.artifact.program, inputs.corpus
    form = program.query_form()
    if args.kind == "question":
        pairs = questions_of(args.store, args.limit)
        variants = {"plain": (lambda q, doc: form.problem(q) if form else "is a question", []),
                    "demos": (lambda q, doc: form.problem(q) if form else "is a question", REWRITE_DEMOS)}
    else:
        pairs = copies_of(args.store, corpus, args.limit)
        variants = {"plain": (lambda q, doc: REPAIRS["copy"], []),
                    "span": (lambda q, doc: copy_repair(q, doc, 10), [])}
    names = list(variants)
    rows = []
    seconds = dict.fromkeys(names, 0.0)
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        for query, doc_id in pairs:
            document = corpus[doc_id].content
            row = {"query": query, "doc_id": doc_id}
            for name, (problem, demos) in variants.items():
                step = dspy.Predict(RewriteRejectedQuery)
                step.demos = list(demos)
                started = time.perf_counter()
                try:
                    pred = step(query=query, problem=problem(query, document),
                                form=program.rewrite_form(), config={"max_tokens": 120})
                    text = " ".join(str(pred.rewritten or "").split()).strip().strip('"').strip()
                except (ValueError, dspy.utils.exceptions.AdapterParseError):
                    text = ""
                seconds[name] += time.perf_counter() - started
                why = query_problem(text, language="en", document=document, form=form) if text else ("no answer", 0)
                row[name] = {"rewritten": text, "problem": why[0] if why else None}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    a, b = names
    ok = {name: [r[name]["problem"] is None for r in rows] for name in names}
    only_a = sum(x and not y for x, y in zip(ok[a], ok[b]))
    only_b = sum(y and not x for x, y in zip(ok[a], ok[b]))
    summary = {"artifact": inputs.artifact.version, "kind": args.kind, "queries": len(rows),
               "passed": {k: sum(v) for k, v in ok.items()}, f"only_{a}": only_a, f"only_{b}": only_b,
               "mcnemar_p": round(mcnemar_p(only_a, only_b), 4),
               "seconds_per_rewrite": {k: round(v / max(1, len(rows)), 2) for k, v in seconds.items()}, "rows": rows}
    what = {"question": "the writer's questions as claims", "copy": "the writer's copied passages"}[args.kind]
    text = (f"# Rewriting {what}\n\nArtifact `{summary['artifact']}`, its own generator; "
            f"{len(rows)} rejected queries from `{args.store.name}`.\n\n| prompt | passed the write step's checks | "
            "s/rewrite |\n|---|---:|---:|\n" + "".join(f"| {k} | {summary['passed'][k]}/{len(rows)} | "
                                                     f"{summary['seconds_per_rewrite'][k]} |\n" for k in names)
            + f"\nPassed with one prompt only: {a} {only_a}, {b} {only_b} (exact McNemar p {summary['mcnemar_p']}).\n")
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    stem = {"question": "rewrite_questions", "copy": "rewrite_copies"}[args.kind]
    (args.results / f"{stem}.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    (args.results / f"{stem}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
