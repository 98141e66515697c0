"""Grade the issue-day store's production lists with the guidance-free prompt, then replay the margin cascade learned
from them on the held-out claims (one-off, issue 42; see ~/notes/plan-own-margin.md)."""
import json, sqlite3, sys, time
from pathlib import Path
import dspy
from syntra_dspy.artifacts import load_artifact
from syntra_dspy.lm.roles import build_lm, prepare_lm
from syntra_dspy.production.setup import resolve_generator_spec
from syntra_dspy.retrieval.corpus import read_corpus

STORE, LOG = "benchmarks/runs/scifact-hybrid-v2.db", Path.home() / "own-margin/grades.jsonl"
art = load_artifact("artifacts/scifact/bfb6cfdf9e09")
program = art.program.with_components(judge=None)
rows = sqlite3.connect(STORE).execute(
    "SELECT c.query_id, q.text, c.rank, c.doc_id, c.score, g.lexical FROM candidates c JOIN queries q USING (query_id) "
    "JOIN documents d ON d.doc_id = q.doc_id LEFT JOIN grades g ON g.query_id = c.query_id AND g.rank = c.rank "
    "ORDER BY d.position, q.position, c.rank").fetchall()
mode = sys.argv[1]
LOG.parent.mkdir(exist_ok=True)
done = {(r["query_id"], r["rank"]): r for r in map(json.loads, LOG.read_text().splitlines())} if LOG.exists() else {}
if mode == "grade":
    corpus = read_corpus("../shared/data/scifact/corpus.jsonl")
    lm = build_lm(resolve_generator_spec(art.meta, "embedded"), role="generator", cache=False)
    prepare_lm(lm)
    deadline = float(sys.argv[2])
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter(), trace=None), LOG.open("a") as out:
        for n, (qid, text, rank, doc, cosine, lexical) in enumerate(rows):
            if (qid, rank) in done:
                continue
            if time.time() > deadline:
                break
            g = program.grade_candidate(text, corpus[doc].content)
            out.write(json.dumps({"query_id": qid, "rank": rank, "expected": g.expected, "cosine": cosine,
                                  "lexical": lexical}) + "\n")
            out.flush()
            if n % 8 == 7:
                print(time.strftime("%H:%M:%S"), "list", (n + 1) // 8, flush=True)
else:  # replay
    from syntra_dspy.judging.cascade import GradedCandidate, JudgeCascade
    from syntra_dspy.judging.candidates import JudgedCandidate
    from syntra_dspy.judging.judge import RelevanceJudge
    from syntra_dspy.judging.measure import JudgmentLog, log_key, paired_kappa_difference, recalibrated_rows, score_judge
    issue_day = load_artifact("artifacts/scifact/22e653baa2bb")
    lists, current = [], {}
    for qid, _, rank, _, _, _ in rows:
        current.setdefault(qid, []).append(done.get((qid, rank)))
    lists = [[GradedCandidate(expected=r["expected"], cosine=r["cosine"], lexical=r["lexical"]) for r in group]
             for group in current.values() if all(r is not None and r["expected"] is not None for r in group)]
    cascade = JudgeCascade.margin(art.program.state.judge, lists, coverage=0.95,
                                  learned_from=f"{len(lists)} regraded production lists")
    runs = [Path("benchmarks/results/judge_agreement_hybrid_fresh"), Path("benchmarks/results/judge_agreement_weighted/seed2")]
    cands = [JudgedCandidate(**c) for r in runs for c in json.loads((r / "candidates.json").read_text())]
    ref_log = {k: v for r in runs for k, v in JudgmentLog(r / "judgments.jsonl").done.items()}
    new_log = JudgmentLog(Path("experiments/judge_guidance/judgments.jsonl")).done
    ref = recalibrated_rows(RelevanceJudge(issue_day.program, mode="graded"), cands,
                            [ref_log[log_key(issue_day.version, "graded", c)] for c in cands])
    new = recalibrated_rows(RelevanceJudge(art.program, mode="graded", cascade=cascade), cands,
                            [new_log[log_key(art.version, "graded", c)] for c in cands])
    plain = recalibrated_rows(RelevanceJudge(art.program, mode="graded"), cands,
                              [new_log[log_key(art.version, "graded", c)] for c in cands])
    out = {"lists": len(lists), "no_cascade_difference": paired_kappa_difference(cands, ref, plain)["difference"],
           "cascade": cascade.describe(),
           "skipped": sum("skipped" in (r or {}).get("judgment", {}) for r in new), "candidates": len(cands),
           "ref_kappa": score_judge(cands, ref)["binary"]["kappa"], "new_kappa": score_judge(cands, new)["binary"]["kappa"],
           "paired_kappa_difference": paired_kappa_difference(cands, ref, new)}
    print(json.dumps(out, indent=1, default=str))
