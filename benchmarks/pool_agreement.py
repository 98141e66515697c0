"""Pool several ``syntra agreement`` measurements (disjoint query samples) into one, per judge, with a paired test.

Each folder holds what ``syntra agreement`` wrote (``candidates.json``, ``judgments.jsonl``); the judges are the
given artifacts' graded judges, their labels settled against each query's list as ``syntra agreement`` does. Query
ids are prefixed with the folder's position, so the samples stay apart in the bootstrap over queries.

    python benchmarks/pool_agreement.py --run benchmarks/results/judge_agreement_hybrid \\
        --run benchmarks/results/judge_agreement_hybrid_fresh --reuse-log benchmarks/results/judge_agreement_41d8 \\
        --artifact artifacts/scifact/41d81ca90d87 --artifact artifacts/scifact/22e653baa2bb \\
        --out benchmarks/results/pool_agreement/scifact.md
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from syntra_dspy.artifacts import load_artifact
from syntra_dspy.judging.candidates import JudgedCandidate
from syntra_dspy.judging.measure import JudgmentLog, paired_kappa_difference, score_judge, settle_rows
from syntra_dspy.judging.judge import RelevanceJudge


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", action="append", required=True, type=Path, help="a syntra agreement output folder")
    ap.add_argument("--reuse-log", action="append", default=[], type=Path,
                    help="another folder whose judgments.jsonl also holds rows of these artifacts")
    ap.add_argument("--artifact", action="append", required=True, help="artifact whose graded judge to pool")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()

    artifacts = [load_artifact(a) for a in args.artifact]
    judges = {a.version: RelevanceJudge(a.program, mode="graded") for a in artifacts}
    extra = [JudgmentLog(folder / "judgments.jsonl") for folder in args.reuse_log]
    candidates: list[JudgedCandidate] = []
    rows: dict[str, list] = {v: [] for v in judges}
    for n, folder in enumerate(args.run):
        found = [JudgedCandidate(**c) for c in json.loads((folder / "candidates.json").read_text(encoding="utf-8"))]
        logs = [JudgmentLog(folder / "judgments.jsonl"), *extra]
        for version, judge in judges.items():
            mine = []
            for c in found:
                key = f"{version}|graded|{c.query_id}|{c.doc_id}"
                mine.append(next((log.done[key] for log in logs if key in log.done), None))
            rows[version] += settle_rows(judge, found, mine, None)
        candidates += [replace(c, query_id=f"{n}:{c.query_id}") for c in found]

    lines = [f"# Judge agreement pooled over {len(args.run)} measurements", "",
             f"{len({c.query_id for c in candidates})} queries, {len(candidates)} candidates, "
             f"{sum(c.gold == 'positive' for c in candidates)} positive by the qrels (judgments people made). "
             "Folders: " + ", ".join(f"`{f}`" for f in args.run) + ".", "",
             "| judge | binary κ | pos. precision | pos. recall | 3-class κ | AUC BM25 (no LLM) | best κ BM25 alone |",
             "|---|---|---|---|---|---|---|"]
    scores = {}
    for a in artifacts:
        s = scores[a.version] = score_judge(candidates, rows[a.version])
        pos, bm25 = s["binary"]["per_class"]["relevant"], s["ranking"].get("bm25", {})
        feature = a.program.state.judge.feature if a.program.state.judge else "written"
        lines.append(f"| {a.task}/{a.version} ({feature}) | {s['binary']['kappa']:.3f} | {pos['precision']:.3f} | "
                     f"{pos['recall']:.3f} | {s['three_class']['kappa']:.3f} | "
                     f"{bm25.get('auc') or float('nan'):.3f} | {bm25.get('best_binary_kappa') or float('nan'):.3f} |")
    first, *others = [a.version for a in artifacts]
    lines += ["", "| paired (bootstrap over queries) | κ difference | 95% CI | P(not better) |", "|---|---|---|---|"]
    comparisons = {}
    for other in others:
        c = comparisons[f"{other} vs {first}"] = paired_kappa_difference(candidates, rows[first], rows[other])
        lines.append(f"| {other} vs {first} | {c['difference']:+.3f} | [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] | "
                     f"{c['p_b_not_better']:.3f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({"runs": [str(f) for f in args.run], "judges": scores,
                                                         "comparisons": comparisons}, indent=2) + "\n",
                                             encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
