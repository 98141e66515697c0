"""Can the query verifier tell good queries from bad ones? Graded (one query per call, E over the rating tokens)
against written (one 0-3 score for a batch of pairs), on queries whose quality is known.

Four groups of SciFact queries, each with its document (the batch verifier sees it; the graded rater does not):

* ``people``: train claims written by people (SciFact's annotators), with their first relevant abstract;
* ``synthetic``: the claims a production run wrote and kept (``--store``), with their source documents;
* ``questions``: the questions the run's writer wrote first and the write step restated (``queries.restated_from``);
* ``copied``: for the ``people`` abstracts, their first 14 words as a claim, a passage lifted from the document.

For each group: the mean graded rating E and the mean written digit of the same calls; AUC of E (and of the digit)
for ``people`` against each other group; the written batch verifier's score on ``--batches`` random samples of
five pairs of the group (the query loop's old score). The artifact's own verifier model and example queries are
used; its few-shot claims are left out of ``people``.

    python benchmarks/query_verifier.py --artifact artifacts/scifact/22e653baa2bb \\
        --store ~/syntra-runs/scifact-hybrid.db --per-group 15
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import time
from pathlib import Path
from statistics import mean

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "query_verifier"
GROUPS = ("people", "synthetic", "questions", "copied")


def auc(pos: list[float], neg: list[float]) -> float | None:
    """P(a positive scores above a negative), ties counting half (the judge calibration's ``roc_auc``)."""
    from syntra_dspy.judging.calibration import roc_auc

    return roc_auc([*pos, *neg], [True] * len(pos) + [False] * len(neg))


def groups_of(args, examples: set[str]) -> dict[str, list[tuple[str, str]]]:
    """(query, document) pairs per group."""
    from syntra_dspy.evaluation.datasets import load_beir

    data = load_beir(args.dataset_path, args.split)
    corpus = data.require_corpus()
    rng = random.Random(args.seed)
    claims = [q for q in data.judged_queries if data.queries[q].strip() not in examples]
    rng.shuffle(claims)
    people, copied = [], []
    for qid in claims[: args.per_group]:
        doc_id = next(d for d, g in data.qrels[qid].items() if g > 0 and d in corpus)
        text = corpus[doc_id].content
        people.append((data.queries[qid], text))
        words = (corpus[doc_id].text or text).split()[:14]
        copied.append((" ".join(words).rstrip(",;:") + ".", text))
    store = sqlite3.connect(args.store)
    rows = store.execute("SELECT text, restated_from, doc_id FROM queries ORDER BY query_id").fetchall()
    synthetic = [(t, corpus[d].content) for t, _, d in rows if d in corpus]
    questions = [(r, corpus[d].content) for _, r, d in rows if r and r.rstrip().endswith("?") and d in corpus]
    rng.shuffle(synthetic)
    rng.shuffle(questions)
    return {"people": people, "synthetic": synthetic[: args.per_group], "questions": questions[: args.per_group],
            "copied": copied}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--store", required=True, help="a production run store of the same task")
    parser.add_argument("--dataset-path", default=str(REPO.parent / "shared" / "data" / "scifact"))
    parser.add_argument("--split", default="train")
    parser.add_argument("--per-group", type=int, default=15)
    parser.add_argument("--batches", type=int, default=2, help="written batch scores per group")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scripted", action="store_true", help="the scripted brain instead of the artifact's LM "
                        "(checks this script, measures nothing)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()

    import dspy

    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.lm.roles import prepare_lm
    from syntra_dspy.optimizers import trials as tr
    from syntra_dspy.optimizers.query_rating import QueryRater
    from syntra_dspy.programs import context as ctx
    from syntra_dspy.programs.authoring import InstructionAuthor
    from syntra_dspy.production.setup import resolve_generator
    from syntra_dspy.testing import scripted_lm

    artifact = load_artifact(args.artifact)
    program = artifact.program
    if args.scripted:
        lm = scripted_lm()
    else:
        lm, _ = resolve_generator(artifact.meta, None)
        prepare_lm(lm)
    golden = ctx.example_queries(program.state.examples)
    task = ctx.task_context(program.state.task_definition)
    author = InstructionAuthor()
    rater = QueryRater(author.rate_query, lm)
    groups = groups_of(args, {ex.query.strip() for ex in program.state.examples})

    class Doc:
        def __init__(self, n: int, content: str) -> None:
            self.doc_id, self.content = str(n), content

    results: dict[str, dict] = {}
    expected: dict[str, list[float]] = {}
    written: dict[str, list[float]] = {}
    for name in GROUPS:
        pairs = groups[name]
        trials = [tr.QueryTrial(Doc(n, doc), queries=[q]) for n, (q, doc) in enumerate(pairs)]
        started = time.perf_counter()
        ratings = rater.rate(golden, trials)
        seconds = (time.perf_counter() - started) / max(1, len(pairs))
        expected[name] = [r.rating for r in ratings.ratings]
        written[name] = [float(r.grade.written) for r in ratings.ratings if r.grade.written is not None]
        batch = []
        for b in range(args.batches):
            with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
                pred = author.judge_queries(task_context=task, golden_queries=golden, query_instruction=
                                            program.state.query_instruction,
                                            pairs=tr.query_pairs(trials, limit=5, seed=args.seed + b))
            try:
                batch.append(max(0, min(3, int(pred.score))))
            except (TypeError, ValueError):
                batch.append(None)
        results[name] = {"pairs": len(pairs), "rated": len(ratings.ratings), "unrated": ratings.unrated,
                         "mean_rating": round(mean(expected[name]), 3) if expected[name] else None,
                         "mean_written_digit": round(mean(written[name]), 3) if written[name] else None,
                         "batch_scores": batch, "seconds_per_rating": round(seconds, 2),
                         "examples": [r.to_dict() | {"document": None} for r in ratings.ratings[:3]]}
        print(name, results[name]["mean_rating"], results[name]["mean_written_digit"], batch, flush=True)
    aucs = {other: {"graded": auc(expected["people"], expected[other]),
                    "written_digit": auc(written["people"], written[other])} for other in GROUPS[1:]}
    summary = {"artifact": artifact.meta.version, "verifier": "scripted" if args.scripted else "artifact generator",
               "fallback": rater.fallback, "per_group": args.per_group, "seed": args.seed, "groups": results,
               "auc_people_vs": aucs}
    lines = ["# Query verifier: graded vs written, on queries of known quality", "",
             f"Artifact `{artifact.meta.version}`, verifier: {summary['verifier']}; SciFact train claims "
             f"(seed {args.seed}), run store `{Path(args.store).name}`. People's claims are SciFact's.", "",
             "| group | pairs | mean graded rating E | mean written digit | written batch scores | s/rating |",
             "|---|---|---|---|---|---|"]
    for name in GROUPS:
        r = results[name]
        lines.append(f"| {name} | {r['pairs']} | {r['mean_rating']} | {r['mean_written_digit']} | "
                     f"{', '.join(map(str, r['batch_scores']))} | {r['seconds_per_rating']} |")
    lines += ["", "| people vs | AUC of E | AUC of the written digit |", "|---|---|---|"]
    for other, v in aucs.items():
        lines.append(f"| {other} | {v['graded'] and round(v['graded'], 3)} | "
                     f"{v['written_digit'] and round(v['written_digit'], 3)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.scripted:
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "query_verifier.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        (args.results / "query_verifier.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
