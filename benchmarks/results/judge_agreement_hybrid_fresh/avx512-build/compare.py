"""The AVX-512 build's judgments against the committed ones (portable build): final labels of both logs on the claims the
new log judged whole, recomputed with no LM call, and the paired binary kappa difference (bootstrap over claims).

    python benchmarks/results/judge_agreement_hybrid_fresh/avx512-build/compare.py \
        benchmarks/results/judge_agreement_hybrid_fresh benchmarks/results/judge_agreement_hybrid_fresh/avx512-build/judgments.jsonl \
        artifacts/scifact/22e653baa2bb
"""
import json, sys
from pathlib import Path
import dspy
from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.judge import RelevanceJudge
from syntra_dspy.judging.measure import JudgmentLog, judge_candidates, paired_kappa_difference, score_judge
from syntra_dspy.evaluation.datasets import load_dataset  # noqa
ref_dir, new_log, artifact = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
cands = [JudgedCandidate(**c) for c in json.loads((ref_dir / "candidates.json").read_text())]
art = load_artifact(artifact)
done = {(r["query_id"], r["doc_id"]) for r in map(json.loads, new_log.read_text().splitlines()) if r.get("judgment")}
whole = {q for q in {c.query_id for c in cands} if all((c.query_id, c.doc_id) in done for c in cands if c.query_id == q)}
cands = [c for c in cands if c.query_id in whole]
print("claims judged whole by the new build:", len(whole), "candidates", len(cands))
rows = {}
for name, path in (("ref", ref_dir / "judgments.jsonl"), ("new", new_log)):
    judge = RelevanceJudge(art.program, mode="graded")
    with dspy.context(lm=None):
        rows[name] = judge_candidates(judge, art.version, cands, corpus=None, log=JudgmentLog(path))
    s = score_judge(cands, rows[name])
    print(name, "binary kappa", round(s["binary"]["kappa"], 3), "recall", round(s["binary"]["per_class"]["relevant"]["recall"], 3))
cls = lambda r: None if r is None or r["judgment"] is None else r["judgment"]["label"]
flips = [(c, b) for c, a, b in zip(cands, rows["ref"], rows["new"]) if cls(a) != cls(b)]
print("labels differ:", len(flips), "of", len(cands))
relevant = lambda r: r is not None and r["judgment"] is not None and r["judgment"]["class"] == "positive"
binary_flips = [(c, b) for c, a, b in zip(cands, rows["ref"], rows["new"]) if relevant(a) != relevant(b)]
toward = sum(relevant(b) == (c.gold == "positive") for c, b in binary_flips)
print("relevant/not flips:", len(binary_flips), "of which the AVX-512 build agrees with people on", toward)
print(paired_kappa_difference(cands, rows["ref"], rows["new"]))
