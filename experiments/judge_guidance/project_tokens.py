"""Projected prompt tokens per record of the paired runs' after sides had they graded with the guidance-free version
and the margin learned from its regrades of the issue-day store (no LM call, issue 42): each stored query's candidates
replayed through that cascade (the source document always graded), each grading call 137 prompt tokens shorter (the
guidance paragraph, exact), the rest of each run's prompt tokens as measured.

    PYTHONPATH=. python experiments/judge_guidance/project_tokens.py \
        experiments/judge_guidance/production-lists-noguidance.jsonl experiments/judge_guidance/project-tokens.json
"""
import gzip, json, shutil, sqlite3, sys, tempfile
from pathlib import Path
from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.cascade import GradedCandidate, JudgeCascade
from syntra_dspy.production.store import RunStore

RUNS = Path("benchmarks/results/paired_produce")
regrades_path = Path(sys.argv[1])
art = load_artifact("artifacts/scifact/bfb6cfdf9e09")
cal = art.program.state.judge
regrades = {(r["query_id"], r["rank"]): r["expected"] for r in map(json.loads, regrades_path.read_text().splitlines())
            if r["expected"] is not None}
tmp = Path(tempfile.mkdtemp())
with gzip.open("benchmarks/runs/scifact-hybrid-v2.db.gz") as s, open(tmp / "v2.db", "wb") as d:
    shutil.copyfileobj(s, d)
with RunStore.open(tmp / "v2.db", readonly=True) as run:
    lists = [[GradedCandidate(expected=e, cosine=c, lexical=b) for e, c, b in g] for g in run.graded_lists(regrades)]
cascade = JudgeCascade.margin(cal, lists, coverage=0.95, learned_from="regraded")
SHORTER = 137
out, pooled = [], {}
for n in [10, 11, 12, 13, 14, 15, 16, 17]:
    sides = json.loads((RUNS / f"scifact-embedded-{n}/paired_produce.json").read_text())
    for i, side in enumerate(sides):
        st = side["settings"]
        kind = "A" if st.get("max_identifiers") == "all" else ("C" if st.get("judge_cascade") == "margin" else
                                                                 ("B'" if "artifact" in st else "B"))
        gz = RUNS / f"scifact-embedded-{n}/stores/{side['store']}.gz"
        db = tmp / f"{n}-{i}.db"
        with gzip.open(gz) as s, open(db, "wb") as d:
            shutil.copyfileobj(s, d)
        con = sqlite3.connect(db)
        ann = side["by_step"]["annotate"]
        per_call = ann["prompt_tokens"] / ann["calls"]
        if kind == "B'":
            per_call += SHORTER  # back to the issue-day prompt's length, then shortened like the others
        candidates = 0
        rows = con.execute("SELECT c.query_id, c.rank, c.doc_id, c.score, q.doc_id, coalesce(g.lexical, s.lexical) "
                           "FROM candidates c JOIN queries q USING (query_id) "
                           "LEFT JOIN grades g USING (query_id, rank) LEFT JOIN judge_skips s USING (query_id, rank) "
                           "ORDER BY c.query_id, c.rank").fetchall()
        by_q = {}
        for qid, rank, doc, cosine, src, lex in rows:
            by_q.setdefault(qid, []).append((doc == src, cosine, lex))
        skipped = 0
        for qid, cs in by_q.items():
            keep = [k for k, c in enumerate(cs) if c[0]]
            skipped += len(cascade.skips(cal, [c[1] for c in cs], lexical=[c[2] for c in cs], keep=keep))
            candidates += len(cs)
        new_ann = (candidates - skipped) * (per_call - SHORTER)
        tokens = side["prompt_tokens_per_record"] * side["records"]
        projected = tokens - ann["prompt_tokens"] + new_ann
        row = {"run": n, "side": kind, "records": side["records"], "candidates": candidates,
               "graded_calls": ann["calls"], "prompt_tokens_per_record": round(tokens / side["records"])}
        if kind != "A":  # the baseline stays as measured
            row |= {"projected_calls": candidates - skipped,
                    "projected_per_record": round(projected / side["records"])}
        out.append(row)
        print(row)
        pooled.setdefault(n, {})[kind] = (tokens, projected, side["records"])
def ratio(kind, runs):
    a = sum(pooled[n]["A"][0] for n in runs) / sum(pooled[n]["A"][2] for n in runs)
    k = sum(pooled[n][kind][1] for n in runs) / sum(pooled[n][kind][2] for n in runs)
    k0 = sum(pooled[n][kind][0] for n in runs) / sum(pooled[n][kind][2] for n in runs)
    return {"runs": runs, "A": round(a), kind: round(k0), kind + " projected": round(k),
            "ratio": round(k0 / a, 3), "projected_ratio": round(k / a, 3)}
summary = {"cascade": cascade.describe(), "C": ratio("C", [n for n in pooled if "C" in pooled[n]]),
           "B": ratio("B", [n for n in pooled if "B" in pooled[n]])}
print(json.dumps(summary, indent=1))
Path(sys.argv[2]).write_text(json.dumps({"rows": out, "summary": summary}, indent=1) + "\n")
